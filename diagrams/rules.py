"""The system rules as one picture: which input reaches which calls, what it does to them,
and what it leaves behind for whatever arrives later.

Generated from the data of :mod:`callsafe.model.system`, so it cannot drift from the
model: every entry of :data:`~callsafe.model.system.BROADCASTS` is a card on the left (who
sends it, which calls it reaches, the lifecycle event they receive and where the
lifecycle table takes them); every guard of :data:`~callsafe.model.system.GUARDS` is a
card on the right (the facts it checks, the events it can return and where they lead
from the state it acts on); in between, the facts a broadcast makes false for the turn,
response or tool it names (``Broadcast.breaks``), linked to the guard rows that check
them: that link is why a stopped call is never revived by a late event. Turn ownership
(the call key and the turn binding, read from :class:`~callsafe.model.vocabulary.CallKey`
and :class:`~callsafe.model.system.TurnRecord`) and what a restart keeps
(:data:`~callsafe.model.system.RESTART_KEEPS`) are cards of their own.

Why cards (HTML-like labels) rather than labelled edges: nine inputs converge on two end
states, and edge labels there overlap; a card keeps each rule's words in one place, and
edges only show where it goes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Final

import graphviz

from callsafe.diagrams.style import (
    EDGE_FONT,
    FONT,
    GREEN,
    NODE_FONT,
    RED,
    UNFINISHED,
    html_text,
)
from callsafe.model.lifecycle import TRANSITIONS, CallEvent, Ignored, Outcome, State
from callsafe.model.system import BROADCASTS, GUARDS, RESTART_KEEPS, Broadcast, Guard, TurnRecord
from callsafe.model.vocabulary import CallKey

__all__ = ["WHO_FILL", "broadcast_effect", "system_rules_diagram"]

# The colour of each sender, for the card headers. A sender missing here is drawn grey.
WHO_FILL: Final = {
    "user": "#dbe9f6",
    "stream": "#e6e6e6",
    "operator": "#fde4c8",
    "application": "#e8dcf2",
    "process": "#d9d9d9",
}
_CHECK_BLUE: Final = "#2e5f9e"
_NOT_OWNERSHIP: Final = ("turn", "status", "traceparent")  # TurnRecord fields that do not say who owns a call
_CARD: Final = 'BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="5" COLOR="#7a7a7a"'
# A card's text cell, left-aligned (lines too), its font opened: close with </FONT></TD>.
_CELL: Final = f'<TD ALIGN="LEFT" BALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}"'


def _node_id(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def _outcome_words(outcome: Outcome, at: State) -> str:
    if isinstance(outcome, State):
        return f"stays {at.value}" if outcome is at else f"→ {outcome.value}"
    return "ignored" if isinstance(outcome, Ignored) else "refused"


def broadcast_effect(rule: Broadcast) -> dict[State, list[State]]:
    """Where the lifecycle table takes each unfinished state on ``rule.call_event``: end
    state -> the unfinished states it ends. States that ignore the event are left out."""
    ends: dict[State, list[State]] = defaultdict(list)
    for state in UNFINISHED:
        result = TRANSITIONS[state][rule.call_event]
        if isinstance(result, State) and result is not state:
            ends[result].append(state)
    return dict(ends)


def _effect_words(rule: Broadcast) -> str:
    effect = broadcast_effect(rule)
    parts = []
    for end, states in effect.items():
        where = "" if len(states) == len(UNFINISHED) else f"\n(only while {', '.join(s.value for s in states)})"
        parts.append(f"→ {end.value}{where}")
    return "; ".join(parts) or "no effect"


def _broadcast_card(rule: Broadcast) -> str:
    fill = WHO_FILL.get(rule.who, "#eeeeee")
    return (
        f"<<TABLE {_CARD}>"
        f'<TR><TD BGCOLOR="{fill}" ALIGN="LEFT"><B>{html_text(rule.event_type.kind)}</B></TD></TR>'
        f"<TR>{_CELL}>reaches {html_text(rule.reaches)}</FONT></TD></TR>"
        f'<TR>{_CELL} COLOR="{RED}">as <B>{html_text(rule.call_event.value)}</B> '
        f"{html_text(_effect_words(rule))}</FONT></TD></TR>"
        "</TABLE>>"
    )


def _guard_card(guard: Guard) -> str:
    rows = [
        f'<TR><TD BGCOLOR="#dfe7f2" ALIGN="LEFT"><B>guard: {html_text(guard.name)}</B></TD></TR>',
        f"<TR>{_CELL}><I>on {html_text(guard.when)}, checks</I></FONT></TD></TR>",
    ]
    for n, fact in enumerate(guard.checks):
        rows.append(
            f'<TR><TD PORT="c{n}" ALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}" COLOR="{_CHECK_BLUE}">'
            f"✓ {html_text(fact)}</FONT></TD></TR>"
        )
    rows.append(
        f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}"><I>gives, from {html_text(guard.at.value)}</I>'
        "</FONT></TD></TR>"
    )
    for event in guard.outcomes:
        result = TRANSITIONS[guard.at][event]
        color = RED if isinstance(result, State) and result in (State.CANCELLED, State.FAILED) else "#222222"
        if result is State.DISPATCHED:
            color = GREEN
        rows.append(
            f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}" COLOR="{color}">'
            f"{html_text(event.value)} {html_text(_outcome_words(result, guard.at))}</FONT></TD></TR>"
        )
    return f"<<TABLE {_CARD}>" + "".join(rows) + "</TABLE>>"


def _ownership_card() -> str:
    key = " · ".join(f.name for f in dataclasses.fields(CallKey))
    binding = " · ".join(f.name for f in dataclasses.fields(TurnRecord) if f.name not in _NOT_OWNERSHIP)
    lines = [
        f"call key: <B>{html_text(key)}</B>",
        f"a turn binds: <B>{html_text(binding)}</B>",
        "a call belongs to its turn, and runs only",
        "while that turn is live and current;",
        "a new turn supersedes the conversation's older ones",
    ]
    rows = "".join(f"<TR>{_CELL}>{line}</FONT></TD></TR>" for line in lines)
    header = f'<TR><TD BGCOLOR="{WHO_FILL["user"]}" ALIGN="LEFT"><B>turn ownership</B></TD></TR>'
    return f"<<TABLE {_CARD}>{header}{rows}</TABLE>>"


def _restart_card() -> str:
    rows = "".join(
        f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}">{html_text(words)}</FONT></TD></TR>'
        for words in RESTART_KEEPS.values()
    )
    return (
        f'<<TABLE {_CARD}><TR><TD BGCOLOR="{WHO_FILL["process"]}" ALIGN="LEFT"><B>a restart keeps</B>'
        f'  <FONT POINT-SIZE="{EDGE_FONT}">(durable)</FONT></TD></TR>{rows}'
        f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="{EDGE_FONT}" COLOR="{RED}">and loses unfinished buffers'
        "</FONT></TD></TR></TABLE>>"
    )


_TITLE: Final = (
    '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2">'
    '<TR><TD><FONT POINT-SIZE="20"><B>callsafe: the system rules</B></FONT>'
    "  (generated from model/system.py: BROADCASTS, GUARDS, RESTART_KEEPS)</TD></TR>"
    f'<TR><TD>left: each input, the calls it reaches <FONT COLOR="{RED}">and what it does to them now</FONT></TD></TR>'
    f'<TR><TD><FONT COLOR="{_CHECK_BLUE}">dashed: what it leaves false (✗) for that turn, response or tool,'
    " and the guard checks (✓) that then refuse later events</FONT></TD></TR>"
    "</TABLE>>"
)


def system_rules_diagram() -> graphviz.Digraph:
    """Turn ownership, operator controls and restart: every broadcast, every guard."""
    dot = graphviz.Digraph("system_rules", comment="callsafe system rules, generated from model/system.py")
    dot.attr(
        rankdir="LR",
        fontname=FONT,
        fontsize=EDGE_FONT,
        nodesep="0.2",
        ranksep="0.6",
        newrank="true",
        pad="0.3",
        labelloc="t",
        label=_TITLE,
    )
    dot.attr("node", fontname=FONT, fontsize=NODE_FONT, shape="plaintext")
    dot.attr("edge", fontname=FONT, fontsize=EDGE_FONT, arrowsize="0.9")

    by_who: dict[str, list[Broadcast]] = defaultdict(list)
    for rule in BROADCASTS:
        by_who[rule.who].append(rule)
    for who, rules in by_who.items():
        with dot.subgraph(name=f"cluster_{_node_id(who)}") as box:
            box.attr(label=f"from the {who}", labeljust="l", style="rounded,dashed", color="#9a9a9a")
            for rule in rules:
                box.node(f"in_{rule.event_type.kind}", _broadcast_card(rule))

    facts = [fact for fact in dict.fromkeys(f for rule in BROADCASTS for f in rule.breaks)]
    with dot.subgraph(name="cluster_facts") as box:
        box.attr(  # no label (edges arrive from every side and would cross it; the ✗ and the title say it),
            label="",  # and an explicit empty one: a cluster inherits the graph's title otherwise
            style="rounded,dashed",
            color=_CHECK_BLUE,
            fontcolor=_CHECK_BLUE,
        )
        for fact in facts:
            box.node(
                f"fact_{_node_id(fact)}",
                f"✗ {fact}",
                shape="box",
                style="rounded",
                color=_CHECK_BLUE,
                fontcolor=_CHECK_BLUE,
                fontsize=EDGE_FONT,
            )
    dot.node("restart_keeps", _restart_card())
    for guard in GUARDS:
        dot.node(f"guard_{guard.name}", _guard_card(guard))
    dot.node("ownership", _ownership_card())

    for rule in BROADCASTS:
        source = f"in_{rule.event_type.kind}"
        for fact in rule.breaks:
            dot.edge(source, f"fact_{_node_id(fact)}", color=_CHECK_BLUE, style="dashed", penwidth="1.4")
        if rule.call_event is CallEvent.RESTART:
            dot.edge(source, "restart_keeps", color="#555555", penwidth="1.4")
    for guard in GUARDS:
        for n, fact in enumerate(guard.checks):
            if fact in facts:
                dot.edge(
                    f"fact_{_node_id(fact)}",
                    f"guard_{guard.name}:c{n}:w",
                    color=_CHECK_BLUE,
                    style="dashed",
                    penwidth="1.4",
                )
    # Guards nobody's broadcast touches still belong in the right-hand column.
    with dot.subgraph(name="right") as col:
        col.attr(rank="same")
        for guard in GUARDS:
            col.node(f"guard_{guard.name}")
        col.node("ownership")
    return dot
