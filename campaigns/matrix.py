"""The conformance matrix: every available client library, and the reference
implementation, certified under the same options and tabulated library × invariant.

Why it is built this way:

* **One row per surface.** A library can present a call as finished at more than one
  moment (a ``done`` event mid-stream, or its final message), and applications use both;
  each surface is its own adapter (:data:`callsafe.targets.libraries.LIBRARY_TARGETS`) and
  its own row, labelled with the library, its installed version, the protocol and the
  surface. The reference implementation is the first row, the yardstick.
* **Fair to libraries.** A library binds no turns, confirms nothing, takes no operator
  control and keeps no ledger: its adapters declare no capability, so every trace that
  needs one, and every invariant that needs a ledger, a status or confirmations, is
  *not applicable*; a trace the library's protocol cannot carry is not applicable too
  (:mod:`callsafe.certify.wire`). A library is judged on what it presents as finished,
  that is what its adapter hands the executor; liveness counts only for responses that
  ended normally. "Holds" means: checked on at least one applicable trace, never violated.
* **Every violation is evidence.** A violated cell carries the minimal counterexample (the
  trace as it ran, the findings, the payloads the library read) and the standalone script
  that reproduces the finding with the library alone (``campaigns/repro``, mapped in
  :mod:`callsafe.campaigns.findings`), and the counterexample is written as a trace file
  that ``callsafe replay FILE <row>`` runs again.
* **Stable.** Everything but the timings is a function of the options and the installed
  versions: the generators are deterministic given the seed, rows run one after another
  in a fixed order, and the JSON keeps everything that depends on the clock under
  ``timings`` keys. (A row whose budget ran out is marked; its counts then depend on the
  machine, so stability needs budgets that let every row finish.)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Final

from callsafe import __version__
from callsafe.certify.harness import (
    KNOWN_GENERATORS,
    WIRE_GENERATOR,
    Certification,
    Counterexample,
    Options,
    certify,
)
from callsafe.certify.targets import replay_command
from callsafe.certify.wire import ABSTRACT, NotRepresentable, prepare
from callsafe.model.invariants import INVARIANTS
from callsafe.model.vocabulary import (
    CallAddressed,
    CallTerminal,
    Event,
    Executed,
    Fragment,
    ResponseTerminal,
    TextFragment,
    Trace,
    TurnStarted,
    event_to_json,
)
from callsafe.reporting.report import LONE_SURROGATES

__all__ = [
    "GUARD_PROTOCOLS",
    "GUARD_ROWS",
    "MATRIX_GENERATORS",
    "MATRIX_VERSION",
    "REFERENCE_ROW",
    "Cell",
    "Matrix",
    "MatrixFiles",
    "RowResult",
    "RowSpec",
    "default_rows",
    "matrix_html",
    "matrix_json",
    "matrix_markdown",
    "matrix_summary",
    "merge_summary",
    "readme_table",
    "replace_readme_table",
    "run_matrix",
    "stable_view",
    "write_matrix",
]

MATRIX_VERSION: Final = 1
MATRIX_GENERATORS: Final = (
    WIRE_GENERATOR,
    *(g for g in KNOWN_GENERATORS if g not in (WIRE_GENERATOR, "traces")),
)
STATUS_LABEL: Final = {
    "holds": "holds",
    "violated": "violated",
    "not_established": "not established",
    "not_applicable": "n/a",
}
_INVARIANT_IDS: Final = tuple(inv.id for inv in INVARIANTS)


@dataclass(frozen=True)
class RowSpec:
    """One row: the target name the harness resolves, and how the row is labelled."""

    spec: str
    library: str  # distribution name ("callsafe" for the reference), or npm package (node)
    protocol: str
    surface: str
    ecosystem: str = "python"  # "python" | "node": the matrix's groups (--ecosystem)
    # Options overrides for this row (a program reading HTTP runs fewer walks): fixed per
    # row, so the row is still a function of the seed; recorded in the row's JSON.
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.library} · {self.protocol} · {self.surface}"

    @property
    def version_key(self) -> str:
        """The key of the row's library in the matrix's ``versions``: the distribution, and
        ``npm:`` before a Node package (``openai`` is on both registries)."""
        return f"npm:{self.library}" if self.ecosystem == "node" else self.library

    def options(self, base: Options) -> Options:
        return dataclasses.replace(base, **dict(self.overrides)) if self.overrides else base


REFERENCE_ROW: Final = RowSpec("reference:memory", "callsafe", ABSTRACT, "reference implementation (memory store)")
# callsafe.guard, the reference as a library, over each protocol an agent's SDK speaks:
# certified through the same wire path (and the same wire adversities) as the libraries.
GUARD_PROTOCOLS: Final = (
    "openai-chat",
    "openai-responses",
    "anthropic-messages",
    "bedrock-converse",
    "openai-realtime",
)
GUARD_ROWS: Final = tuple(
    RowSpec(f"guard:memory:{protocol}", "callsafe", protocol, "callsafe.guard (memory store)")
    for protocol in GUARD_PROTOCOLS
)


def default_rows(ecosystem: str | None = None, mcp: bool = False) -> list[RowSpec]:
    """The reference, the guard over each protocol, every library adapter of the catalog
    in catalog order, the Python agent frameworks, then the TypeScript libraries
    (:mod:`callsafe.targets.programs`); with ``ecosystem``, only that group's library rows
    after the reference (the yardstick is in every run). With ``mcp``, the MCP hosts
    (:mod:`callsafe.targets.mcp_rows`) too: opt-in, because each starts a process per
    model stream and a run of them takes minutes per row."""
    from callsafe.targets.libraries import LIBRARY_TARGETS
    from callsafe.targets.mcp_rows import MCP_ROWS
    from callsafe.targets.program_catalog import program_rows
    from callsafe.targets.programs import ECOSYSTEMS

    hosts = {row.name for row in MCP_ROWS}

    if ecosystem is not None and ecosystem not in ECOSYSTEMS:
        raise ValueError(f"the ecosystems are {', '.join(ECOSYSTEMS)}, got {ecosystem!r}")
    rows = [REFERENCE_ROW, *GUARD_ROWS]
    for name in LIBRARY_TARGETS:
        library, protocol, surface = name.split(":", 2)
        rows.append(RowSpec(f"library:{name}", library, protocol, surface))
    for program in program_rows().values():
        if program.name in hosts and not mcp:
            continue
        overrides = tuple(sorted(program.options.items()))
        rows.append(
            RowSpec(
                f"library:{program.name}",
                program.library,
                program.protocol,
                program.surface,
                program.ecosystem,
                overrides,
            )
        )
    if ecosystem is None:
        return rows
    return [REFERENCE_ROW, *(r for r in rows[1:] if r.ecosystem == ecosystem)]


@dataclass
class Cell:
    """One invariant for one row."""

    invariant: str
    status: str  # "holds" | "violated" | "not_established" | "not_applicable"
    kind: str  # "safety" | "liveness"
    traces_checked: int = 0
    traces_violated: int = 0
    reason: str = ""  # why not applicable
    counterexample: dict[str, Any] | None = None
    findings: list[dict[str, str]] = field(default_factory=list)  # known findings: id, summary, script
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "invariant": self.invariant,
            "status": self.status,
            "kind": self.kind,
            "traces_checked": self.traces_checked,
            "traces_violated": self.traces_violated,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        if self.findings:
            out["findings"] = self.findings
        if self.notes:
            out["notes"] = self.notes
        return out


@dataclass
class RowResult:
    """One row's certification, or why it could not run."""

    row: RowSpec
    version: str | None
    unavailable: str | None = None
    cells: dict[str, Cell] = field(default_factory=dict)
    traces_generated: int = 0
    traces_run: int = 0
    not_applicable: dict[str, int] = field(default_factory=dict)
    target_errors: int = 0
    budget_exhausted: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.row.spec,
            "label": self.row.label,
            "library": self.row.library,
            "version": self.version,
            "protocol": self.row.protocol,
            "surface": self.row.surface,
            "ecosystem": self.row.ecosystem,
            **({"options": dict(self.row.overrides)} if self.row.overrides else {}),
            "available": self.unavailable is None,
            **({"unavailable": self.unavailable} if self.unavailable else {}),
            "traces_generated": self.traces_generated,
            "traces_run": self.traces_run,
            "traces_not_applicable": dict(sorted(self.not_applicable.items())),
            "traces_with_target_errors": self.target_errors,
            "budget_exhausted": self.budget_exhausted,
            "cells": {inv: self.cells[inv].to_json() for inv in _INVARIANT_IDS if inv in self.cells},
            "timings": {"seconds": round(self.seconds, 3)},
        }


@dataclass
class Matrix:
    """The whole table and how it was measured."""

    options: Options
    rows: list[RowResult]
    started_at: float
    seconds: float
    version: str = __version__

    @property
    def node_version(self) -> str | None:
        """Node.js's version when a node row ran (``node --version``), else ``None``."""
        if not any(r.row.ecosystem == "node" and r.unavailable is None for r in self.rows):
            return None
        from callsafe.targets.programs import node_version

        return node_version()

    @property
    def versions(self) -> dict[str, str]:
        """Each measured library's version, by distribution (the reference: callsafe's)."""
        out: dict[str, str] = {}
        from callsafe.targets.program_catalog import program_rows

        programs = program_rows()
        for r in self.rows:
            if r.version is not None:
                out.setdefault(r.row.version_key, r.version)
                program = programs.get(r.row.spec.partition(":")[2])
                if program is not None and r.unavailable is None:
                    for key, version in program.dependency_versions().items():
                        out.setdefault(key, version)
        return out


ProgressCallback = Callable[[RowSpec, "RowResult | None"], None]


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


def _version(row: RowSpec) -> str | None:
    if row.protocol == ABSTRACT or row.library == "callsafe":
        return __version__
    from callsafe.targets._common import library_version
    from callsafe.targets.program_catalog import program_rows

    program = program_rows().get(row.spec.partition(":")[2])
    if program is not None:
        return program.version()
    return library_version(row.library)


def _unavailable(row: RowSpec) -> str | None:
    if not row.spec.startswith("library:"):
        return None
    from callsafe.targets.libraries import unavailable

    return unavailable(row.spec.partition(":")[2])


def run_matrix(
    options: Options, rows: Sequence[RowSpec] | None = None, progress: ProgressCallback | None = None
) -> Matrix:
    """Certify every row with ``options`` (its budget is per row) and tabulate."""
    started_at = time.time()
    t0 = time.perf_counter()
    results: list[RowResult] = []
    for row in rows if rows is not None else default_rows():
        if progress is not None:
            progress(row, None)
        reason = _unavailable(row)
        # a library that cannot be imported has no version here, whatever metadata it left behind
        result = RowResult(row, _version(row) if reason is None else None)
        if reason is not None:
            result.unavailable = reason
            result.cells = {
                inv.id: Cell(inv.id, "not_applicable", inv.kind, reason="the library is not installed")
                for inv in INVARIANTS
            }
        else:
            begun = time.perf_counter()
            cert = certify(row.spec, row.options(options))
            result.seconds = time.perf_counter() - begun
            _fill(result, cert)
        results.append(result)
        if progress is not None:
            progress(row, result)
    return Matrix(options, results, started_at, time.perf_counter() - t0)


def _fill(result: RowResult, cert: Certification) -> None:
    from callsafe.campaigns.findings import findings_for, notes_for

    result.traces_generated = sum(g.generated for g in cert.generators.values())
    result.traces_run = cert.traces_run
    result.not_applicable = dict(cert.not_applicable)
    result.target_errors = sum(g.errors for g in cert.generators.values())
    result.budget_exhausted = cert.budget_exhausted
    spec = result.row.spec
    for inv in INVARIANTS:
        summary = cert.invariants[inv.id]
        cell = Cell(inv.id, summary.status, inv.kind, summary.traces_checked, summary.traces_violated)
        if summary.status == "not_applicable":
            missing = sorted(inv.needs - cert.target.capabilities)
            cell.reason = (
                f"needs {', '.join(missing)}, which the target does not have" if missing else "no applicable trace ran"
            )
        elif summary.status == "violated":
            ces = cert.counterexamples.get(inv.id, [])
            if ces:
                cell.counterexample = _counterexample_json(ces[0], result.row.protocol)
            cell.findings = [f.to_json() for f in findings_for(spec, inv.id)]
        cell.notes = notes_for(spec, inv.id) + reading_notes(cert, inv.id)
        result.cells[inv.id] = cell


def reading_notes(cert: Certification, invariant: str) -> list[str]:
    """What a cell says about the wire runs judged under another defensible reading of their
    stream than callsafe's parser (:mod:`callsafe.certify.wire_readings`): the reading the
    library took, where the protocol's documentation is silent, and on how many traces it
    spared or still broke ``invariant``."""
    out: list[str] = []
    for label, taken in cert.readings.items():
        spared, still = taken.spared.get(invariant, 0), taken.violated.get(invariant, 0)
        if spared:
            out.append(
                f"Reading taken where the protocol's documentation is silent: {label}, on {spared} of "
                f"{taken.traces} trace(s) judged under it. callsafe's own parser reads these streams otherwise "
                "(it refuses them, so nothing runs, or ends a call at a later event); the library's reading is as "
                f"defensible, so the runs are judged under it and {invariant} is not violated there."
            )
        if still:
            out.append(
                f"Judged under the reading the library's run is closest to ({label}) on {still} trace(s), "
                f"{invariant} is still violated there: no defensible reading of those streams allows what it did."
            )
    return out


def _as_read(ce: Counterexample) -> tuple[Trace, Any]:
    """The counterexample's trace as the reading it was judged under reads its payloads (its
    steps are then that reading's, as the findings' steps are), with that reading's parser;
    the trace itself, and no parser, otherwise."""
    from callsafe.certify.wire_readings import reading_trace
    from callsafe.providers.adversities import WireTrace
    from callsafe.providers.readings import read_under, readings_for

    trace = ce.minimal
    if not ce.reading or not isinstance(trace, WireTrace):
        return trace, None
    name = ce.reading.split(" (")[0].split("; ")[0]
    reading = next((r for r in readings_for(trace.protocol) if r.name == name), None)
    if reading is None:  # calls named by their id: callsafe's own parse
        return trace, None
    turn = next((getattr(e, "turn", "") for e in trace.events if isinstance(e, TurnStarted)), "")
    read = read_under(reading, trace.payloads, turn=turn, response="r1", clean=trace.clean)
    return reading_trace(trace, reading, read.events), reading.parser


def _counterexample_json(ce: Counterexample, protocol: str) -> dict[str, Any]:
    executed = [o for o in ce.observations if isinstance(o, Executed)]
    shown, parser = _as_read(ce)
    out: dict[str, Any] = {
        "generator": ce.generator,
        "events": len(ce.minimal.events),
        "found_in_events": len(ce.original.events),
        "trace": _plain_trace(ce.minimal).to_json(),
        "steps": [describe(i, e) for i, e in enumerate(shown.delivered())],
        "findings": [f.describe() for f in ce.findings],
        "executed": [
            {"step": o.step, "call": o.key.short(), "tool": o.tool, "arguments": o.arguments} for o in executed
        ],
        "target_errors": [e.describe() for e in ce.errors],
    }
    if ce.reading:  # the run was judged under the reading it is closest to; the steps are that reading's
        out["reading"] = ce.reading
    if protocol != ABSTRACT:
        out["wire"] = _wire(shown, protocol, parser)
    return out


def _plain_trace(trace: Trace) -> Trace:
    """The trace without the run's name (the name of a generated trace is its recipe,
    which the events already say)."""
    return dataclasses.replace(trace, name="")


def _wire(trace: Trace, protocol: str, parser: Any = None) -> list[dict[str, Any]]:
    """The payloads the library read, with the step of the abstract event each came from (in
    the parse of ``parser``, a reading's, when one is given)."""
    from callsafe.certify.wire import plan_recorded
    from callsafe.providers.adversities import WireTrace

    try:
        if parser is not None and isinstance(trace, WireTrace):
            plan = plan_recorded(trace, parser)
        else:
            _, plan = prepare(trace, protocol)
    except NotRepresentable:  # pragma: no cover - a counterexample ran, so it is representable
        return []
    out: list[dict[str, Any]] = []
    for step, delivery in enumerate(plan.deliveries):
        for k, payload in enumerate(delivery.payloads):
            out.append({"step": step - 1 if k < delivery.early else step, "payload": dict(payload)})
        if delivery.end_stream:
            out.append({"step": step, "end_stream": True})
    return out


def describe(index: int, event: Event) -> str:
    """One readable line for an event of a counterexample."""
    if isinstance(event, TurnStarted):
        return f"[{index}] turn {event.turn} starts (actor {event.actor}, tenant {event.tenant})"
    if isinstance(event, Fragment):
        return f"[{index}] {event.call}: fragment #{event.position} {json.dumps(event.text, ensure_ascii=False)}"
    if isinstance(event, CallTerminal):
        return f"[{index}] {event.call}: terminal event, {event.reason}"
    if isinstance(event, ResponseTerminal):
        return f"[{index}] response {event.response} ends, {event.reason}"
    if isinstance(event, TextFragment):
        return f"[{index}] text {json.dumps(event.text, ensure_ascii=False)}"
    if isinstance(event, CallAddressed):
        body = {k: v for k, v in event_to_json(event)[event.kind].items() if k not in ("turn", "response", "call")}
        details = ", ".join(f"{k} {v}" for k, v in body.items())
        return f"[{index}] {event.call}: {event.kind.replace('_', ' ')} ({details})"
    body = event_to_json(event)[event.kind]
    return f"[{index}] {event.kind.replace('_', ' ')} " + ", ".join(f"{k} {v}" for k, v in body.items())


# --------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------


def matrix_json(m: Matrix) -> dict[str, Any]:
    """The matrix as a JSON document; :func:`stable_view` drops what depends on the clock."""
    return {
        "schema": "callsafe-conformance-matrix",
        "version": MATRIX_VERSION,
        "callsafe_version": m.version,
        "python": platform.python_version(),
        **({"node": m.node_version} if m.node_version else {}),
        "options": m.options.to_json() | {"budget_applies_to": "each row"},
        "versions": dict(sorted(m.versions.items())),
        "invariants": [
            {"id": inv.id, "kind": inv.kind, "title": inv.title, "needs": sorted(inv.needs)} for inv in INVARIANTS
        ],
        "rows": [r.to_json() for r in m.rows],
        "timings": {
            "started_at": dt.datetime.fromtimestamp(m.started_at, dt.UTC).isoformat(timespec="seconds"),
            "seconds": round(m.seconds, 3),
        },
    }


def stable_view(doc: Any) -> Any:
    """``doc`` without its ``timings`` (at any depth): what two runs with the same options
    and library versions must agree on."""
    if isinstance(doc, dict):
        return {k: stable_view(v) for k, v in doc.items() if k != "timings"}
    if isinstance(doc, list):
        return [stable_view(v) for v in doc]
    return doc


def _measured_on(m: Matrix) -> str:
    return dt.datetime.fromtimestamp(m.started_at, dt.UTC).date().isoformat()


def _row_title(r: RowResult) -> str:
    return _title(r.row.library, r.version, r.row.protocol, r.row.surface, r.row.overrides)


def _title(library: str, version: str | None, protocol: str, surface: str, overrides: Iterable[tuple[str, Any]]) -> str:
    """A row's title, the same in every view and in the README's summary: library and
    version, protocol, surface, and the row's option overrides (sorted by name)."""
    shown = ", ".join(f"{k} {v}" for k, v in sorted(overrides))
    return f"{library}{f' {version}' if version else ''} · {protocol} · {surface}" + (f" ({shown})" if shown else "")


def _runtimes(m: Matrix) -> str:
    """The interpreters the rows ran on: Python always, Node.js when a node row ran."""
    node = m.node_version
    return f"Python {platform.python_version()}" + (f", Node.js {node}" if node else "")


def _cell_ref(r: RowResult, inv: str) -> str:
    return f"{_slug(r.row.spec)}--{_slug(inv)}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


LEGEND: Final = (
    ("holds", "checked on at least one applicable trace, and never violated"),
    (
        "violated",
        "some applicable trace breaks the invariant: the minimal counterexample and, for a library, the standalone "
        "script that shows the problem with the library alone are linked",
    ),
    (
        "n/a",
        "not applicable: the invariant needs an observation the target cannot give (a ledger, a status, "
        "confirmations, business validation), or no applicable trace exercised it; never counted as holding",
    ),
)


LIBRARY_RULES: Final = (
    "How a library row is judged. Every row gets the same traces (wire-shaped traces, the named catalog, "
    "coverage suites, random walks, a bounded exhaustive exploration), rendered for the library's protocol by "
    "callsafe's providers; a trace the protocol cannot carry, or that needs what a library does not have "
    "(turns, cancellation, confirmation, operator controls, restart, a ledger, business validation, byte caps), "
    "is not applicable and is counted by reason below. The adapter stands for the application around the "
    "library: it binds each call to the turn in force and calls the executor when the library presents the "
    "call as finished (the row's surface), so the row is judged on exactly that. A trace that stops while the "
    "body is still open ends the run there, which the adapters read as the body ending without a finish "
    "reason. A liveness shortfall counts only for calls whose response ended normally (a library may present "
    "calls at the end of the response). INV-TURN can only hold trivially here: the applicable traces have one "
    "turn, and the binding is the adapter's.",
)


PROGRAM_RULES: Final = (
    "How a program row is judged (the Python agent frameworks and the TypeScript libraries). The library runs "
    "as a program over the callsafe target protocol, and its own SDK reads each trace as real SSE over HTTP from "
    "callsafe's loopback provider. Where the library or framework runs tools itself, the tools it was given are "
    "callsafe's executor, so a cell is about what reached a tool, not what the library printed; where the "
    "application decides (a stream helper), the program runs the tool when the surface presents the call as "
    "finished. Cancellation is the library's own abort or cancel API, and a surface that has none declares no "
    "capability (not applicable). A program that crashes or hangs is a target error, never holds. Such a row may "
    "run fewer walks or a lower exhaustive depth than the in-process rows (HTTP costs time); its overrides are "
    "printed with the row and recorded in the JSON.",
)


def matrix_markdown(m: Matrix, files: MatrixFiles | None = None) -> str:
    """The table, what each cell means, and each violated cell's evidence, as Markdown."""
    head = ["library · protocol · surface", *(inv.id for inv in INVARIANTS)]
    lines = [
        "# callsafe conformance matrix",
        "",
        f"Measured on {_measured_on(m)} with callsafe {m.version}, {_runtimes(m)}; "
        f"seed {m.options.seed}, exhaustive depth {m.options.depth}, {m.options.walks} random walks, budget "
        f"{'none' if m.options.budget is None else f'{m.options.budget:g} s per row'}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for group, members in _groups(m.rows):
        if group:
            lines.append(f"| **{group}** |" + " |" * len(INVARIANTS))
        lines += [_markdown_row(r) for r in members]
    lines += ["", "What a cell means:", ""]
    lines += [f"- **{word}**: {meaning}." for word, meaning in LEGEND]
    lines += ["", *LIBRARY_RULES, "", *PROGRAM_RULES]
    lines += _markdown_tail(m, files)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_row(r: RowResult) -> str:
    cells = []
    for inv in INVARIANTS:
        cell = r.cells[inv.id]
        label = STATUS_LABEL[cell.status]
        if cell.status == "violated":
            label = f"**[violated](#{_cell_ref(r, inv.id)})**"
        elif cell.notes:
            label = f"[{label}](#{_cell_ref(r, inv.id)})"
        cells.append(label)
    title = _row_title(r) + (f" (not installed: {r.unavailable})" if r.unavailable else "")
    return f"| {title} | " + " | ".join(cells) + " |"


def _markdown_tail(m: Matrix, files: MatrixFiles | None) -> list[str]:
    """The per-row counts, then each violated or annotated cell's evidence."""
    lines = [
        "",
        "| row | traces run | not applicable (why: traces) | target errors |",
        "|---|---|---|---|",
    ]
    for r in m.rows:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(r.not_applicable.items())) or "none"
        budget = " (budget ran out)" if r.budget_exhausted else ""
        lines.append(f"| {_row_title(r)} | {r.traces_run}{budget} | {why} | {r.target_errors} |")
    evidence = [
        (r, r.cells[inv.id])
        for r in m.rows
        for inv in INVARIANTS
        if r.cells[inv.id].counterexample or r.cells[inv.id].notes
    ]
    if evidence:
        lines += ["", "## Violations and notes", ""]
    for r, cell in evidence:
        lines += [
            f'<a id="{_cell_ref(r, cell.invariant)}"></a>',
            f"### {_row_title(r)}: {cell.invariant} {STATUS_LABEL[cell.status]}",
            "",
        ]
        for note in cell.notes:
            lines += [note, ""]
        for finding in cell.findings:
            path = finding.get("script")
            script = f" Reproduction: [`{path}`]({_link(path, files)})." if path else ""
            lines += [f"- {finding['id']}: {finding['summary']}.{script}"]
        if cell.findings:
            lines.append("")
        ce = cell.counterexample
        if ce is not None:
            replay = ""
            if files is not None and (r.row.spec, cell.invariant) in files.counterexamples:
                path = files.counterexamples[(r.row.spec, cell.invariant)]
                replay = f"; replay it: `{replay_command(path, r.row.spec)}`"
            lines += [
                f"Minimal counterexample ({ce['events']} events, from the {ce['generator']} generator{replay}):",
                "",
            ]
            lines += ["```", *ce["steps"], "```", ""]
            if ce.get("reading"):
                lines += [
                    f"Judged under the reading the run is closest to: {ce['reading']} (the steps are its parse).",
                    "",
                ]
            lines += [f"- {f}" for f in ce["findings"]]
            lines.append("")
    return lines


GROUP_TITLES: Final = {"python": "Python", "node": "Node.js (TypeScript)"}


def _groups(rows: Sequence[RowResult]) -> list[tuple[str, list[RowResult]]]:
    """The rows by ecosystem, in first-appearance order: callsafe's own rows (untitled,
    the yardstick) first, then each ecosystem's library rows under its title."""
    groups: dict[str, list[RowResult]] = {}
    for r in rows:
        groups.setdefault(_group_title(r.row.library, r.row.ecosystem), []).append(r)
    return list(groups.items())


def _group_title(library: str, ecosystem: str) -> str:
    """The group a row is listed under: none for callsafe's own rows, else its ecosystem's."""
    return "" if library == "callsafe" else GROUP_TITLES.get(ecosystem, ecosystem)


_CSS: Final = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f3f5f8; } th.inv { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
.holds { background: #d5ecd4; color: #1b5e20; } .violated { background: #f6d5d5; color: #b71c1c; font-weight: bold; }
.not_applicable { background: #eee; color: #666; }
td.cell { text-align: center; } td.cell a { color: inherit; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px; overflow-x: auto; font-size: 0.85em; }
.ev { border: 1px solid #e3c0c0; border-radius: 6px; padding: 0.4em 1em; margin: 1em 0; }
.muted { color: #777; }
"""


def matrix_html(m: Matrix, files: MatrixFiles | None = None) -> str:
    """A self-contained HTML page: the table (cells coloured, linked to their evidence),
    the legend, and each violated cell's counterexample with the payloads the library read."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>callsafe conformance matrix</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>callsafe conformance matrix</h1>",
        f"<p class='muted'>Measured on {_measured_on(m)} with callsafe {escape(m.version)}, "
        f"{escape(_runtimes(m))}; seed {m.options.seed}, depth {m.options.depth}, "
        f"{m.options.walks} walks, budget {'none' if m.options.budget is None else f'{m.options.budget:g} s per row'}; "
        f"{m.seconds:.1f} s.</p>",
        "<table><tr><th>library · protocol · surface</th>"
        + "".join(f"<th class='inv' title='{escape(inv.title)}'>{escape(inv.id)}</th>" for inv in INVARIANTS)
        + "<th>traces run</th></tr>",
    ]
    for group, members in _groups(m.rows):
        if group:
            parts.append(f"<tr><th colspan='{len(INVARIANTS) + 2}'>{escape(group)}</th></tr>")
        parts += [_html_row(r) for r in members]
    parts += _html_tail(m, files)
    return "\n".join(parts) + "\n"


def _html_row(r: RowResult) -> str:
    tds = []
    for inv in INVARIANTS:
        cell = r.cells[inv.id]
        text = escape(STATUS_LABEL[cell.status])
        if cell.counterexample or cell.notes:
            text = f"<a href='#{_cell_ref(r, inv.id)}'>{text}</a>"
        tip = escape(cell.reason or f"{cell.traces_checked} traces checked, {cell.traces_violated} violating")
        tds.append(f"<td class='cell {cell.status}' title='{tip}'>{text}</td>")
    title = escape(_row_title(r)) + (
        f" <span class='muted'>(not installed: {escape(r.unavailable)})</span>" if r.unavailable else ""
    )
    return f"<tr><td>{title}</td>{''.join(tds)}<td>{r.traces_run}</td></tr>"


def _html_tail(m: Matrix, files: MatrixFiles | None) -> list[str]:
    """The legend, the rules, the per-row counts and each cell's evidence, as HTML."""
    parts = ["</table><ul>"]
    parts += [f"<li><b>{escape(w)}</b>: {escape(meaning)}.</li>" for w, meaning in LEGEND]
    parts.append("</ul>")
    parts += [f"<p>{escape(p)}</p>" for p in (*LIBRARY_RULES, *PROGRAM_RULES)]
    parts.append(
        "<table><tr><th>row</th><th>traces run</th><th>not applicable (why: traces)</th><th>target errors</th></tr>"
    )
    for r in m.rows:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(r.not_applicable.items())) or "none"
        budget = " (budget ran out)" if r.budget_exhausted else ""
        parts.append(
            f"<tr><td>{escape(_row_title(r))}</td><td>{r.traces_run}{budget}</td><td>{escape(why)}</td>"
            f"<td>{r.target_errors}</td></tr>"
        )
    parts.append("</table>")
    for r in m.rows:
        for inv in INVARIANTS:
            cell = r.cells[inv.id]
            if not (cell.counterexample or cell.notes):
                continue
            parts.append(
                f"<div class='ev' id='{_cell_ref(r, inv.id)}'><h3>{escape(_row_title(r))}: {escape(inv.id)} "
                f"<span class='{cell.status}'>{escape(STATUS_LABEL[cell.status])}</span></h3>"
            )
            parts += [f"<p>{escape(n)}</p>" for n in cell.notes]
            if cell.findings:
                parts.append("<ul>")
                for f in cell.findings:
                    path = f.get("script")
                    link = f" <a href='{escape(_link(path, files))}'>{escape(path)}</a>" if path else ""
                    parts.append(f"<li>{escape(f['id'])}: {escape(f['summary'])}.{link}</li>")
                parts.append("</ul>")
            ce = cell.counterexample
            if ce is not None:
                replay = ""
                if files is not None and (r.row.spec, inv.id) in files.counterexamples:
                    path = files.counterexamples[(r.row.spec, inv.id)]
                    replay = f" Replay: <code>{escape(replay_command(path, r.row.spec))}</code>."
                source = f"{ce['events']} events, {escape(ce['generator'])} generator"
                parts.append(f"<p>Minimal counterexample ({source}).{replay}</p>")
                parts.append("<pre>" + escape("\n".join(ce["steps"])) + "</pre><ul>")
                parts += [f"<li>{escape(f)}</li>" for f in ce["findings"]]
                parts.append("</ul>")
                if ce.get("wire"):
                    wire = "\n".join(json.dumps(w, ensure_ascii=False) for w in ce["wire"])
                    parts.append(
                        f"<details><summary>what the library read</summary><pre>{escape(wire)}</pre></details>"
                    )
            parts.append("</div>")
    parts.append("</body></html>")
    return parts


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


@dataclass
class MatrixFiles:
    """What :func:`write_matrix` wrote (paths relative to the folder for the links)."""

    json: Path
    markdown: Path
    html: Path
    counterexamples: dict[tuple[str, str], str] = field(default_factory=dict)  # (spec, invariant) -> path
    root: Path | None = None  # the folder the report's relative links start from


_PACKAGE_ROOT: Final = Path(__file__).resolve().parents[1]


def _link(path: str, files: MatrixFiles | None) -> str:
    """A script's link: relative to the package root (as in the README), or, in a written
    report, relative to the report's folder when the script is there on disk."""
    if files is None or files.root is None or not (_PACKAGE_ROOT / path).is_file():
        return path
    return os.path.relpath(_PACKAGE_ROOT / path, files.root)


def write_matrix(m: Matrix, out_dir: Path) -> MatrixFiles:
    """Write ``matrix.json``, ``matrix.md``, ``matrix.html`` and each violated cell's minimal
    counterexample as a trace file (``counterexamples/<row>/<invariant>.json``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = MatrixFiles(out_dir / "matrix.json", out_dir / "matrix.md", out_dir / "matrix.html", root=out_dir.resolve())
    for r in m.rows:
        for inv, cell in r.cells.items():
            if cell.counterexample is None:
                continue
            folder = out_dir / "counterexamples" / _slug(r.row.spec)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{_slug(inv)}.json"
            path.write_text(
                json.dumps(cell.counterexample["trace"], indent=1, ensure_ascii=False) + "\n",
                encoding="utf-8",
                errors=LONE_SURROGATES,
            )
            files.counterexamples[(r.row.spec, inv)] = str(path.relative_to(out_dir))
    doc = matrix_json(m)
    files.json.write_text(
        json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8", errors=LONE_SURROGATES
    )
    files.markdown.write_text(matrix_markdown(m, files), encoding="utf-8", errors=LONE_SURROGATES)
    files.html.write_text(matrix_html(m, files), encoding="utf-8", errors=LONE_SURROGATES)
    return files


# --------------------------------------------------------------------------------------
# The matrix page's table (docs/matrix.md)
# --------------------------------------------------------------------------------------

README_START: Final = "<!-- matrix:start -->\n"
README_END: Final = "<!-- matrix:end -->"
_LOUD: Final = ("violated", "not_established")
_SHORT_IDS: Final = {inv.id: inv.id.removeprefix("INV-") for inv in INVARIANTS}


def matrix_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the matrix page says of a measured matrix (from its ``matrix.json``): when, with what
    (callsafe, the runtimes, every judged library's version, the options) and each row's
    cells. Committed as ``docs/matrix-summary.json`` beside the page, so that a test can
    keep the page's table equal to a run that happened and to today's list of rows."""
    return {
        "schema": "callsafe-matrix-summary",
        "measured_on": str(doc["timings"]["started_at"])[:10],
        "callsafe_version": doc["callsafe_version"],
        "python": doc["python"],
        **({"node": doc["node"]} if doc.get("node") else {}),
        "options": {k: v for k, v in doc["options"].items() if k in ("seed", "depth", "walks", "budget_seconds")},
        "versions": doc["versions"],
        "seconds": doc["timings"]["seconds"],
        "rows": [
            {
                "spec": r["spec"],
                "library": r["library"],
                "ecosystem": r.get("ecosystem", "python"),
                "title": _summary_title(r),
                "available": r["available"],
                **({"unavailable": r["unavailable"]} if not r["available"] else {}),
                "traces_run": r["traces_run"],
                "seconds": r["timings"]["seconds"],
                "cells": {inv: c["status"] for inv, c in r["cells"].items()},
            }
            for r in doc["rows"]
        ],
    }


def merge_summary(recorded: Mapping[str, Any], run: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``recorded`` (the committed summary) with the rows of a later, partial ``run`` (a
    ``--only`` run's summary) put in: a row measured again replaces its old self, a new row
    goes where ``order`` (today's row specs) puts it, and the versions the run judged are
    added. The run is recorded under ``merged`` (when, which rows, how long), and the page
    says so. Refused (``ValueError``) when the run's options differ from the recorded ones:
    the rows of one table are measured alike."""
    if run["options"] != recorded["options"]:
        raise ValueError(f"the run's options {run['options']} are not the recorded {recorded['options']}")
    fresh = {r["spec"]: r for r in run["rows"]}
    rows = {r["spec"]: r for r in recorded["rows"]}
    rows.update(fresh)
    ranked = {spec: n for n, spec in enumerate(order)}
    later = {"measured_on": run["measured_on"], "rows": list(fresh), "seconds": run["seconds"]}
    earlier = [{**m, "rows": [r for r in m["rows"] if r not in fresh]} for m in recorded.get("merged", [])]
    merged = [*(m for m in earlier if m["rows"]), later]  # a row is listed under its latest run only
    return {
        **recorded,
        "rows_in_run": recorded.get("rows_in_run", len(recorded["rows"])),
        "versions": dict(sorted({**recorded["versions"], **run["versions"]}.items())),
        "rows": sorted(rows.values(), key=lambda r: ranked.get(r["spec"], len(ranked))),
        "merged": merged,
    }


def _summary_title(r: Mapping[str, Any]) -> str:
    return _title(r["library"], r.get("version"), r["protocol"], r["surface"], r.get("options", {}).items())


def readme_table(summary: Mapping[str, Any]) -> str:
    """The matrix page's table (``docs/matrix.md``): a line saying when and with what it was measured, then the
    table grouped by ecosystem (callsafe's own rows first)."""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(summary["versions"].items()) if k != "callsafe")
    opts = summary["options"]
    budget = "none" if opts.get("budget_seconds") is None else f"{opts['budget_seconds']:g} s per row"
    node = f", Node.js {summary['node']}" if summary.get("node") else ""
    measured = summary.get("rows_in_run", len(summary["rows"]))  # after a merge: the first run's rows
    lines = [
        f"Measured on {summary['measured_on']} (`callsafe matrix --readme docs/matrix.md`): callsafe "
        f"{summary['callsafe_version']}, Python {summary['python']}{node}; seed {opts['seed']}, exhaustive depth "
        f"{opts['depth']}, {opts['walks']} random walks, budget {budget}; {measured} rows in "
        f"{summary['seconds']:.0f} s. Versions: {versions}.",
        "",
    ]
    for later in summary.get("merged", []):
        lines[-1:-1] = [
            "",
            f"Measured on {later['measured_on']} in a later run (`callsafe matrix --only ... --readme docs/matrix.md "
            f"--merge`, the same options) and merged in: {', '.join(later['rows'])} ({later['seconds']:.0f} s).",
        ]
    ids = [inv.id for inv in INVARIANTS]
    lines += ["| library · protocol · surface | " + " | ".join(_SHORT_IDS[i] for i in ids) + " |"]
    lines += ["|" + "---|" * (len(ids) + 1)]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in summary["rows"]:
        groups.setdefault(_group_title(r["library"], r["ecosystem"]), []).append(r)
    for group, members in groups.items():
        if group:
            lines.append(f"| **{group}** |" + " |" * len(ids))
        for r in members:
            if not r["available"]:
                lines.append(f"| {r['title']} (not installed: {r['unavailable']}) |" + " |" * len(ids))
                continue
            cells = [r["cells"].get(i, "not_applicable") for i in ids]
            shown = [
                f"**{STATUS_LABEL[c]}**" if c in ("violated", "not_established") else STATUS_LABEL[c] for c in cells
            ]
            lines.append(f"| {r['title']} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def replace_readme_table(text: str, table: str) -> str:
    """``text`` (the matrix page) with the block between the matrix markers replaced."""
    if README_START not in text or README_END not in text:
        raise ValueError(f"the page has no {README_START.strip()} ... {README_END} block")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    return head + README_START + table + README_END + tail
