"""The compiled rules are the interpreted rules: on every reachable state of several
configurations (all controls, a few, no canonicalisation, mutant tables and guards), the
compiled step enables the same actions, in the same order, with the same successors (same
values and same Python types) and exercises the same lifecycle table entries as
:meth:`SystemModel.actions` and :meth:`SystemModel.next_state` over ``Concrete``; the
compiled invariant check agrees with :func:`state_invariants`; and the explorer builds the
same graph either way."""

from __future__ import annotations

from collections import deque

import pytest

from callsafe.formal import slots
from callsafe.formal.abstract import CONTROLS, AbsState, Action, Config, SystemModel, TableEntry, state_invariants
from callsafe.formal.compiled import compile_model
from callsafe.formal.graph import explore
from callsafe.formal.mutants import mutant
from callsafe.model import lifecycle
from callsafe.model.lifecycle import CallEvent, State

ALL = frozenset(CONTROLS)

MODELS = {
    "smallest": SystemModel(Config(1, 1, 1, frozenset(), 0)),
    "one call, two fragments": SystemModel(Config(1, 1, 2, ALL, 1)),
    "two calls, all controls": SystemModel(Config(2, 1, 1, ALL, 1)),
    "two turns, some controls": SystemModel(
        Config(2, 2, 1, frozenset({"cancel", "confirmation", "restart", "replay"}))
    ),
    "three calls, three turns": SystemModel(Config(3, 3, 1, frozenset(), 0)),
    "not canonicalised": SystemModel(Config(1, 1, 2, ALL, 1), canonicalise=False),
    "mutant table": mutant("late-terminal-revives").model(),
    "mutant guard": mutant("dispatch-ignores-turn").model(),
    "validate twice": mutant("validate-twice").model(),
    "mutant reopens": mutant("reconnect-reopens").model(),
    "mutant guard, all controls": mutant("dispatch-ignores-turn").model(Config(1, 2, 1, ALL, 1)),
}


def _strict(state: AbsState) -> str:
    """Equality with types: ``False`` and ``0`` are equal and hash alike, their reprs differ."""
    return repr(state)


def _typed(flat: tuple[object, ...]) -> tuple[tuple[type, object], ...]:
    return tuple((type(v), v) for v in flat)


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_step_matches_the_interpreted_rules_on_every_reachable_state(name: str) -> None:
    model = MODELS[name]
    cm = compile_model(model)
    (initial,) = model.init_states()
    seen = {initial}
    queue = deque([initial])
    violating = 0
    while queue:
        state = queue.popleft()
        flat = cm.flatten(state)
        assert _strict(cm.unflatten(flat)) == _strict(state)  # every successor below is checked on its own visit
        problems = state_invariants(state)
        violating += bool(problems)
        assert cm.holds(flat) is (not problems), state
        mask, compiled = cm.step(flat)
        interpreted: list[tuple[int, AbsState]] = []
        exercised: set[TableEntry] = set()
        for action in model.actions(state):
            succ, entries = model.next_state(state, action)
            interpreted.append((model.all_actions.index(action), succ))
            exercised.update(entries)
            if succ not in seen:
                seen.add(succ)
                queue.append(succ)
        assert [a for a, _ in compiled] == [a for a, _ in interpreted], state
        assert [_typed(f) for _, f in compiled] == [_typed(cm.flatten(s)) for _, s in interpreted], state
        assert cm.entries(mask) == exercised, state
    assert len(seen) > 10
    assert (violating > 0) is (name.startswith("mutant") or name == "validate twice")


@pytest.mark.parametrize("name", ["two turns, some controls", "not canonicalised", "mutant table", "mutant guard"])
def test_the_explorer_builds_the_same_graph_compiled_or_interpreted(name: str) -> None:
    fast = explore(model=MODELS[name])
    slow = explore(model=MODELS[name], compiled=False)
    assert [_strict(n) for n in fast.graph.nodes] == [_strict(n) for n in slow.graph.nodes]
    assert list(fast.graph.edges(data=True)) == list(slow.graph.edges(data=True))
    assert list(fast.graph.pred.items()) == list(slow.graph.pred.items())
    assert fast.parent == slow.parent
    assert fast.entries == slow.entries
    assert fast.violations == slow.violations
    assert fast.stats() == slow.stats()
    assert fast.transitions == slow.transitions == sum(len(d["actions"]) for _, _, d in fast.graph.edges(data=True))


def test_a_table_patched_before_exploring_is_compiled_as_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    row = dict(lifecycle.TRANSITIONS[State.FAILED])
    row[CallEvent.TERMINAL_COMPLETED] = State.TERMINAL_CANDIDATE
    monkeypatch.setitem(lifecycle.TRANSITIONS, State.FAILED, row)
    config = Config(calls=1, turns=1, fragments=1, controls=frozenset({"disconnect"}), restarts=0)
    fast, slow = explore(config), explore(config, compiled=False)
    assert fast.violations and fast.violations == slow.violations
    assert fast.shortest_violation("INV-CANCEL") == slow.shortest_violation("INV-CANCEL")


def test_a_model_that_overrides_the_rules_is_interpreted() -> None:
    class NoRestart(SystemModel):
        def actions(self, s: AbsState):  # type: ignore[no-untyped-def]
            return (a for a in super().actions(s) if a != Action("restart"))

    config = Config(1, 1, 1, frozenset({"restart"}), 1)
    assert explore(model=NoRestart(config)).stats().states < explore(config).stats().states


def test_the_state_limit_holds_when_compiled() -> None:
    with pytest.raises(RuntimeError, match="more than 100 states"):
        explore(Config(2, 1, 1, ALL, 1), max_states=100)


SLOT_MODELS = {
    **{name: MODELS[name] for name in ("two calls, all controls", "two turns, some controls", "not canonicalised")},
    **{name: MODELS[name] for name in ("mutant table", "mutant reopens", "mutant guard, all controls")},
    "three calls of one turn": SystemModel(Config(3, 1, 1, frozenset({"cancel", "replay", "restart", "disable_tool"}))),
}


@pytest.mark.parametrize("name", list(SLOT_MODELS))
@pytest.mark.parametrize("symmetry", [False, True], ids=["plain", "symmetry"])
def test_the_slot_search_explores_as_the_byte_search_does(
    name: str, symmetry: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memoised search over slot codes against the compiled step on every state: the
    same states in the same order, the same parents, transitions, counts, entries and
    violations. The byte search is forced by a slot too narrow for the calls (which also
    checks that an overflowing slot falls back to it)."""
    model = SLOT_MODELS[name]
    for graph in (True, False):
        fast = explore(model=model, symmetry=symmetry, graph=graph)
        assert isinstance(fast.store.keys[0], int)
        with monkeypatch.context() as patched:
            patched.setattr(slots, "CALL_BITS", 1)
            flat = explore(model=model, symmetry=symmetry, graph=graph)
        assert isinstance(flat.store.keys[0], bytes)
        assert [_strict(s) for s in fast.states] == [_strict(s) for s in flat.states]
        for array_name in ("parents", "via", "offsets", "targets", "labels"):
            assert getattr(fast.store, array_name) == getattr(flat.store, array_name), array_name
        assert fast.stats() == flat.stats()
        assert fast.entries == flat.entries
        assert fast.violations == flat.violations
        assert fast.violation_index == flat.violation_index


def test_a_slot_entry_made_again_from_another_state_must_agree() -> None:
    """What the slot tables rely on (an action reads only its slots) is checked each time
    the compiled step makes an entry that exists already."""
    table: dict[int, object] = {}
    slots._put(table, 7, (2, ((3, 1),)))
    slots._put(table, 7, (2, ((3, 1),)))
    with pytest.raises(AssertionError, match="depend on more than its slots"):
        slots._put(table, 7, (2, ((3, 2),)))
