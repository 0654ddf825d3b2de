"""The model as data for people and programs: the table, the invariants, the graph's
statistics. ``callsafe model --json`` prints :func:`model_summary`; notebooks and other
tools read it."""

from __future__ import annotations

from typing import Any

from callsafe.formal.abstract import Config
from callsafe.formal.graph import explore
from callsafe.model.invariants import INVARIANTS
from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, CallEvent, Ignored, Rejected, State

__all__ = ["model_summary", "table_rows"]


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


def model_summary(config: Config | None = None) -> dict[str, Any]:
    """States, events, transitions, invariants and the state graph's statistics."""
    config = config or Config()
    exploration = explore(config)
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
            **exploration.stats().to_json(),
            "shortest_violations": {
                inv: [str(a) for a, _ in path] for inv, path in violations.items() if path is not None
            },
        },
    }
