"""The lifecycle table is total, its terminal states have no way out, and the explored
state graph exercises every transition it has."""

from __future__ import annotations

import pytest

from callsafe.formal.abstract import Config
from callsafe.formal.graph import explore, lifecycle_coverage
from callsafe.model.lifecycle import (
    NON_DISPATCHING,
    TERMINAL_STATES,
    TRANSITIONS,
    CallEvent,
    Ignored,
    Rejected,
    State,
    next_state,
    outcome,
)


def test_seven_states_of_the_spec() -> None:
    assert [s.value for s in State] == [
        "absent",
        "collecting",
        "terminal_candidate",
        "validated",
        "dispatched",
        "cancelled",
        "failed",
    ]
    assert {s.value for s in TERMINAL_STATES} == {"dispatched", "cancelled", "failed"}


@pytest.mark.parametrize("state", list(State))
def test_table_is_total(state: State) -> None:
    row = TRANSITIONS[state]
    assert set(row) == set(CallEvent), f"{state}: missing {set(CallEvent) - set(row)}"
    for event, result in row.items():
        assert isinstance(result, (State, Ignored, Rejected)), (state, event, result)
        if isinstance(result, (Ignored, Rejected)):
            assert result.why, (state, event)


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_terminal_states_have_no_way_out(state: State) -> None:
    for event in CallEvent:
        assert next_state(state, event) is state, (state, event)


def test_only_dispatch_reaches_dispatched_and_only_from_validated() -> None:
    into = [(s, e) for s, row in TRANSITIONS.items() for e, r in row.items() if r is State.DISPATCHED and s is not r]
    assert into == [(State.VALIDATED, CallEvent.DISPATCH)]


def test_a_terminal_event_permits_parsing_not_execution() -> None:
    assert outcome(State.COLLECTING, CallEvent.TERMINAL_COMPLETED) is State.TERMINAL_CANDIDATE
    assert outcome(State.TERMINAL_CANDIDATE, CallEvent.DISPATCH) == Rejected(
        "internal step for a call that is not at that stage"
    )


def test_every_stop_ends_non_dispatching_from_every_live_state() -> None:
    stops = [
        CallEvent.CANCEL,
        CallEvent.SUPERSEDE,
        CallEvent.DISCONNECT,
        CallEvent.QUARANTINE,
        CallEvent.DISABLE_TOOL,
        CallEvent.STOP_TENANT,
        CallEvent.CATALOG_CHANGE,
        CallEvent.RESTART,
    ]
    for state in (State.COLLECTING, State.TERMINAL_CANDIDATE, State.VALIDATED):
        for stop in stops:
            assert outcome(state, stop) in NON_DISPATCHING, (state, stop)


def test_exploration_covers_every_transition_of_the_table() -> None:
    exploration = explore(Config(calls=2, turns=2, fragments=1))
    covered, total = lifecycle_coverage(exploration.entries)
    missing = {(s, e) for s, row in TRANSITIONS.items() for e, r in row.items() if isinstance(r, State)} - covered
    assert not missing, f"transitions no reachable state exercises: {sorted(missing)}"
    assert len(covered) == total
