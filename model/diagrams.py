"""Diagrams generated from the model, so the picture is the machine.

* :func:`lifecycle_diagram`: the per-call lifecycle, drawn from
  :data:`callsafe.model.lifecycle.TRANSITIONS`: one node per state, one edge per
  ``(source, target)`` pair labelled with every event that takes it; terminal states drawn
  as double circles; paths into the non-dispatching states drawn red and dashed, the path
  into ``dispatched`` green. Optionally coloured by the coverage a run reached.
* :func:`system_diagram`: the reachable state graph of a small configuration
  (:mod:`callsafe.model.graph`).

DOT text is always produced (the ``graphviz`` Python package builds it without the
Graphviz programs); SVG and PNG are written where the ``dot`` program is installed.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import graphviz

from callsafe.model.abstract import AbsCall, AbsState
from callsafe.model.graph import Exploration
from callsafe.model.lifecycle import DISPATCHING, NON_DISPATCHING, TERMINAL_STATES, TRANSITIONS, CallEvent, State

__all__ = ["has_dot", "lifecycle_diagram", "render", "system_diagram", "write_diagrams"]

_FONT = "Helvetica"
_STATE_FILL = {
    State.ABSENT: "#f2f2f2",
    State.COLLECTING: "#dbe9f6",
    State.TERMINAL_CANDIDATE: "#fff2cc",
    State.VALIDATED: "#fde4c8",
    State.DISPATCHED: "#d5ecd4",
    State.CANCELLED: "#f6d5d5",
    State.FAILED: "#f6d5d5",
}


_TERMINALS = [s for s in State if s in TERMINAL_STATES]  # in table order: deterministic output


def has_dot() -> bool:
    """Whether the Graphviz ``dot`` program is installed (needed for SVG/PNG)."""
    return shutil.which("dot") is not None


def _label(state: State) -> str:
    return state.value.replace("_", "\n")


def lifecycle_diagram(covered: Iterable[tuple[State, CallEvent]] | None = None) -> graphviz.Digraph:
    """The lifecycle table as a state diagram. With ``covered``, edges a run exercised are
    drawn solid and annotated with the count, and the others grey (a coverage map)."""
    covered_set = set(covered) if covered is not None else None
    dot = graphviz.Digraph("lifecycle", comment="callsafe call lifecycle, generated from lifecycle.TRANSITIONS")
    dot.attr(rankdir="LR", fontname=_FONT, fontsize="14", nodesep="0.5", ranksep="1.1", newrank="true", pad="0.4")
    dot.attr("node", fontname=_FONT, fontsize="13", style="filled", penwidth="1.4")
    dot.attr("edge", fontname=_FONT, fontsize="10", arrowsize="0.8")
    dot.attr(label="callsafe: lifecycle of one tool call (generated from the transition table)", labelloc="t")
    for state in State:
        shape = "doublecircle" if state in TERMINAL_STATES else "circle"
        dot.node(state.value, _label(state), shape=shape, fillcolor=_STATE_FILL[state], width="1.25", fixedsize="true")
    with dot.subgraph(name="ends") as ends:
        ends.attr(rank="same")
        for state in _TERMINALS:
            ends.node(state.value)

    grouped: dict[tuple[State, State], list[CallEvent]] = defaultdict(list)
    for source, row in TRANSITIONS.items():
        for event, result in row.items():
            if isinstance(result, State) and result is not source:
                grouped[(source, result)].append(event)
    for (source, target), events in sorted(grouped.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value)):
        names = [e.value for e in events]
        label = "\n".join(names)
        attrs: dict[str, str] = {}
        if target in NON_DISPATCHING:
            attrs.update(color="#b03030", fontcolor="#b03030", style="dashed")
        elif target in DISPATCHING:
            attrs.update(color="#2e7d32", fontcolor="#2e7d32", penwidth="2.2")
        if covered_set is not None:
            hit = [e for e in events if (source, e) in covered_set]
            if not hit:
                attrs.update(color="#bbbbbb", fontcolor="#999999", style="dotted")
            label = "\n".join(f"{e.value}{' ✓' if (source, e) in covered_set else ''}" for e in events)
        dot.edge(source.value, target.value, label=label, **attrs)
    # Self-transitions that are real steps of the table (not ignored/rejected entries).
    for source, row in TRANSITIONS.items():
        loops = [e.value for e, r in row.items() if r is source]
        if loops:
            dot.edge(source.value, source.value, label="\n".join(loops), color="#4a6fa5", fontcolor="#4a6fa5")
    for state in _TERMINALS:
        dot.node(f"note_{state.value}", "no way out:\nlate events are\nrejected", shape="note", fontsize="9")
        dot.edge(state.value, f"note_{state.value}", style="invis")
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
    dot.attr(
        rankdir="TB",
        fontname=_FONT,
        label=f"reachable states: {cfg.calls} call(s), {cfg.turns} turn(s), {cfg.fragments} fragment(s); "
        f"controls: {', '.join(sorted(cfg.controls)) or 'none'}",
        labelloc="t",
    )
    dot.attr("node", fontname=_FONT, fontsize="10", shape="box", style="rounded,filled", fillcolor="#f7f7f7")
    dot.attr("edge", fontname=_FONT, fontsize="9")
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
    """The design-review set: the lifecycle and the system graph of a small configuration."""
    formats = tuple(formats)
    return render(lifecycle_diagram(), out_dir, "lifecycle", formats) + render(
        system_diagram(small), out_dir, "system", formats
    )
