"""The model as data for people and programs: the table, the invariants, the graph's
statistics. ``callsafe model --json`` prints :func:`model_summary`; notebooks and other
tools read it."""

from __future__ import annotations

from typing import Any

from callsafe.formal.abstract import Config
from callsafe.formal.graph import explore
from callsafe.model.invariants import INVARIANTS
from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, CallEvent, Ignored, Rejected, State

__all__ = ["DEFAULT_MAX_STATES", "model_summary", "table_rows"]


def table_rows() -> list[dict[str, str]]:
    """Every ``(state, event)`` entry of the lifecycle table, in table order."""
    rows = []
    for state, row in TRANSITIONS.items():
        for event, result in row.items():
            if isinstance(result, State):
                rows.append({"from": state.value, "event": event.value, "outcome": "transition", "to": result.value})
            elif isinstance(result, Ignored):
                rows.append({"from": state.value, "event": event.value, "outcome": "ignored", "why": result.why})
            elif isinstance(result, Rejected):
                rows.append({"from": state.value, "event": event.value, "outcome": "rejected", "why": result.why})
    return rows


DEFAULT_MAX_STATES = 20_000_000


def model_summary(
    config: Config | None = None, symmetry: bool = True, max_states: int = DEFAULT_MAX_STATES
) -> dict[str, Any]:
    """States, events, transitions, invariants and the state graph's statistics.

    The graph is explored with the symmetry reduction (one state per set of states that
    differ only by which call of a turn is which) and without keeping its transitions,
    unless ``symmetry=False``: its counts are then those of the reduced graph, and each
    shortest violation is a run of the unreduced system. Raises
    :class:`~callsafe.formal.graph.StateBoundExceeded` past ``max_states``."""
    config = config or Config()
    exploration = explore(config, symmetry=symmetry, graph=False, max_states=max_states)
    violations = {
        inv: exploration.shortest_violation(inv)
        for inv in sorted({i for v in exploration.violations.values() for i, _ in v})
    }
    return {
        "states": [s.value for s in State],
        "terminal_states": sorted(s.value for s in TERMINAL_STATES),
        "events": [e.value for e in CallEvent],
        "transitions": table_rows(),
        "invariants": [{"id": i.id, "kind": i.kind, "title": i.title, "spec": i.spec} for i in INVARIANTS],
        "graph": {
            "config": config.to_json(),
            "symmetry": symmetry,
            **exploration.stats().to_json(),
            "shortest_violations": {
                inv: [str(a) for a, _ in path] for inv, path in violations.items() if path is not None
            },
        },
    }
