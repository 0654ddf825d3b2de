"""What ``callsafe inspect`` shows: rich tables on the terminal, and a self-contained HTML
page with the same tables and a sequence diagram of the stream.

Why the library tables are built around what the library *presented*: that is what an
application acts on. Each presented call gets a "vs reference" cell (the same call, with
the same tool and arguments, as the reference executed; or every difference), and each call
the reference executed that the library never presented gets a row of its own, so that a
lost call is as visible as a wrong one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any, Final

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from callsafe.diagrams.sequence import sequence_svg
from callsafe.inspection.inspect import Difference, Inspection, LibraryCall, LibraryResult, ReferenceCall
from callsafe.model.vocabulary import Executed, LedgerRow

__all__ = ["html_page", "print_inspection", "summary_line"]

_FORMAT_NAMES: Final = {"jsonl": "JSON lines", "sse": "server-sent events"}


def _json(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _header(inspection: Inspection) -> list[tuple[str, str]]:
    """The facts above the tables, as (label, text) pairs shared by both renderings."""
    rec = inspection.recording
    if inspection.protocol_source == "detected" and inspection.detection is not None:
        protocol = f"{inspection.protocol} (detected: {inspection.detection.describe()})"
    else:
        protocol = f"{inspection.protocol} (from --protocol)"
    rows = [("protocol", protocol)]
    if inspection.detection_note:
        rows.append(("note", inspection.detection_note))
    rows.append(
        (
            "stream",
            f"{_FORMAT_NAMES[rec.format]}: {len(rec.payloads)} payloads read, {len(inspection.events)} abstract events"
            + (", ended by [DONE]" if rec.done else ""),
        )
    )
    if inspection.tools_source == "open":
        names = ", ".join(inspection.tools) or "none"
        rows.append(
            (
                "tools",
                f"no --tools given: every tool the stream names ({names}) is declared with an open schema "
                '({"type": "object"}), so no argument is checked against your schemas',
            )
        )
    else:
        rows.append(("tools", f"{len(inspection.tools)} declared by --tools: {', '.join(inspection.tools) or 'none'}"))
    error = inspection.stream_error
    if error is not None:
        what = "the file is damaged here" if error.damaged else "the stream breaks its protocol here"
        rows.append(("stopped", f"{error.kind}: {error.message} ({what}; nothing after it is read)"))
    elif inspection.recording.damage:
        rows.append(("damaged", inspection.recording.damage))
    for reading in inspection.readings:  # the protocol's documentation is silent: another reading is as defensible
        runs = ", ".join(f"{r['call']} {_json(r.get('arguments'))}" for r in reading["runs"]) or "nothing"
        rows.append(("also allowed", f"{reading['name']}: {reading['description']}; it runs {runs}"))
    return rows


def _reference_detail(call: ReferenceCall) -> str:
    if call.outcome == "executed":
        extra = f" (executed {call.executions} times!)" if call.executions > 1 else ""
        return _json(call.arguments) + extra
    ledger = call.ledger or {}
    facts = [
        f"{ledger.get('fragments', 0)} fragment(s)",
        f"terminal: {ledger.get('terminal_reason') or 'none'}",
        f"parse: {ledger.get('parse', '?')}",
        f"validation: {ledger.get('validation', '?')}",
    ]
    return f"{call.reason} [{call.decision or 'no ledger row'}; {', '.join(facts)}]"


def _library_rows(lib: LibraryResult) -> list[tuple[LibraryCall | None, str, list[Difference]]]:
    """(presented call or None for a missing one, its call id, the differences to show)."""
    by_call: dict[str, list[Difference]] = {}
    for diff in lib.differences:
        by_call.setdefault(diff.call, []).append(diff)
    rows: list[tuple[LibraryCall | None, str, list[Difference]]] = []
    shown: set[str] = set()
    for call in lib.presented:
        diffs = [] if call.key.call in shown else by_call.get(call.key.call, [])
        shown.add(call.key.call)
        rows.append((call, call.key.call, diffs))
    for call_id, diffs in by_call.items():
        if call_id not in shown:
            rows.append((None, call_id, diffs))
    return rows


def summary_line(inspection: Inspection) -> str:
    """One sentence: what the reference did and which libraries differ."""
    executed = len(inspection.executed)
    refused = sum(c.outcome == "refused" for c in inspection.reference)
    waiting = sum(c.outcome == "awaiting_confirmation" for c in inspection.reference)
    ran = [lib for lib in inspection.libraries if lib.status == "ran"]
    differing = [lib.name for lib in ran if lib.differences]
    text = f"the reference executed {executed} call(s) and refused {refused}"
    if waiting:
        text += f"; {waiting} await confirmation"
    reason = inspection.no_library_reason()
    if reason is not None:
        return f"{text}; {reason}"
    text += f"; {len(ran)} library adapter(s) ran"
    text += f", {len(differing)} differ from the reference" + (f": {', '.join(differing)}" if differing else "")
    return text


# --------------------------------------------------------------------------------------
# Terminal
# --------------------------------------------------------------------------------------


def print_inspection(inspection: Inspection, console: Console) -> None:
    """The report as rich tables (argument values and reasons are never read as markup)."""
    console.print(Text(f"callsafe inspect {inspection.file}", style="bold"))
    header = Table.grid(padding=(0, 1))
    header.add_column(style="dim", no_wrap=True)
    header.add_column(overflow="fold")
    for label, text in _header(inspection):
        header.add_row(label, Text(text, style="yellow" if label in ("note", "stopped", "damaged") else ""))
    console.print(header)
    console.print()

    title = "Reference implementation: what it executes and what it refuses"
    if not inspection.reference:
        console.print(Text.assemble((title, "italic"), ": the stream announces no tool call"))
    table = Table(title=title, title_justify="left")
    for col in ("call", "tool", "outcome", "arguments, or the ledger's reason", "after"):
        table.add_column(col, overflow="fold")
    styles = {"executed": "green", "refused": "red", "awaiting_confirmation": "yellow", "undecided": "magenta"}
    for call in inspection.reference:
        table.add_row(
            Text(call.key.call),
            Text(call.tool),
            Text(call.outcome.replace("_", " "), style=styles[call.outcome]),
            Text(_reference_detail(call)),
            Text(call.where or ""),
        )
    if inspection.reference:
        console.print(table)
    for finding in inspection.oracle_findings:
        console.print(Text(f"  the reference disagrees with the oracle: {finding.describe()}", style="bold red"))
    for error in inspection.reference_errors:
        console.print(Text(f"  the reference raised: {error}", style="bold red"))

    for lib in inspection.libraries:
        console.print()
        _print_library(lib, console)
    console.print()
    console.print(Text(summary_line(inspection), style="bold"))


def _print_library(lib: LibraryResult, console: Console) -> None:
    title = f"{lib.name}" + (f" ({lib.library} {lib.version})" if lib.version else "")
    if lib.status == "unavailable":
        console.print(Text(f"{title}: skipped: {lib.reason}", style="dim"))
        return
    if lib.status == "failed":
        console.print(Text(f"{title}: the adapter failed: {lib.reason}", style="bold red"))
        return
    if lib.status == "stopped":
        console.print(Text(f"{title}: stopped: {lib.reason}", style="bold yellow"))
        return
    verdict = Text("same as the reference", style="green") if lib.agrees else Text("differs", style="bold red")
    if not lib.presented and not lib.differences:
        console.print(Text.assemble((title, "bold"), ": presents no call; ", verdict))
        for error in lib.errors:
            console.print(Text(f"  the library raised: {error}", style="yellow"))
        return
    table = Table(title=Text.assemble((title, "bold"), ": ", verdict), title_justify="left")
    for col in ("call", "tool", "presented as finished", "an app runs it", "after", "vs reference"):
        table.add_column(col, overflow="fold")
    for call, call_id, diffs in _library_rows(lib):
        marks = Group(*(Text(f"≠ {d.kind}: {d.message}", style="red") for d in diffs)) if diffs else None
        same = Text("= same", style="green")
        if call is None:
            table.add_row(Text(call_id), "", Text("(never presented)", style="dim"), "", "", marks or same)
            continue
        runs = Text("yes") if call.would_execute else Text(f"no: {call.note}", style="yellow")
        table.add_row(
            Text(call.key.call),
            Text(call.tool),
            Text(_json(call.arguments)),
            runs,
            Text(call.where or ""),
            marks or same,
        )
    console.print(table)
    for error in lib.errors:
        console.print(Text(f"  the library raised: {error}", style="yellow"))


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------

_CSS: Final = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ccd; padding: .3em .6em; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #eef2f7; }
code, .args { font-family: Menlo, Consolas, monospace; font-size: 12px; word-break: break-all; }
.executed, .same { color: #2e7d32; } .refused, .diff { color: #c62828; } .awaiting_confirmation { color: #b26a00; }
.muted { color: #667; } dt { font-weight: bold; float: left; width: 6em; } dd { margin-left: 7em; }
.diagram { overflow-x: auto; border: 1px solid #dde; padding: .5em; }
"""


def html_page(inspection: Inspection) -> str:
    """A self-contained HTML page (inline CSS and SVG), every value escaped."""
    title = f"callsafe inspect: {inspection.file or 'recording'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1><dl>",
    ]
    parts += [f"<dt>{escape(label)}</dt><dd>{escape(text)}</dd>" for label, text in _header(inspection)]
    parts.append(f"</dl><p><strong>{escape(summary_line(inspection))}</strong></p>")
    parts.append("<h2>Reference implementation</h2>")
    parts.append(_reference_table(inspection.reference))
    if inspection.oracle_findings or inspection.reference_errors:
        items = [f"disagrees with the oracle: {f.describe()}" for f in inspection.oracle_findings]
        items += [f"raised: {e}" for e in inspection.reference_errors]
        parts.append("<ul class='diff'>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>")
    parts.append("<h2>Library adapters</h2>")
    reason = inspection.no_library_reason()
    if reason is not None:
        parts.append(f"<p class='muted'>{escape(reason)}.</p>")
    for lib in inspection.libraries:
        parts.append(_library_html(lib))
    parts.append(_diagram_html(inspection))
    parts.append(
        "<details><summary>the recording as a trace (what <code>--to-trace</code> writes, without verdicts)"
        f"</summary><pre>{escape(inspection.trace.dumps())}</pre></details>"
    )
    parts.append("</body></html>")
    return "\n".join(parts)


def _reference_table(calls: Sequence[ReferenceCall]) -> str:
    rows = [
        "<table><tr><th>call</th><th>tool</th><th>outcome</th><th>arguments, or the ledger's reason</th>"
        "<th>after</th></tr>"
    ]
    for call in calls:
        rows.append(
            f"<tr><td><code>{escape(call.key.call)}</code></td><td>{escape(call.tool)}</td>"
            f"<td class='{escape(call.outcome)}'>{escape(call.outcome.replace('_', ' '))}</td>"
            f"<td class='args'>{escape(_reference_detail(call))}</td><td>{escape(call.where or '')}</td></tr>"
        )
    if not calls:
        rows.append("<tr><td colspan='5' class='muted'>the stream announces no tool call</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _library_html(lib: LibraryResult) -> str:
    title = escape(lib.name + (f" ({lib.library} {lib.version})" if lib.version else ""))
    if lib.status != "ran":
        what = {"unavailable": "skipped", "stopped": "stopped"}.get(lib.status, "the adapter failed")
        return f"<h3>{title}</h3><p class='muted'>{what}: {escape(lib.reason or '')}</p>"
    verdict = "<span class='same'>same as the reference</span>" if lib.agrees else "<span class='diff'>differs</span>"
    out = [
        f"<h3>{title}: {verdict}</h3>",
        "<table><tr><th>call</th><th>tool</th><th>presented as finished</th><th>an app runs it</th><th>after</th>"
        "<th>vs reference</th></tr>",
    ]
    for call, call_id, diffs in _library_rows(lib):
        marks = (
            "<br>".join(f"<span class='diff'>≠ {escape(d.kind)}: {escape(d.message)}</span>" for d in diffs)
            if diffs
            else "<span class='same'>= same</span>"
        )
        if call is None:
            out.append(
                f"<tr><td><code>{escape(call_id)}</code></td><td></td><td class='muted'>(never presented)</td>"
                f"<td></td><td></td><td>{marks}</td></tr>"
            )
            continue
        runs = "yes" if call.would_execute else f"no: {escape(call.note)}"
        out.append(
            f"<tr><td><code>{escape(call.key.call)}</code></td><td>{escape(call.tool)}</td>"
            f"<td class='args'>{escape(_json(call.arguments, 400))}</td><td>{runs}</td>"
            f"<td>{escape(call.where or '')}</td><td>{marks}</td></tr>"
        )
    if not lib.presented and not lib.differences:
        out.append("<tr><td colspan='6' class='muted'>presents no call, as the reference executes none</td></tr>")
    out.append("</table>")
    if lib.errors:
        out.append("<ul>" + "".join(f"<li>the library raised: {escape(e)}</li>" for e in lib.errors) + "</ul>")
    return "".join(out)


def _diagram_html(inspection: Inspection) -> str:
    """The stream as a sequence diagram (:func:`callsafe.diagrams.sequence.sequence_svg`): in
    its lanes, *harness* is the recorded stream as callsafe delivers it, *target* the
    reference implementation, *executor* the tools; only executions and ledger rows are
    drawn back, so the diagram stays the stream's own story."""
    run_obs = inspection.reference_observations
    shown = [o for o in run_obs if isinstance(o, (Executed, LedgerRow))]
    return (
        "<h2>The stream, as the reference implementation received it</h2>"
        "<p class='muted'>Lanes: <em>harness</em> delivers the recorded stream's events (a turn first, then the "
        "parsed payloads), <em>target</em> is the reference implementation, <em>executor</em> the tools. "
        "Blue dashed arrows are ledger rows; arrows to the executor are executions.</p>"
        f"<div class='diagram'>{sequence_svg(inspection.trace, shown)}</div>"
    )
