"""The symmetry reduction is sound: over the whole reachable space of several
configurations (mutants among them), the representatives the reduced search finds are
exactly the representatives of the states the unreduced search finds, with the same
violations; the representative is a canonical form (every permutation of a turn's calls
has the same one); compiled and interpreted searches agree; a reduced counterexample maps
back to a run of the unreduced system as short as its shortest one; and a search that
counts its transitions instead of keeping them reports the same statistics."""

from __future__ import annotations

import itertools

import pytest

from callsafe.formal.abstract import CONTROLS, AbsState, Config, SystemModel, state_invariants, symmetric
from callsafe.formal.graph import StateBoundExceeded, explore
from callsafe.formal.mutants import mutant

ALL = frozenset(CONTROLS)

MODELS = {
    "two calls, one turn, all controls": SystemModel(Config(2, 1, 1, ALL, 1)),
    "three calls, two turns, some controls": SystemModel(
        Config(3, 2, 1, frozenset({"cancel", "confirmation", "restart", "replay"}), 1)
    ),
    "three calls, one turn, two fragments": SystemModel(Config(3, 1, 2, frozenset({"disconnect", "limits"}), 0)),
    "mutant guard": mutant("dispatch-ignores-turn").model(Config(3, 2, 1, frozenset({"cancel"}), 0)),
    "mutant table, not canonicalised": mutant("restart-forgets").model(Config(2, 1, 1, frozenset({"restart"}), 1)),
}


def _permutations(c: Config, s: AbsState) -> list[AbsState]:
    """Every state that differs from ``s`` only by which call of a turn is which."""
    per_turn = [list(itertools.permutations(members)) for members in c.calls_of_turn]
    out = []
    for choice in itertools.product(*per_turn):
        calls = list(s.calls)
        for members, order in zip(c.calls_of_turn, choice, strict=True):
            for i, j in zip(members, order, strict=True):
                calls[i] = s.calls[j]
        out.append(s._replace(calls=tuple(calls)))
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_the_reduced_search_finds_the_representatives_of_every_reachable_state(name: str) -> None:
    model = MODELS[name]
    c = model.config
    full = explore(model=model)
    reduced = explore(model=model, symmetry=True)
    assert set(reduced.states) == {symmetric(c, s) for s in full.states}
    assert len(reduced.states) < len(full.states)
    assert {s: sorted(v) for s, v in reduced.violations.items()} == {
        symmetric(c, s): sorted(state_invariants(symmetric(c, s))) for s in full.violations
    }
    assert reduced.entries == full.entries  # the same lifecycle table entries exercised
    # a canonical form: every permutation of a state has the one representative
    for s in full.states[:: max(1, len(full.states) // 300)]:
        assert {symmetric(c, p) for p in _permutations(c, s)} == {symmetric(c, s)}


@pytest.mark.parametrize("name", ["three calls, two turns, some controls", "mutant guard"])
def test_compiled_and_interpreted_reductions_agree(name: str) -> None:
    fast = explore(model=MODELS[name], symmetry=True)
    slow = explore(model=MODELS[name], symmetry=True, compiled=False)
    assert [repr(s) for s in fast.states] == [repr(s) for s in slow.states]
    assert fast.stats() == slow.stats()
    assert fast.violations == slow.violations


@pytest.mark.parametrize("name", ["mutant guard", "mutant table, not canonicalised"])
def test_a_reduced_counterexample_maps_back_to_a_shortest_run(name: str) -> None:
    model = MODELS[name]
    full = explore(model=model)
    reduced = explore(model=model, symmetry=True, graph=False)
    for inv in sorted({i for v in full.violations.values() for i, _ in v}):
        path = reduced.shortest_violation(inv)
        shortest = full.shortest_violation(inv)
        assert path is not None and shortest is not None
        assert len(path) == len(shortest)
        state = model.init_states()[0]
        for action, after in path:  # a run of the unreduced system, step by step
            assert action in set(model.actions(state))
            assert model.next_state(state, action)[0] == after
            state = after
        assert inv in {i for i, _ in state_invariants(state)}


def test_counting_the_transitions_reports_what_keeping_them_does() -> None:
    model = MODELS["three calls, two turns, some controls"]
    kept, counted = explore(model=model, symmetry=True), explore(model=model, symmetry=True, graph=False)
    assert kept.stats() == counted.stats()
    assert kept.stats().deadlocks == 0 and kept.stats().terminal_states > 0
    with pytest.raises(ValueError, match="without its transitions"):
        counted.graph  # noqa: B018


def test_the_state_bound_is_a_typed_error() -> None:
    with pytest.raises(StateBoundExceeded, match="more than 50 states") as raised:
        explore(Config(2, 1, 1, ALL, 1), symmetry=True, graph=False, max_states=50)
    assert raised.value.max_states == 50
