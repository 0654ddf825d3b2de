"""The coverage heat map: the lifecycle with each transition weighted by the traces that took it.

Why a separate picture from the design-review lifecycle: the review picture draws the
stops shared by every unfinished state once, from a box; coverage is per state (a cancel
seen a hundred times while collecting says nothing about a cancel while validated), so
here every ``(source, target)`` pair of the table is its own edge, its events listed with
their own counts.

The data is ``coverage.lifecycle_transitions.hits`` of a certification report (``[state,
event, traces]``): how many traces took each transition. An edge's colour and width grow
with the sum of its events' counts, on a logarithmic scale (counts run from 1 to
thousands), in :data:`HEAT` from light to dark; an edge no trace took is grey and dashed,
and so is the line of each event nobody exercised. The legend in the title gives the
count range of every shade.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import graphviz

from callsafe.diagrams.style import EDGE_FONT, FONT, GREY, NODE_FONT, SMALL_FONT, add_state_nodes, escape
from callsafe.model.lifecycle import TRANSITIONS, CallEvent, State

__all__ = ["HEAT", "UNTAKEN", "HeatEdge", "coverage_heatmap", "heat_edges", "heat_level", "hits_from_report"]

# ColorBrewer's sequential "OrRd", 5 classes: light to dark.
HEAT: Final = ("#fdcc8a", "#fc8d59", "#e34a33", "#b30000", "#6b0000")
UNTAKEN: Final = GREY
_WIDTH: Final = (1.6, 2.6, 3.8, 5.2, 7.0)

Hits = Mapping[tuple[State, CallEvent], int]


@dataclass(frozen=True)
class HeatEdge:
    """One drawn edge: a ``(source, target)`` pair of the table, its events with their
    counts (in table order), and its shade (0 when no trace took it, else 1..len(HEAT))."""

    source: State
    target: State
    events: tuple[tuple[CallEvent, int], ...]
    level: int

    @property
    def total(self) -> int:
        return sum(n for _, n in self.events)


def heat_level(count: int, most: int) -> int:
    """The shade of ``count`` when the most-taken edge has ``most``: 0 for nothing, then
    1..len(HEAT) on a logarithmic scale, the top shade for ``most`` itself."""
    if count <= 0:
        return 0
    if most <= 1:
        return len(HEAT)
    return max(1, min(len(HEAT), math.ceil(len(HEAT) * math.log(count + 1) / math.log(most + 1))))


def _level_range(level: int, most: int) -> tuple[int, int]:
    """The counts that get ``level`` (the legend's ranges); empty when lo > hi."""
    steps = len(HEAT)
    base = most + 1
    lo = math.floor(base ** ((level - 1) / steps) - 1) + 1 if level > 1 else 1
    hi = math.floor(base ** (level / steps) - 1 + 1e-9)
    return lo, min(hi, most)


def heat_edges(hits: Hits) -> list[HeatEdge]:
    """Every state-changing entry of the table (self-loops included), grouped by
    ``(source, target)``, with its count from ``hits`` (0 when absent)."""
    grouped: dict[tuple[State, State], list[tuple[CallEvent, int]]] = defaultdict(list)
    for source, row in TRANSITIONS.items():
        for event, result in row.items():
            if isinstance(result, State):
                grouped[(source, result)].append((event, int(hits.get((source, event), 0))))
    totals = {pair: sum(n for _, n in events) for pair, events in grouped.items()}
    most = max(totals.values(), default=0)
    return [
        HeatEdge(source, target, tuple(events), heat_level(totals[(source, target)], most))
        for (source, target), events in grouped.items()
    ]


def hits_from_report(report: Mapping[str, Any]) -> dict[tuple[State, CallEvent], int]:
    """The per-transition counts of a certification ``report.json`` document."""
    rows = report["coverage"]["lifecycle_transitions"]["hits"]
    return {(State(state), CallEvent(event)): int(n) for state, event, n in rows}


def _edge_label(edge: HeatEdge, counted: bool) -> str:
    rows = []
    for event, n in edge.events:
        mark = (f" {n}" if counted else " ✓") if n else (" 0" if counted else "")
        color = "#222222" if n else UNTAKEN
        rows.append(f'<TR><TD ALIGN="LEFT"><FONT COLOR="{color}">{escape(event.value)}{mark}</FONT></TD></TR>')
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">' + "".join(rows) + "</TABLE>>"


def _legend(most: int, counted: bool, title: str) -> str:
    cells = []
    if counted:
        for level in range(1, len(HEAT) + 1):
            lo, hi = _level_range(level, most)
            if lo > hi:
                continue
            span = f"{lo}" if lo == hi else f"{lo}–{hi}"
            cells.append(f'<TD BGCOLOR="{HEAT[level - 1]}"><FONT COLOR="{_ink(level)}"> {span} </FONT></TD>')
        unit = "traces that took the edge (sum over its events; each event's own count beside it)"
    else:
        cells.append(f'<TD BGCOLOR="{HEAT[-1]}"><FONT COLOR="white"> taken ✓ </FONT></TD>')
        unit = "transitions the run exercised"
    dashes = " - - - " if counted else " · · · · "
    cells.append(f'<TD><FONT COLOR="{UNTAKEN}">{dashes}not taken </FONT></TD>')
    shades = '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3"><TR>' + "".join(cells) + "</TR></TABLE>"
    return (
        '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2">'
        f'<TR><TD><FONT POINT-SIZE="20"><B>{escape(title)}</B></FONT></TD></TR>'
        f'<TR><TD><FONT POINT-SIZE="{EDGE_FONT}">colour and width: {escape(unit)}</FONT></TD></TR>'
        f'<TR><TD><FONT POINT-SIZE="{EDGE_FONT}">{shades}</FONT></TD></TR></TABLE>>'
    )


def _ink(level: int) -> str:
    return "#222222" if level <= 2 else "white"


def coverage_heatmap(
    hits: Hits | Iterable[tuple[tuple[State, CallEvent], int]],
    counted: bool = True,
    title: str = "callsafe: lifecycle coverage heat map",
) -> graphviz.Digraph:
    """The lifecycle with every transition edge shaded by ``hits``. ``counted=False``
    draws a plain covered / not covered map (every hit count is shown as a check)."""
    table = dict(hits.items() if isinstance(hits, Mapping) else hits)
    edges = heat_edges(table)
    most = max((e.total for e in edges), default=0)
    dot = graphviz.Digraph("lifecycle_coverage", comment="callsafe lifecycle coverage, from report hits")
    dot.attr(
        rankdir="LR",
        fontname=FONT,
        fontsize=SMALL_FONT,
        nodesep="0.35",
        ranksep="1.0",
        newrank="true",
        pad="0.3",
        labelloc="t",
        label=_legend(most, counted, title),
    )
    dot.attr("node", fontname=FONT, fontsize=NODE_FONT, style="filled", penwidth="1.4")
    dot.attr("edge", fontname=FONT, fontsize=EDGE_FONT, arrowsize="0.9")
    add_state_nodes(dot)
    for edge in edges:
        attrs: dict[str, str] = {"label": _edge_label(edge, counted)}
        if edge.level == 0:
            # dotted on the plain covered/not covered map, as it always was (notebook 02 says so)
            attrs.update(color=UNTAKEN, style="dashed" if counted else "dotted", penwidth="1.2")
        else:
            width = _WIDTH[edge.level - 1]
            # arrowheads grow with the pen: keep them about the same size on every edge
            attrs.update(color=HEAT[edge.level - 1], penwidth=str(width), arrowsize=f"{1.6 / width**0.5:.2f}")
        if counted:
            attrs["tooltip"] = f"{edge.source.value} -> {edge.target.value}: {edge.total} traces"
        dot.edge(edge.source.value, edge.target.value, **attrs)
    return dot
