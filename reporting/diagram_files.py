"""The design-review set of diagrams, as files: what ``callsafe render`` writes.

From the model alone: the lifecycle on one page, the system rules (broadcasts, guards,
restart), and the reachable states of a small configuration. From a certification report
(``report.json``, as :func:`callsafe.reporting.report.write_reports` writes it): one
sequence diagram per counterexample, named like the counterexample's trace file and
titled with the invariant it violates, and the coverage heat map (the lifecycle weighted
by how many traces took each transition).

Why here and not in ``model``: the sequence diagrams draw a target's observations, which
belong to the harness (``model`` imports nothing of the project). Why from the JSON report
rather than from a run in memory: a reviewer renders the diagrams of a run someone else
made, from the file that run left behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jsonschema

from callsafe.diagrams.coverage import coverage_heatmap, hits_from_report
from callsafe.diagrams.model import render, write_diagrams
from callsafe.diagrams.sequence import sequence_dot
from callsafe.formal.abstract import Config
from callsafe.formal.graph import explore
from callsafe.model.vocabulary import CallKey, Trace, observation_from_json

__all__ = ["Rendered", "load_report", "write_model_diagrams", "write_report_diagrams"]

# The configuration whose reachable states are drawn: one call, one turn, one control
# (24 states). With a second control it is 35 states, and at review size (1400 px) the
# labels are too small to read; every control is in the system-rules diagram instead.
SMALL: Final = Config(calls=1, turns=1, fragments=1, controls=frozenset({"cancel"}), restarts=0)


@dataclass
class Rendered:
    """The files written, and what could not be drawn and why (said to the user)."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_model_diagrams(out_dir: Path, formats: Iterable[str] = ("svg",)) -> list[Path]:
    """The diagrams that need only the model: ``lifecycle``, ``system-rules``, ``system``."""
    return write_diagrams(out_dir, explore(SMALL), formats)


def load_report(path: Path) -> dict[str, Any]:
    """A certification report, checked against its schema (a wrong file fails here, with
    the schema's words, not halfway through drawing). ``path`` may be the report folder."""
    from callsafe.reporting.report import REPORT_SCHEMA  # the harness behind it is heavy: only when asked

    if path.is_dir():
        path = path / "report.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert isinstance(doc, dict)
    return doc


def _stem(inv_id: str, n: int, ce: Mapping[str, Any]) -> str:
    trace_file = ce.get("files", {}).get("trace")
    if trace_file:
        return Path(trace_file).stem  # counterexamples/inv-turn-1.json -> inv-turn-1
    return re.sub(r"[^a-z0-9]+", "-", inv_id.lower()).strip("-") + f"-{n + 1}"


def _title(inv_id: str, ce: Mapping[str, Any]) -> str:
    findings = [f for f in ce["findings"] if f["invariant"] == inv_id] or ce["findings"]
    first = findings[0] if findings else None
    if first is None:
        return f"{inv_id} violated"
    where = f" ({CallKey.from_json(first['key']).short()})" if first.get("key") else ""
    return f"{inv_id} violated{where}: {first['message']}"


def write_report_diagrams(report: Mapping[str, Any], out_dir: Path, formats: Iterable[str] = ("svg",)) -> Rendered:
    """The coverage heat map, and one sequence diagram per counterexample under
    ``out_dir/sequences``."""
    formats = tuple(formats)
    done = Rendered()
    target = report["target"]["name"]
    heat = coverage_heatmap(hits_from_report(report), title=f"callsafe: lifecycle coverage of {target}")
    done.files += render(heat, out_dir, "coverage-heatmap", formats)
    count = 0
    for inv in report["invariants"]:
        for n, ce in enumerate(inv["counterexamples"]):
            trace = Trace.from_json(ce["trace"])
            observations = [observation_from_json(o) for o in ce.get("observations", [])]
            flagged = [CallKey.from_json(f["key"]) for f in ce["findings"] if f.get("key")]
            dot = sequence_dot(trace, observations, flagged, _title(inv["id"], ce), ce.get("explanation") or ())
            done.files += render(dot, out_dir / "sequences", _stem(inv["id"], n, ce), formats)
            count += 1
    if count == 0:
        done.notes.append("the report has no counterexample: no sequence diagram to draw")
    return done
