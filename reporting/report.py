"""The three reports of a certification run: ``report.json``, JUnit XML, ``report.html``.

Why three: ``report.json`` is for programs (a stable, versioned schema,
:data:`REPORT_SCHEMA`, checked by the tests: add fields freely, bump ``version`` when a
field changes meaning or goes away); JUnit XML is for CI dashboards (one test case per
invariant per generator: failed, passed, or skipped when not applicable; one per named
scenario, ``callsafe.scenarios``: failed, an error when the target raised or hung on it,
or skipped; and one errored case per broken trace of the unnamed generators); the HTML page
is for the people who review a run: the verdict per invariant, each counterexample as its
minimal trace and a sequence diagram, and the coverage heat map (the lifecycle, each
transition weighted by how many traces of the run took it).

Counterexamples are also written as files next to the reports: the minimal trace as JSON
(``callsafe replay FILE TARGET``) and a standalone pytest file
(:func:`callsafe.certify.minimize.pytest_source`).

What may differ between two runs of the same target with the same options and seed
(:data:`VARYING`): ``started_at``, ``timings``, ``execution`` (how the run was executed:
in this process, local workers or a Dask cluster; partitions; partitions re-run after a
worker was lost, :mod:`callsafe.certify.execution`), and each generator's ``seconds`` and
``info.wall_seconds``. Everything else is the same, byte for byte, on one process, on N
processes and on a cluster, unless the budget stopped the run (where it stops depends on
the machine).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Final

import graphviz

from callsafe.certify.harness import BrokenTrace, Certification, Counterexample
from callsafe.certify.minimize import pytest_source
from callsafe.diagrams.coverage import coverage_heatmap
from callsafe.diagrams.model import has_dot
from callsafe.diagrams.sequence import sequence_svg
from callsafe.generators.coverage import ALL_TRANSITIONS
from callsafe.model.vocabulary import observation_to_json
from callsafe.reporting.sections import sections, status_in, verdict_line

__all__ = [
    "LONE_SURROGATES",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "VARYING",
    "Reports",
    "comparable_text",
    "html_report",
    "junit_xml",
    "report_json",
    "write_reports",
]

# 2: options.workers moved to execution.workers; 3: target errors are verdicts (verdict
# "target_errors"/"partial", status "not_established", broken_traces, scenarios, stopped)
REPORT_VERSION: Final = 3
# What a target presented or ran can hold a lone surrogate (a "\\ud800" escape a library
# decoded), which UTF-8 cannot encode: it is written as that escape again, which a JSON
# reader reads back as the same string (the files stay valid UTF-8).
LONE_SURROGATES: Final = "backslashreplace"
# The parts of report.json that say when and how a run was executed, not what it found
# (paths; "*" stands for every generator).
VARYING: Final = ("started_at", "timings", "execution", "generators.*.seconds", "generators.*.info.wall_seconds")


def _drop(doc: dict[str, Any], path: list[str]) -> None:
    head, *rest = path
    for key in list(doc) if head == "*" else [head]:
        if not rest:
            doc.pop(key, None)
        elif isinstance(doc.get(key), dict):
            _drop(doc[key], rest)


def comparable_text(doc: dict[str, Any]) -> str:
    """report.json's text without the :data:`VARYING` parts: two runs of the same target
    with the same options and seed give the same text, on one process, on N processes or
    on a cluster (how the tests and the scaling benchmark compare them, and how a user can
    diff two reports). ``doc`` is not changed."""
    doc = json.loads(json.dumps(doc))
    for path in VARYING:
        _drop(doc, path.split("."))
    return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True)


_COUNTS = {"type": "integer", "minimum": 0}
_FINDING = {
    "type": "object",
    "required": ["invariant", "kind", "message", "key", "step", "source"],
    "properties": {
        "invariant": {"type": "string"},
        "kind": {"enum": ["safety", "liveness"]},
        "message": {"type": "string"},
        "key": {"type": ["object", "null"]},
        "step": {"type": ["integer", "null"]},
        "source": {"enum": ["checker", "oracle"]},
        "about": {"enum": ["action", "records"]},
        "cause": {"type": "string"},
    },
}
_TARGET_ERROR = {
    "type": "object",
    "required": ["kind", "where", "step", "message", "traceback", "stderr"],
    "properties": {"kind": {"enum": ["error", "hang", "crash"]}, "step": {"type": ["integer", "null"]}},
}
REPORT_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "callsafe certification report",
    "type": "object",
    "required": [
        "schema",
        "version",
        "callsafe_version",
        "verdict",
        "target",
        "options",
        "seed",
        "started_at",
        "timings",
        "execution",
        "budget_exhausted",
        "summary",
        "invariants",
        "generators",
        "coverage",
        "not_applicable",
        "target_errors",
        "broken_traces",
        "scenarios",
        "stopped",
        "partial",
    ],
    "properties": {
        "schema": {"const": "callsafe-certification-report"},
        "version": {"const": REPORT_VERSION},
        "callsafe_version": {"type": "string"},
        "verdict": {"enum": ["pass", "fail", "target_errors", "partial", "nothing_ran"]},
        "stopped": {"enum": [None, "interrupted", "fail-fast", "hangs"]},
        "stop_reason": {"type": "string"},
        "partial": {"type": "boolean"},
        "target": {
            "type": "object",
            "required": ["spec", "name", "protocol", "capabilities", "run"],
            "properties": {
                "capabilities": {"type": "array", "items": {"type": "string"}},
                "run": {
                    "type": "object",
                    "required": ["mode"],
                    "properties": {
                        "mode": {"type": "string"},
                        # over HTTP: whether the program acknowledged its reads (the trace's order by
                        # design) or the order was best effort (targets.exec_target.order)
                        "order": {"enum": ["acknowledged", "best effort"]},
                    },
                },
            },
        },
        "options": {"type": "object"},
        "seed": {"type": "integer"},
        "started_at": {"type": "string"},
        "timings": {
            "type": "object",
            "required": ["run_seconds", "minimize_seconds", "total_seconds"],
            "additionalProperties": {"type": "number"},
        },
        "execution": {
            "type": "object",
            "required": [
                "executor",
                "workers",
                "scheduler",
                "partition_size",
                "partitions",
                "rerun_partitions",
                "lost_workers",
            ],
            "properties": {
                "executor": {"enum": ["in-process", "processes", "dask"]},
                "workers": _COUNTS,
                "scheduler": {"type": ["string", "null"]},
                "partition_size": {"type": ["integer", "null"], "minimum": 1},
                "partitions": _COUNTS,
                "rerun_partitions": {"type": "array", "items": {"type": "string"}},
                "lost_workers": {"type": "array", "items": {"type": "string"}},
            },
        },
        "budget_exhausted": {"type": "boolean"},
        "summary": {
            "type": "object",
            "required": [
                "traces_generated",
                "traces_run",
                "traces_not_applicable",
                "skipped_equivalent",
                "violated",
                "safety_violated",
                "liveness_violated",
            ],
            "properties": {
                "traces_generated": _COUNTS,
                "traces_run": _COUNTS,
                "traces_not_applicable": _COUNTS,
                "skipped_equivalent": _COUNTS,
                "violated": {"type": "array", "items": {"type": "string"}},
                "safety_violated": {"type": "array", "items": {"type": "string"}},
                "liveness_violated": {"type": "array", "items": {"type": "string"}},
                "action_violated": {"type": "array", "items": {"type": "string"}},
                "records_violated": {"type": "array", "items": {"type": "string"}},
                "violation_kind": {"enum": ["", "action", "records", "action+records"]},
            },
        },
        "sections": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["about", "title", "status", "invariants", "violated", "counterexamples"],
                "properties": {
                    "about": {"enum": ["action", "records"]},
                    "status": {"enum": ["holds", "violated", "not_established", "not_applicable"]},
                    "invariants": {"type": "array", "items": {"type": "string"}},
                    "violated": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "invariants": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "id",
                    "title",
                    "kind",
                    "spec",
                    "needs",
                    "status",
                    "traces_checked",
                    "traces_violated",
                    "counterexamples",
                ],
                "properties": {
                    "status": {"enum": ["holds", "violated", "not_established", "not_applicable"]},
                    "traces_broken": _COUNTS,
                    "kind": {"enum": ["safety", "liveness"]},
                    "traces_checked": _COUNTS,
                    "traces_violated": _COUNTS,
                    "counterexamples": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [
                                "generator",
                                "original_events",
                                "minimal_events",
                                "tests_run",
                                "findings",
                                "trace",
                                "files",
                            ],
                            "properties": {
                                "findings": {"type": "array", "items": _FINDING},
                                "trace": {"type": "object", "required": ["events"]},
                                "files": {"type": "object", "additionalProperties": {"type": "string"}},
                            },
                        },
                    },
                },
            },
        },
        "generators": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": [
                    "generated",
                    "ran",
                    "not_applicable",
                    "skipped_equivalent",
                    "violating",
                    "target_errors",
                    "seconds",
                    "complete",
                    "violated",
                ],
            },
        },
        "coverage": {
            "type": "object",
            "required": ["lifecycle_transitions", "transition_pairs"],
            "properties": {
                "lifecycle_transitions": {
                    "type": "object",
                    "required": ["covered", "total", "reached", "missing", "hits"],
                    "properties": {
                        "covered": _COUNTS,
                        "total": _COUNTS,
                        # [state, event, traces that took the transition]: the heat map's data
                        "hits": {"type": "array", "items": {"type": "array", "minItems": 3, "maxItems": 3}},
                    },
                },
                "transition_pairs": {"type": "object", "required": ["reached"]},
            },
        },
        "not_applicable": {"type": "object", "additionalProperties": _COUNTS},
        "target_errors": {"type": "array", "items": {"type": "string"}},
        "broken_traces": {
            "type": "object",
            "required": ["count", "traces"],
            "properties": {
                "count": {"type": "object", "additionalProperties": _COUNTS},
                "traces": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["generator", "name", "kind", "errors", "trace", "files"],
                        "properties": {
                            "kind": {"enum": ["error", "hang", "crash"]},
                            "errors": {"type": "array", "items": _TARGET_ERROR},
                        },
                    },
                },
            },
        },
        "scenarios": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["generator", "name", "outcome", "violated", "detail"],
                "properties": {
                    "outcome": {"enum": ["passed", "violated", "target_error", "hang", "not_applicable"]},
                },
            },
        },
    },
}


def _transition_json(t: Any) -> list[str]:
    state, event = t
    return [str(state), str(event)]


def _counterexample_json(ce: Counterexample) -> dict[str, Any]:
    return {
        "generator": ce.generator,
        "original_events": len(ce.original.events),
        "minimal_events": len(ce.minimal.events),
        "tests_run": ce.tests_run,
        "findings": [f.to_json() for f in ce.findings],
        "explanation": ce.explanation,
        "trace": ce.minimal.to_json(),
        "observations": [observation_to_json(o) for o in ce.observations],
        "target_errors": [e.to_json() for e in ce.errors],
        "calls": [c.to_json() for c in ce.calls],
        "name": ce.minimal.name,
        "source": ce.original.name,
        "merged": ce.merged,
        "cause": ce.cause,
        "traces": ce.traces,
        "about": ce.about,
        "files": dict(ce.files),
    }


def _broken_json(b: BrokenTrace) -> dict[str, Any]:
    return {
        "generator": b.generator,
        "name": b.name,
        "kind": b.kind,
        "errors": [e.to_json() for e in b.errors],
        "trace": b.trace.to_json(),
        "files": dict(b.files),
    }


def report_json(cert: Certification) -> dict[str, Any]:
    """The report as a JSON document following :data:`REPORT_SCHEMA`."""
    violated = cert.violated
    kinds = {i: s.kind for i, s in cert.invariants.items()}
    return {
        "schema": "callsafe-certification-report",
        "version": REPORT_VERSION,
        "callsafe_version": cert.version,
        "verdict": cert.verdict,
        "stopped": cert.stopped,
        "stop_reason": cert.stop_reason,
        "partial": cert.partial,
        "target": cert.target.to_json(),
        "options": cert.options.to_json(),
        "seed": cert.options.seed,
        "started_at": dt.datetime.fromtimestamp(cert.started_at, dt.UTC).isoformat(timespec="seconds"),
        "timings": dict(cert.timings),
        "execution": cert.execution.to_json(),
        "budget_exhausted": cert.budget_exhausted,
        "summary": {
            "traces_generated": sum(g.generated for g in cert.generators.values()),
            "traces_run": cert.traces_run,
            "traces_not_applicable": sum(g.not_applicable for g in cert.generators.values()),
            "skipped_equivalent": sum(g.skipped_equivalent for g in cert.generators.values()),
            "violated": violated,
            "safety_violated": [i for i in violated if kinds[i] == "safety"],
            "liveness_violated": [i for i in violated if kinds[i] == "liveness"],
            "action_violated": cert.action_violated,
            "records_violated": cert.records_violated,
            "violation_kind": cert.violation_kind,
        },
        "sections": [
            {
                "about": section.about,
                "title": section.title,
                "covers": section.covers,
                "status": section.status,
                "invariants": [s.id for s in section.invariants],
                "violated": section.violated,
                "counterexamples": [
                    {"invariant": inv_id, "name": ce.minimal.name, "cause": ce.cause, "traces": ce.traces}
                    for inv_id, ce in section.counterexamples
                ],
            }
            for section in sections(cert)
        ],
        "invariants": [
            {
                "id": s.id,
                "title": s.title,
                "kind": s.kind,
                "spec": s.spec,
                "needs": s.needs,
                "status": s.status,
                "traces_checked": s.traces_checked,
                "traces_violated": s.traces_violated,
                "traces_broken": s.traces_broken,
                "about": list(s.about),
                "violated_by": dict(s.violated_by),
                "causes": s.causes,
                "counterexamples": [
                    {**_counterexample_json(ce), "run": cert.target.to_json()["run"]}
                    for ce in cert.counterexamples.get(s.id, [])
                ],
            }
            for s in cert.invariants.values()
        ],
        "generators": {name: g.to_json() for name, g in cert.generators.items()},
        "coverage": {
            "lifecycle_transitions": {
                "covered": len(cert.transitions),
                "total": len(ALL_TRANSITIONS),
                "reached": sorted(_transition_json(t) for t in cert.transitions),
                "missing": sorted(_transition_json(t) for t in set(ALL_TRANSITIONS) - cert.transitions),
                "hits": sorted([*_transition_json(t), n] for t, n in cert.transition_hits.items()),
            },
            "transition_pairs": {"reached": len(cert.pairs)},
        },
        "not_applicable": dict(sorted(cert.not_applicable.items())),
        "target_errors": list(cert.errors),
        "broken_traces": {
            "count": dict(sorted(cert.broken_count.items())),
            "traces": [_broken_json(b) for b in cert.broken],
        },
        "scenarios": [r.to_json() for r in cert.scenarios],
    }


# --------------------------------------------------------------------------------------
# JUnit XML
# --------------------------------------------------------------------------------------


def junit_xml(cert: Certification) -> ET.ElementTree[ET.Element]:
    """One ``testsuite`` per generator, one ``testcase`` per invariant in it."""
    root = ET.Element("testsuites", name=f"callsafe certify {cert.target.spec}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, g in cert.generators.items():
        suite = ET.SubElement(root, "testsuite", name=f"callsafe.{name}", time=f"{g.seconds:.3f}")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for inv in cert.invariants.values():
            case = ET.SubElement(suite, "testcase", classname=f"callsafe.{name}", name=inv.id, time="0")
            counts["tests"] += 1
            violated = g.violated.get(inv.id, 0)
            if violated:
                counts["failures"] += 1
                failure = ET.SubElement(
                    case,
                    "failure",
                    message=f"{inv.id} violated by {violated} of {g.checked.get(inv.id, 0)} traces",
                    type=inv.kind,
                )
                ces = [ce for ce in cert.counterexamples.get(inv.id, []) if ce.generator == name]
                failure.text = "\n\n".join(_ce_text(ce) for ce in ces) or f"{inv.title}"
            elif inv.status == "not_applicable" and inv.needs and not set(inv.needs) <= cert.target.capabilities:
                counts["skipped"] += 1
                missing = ", ".join(sorted(set(inv.needs) - cert.target.capabilities))
                ET.SubElement(case, "skipped", message=f"not applicable: the target lacks {missing}")
            elif not g.checked.get(inv.id):
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"no {name} trace applicable to the target ran")
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    _junit_sections(root, cert, totals)
    _junit_scenarios(root, cert, totals)
    _junit_broken(root, cert, totals)
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{cert.timings.get('total_seconds', 0.0):.3f}")
    ET.indent(root)
    return ET.ElementTree(root)


def _ce_text(ce: Counterexample) -> str:
    head = f"{ce.minimal.name}\n({ce.traces} violating traces with this cause: {ce.cause})" if ce.cause else ""
    return "\n".join([head, *(f.describe() for f in ce.findings), ce.minimal.dumps()]).strip()


def _junit_sections(root: ET.Element, cert: Certification, totals: dict[str, int]) -> None:
    """One testsuite per section (``callsafe.action-safety``, ``callsafe.records``), one
    testcase per invariant in it, failing with that section's counterexamples, every
    distinct cause kept: CI shows action safety apart from the records."""
    for section in sections(cert):
        name = "callsafe." + section.title.lower().replace(" ", "-")
        suite = ET.SubElement(root, "testsuite", name=name, time="0")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for inv in section.invariants:
            case = ET.SubElement(suite, "testcase", classname=name, name=inv.id, time="0")
            counts["tests"] += 1
            status = status_in(inv, section.about)
            if status == "violated":
                counts["failures"] += 1
                ces = [ce for i, ce in section.counterexamples if i == inv.id]
                failure = ET.SubElement(
                    case,
                    "failure",
                    message=f"{section.title}: {inv.id} violated by {inv.violated_by.get(section.about, 0)} traces "
                    f"({len(ces)} of {inv.causes} distinct causes shown)",
                    type=section.about,
                )
                failure.text = "\n\n".join(_ce_text(ce) for ce in ces) or inv.title
            elif status != "holds":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=status.replace("_", " "))
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v


def _junit_scenarios(root: ET.Element, cert: Certification, totals: dict[str, int]) -> None:
    """``callsafe.scenarios``: one test case per named trace (catalog scenario, synthesised
    hazard, wire scenario, trace file): failed when it violated an invariant, an error when
    the target raised or hung on it, skipped when not applicable."""
    if not cert.scenarios:
        return
    suite = ET.SubElement(root, "testsuite", name="callsafe.scenarios")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for r in cert.scenarios:
        case = ET.SubElement(
            suite, "testcase", classname=f"callsafe.scenarios.{r.generator}", name=r.name, time=f"{r.seconds:.3f}"
        )
        counts["tests"] += 1
        if r.outcome == "violated":
            counts["failures"] += 1
            ET.SubElement(
                case, "failure", message=f"violates {', '.join(r.violated)}", type="violation"
            ).text = r.detail
        elif r.outcome in ("target_error", "hang"):
            counts["errors"] += 1
            ET.SubElement(case, "error", message=r.detail, type=r.outcome)
        elif r.outcome == "not_applicable":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"not applicable: {r.detail}")
    for k, v in counts.items():
        suite.set(k, str(v))
        totals[k] += v


def _junit_broken(root: ET.Element, cert: Certification, totals: dict[str, int]) -> None:
    """``callsafe.target_errors``: one errored case per kept broken trace of the generators
    whose traces are not named (their scenarios' cases already say so), with the traceback."""
    from callsafe.certify.harness import NAMED_GENERATORS

    unnamed = [b for b in cert.broken if b.generator not in NAMED_GENERATORS]
    if not unnamed:
        return
    suite = ET.SubElement(root, "testsuite", name="callsafe.target_errors")
    for b in unnamed:
        case = ET.SubElement(suite, "testcase", classname=f"callsafe.target_errors.{b.generator}", name=b.name)
        error = b.errors[0]
        ET.SubElement(case, "error", message=error.describe(), type=error.kind).text = error.traceback
    suite.set("tests", str(len(unnamed)))
    suite.set("errors", str(len(unnamed)))
    totals["tests"] += len(unnamed)
    totals["errors"] += len(unnamed)


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------

_CSS: Final = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; }
td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
th { background: #f3f5f8; } .num { text-align: right; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 10px; font-size: 0.9em; font-weight: bold; }
.holds { background: #d5ecd4; color: #1b5e20; } .violated { background: #f6d5d5; color: #b71c1c; }
.not_applicable { background: #eee; color: #555; } .pass { background: #d5ecd4; color: #1b5e20; }
.fail { background: #f6d5d5; color: #b71c1c; } .not_established, .target_errors, .partial, .hang, .error,
.target_error, .nothing_ran { background: #fbeccb; color: #7a4f00; } .passed { background: #d5ecd4; color: #1b5e20; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px; overflow-x: auto; font-size: 0.85em; }
.ce { border: 1px solid #e3c0c0; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
.diagram { overflow-x: auto; } .muted { color: #777; }
.diagram svg { max-width: 100%; height: auto; }
"""


def _badge(status: str) -> str:
    label = status.replace("_", " ")
    return f'<span class="badge {escape(status)}">{escape(label)}</span>'


def _heatmap(cert: Certification) -> graphviz.Digraph:
    """The lifecycle weighted by the traces that took each transition (the coverage heat map)."""
    return coverage_heatmap(cert.transition_hits, title=f"lifecycle coverage of {cert.target.name}")


def _lifecycle_svg(cert: Certification) -> str:
    """The heat map inline, scaled to the page's column (Graphviz draws it about twice as
    wide: its viewBox keeps the drawing whole, the CSS rule of ``.diagram svg`` its width)."""
    dot = _heatmap(cert)
    if has_dot():
        svg: str = dot.pipe(format="svg").decode("utf-8")
        return svg[svg.index("<svg") :]
    return f"<pre>{escape(dot.source)}</pre><p class='muted'>Graphviz is not installed: the DOT source is shown.</p>"


def _run_text(run: dict[str, Any]) -> str:
    """How the traces ran, in one line: ``exec `node t.js`, callsafe-target v1``."""
    text = str(run.get("mode", "in process"))
    if "command" in run:
        text += f" `{run['command']}`, {run.get('protocol', '')} v{run.get('protocol_version', '?')}"
    if "wire" in run:
        text += f", wire over {run['wire']}"
    if "order" in run:
        text += f", order {run['order']}"
    return text


def html_report(cert: Certification) -> str:
    """A self-contained HTML page (inline CSS and SVG)."""
    doc = report_json(cert)
    verdict = doc["verdict"]
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>callsafe certification: {escape(cert.target.spec)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>callsafe certification: {escape(cert.target.name)} {_badge(verdict)}</h1>",
        _html_banner(cert),
        f"<p class='muted'>target <code>{escape(cert.target.spec)}</code> · protocol "
        f"{escape(cert.target.protocol)} · capabilities {escape(', '.join(sorted(cert.target.capabilities)))}"
        f"<br>run: {escape(_run_text(doc['target']['run']))}"
        f"{'<br>setup: ' + escape(cert.target.setup) if cert.target.setup else ''}"
        f"<br>seed {cert.options.seed} · depth {cert.options.depth} · {cert.options.walks} walks · model of "
        f"{cert.options.calls} calls, {cert.options.turns} turns, {cert.options.fragments} fragments · "
        f"{f'budget {cert.options.budget:g} s' if cert.options.budget else 'no budget'}"
        f"{' (exhausted: generation stopped early)' if cert.budget_exhausted else ''} · "
        f"{doc['summary']['traces_run']} traces run in {cert.timings.get('total_seconds', 0)} s · "
        f"started {escape(doc['started_at'])} · callsafe {escape(cert.version)}<br>"
        f"{escape(cert.execution.summary())}</p>",
        "<h2>Invariants</h2><table><tr><th>invariant</th><th>kind</th><th>about</th><th>status</th>"
        "<th class='num'>traces checked</th><th class='num'>violated</th><th>property</th></tr>",
    ]
    for inv in cert.invariants.values():
        # a link only where there is something to land on: the invariant's first counterexample
        name = (
            f"<a href='#{escape(inv.id)}'>{escape(inv.id)}</a>" if cert.counterexamples.get(inv.id) else escape(inv.id)
        )
        parts.append(
            f"<tr><td>{name}</td><td>{escape(inv.kind)}</td>"
            f"<td>{escape('+'.join(inv.about))}</td>"
            f"<td>{_badge(inv.status)}</td><td class='num'>{inv.traces_checked}</td>"
            f"<td class='num'>{inv.traces_violated}</td><td>{escape(inv.title)}</td></tr>"
        )
    parts.append("</table>")
    parts.append(
        "<h2>Generators</h2><table><tr><th>generator</th><th class='num'>generated</th><th class='num'>ran</th>"
        "<th class='num'>not applicable</th><th class='num'>skipped as equivalent</th>"
        "<th class='num'>violating</th><th class='num'>target errors</th><th class='num'>seconds</th></tr>"
    )
    for name, g in cert.generators.items():
        done = "" if g.complete else " <span class='muted'>(stopped by the budget)</span>"
        parts.append(
            f"<tr><td>{escape(name)}{done}</td><td class='num'>{g.generated}</td><td class='num'>{g.ran}</td>"
            f"<td class='num'>{g.not_applicable}</td><td class='num'>{g.skipped_equivalent}</td>"
            f"<td class='num'>{g.violating}</td><td class='num'>{g.errors}</td>"
            f"<td class='num'>{g.seconds:.2f}</td></tr>"
        )
    parts.append("</table>")
    if cert.not_applicable:
        items = ", ".join(f"{escape(k)} ({v} traces)" for k, v in sorted(cert.not_applicable.items()))
        parts.append(f"<p>Not applicable, for lack of a capability: {items}. Never counted as passed.</p>")
    cov = doc["coverage"]["lifecycle_transitions"]
    parts.append(
        f"<h2>Coverage</h2><p>{cov['covered']} of {cov['total']} lifecycle transitions reached by the traces "
        f"that ran; {doc['coverage']['transition_pairs']['reached']} pairs of consecutive transitions of one call.</p>"
    )
    if cov["missing"]:
        missing = ", ".join(f"{s} --{e}-->" for s, e in cov["missing"])
        parts.append(f"<p class='muted'>Not reached: {escape(missing)}</p>")
    parts.append(f"<div class='diagram'>{_lifecycle_svg(cert)}</div>")
    parts.append("<h2>Counterexamples</h2>")
    if not cert.counterexamples:
        parts.append("<p>None: no trace violated an invariant.</p>")
    elif cert.violation_kind:
        parts.append(f"<p><b>{escape(verdict_line(cert))}</b></p>")
    anchored: set[str] = set()
    for section in sections(cert) if cert.counterexamples else []:
        parts.append(
            f"<h3 id='section-{section.about}'>{escape(section.title)} {_badge(section.status)}</h3>"
            f"<p class='muted'>{escape(section.covers)}</p>"
        )
        if not section.counterexamples:
            parts.append("<p>No finding of this kind.</p>")
        for inv_id, ce in section.counterexamples:
            keys = [f.key for f in ce.findings if f.key is not None]
            files = " · ".join(
                f"<a href='{escape(path)}'>{escape(kind)}</a>" for kind, path in sorted(ce.files.items())
            )
            anchor = "" if inv_id in anchored else escape(inv_id)
            anchored.add(inv_id)
            summary = cert.invariants[inv_id]
            rank = cert.counterexamples[inv_id].index(ce) + 1
            id_attr = f" id='{anchor}'" if anchor else ""  # no empty ids: only the first of an invariant
            parts.append(
                f"<div class='ce'{id_attr}><h3>{escape(inv_id)} "
                f"{_badge('violated')}</h3>"
                f"<p><b>{escape(ce.minimal.name)}</b></p>"
                f"<p>Cause {rank} of {summary.causes} of {escape(inv_id)}, {ce.traces} violating traces with it"
                f"{': ' + escape(ce.cause) if ce.cause else ''}.</p>"
                f"<p>{escape(ce.minimal.source)}: {len(ce.original.events)} events shrunk to "
                f"{len(ce.minimal.events)} ({ce.tests_run} runs"
                f"{f'; {ce.merged} counterexamples like it' if ce.merged > 1 else ''}). {files}</p>"
                "<ul>" + "".join(f"<li>{escape(f.describe())}</li>" for f in ce.findings) + "</ul>"
            )
            if ce.calls:
                parts.append("<p>What the validator and the executor received and answered:</p><pre>")
                parts.append(escape("\n".join(c.describe() for c in ce.calls)) + "</pre>")
            if ce.explanation:
                parts.append("<p>What the model says happened to the call:</p><pre>")
                parts.append(escape("\n".join(ce.explanation)) + "</pre>")
            parts.append(f"<div class='diagram'>{sequence_svg(ce.minimal, ce.observations, keys)}</div>")
            parts += _html_wire(cert, ce)
            parts.append(f"<details><summary>minimal trace (JSON)</summary><pre>{escape(ce.minimal.dumps())}</pre>")
            parts.append("</details></div>")
    parts += _html_scenarios(cert)
    parts += _html_broken(cert)
    parts.append("</body></html>")
    return "\n".join(parts)


def wire_lines(cert: Certification, trace: Any) -> list[str]:
    """What a provider-protocol target read on ``trace``: each payload, as the runner hands
    it over (:func:`callsafe.certify.wire.prepare`), with the event it carries; empty for an
    abstract target or a trace its protocol cannot say. The abstract events alone hide what
    a parser actually met (an index that two calls share, a chunk that repeats)."""
    from callsafe.certify.wire import ABSTRACT, NotRepresentable, prepare

    if cert.target.protocol == ABSTRACT:
        return []
    try:
        relabelled, plan = prepare(trace, cert.target.protocol, cert.target.run.get("wire") == "http")
    except NotRepresentable:
        return []
    lines: list[str] = []
    events = relabelled.delivered()
    for index, (event, delivery) in enumerate(zip(events, plan.deliveries, strict=False)):
        for payload in delivery.payloads:
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            lines.append(f"[{index}] {event.kind}: {text[:400]}{' ...' if len(text) > 400 else ''}")
        if delivery.end_stream:
            lines.append(f"[{index}] {event.kind}: (the body ends)")
    return lines


def _html_wire(cert: Certification, ce: Counterexample) -> list[str]:
    lines = wire_lines(cert, ce.minimal)
    if not lines:
        return []
    payloads = sum(not line.endswith("(the body ends)") for line in lines)
    return [
        f"<details open><summary>what the target read: {payloads} {escape(cert.target.protocol)} payloads, in "
        "order (with the event each one carries)</summary>",
        f"<pre>{escape(chr(10).join(lines))}</pre></details>",
    ]


def _html_banner(cert: Certification) -> str:
    notes = []
    if cert.partial:
        notes.append("Partial report: the run was interrupted (Ctrl-C); it shows what ran until then.")
    if cert.stopped == "fail-fast":
        notes.append("Stopped at the first violation or target error (--fail-fast).")
    if cert.stopped == "hangs":
        notes.append(f"Stopped early: {cert.stop_reason}.")
    if cert.verdict == "nothing_ran":
        notes.append("Nothing certified: no trace ran (see Not applicable for what the traces needed).")
    if cert.broken_traces:
        notes.append(
            f"The target broke {cert.broken_traces} traces (it raised, hung or died): no invariant is established "
            "on them; see Target errors."
        )
    return "".join(f"<p><span class='badge not_established'>{escape(n)}</span></p>" for n in notes)


def _html_scenarios(cert: Certification) -> list[str]:
    """Every named trace with its verdict: those that did not pass first, then the rest."""
    if not cert.scenarios:
        return []
    passed = sum(r.outcome == "passed" for r in cert.scenarios)
    counts = Counter(r.outcome for r in cert.scenarios)
    tally = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in sorted(counts.items()))
    parts = [
        f"<h2>Scenarios</h2><p>{passed} of {len(cert.scenarios)} named traces passed ({escape(tally)}).</p>",
        "<table><tr><th>generator</th><th>scenario</th><th>outcome</th><th>detail</th></tr>",
    ]
    for r in sorted(cert.scenarios, key=lambda r: r.outcome == "passed"):  # stable: run order within each
        parts.append(
            f"<tr><td>{escape(r.generator)}</td><td>{escape(r.name)}</td><td>{_badge(r.outcome)}"
            f"{escape(' ' + ', '.join(r.violated)) if r.violated else ''}</td><td>{escape(r.detail)}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _html_broken(cert: Certification) -> list[str]:
    if not cert.broken_traces:
        return []
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(cert.broken_count.items()))
    parts = [f"<h2>Target errors</h2><p>{cert.broken_traces} traces broken by the target ({escape(kinds)}).</p>"]
    for b in cert.broken:
        link = f" · <a href='{escape(b.files['trace'])}'>trace</a>" if b.files.get("trace") else ""
        parts.append(f"<div class='ce'><h3>{escape(b.generator)}/{escape(b.name)} {_badge(b.kind)}{link}</h3>")
        for e in b.errors[:3]:
            parts.append(f"<p>{escape(e.describe())}</p><pre>{escape(e.traceback or '(no traceback)')}</pre>")
            if e.stderr:
                parts.append(f"<p>stderr (tail):</p><pre>{escape(e.stderr)}</pre>")
        parts.append("</div>")
    return parts


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


@dataclass
class Reports:
    """The files a run wrote."""

    json: Path
    junit: Path
    html: Path
    diagrams: list[Path] = field(default_factory=list)
    counterexamples: list[Path] = field(default_factory=list)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def write_reports(cert: Certification, out_dir: Path, junit: Path | None = None) -> Reports:
    """Write the counterexample files, then ``report.json``, the JUnit XML (``junit`` or
    ``out_dir/junit.xml``), ``report.html`` and the coverage heat map."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ce_dir = out_dir / "counterexamples"
    written_ce: list[Path] = []
    for inv_id, ces in sorted(cert.counterexamples.items()):
        for n, ce in enumerate(ces):
            ce_dir.mkdir(exist_ok=True)
            stem = f"{_slug(inv_id)}-{n + 1}"
            trace_path = ce_dir / f"{stem}.json"
            test_path = ce_dir / f"test_{stem.replace('-', '_')}.py"
            trace_path.write_text(ce.minimal.dumps() + "\n", encoding="utf-8", errors=LONE_SURROGATES)
            test_path.write_text(
                pytest_source(ce.minimal, inv_id, cert.target.spec, trace_path.name, cert.options.seed),
                encoding="utf-8",
            )
            ce.files = {
                "trace": str(trace_path.relative_to(out_dir)),
                "pytest": str(test_path.relative_to(out_dir)),
            }
            written_ce += [trace_path, test_path]
    broken_dir = out_dir / "target-errors"
    for n, b in enumerate(cert.broken):
        broken_dir.mkdir(exist_ok=True)
        path = broken_dir / f"{b.kind}-{n + 1}.json"
        path.write_text(b.trace.dumps() + "\n", encoding="utf-8", errors=LONE_SURROGATES)
        b.files = {"trace": str(path.relative_to(out_dir))}
        written_ce.append(path)
    json_path = out_dir / "report.json"
    json_path.write_text(
        json.dumps(report_json(cert), indent=1, ensure_ascii=False) + "\n", encoding="utf-8", errors=LONE_SURROGATES
    )
    junit_path = junit or out_dir / "junit.xml"
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    junit_xml(cert).write(junit_path, encoding="utf-8", xml_declaration=True)
    html_path = out_dir / "report.html"
    html_path.write_text(html_report(cert), encoding="utf-8", errors=LONE_SURROGATES)
    dot = _heatmap(cert)
    diagrams = [out_dir / "lifecycle-coverage.dot"]
    diagrams[0].write_text(dot.source, encoding="utf-8", errors=LONE_SURROGATES)
    if has_dot():
        svg = out_dir / "lifecycle-coverage.svg"
        svg.write_bytes(dot.pipe(format="svg"))
        diagrams.append(svg)
    return Reports(json_path, junit_path, html_path, diagrams, written_ce)
