"""The state graph: counts for a configuration small enough to count by hand, no
reachable state violating a state invariant, and a broken model caught with a shortest
counterexample."""

from __future__ import annotations

import pytest

from callsafe.formal.abstract import Action, Config, SystemModel
from callsafe.formal.graph import explore
from callsafe.model import lifecycle
from callsafe.model.lifecycle import CallEvent, State


def test_smallest_configuration_counted_by_hand() -> None:
    # One call, one turn, one fragment, no controls. By hand (F = failed):
    #   s0 turn unstarted; s1 turn live, call absent. s1: open -> s2 (collecting, 0 frags);
    #   fragment -> F1 (data before open; terminal not seen); terminal -> F2 (terminal seen).
    #   F1: terminal -> F2 (rejected, but now seen). s2: fragment -> s3 (collecting, 1 frag);
    #   terminal -> s4 (candidate, 0 frags). s3: terminal -> s5 (candidate, 1 frag).
    #   s4: parse_failed -> F2; fragment -> F2 (late data). s5: parse_ok -> s6; fragment ->
    #   F3 (1 frag, seen). s6: valid -> s7; invalid -> F4 (one validation); fragment -> F3.
    #   s7: dispatch -> D; fragment -> F4. Thirteen states: s0-s7, D, F1-F4.
    exploration = explore(Config(calls=1, turns=1, fragments=1, controls=frozenset(), restarts=0))
    stats = exploration.stats()
    states = {(n.calls[0].state, n.calls[0].frags, n.calls[0].terminal_seen) for n in exploration.graph.nodes}
    assert (State.DISPATCHED, 1, True) in states
    assert stats.violations == 0
    assert stats.states == 13
    assert stats.deadlocks == 0  # terminal states still accept (ignored/rejected) inputs


@pytest.mark.parametrize(
    "config",
    [
        Config(calls=1, turns=1, fragments=2),
        Config(calls=2, turns=1, fragments=1),
        Config(calls=2, turns=2, fragments=1, controls=frozenset({"cancel", "confirmation", "restart", "replay"})),
    ],
)
def test_no_reachable_state_violates_a_state_invariant(config: Config) -> None:
    exploration = explore(config)
    assert exploration.violations == {}
    assert exploration.stats().states > 10


def test_a_broken_table_is_caught_with_a_shortest_counterexample(monkeypatch: pytest.MonkeyPatch) -> None:
    # Mutant: a failed call revives on a late terminal event.
    row = dict(lifecycle.TRANSITIONS[State.FAILED])
    row[CallEvent.TERMINAL_COMPLETED] = State.TERMINAL_CANDIDATE
    monkeypatch.setitem(lifecycle.TRANSITIONS, State.FAILED, row)
    exploration = explore(Config(calls=1, turns=1, fragments=1, controls=frozenset({"disconnect"}), restarts=0))
    path = exploration.shortest_violation("INV-CANCEL")
    assert path is not None
    assert [str(a) for a, _ in path] == [
        "start_turn(0)",
        "open(0)",
        "fragment(0)",
        "disconnect(0)",
        "terminal_completed(0)",
        "parse_ok(0)",
        "valid(0)",
        "dispatch(0)",
    ]


def test_the_dispatcher_recheck_stops_a_revived_cancelled_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same revival after a user cancel is stopped by the re-check at execution time
    # (the turn is no longer live): defence in depth, as the spec asks.
    row = dict(lifecycle.TRANSITIONS[State.CANCELLED])
    row[CallEvent.TERMINAL_COMPLETED] = State.TERMINAL_CANDIDATE
    monkeypatch.setitem(lifecycle.TRANSITIONS, State.CANCELLED, row)
    exploration = explore(Config(calls=1, turns=1, fragments=1, controls=frozenset({"cancel"}), restarts=0))
    assert exploration.violations == {}


def test_dispatch_from_candidate_mutant_violates_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class EagerModel(SystemModel):
        def actions(self, s):  # type: ignore[no-untyped-def]
            yield from super().actions(s)
            for i, c in enumerate(s.calls):
                if c.state is State.TERMINAL_CANDIDATE:
                    yield Action("dispatch", i)

    row = dict(lifecycle.TRANSITIONS[State.TERMINAL_CANDIDATE])
    row[CallEvent.DISPATCH] = State.DISPATCHED
    monkeypatch.setitem(lifecycle.TRANSITIONS, State.TERMINAL_CANDIDATE, row)
    config = Config(calls=1, turns=1, fragments=1, controls=frozenset(), restarts=0)
    exploration = explore(model=EagerModel(config))
    path = exploration.shortest_violation("INV-TERMINAL")
    assert path is not None
    assert [a.name for a, _ in path] == ["start_turn", "open", "terminal_completed", "dispatch"]
