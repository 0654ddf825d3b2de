"""A counterexample as a sequence diagram: lanes harness, target, executor.

Why drawn by hand as inline SVG rather than through Graphviz: a sequence diagram is rows
of arrows between three lifelines, which Graphviz lays out poorly, and an inline SVG
needs no program installed and lives inside ``report.html``. Each delivered event is an
arrow from the harness to the target; what the target does at the boundary (asking the
business validator, asking for a confirmation, showing a status, writing a ledger row)
is an arrow back to the harness, and each execution an arrow to the executor, drawn red
when a finding names its call. Rows are in the order things happened: an observation
made while event ``i`` was being delivered comes after that event's arrow, and events
delivered during a validation come after the validator's arrow.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Sequence
from typing import Final

import graphviz

from callsafe.diagrams.style import escape
from callsafe.model.vocabulary import (
    AuditRow,
    BusinessValidated,
    CallAddressed,
    CallKey,
    CallTerminal,
    ConfirmationRequested,
    Event,
    Executed,
    Fragment,
    LedgerRow,
    LogLine,
    Observation,
    StatusShown,
    Trace,
    event_to_json,
)
from callsafe.safe_text import printable

__all__ = ["describe_event", "sequence_dot", "sequence_rows", "sequence_svg"]

_LANES: Final = {"harness": 110, "target": 420, "executor": 730}
_ROW: Final = 24
_TOP: Final = 56
_WIDTH: Final = 860


def _short(text: str, limit: int = 46) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_event(index: int, event: Event) -> str:
    """One line for an event: its index, kind, call and the data that matters."""
    where = ""
    if isinstance(event, CallAddressed):
        where = f" {event.turn}/{event.call}"
    if isinstance(event, Fragment):
        return _short(f"[{index}] fragment{where} #{event.position} {json.dumps(event.text, ensure_ascii=False)}")
    if isinstance(event, CallTerminal):
        return _short(f"[{index}] call_terminal{where} {event.event_id} {event.reason}")
    body = event_to_json(event)[event.kind]
    if isinstance(event, CallAddressed):  # already named by ``where``
        body = {k: v for k, v in body.items() if k not in ("turn", "response", "item", "call")}
    elif "turn" in body:  # the turn a turn_started, cancel or disconnect is about comes first: it is the point
        where = f" {body.pop('turn')}"
    details = " ".join(f"{k}={v}" for k, v in body.items())
    return _short(f"[{index}] {event.kind}{where} {details}".rstrip())


def _describe_observation(obs: Observation) -> tuple[str, str, str]:
    """(from lane, to lane, label)."""
    if isinstance(obs, Executed):
        return "target", "executor", _short(f"execute {obs.tool} {obs.key.short()} {json.dumps(obs.arguments)}")
    if isinstance(obs, BusinessValidated):
        return "target", "harness", f"validate {obs.key.short()}"
    if isinstance(obs, ConfirmationRequested):
        return "target", "harness", f"confirm? {obs.key.short()}"
    if isinstance(obs, StatusShown):
        return "target", "harness", f"status {obs.turn}: {obs.status}"
    if isinstance(obs, LedgerRow):
        return "target", "harness", _short(f"ledger {obs.key.short()}: {obs.decision}")
    if isinstance(obs, AuditRow):
        return "target", "harness", _short(f"audit {obs.action}: {len(obs.keys)} call(s)")
    if isinstance(obs, LogLine):
        return "target", "harness", _short(f"log: {obs.text}")
    return "target", "harness", obs.kind


def sequence_rows(trace: Trace, observations: Sequence[Observation]) -> list[tuple[str, str, str, Observation | None]]:
    """The diagram's rows in the order things happened: (from, to, label, observation)."""
    delivered = trace.delivered()
    rows: list[tuple[str, str, str, Observation | None]] = []
    next_event = 0
    for obs in observations:
        while next_event <= obs.step and next_event < len(delivered):
            rows.append(("harness", "target", describe_event(next_event, delivered[next_event]), None))
            next_event += 1
        src, dst, label = _describe_observation(obs)
        rows.append((src, dst, label, obs))
    while next_event < len(delivered):
        rows.append(("harness", "target", describe_event(next_event, delivered[next_event]), None))
        next_event += 1
    return rows


def sequence_svg(trace: Trace, observations: Sequence[Observation], flagged: Iterable[CallKey] = ()) -> str:
    """An ``<svg>`` element (no XML header: it is meant to be inlined in HTML)."""
    bad = set(flagged)
    rows = sequence_rows(trace, observations)
    height = _TOP + _ROW * (len(rows) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        "<defs>",
        '<marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker>',
        '<marker id="arrow-bad" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#c62828"/></marker>',
        "</defs>",
    ]
    for lane, x in _LANES.items():
        out.append(f'<rect x="{x - 55}" y="8" width="110" height="26" rx="4" fill="#eef2f7" stroke="#8899aa"/>')
        out.append(f'<text x="{x}" y="25" text-anchor="middle" font-weight="bold">{lane}</text>')
        out.append(f'<line x1="{x}" y1="34" x2="{x}" y2="{height - 8}" stroke="#aab" stroke-dasharray="4 3"/>')
    for n, (src, dst, label, obs) in enumerate(rows):
        y = _TOP + _ROW * n
        x1, x2 = _LANES[src], _LANES[dst]
        flagged_row = isinstance(obs, Executed) and obs.key in bad
        color = "#c62828" if flagged_row else ("#555" if obs is None else "#2e6da4")
        marker = "arrow-bad" if flagged_row else "arrow"
        dash = ' stroke-dasharray="5 3"' if obs is not None and not isinstance(obs, Executed) else ""
        width = "2.2" if flagged_row else "1.2"
        out.append(
            f'<line x1="{x1}" y1="{y}" x2="{x2 - 6 if x2 > x1 else x2 + 6}" y2="{y}" stroke="{color}" '
            f'stroke-width="{width}"{dash} marker-end="url(#{marker})"/>'
        )
        tx = (x1 + x2) / 2
        weight = ' font-weight="bold"' if flagged_row else ""
        out.append(f'<text x="{tx}" y="{y - 4}" text-anchor="middle" fill="{color}"{weight}>{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


# --------------------------------------------------------------------------------------
# The same rows through Graphviz, for files (SVG and PNG)
# --------------------------------------------------------------------------------------

_DOT_LANES: Final = {"harness": 1.2, "target": 5.9, "executor": 10.6}  # inches
_DOT_ROW: Final = 0.46
_DOT_TOP: Final = 0.9


def sequence_dot(
    trace: Trace,
    observations: Sequence[Observation],
    flagged: Iterable[CallKey] = (),
    title: str = "",
    explanation: Sequence[str] = (),
) -> graphviz.Digraph:
    """The rows of :func:`sequence_rows` as a Graphviz graph with fixed positions (laid out
    by ``neato``, which keeps pinned nodes where they are): every arrow between two point
    nodes on the lifelines, its text a separate node just above it; under the lifelines,
    ``explanation`` (the model's account of the calls), so that the picture says what
    should have happened as well as what did. Why not the hand-drawn SVG: a design
    document wants a PNG too, and Graphviz writes both from one source."""
    bad = set(flagged)
    rows = sequence_rows(trace, observations)
    dot = graphviz.Digraph("sequence", engine="neato", comment="callsafe counterexample, harness/target/executor")
    heading = "<BR/>".join(escape(line) for line in textwrap.wrap(title, 90))
    dot.attr(
        fontname="Helvetica",
        fontsize="15",
        label=f"<<B>{heading}</B>>" if title else "",
        labelloc="t",
        pad="0.3",
        splines="line",
        outputorder="edgesfirst",
    )
    dot.attr("node", fontname="Helvetica", fontsize="14")
    dot.attr("edge", arrowsize="0.8")
    bottom = -(_DOT_TOP + _DOT_ROW * (len(rows) + 0.5))

    def pos(x: float, y: float) -> str:
        return f"{x:.2f},{y:.2f}!"

    dot.node("top_margin", "", pos=pos(_DOT_LANES["target"], 0.55), shape="point", width="0.01", style="invis")
    for lane, x in _DOT_LANES.items():
        dot.node(
            f"lane_{lane}", lane, pos=pos(x, 0), shape="box", style="rounded,filled", fillcolor="#eef2f7",
            color="#8899aa", width="1.6", fontsize="15",
        )  # fmt: skip
        dot.node(f"end_{lane}", "", pos=pos(x, bottom), shape="point", width="0.01", color="#aaaabb")
        dot.edge(f"lane_{lane}", f"end_{lane}", dir="none", style="dashed", color="#aaaabb")
    for n, (src, dst, label, obs) in enumerate(rows):
        y = -(_DOT_TOP + _DOT_ROW * n)
        x1, x2 = _DOT_LANES[src], _DOT_LANES[dst]
        flagged_row = isinstance(obs, Executed) and obs.key in bad
        color = "#c62828" if flagged_row else ("#555555" if obs is None else "#2e6da4")
        dot.node(f"r{n}a", "", pos=pos(x1, y), shape="point", width="0.01", color=color)
        dot.node(f"r{n}b", "", pos=pos(x2, y), shape="point", width="0.01", color=color)
        dashed = obs is not None and not isinstance(obs, Executed)
        dot.edge(
            f"r{n}a", f"r{n}b", color=color, penwidth="2.4" if flagged_row else "1.3",
            style="dashed" if dashed else "solid",
        )  # fmt: skip
        text = f"<<B>{escape(label)}</B>>" if flagged_row else printable(label, newlines=False)
        dot.node(
            f"r{n}t", text, pos=pos((x1 + x2) / 2, y + 0.17), shape="plaintext", fontcolor=color,
            height="0.2", margin="0",
        )  # fmt: skip
    if explanation:
        lines = "".join(f'<TR><TD ALIGN="LEFT">{escape(_short(line, 110))}</TD></TR>' for line in explanation)
        dot.node(
            "model",
            '<<TABLE BORDER="1" COLOR="#bbbbbb" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="#fafafa">'
            f'<TR><TD ALIGN="LEFT"><B>what the model says happened</B></TD></TR>{lines}</TABLE>>',
            shape="plaintext",
            fontsize="13",
        )
        # under the lifelines, left-aligned with the harness lane: neato pins the node's centre
        width = 0.095 * max(len(_short(line, 110)) for line in explanation)
        height = 0.24 * (len(explanation) + 1)
        dot.node("model", pos=pos(_DOT_LANES["harness"] - 0.6 + width / 2, bottom - 0.3 - height / 2))
    return dot
