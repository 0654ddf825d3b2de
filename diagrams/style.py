"""The look shared by every diagram of the model: fonts, sizes, the colour of each state.

Why one module: the lifecycle, the coverage heat map and the system-rules diagram are
shown side by side in a design review; a state must look the same in all three, and the
sizes below were chosen once, by looking at the pictures as PNG at the width a reviewer
sees them (about 1200 px): node text 16 pt, edge text 14 pt, nothing smaller than 12 pt.
"""

from __future__ import annotations

import html
import textwrap
from typing import Final

import graphviz

from callsafe.model.lifecycle import TERMINAL_STATES, State
from callsafe.safe_text import printable

__all__ = [
    "EDGE_FONT",
    "FONT",
    "GREEN",
    "GREY",
    "LOOP_BLUE",
    "NODE_FONT",
    "RED",
    "SMALL_FONT",
    "STATE_FILL",
    "TERMINALS",
    "UNFINISHED",
    "add_state_nodes",
    "html_text",
    "wrap_names",
]

FONT: Final = "Helvetica"
NODE_FONT: Final = "16"
EDGE_FONT: Final = "14"
SMALL_FONT: Final = "12"
RED: Final = "#b03030"
GREEN: Final = "#2e7d32"
LOOP_BLUE: Final = "#3f5f96"
GREY: Final = "#9a9a9a"

STATE_FILL: Final = {
    State.ABSENT: "#f2f2f2",
    State.COLLECTING: "#dbe9f6",
    State.TERMINAL_CANDIDATE: "#fff2cc",
    State.VALIDATED: "#fde4c8",
    State.DISPATCHED: "#d5ecd4",
    State.CANCELLED: "#f6d5d5",
    State.FAILED: "#f6d5d5",
}

TERMINALS: Final = tuple(s for s in State if s in TERMINAL_STATES)  # in table order: deterministic output
# The states a call can still leave: every stop reaches them.
UNFINISHED: Final = tuple(s for s in State if s is not State.ABSENT and s not in TERMINAL_STATES)


def _state_label(state: State) -> str:
    return state.value.replace("_", "\n")


def add_state_nodes(dot: graphviz.Digraph, graph: graphviz.Digraph | None = None) -> None:
    """The seven states, terminal ones as double circles and on one rank (the right-hand
    column of a left-to-right layout). Unfinished states go into ``graph`` when given (a
    cluster), else into ``dot``."""
    for state in State:
        shape = "doublecircle" if state in TERMINAL_STATES else "circle"
        target = graph if graph is not None and state in UNFINISHED else dot
        target.node(
            state.value,
            _state_label(state),
            shape=shape,
            fillcolor=STATE_FILL[state],
            style="filled",
            width="1.45",
            fixedsize="true",
            fontsize=NODE_FONT,
        )
    with dot.subgraph(name="ends") as ends:
        ends.attr(rank="same")
        for state in TERMINALS:
            ends.node(state.value)


def wrap_names(names: list[str], width: int = 30) -> str:
    """Event names as a few lines of comma-separated text (a label of one name per line
    is as tall as the whole diagram once an edge carries seven events)."""
    return "\n".join(textwrap.wrap(", ".join(names), width=width, break_long_words=False, break_on_hyphens=False))


def escape(text: str) -> str:
    """Text for a Graphviz HTML-like label or an SVG text node: control characters shown as
    escapes (Graphviz refuses them, and they come from streams and targets: a tool name, a
    target name with ESC or BEL stopped the whole report), then HTML-escaped."""
    return html.escape(printable(text))


def html_text(text: str) -> str:
    """Plain text for a Graphviz HTML-like label: escaped, newlines as line breaks."""
    return "<BR/>".join(escape(line) for line in text.split("\n"))
