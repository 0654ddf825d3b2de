"""Diagrams generated from the model, so the picture is the machine.

* :func:`lifecycle_diagram`: the per-call lifecycle on one page, drawn from
  :data:`callsafe.model.lifecycle.TRANSITIONS`. The stops that end *every* unfinished
  state the same way (cancel, supersede, an operator control, disconnect, restart...) are
  read off the table and drawn once, from a box around the unfinished states, instead of
  once per state: that is what the table says ("whatever stops a call, stops it"), and
  it keeps the page legible. Every other transition is one edge per ``(source, target)``
  labelled with its events; red dashed edges end without running, the green one runs.
  With ``covered`` it is the coverage map of :mod:`callsafe.diagrams.coverage`.
* :func:`system_diagram`: the reachable state graph of a small configuration
  (:mod:`callsafe.formal.graph`).
* the system rules (:mod:`callsafe.diagrams.rules`) and the coverage heat map
  (:mod:`callsafe.diagrams.coverage`) live in their own modules.

DOT text is always produced (the ``graphviz`` Python package builds it without the
Graphviz programs); SVG and PNG are written where the ``dot`` program is installed.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import graphviz

from callsafe.diagrams.coverage import coverage_heatmap
from callsafe.diagrams.rules import system_rules_diagram
from callsafe.diagrams.style import (
    EDGE_FONT,
    FONT,
    GREEN,
    LOOP_BLUE,
    NODE_FONT,
    RED,
    UNFINISHED,
    add_state_nodes,
    escape,
    wrap_names,
)
from callsafe.formal.abstract import AbsCall, AbsState
from callsafe.formal.graph import Exploration
from callsafe.model.lifecycle import DISPATCHING, NON_DISPATCHING, TRANSITIONS, CallEvent, State

__all__ = ["has_dot", "lifecycle_diagram", "render", "shared_stops", "system_diagram", "write_diagrams"]


def has_dot() -> bool:
    """Whether the Graphviz ``dot`` program is installed (needed for SVG/PNG)."""
    return shutil.which("dot") is not None


def shared_stops() -> dict[State, list[CallEvent]]:
    """The events that take *every* unfinished state to the same end state, by end state,
    in table order: read from the table, so a stop that one state handled differently
    would drop out of the group and be drawn on that state's own edges."""
    out: dict[State, list[CallEvent]] = defaultdict(list)
    for event in CallEvent:
        results = {TRANSITIONS[state][event] for state in UNFINISHED}
        if len(results) == 1:
            (result,) = results
            if isinstance(result, State) and result in NON_DISPATCHING:
                out[result].append(event)
    return dict(out)


_LEGEND = (
    '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2">'
    '<TR><TD COLSPAN="4"><FONT POINT-SIZE="20"><B>callsafe: the lifecycle of one tool call</B></FONT>'
    "  (generated from the transition table, model/lifecycle.py)</TD></TR>"
    f'<TR><TD><FONT COLOR="{GREEN}"><B>green</B>: the one way to run</FONT></TD>'
    f'<TD><FONT COLOR="{RED}"><B>red dashed</B>: ends without running</FONT></TD>'
    f'<TD><FONT COLOR="{LOOP_BLUE}"><B>loop</B>: stays in the state</FONT></TD>'
    "<TD><B>double circle</B>: no way out, late events are rejected</TD></TR>"
    "</TABLE>>"
)  # drawn at EDGE_FONT size (the graph's fontsize): the smallest text on the page


def lifecycle_diagram(covered: Iterable[tuple[State, CallEvent]] | None = None) -> graphviz.Digraph:
    """The lifecycle table as a state diagram on one page. With ``covered``, the coverage
    map instead: every transition edge drawn, those a run exercised checked and the
    others grey and dotted (see :func:`~callsafe.diagrams.coverage.coverage_heatmap`
    for the version weighted by hit counts)."""
    if covered is not None:
        return coverage_heatmap(dict.fromkeys(covered, 1), counted=False)
    stops = shared_stops()
    grouped_out = {(event, target) for target, events in stops.items() for event in events}
    dot = graphviz.Digraph("lifecycle", comment="callsafe call lifecycle, generated from lifecycle.TRANSITIONS")
    dot.attr(
        rankdir="LR",
        compound="true",
        fontname=FONT,
        fontsize=EDGE_FONT,
        nodesep="0.6",
        ranksep="0.9",
        newrank="true",
        pad="0.3",
        label=_LEGEND,
        labelloc="t",
    )
    dot.attr("node", fontname=FONT, fontsize=NODE_FONT, style="filled", penwidth="1.4")
    dot.attr("edge", fontname=FONT, fontsize=EDGE_FONT, arrowsize="0.9")
    with dot.subgraph(name="cluster_unfinished") as box:
        box.attr(
            label='unfinished: an edge "from any unfinished state" leaves each of these three',
            margin="40",  # room for the self-loops and their labels above the states
            fontsize=EDGE_FONT,
            style="rounded,dashed",
            color="#8a8a8a",
            labeljust="l",
            labelloc="b",  # below the box: above it, the label collides with the self-loops
        )
        add_state_nodes(dot, box)

    edges: dict[tuple[State, State], list[CallEvent]] = defaultdict(list)
    for source, row in TRANSITIONS.items():
        for event, result in row.items():
            if not isinstance(result, State):
                continue
            if source in UNFINISHED and (event, result) in grouped_out:
                continue  # drawn once, from the box
            edges[(source, result)].append(event)
    # The forward path first (in table order), so dot ranks it left to right.
    for (source, target), events in edges.items():
        label = wrap_names([e.value for e in events], 26)
        if source is target:
            dot.edge(source.value, target.value, label=label, color=LOOP_BLUE, fontcolor=LOOP_BLUE)
        elif target in NON_DISPATCHING:
            dot.edge(source.value, target.value, label=label, color=RED, fontcolor=RED, style="dashed")
        elif target in DISPATCHING:
            dot.edge(source.value, target.value, label=label, color=GREEN, fontcolor=GREEN, penwidth="2.6")
        else:
            dot.edge(source.value, target.value, label=label, penwidth="1.6")
    anchor = UNFINISHED[-1].value  # an edge from the box is drawn from one of its nodes, clipped at the box
    for target, events in stops.items():
        dot.edge(
            anchor,
            target.value,
            label="from any unfinished state:\n" + wrap_names([e.value for e in events], 30),
            ltail="cluster_unfinished",
            color=RED,
            fontcolor=RED,
            style="dashed",
            penwidth="1.8",
        )
    return dot


_ABBREV = {
    State.ABSENT: "-",
    State.COLLECTING: "col",
    State.TERMINAL_CANDIDATE: "cand",
    State.VALIDATED: "val",
    State.DISPATCHED: "RUN",
    State.CANCELLED: "can",
    State.FAILED: "fail",
}


def _call_label(i: int, call: AbsCall) -> str:
    detail = ""
    if call.state is State.COLLECTING:
        detail = f" {call.frags}f"
    elif call.state is State.TERMINAL_CANDIDATE:
        detail = " parsed" if call.parsed else f" {call.frags}f"
    elif call.state is State.VALIDATED and call.confirm_requested:
        detail = " asked" + ("+yes" if call.confirmed else "")
    return f"c{i}:{_ABBREV[call.state]}{detail}"


def _node_label(state: AbsState) -> str:
    calls = " ".join(_call_label(i, c) for i, c in enumerate(state.calls))
    turns = " ".join(f"t{i}:{t}" for i, t in enumerate(state.turns))
    flags = [f for f, on in (("quarantined", any(state.quarantined)), ("tool off", state.tool_disabled)) if on]
    return "\n".join(x for x in (calls, turns, " ".join(flags)) if x)


def system_diagram(exploration: Exploration, max_nodes: int = 80) -> graphviz.Digraph:
    """The reachable state graph of a small configuration. Refuses graphs larger than
    ``max_nodes``: past that a picture is no longer readable."""
    g = exploration.graph
    if g.number_of_nodes() > max_nodes:
        raise ValueError(f"{g.number_of_nodes()} states: too many to draw (limit {max_nodes}); use smaller bounds")
    ids = {node: f"s{i}" for i, node in enumerate(g.nodes)}
    dot = graphviz.Digraph("system", comment="callsafe reachable states, generated from the model")
    cfg = exploration.config
    key = ", ".join(f"{short} = {state.value}" for state, short in _ABBREV.items() if state is not State.ABSENT)
    title = (
        f"reachable states: {cfg.calls} call(s), {cfg.turns} turn(s), {cfg.fragments} fragment(s); "
        f"controls: {', '.join(sorted(cfg.controls)) or 'none'}"
    )
    dot.attr(
        rankdir="TB",
        fontname=FONT,
        fontsize=EDGE_FONT,
        label=f"<<B>{escape(title)}</B><BR/>c0 = call 0, t0 = turn 0, - = not opened, 1f = one fragment received"
        f"<BR/>{escape(key)}>",
        labelloc="t",
        nodesep="0.12",
        ranksep="0.4",
    )
    dot.attr("node", fontname=FONT, fontsize="13", shape="box", style="rounded,filled", fillcolor="#f7f7f7")
    dot.attr("edge", fontname=FONT, fontsize="12")
    for node in g.nodes:
        fill = "#f7f7f7"
        if any(c.state is State.DISPATCHED for c in node.calls):
            fill = "#d5ecd4"
        elif all(c.state in NON_DISPATCHING for c in node.calls):
            fill = "#f6d5d5"
        if node == exploration.initial:
            fill = "#dbe9f6"
        if node in exploration.violations:
            fill = "#ff8080"
        dot.node(ids[node], _node_label(node), fillcolor=fill)
    for a, b, data in g.edges(data=True):
        if a == b:
            continue  # ignored and rejected inputs: listed in the table, not drawn
        label = "\n".join(sorted({str(x) for x in data["actions"]}))
        dot.edge(ids[a], ids[b], label=label)
    return dot


def render(dot: graphviz.Digraph, out_dir: Path, name: str, formats: Iterable[str] = ("svg",)) -> list[Path]:
    """Write ``name.dot`` always, and each of ``formats`` where ``dot`` is installed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / f"{name}.dot"]
    written[0].write_text(dot.source, encoding="utf-8")
    if has_dot():
        for fmt in formats:
            path = out_dir / f"{name}.{fmt}"
            path.write_bytes(dot.pipe(format=fmt))
            written.append(path)
    return written


def write_diagrams(out_dir: Path, small: Exploration, formats: Iterable[str] = ("svg",)) -> list[Path]:
    """The design-review set the model draws alone: ``lifecycle``, ``system-rules`` and
    ``system`` (the reachable states of ``small``)."""
    formats = tuple(formats)
    return [
        *render(lifecycle_diagram(), out_dir, "lifecycle", formats),
        *render(system_rules_diagram(), out_dir, "system-rules", formats),
        *render(system_diagram(small), out_dir, "system", formats),
    ]
