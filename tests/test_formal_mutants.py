"""Every checker finds every mutant, and they agree: for each deliberately wrong model
(and the correct one), the explicit-state search over the networkx graph and z3's bounded
model checking find the same violated invariants, each with a shortest counterexample of
the same length. z3 searches to the graph's depth (the longest shortest path from the
initial state), so "nothing found" is complete for that configuration, not a bound."""

from __future__ import annotations

import pytest

from callsafe.formal.abstract import INVARIANT_IDS, Config, SystemModel
from callsafe.formal.graph import Exploration, explore
from callsafe.formal.mutants import MASKED, MUTANTS, all_mutants, mutant
from callsafe.formal.z3_encoding import Encoding
from callsafe.formal.z3_proof import bounded_check, prove

CORRECT = SystemModel(Config(1, 2, 1, frozenset({"cancel", "restart", "replay", "confirmation", "stop_tenant"}), 1))


def _explicit(exploration: Exploration) -> dict[str, int]:
    violated = {inv for problems in exploration.violations.values() for inv, _ in problems}
    lengths = {}
    for inv in violated:
        path = exploration.shortest_violation(inv)
        assert path is not None
        lengths[inv] = len(path)
    return lengths


def _depth(exploration: Exploration) -> int:
    return max(len(exploration.path_to(s)) for s in exploration.graph.nodes)


def test_there_are_enough_mutants() -> None:
    assert len(MUTANTS) >= 6
    assert all(m.breaks for m in MUTANTS.values())
    assert not any(m.breaks for m in MASKED.values())
    with pytest.raises(KeyError, match="known"):
        mutant("no-such-mutant")


@pytest.mark.parametrize("name", [*all_mutants(), "correct"])
def test_explicit_search_and_z3_agree(name: str) -> None:
    model = CORRECT if name == "correct" else mutant(name).model()
    exploration = explore(model=model)
    explicit = _explicit(exploration)
    found = bounded_check(Encoding(model), _depth(exploration))
    z3_lengths = {inv: len(cex) for inv, (cex, _) in found.items() if cex is not None}
    assert z3_lengths == explicit
    expected = frozenset() if name == "correct" else mutant(name).breaks
    assert set(explicit) == expected
    for inv, (cex, _) in found.items():
        if cex is not None:  # z3's counterexample ends in a state that breaks that invariant
            assert any(i == inv for i, _ in exploration.violations[cex.steps[-1][1]])


def test_a_mutant_that_revives_a_terminal_call_is_explored_without_canonicalisation() -> None:
    assert mutant("late-terminal-revives").revives()
    assert not mutant("late-terminal-revives").model().canonicalise
    assert mutant("validate-twice").model().canonicalise


def test_the_mutants_table_is_a_copy() -> None:
    from callsafe.model.lifecycle import TRANSITIONS, CallEvent, State

    model = mutant("dispatch-from-candidate").model()
    assert model.table[State.TERMINAL_CANDIDATE][CallEvent.DISPATCH] is State.DISPATCHED
    assert TRANSITIONS[State.TERMINAL_CANDIDATE][CallEvent.DISPATCH] is not State.DISPATCHED


def test_prove_reports_the_spec_counterexample_for_a_dispatcher_that_ignores_the_turn() -> None:
    report = prove(mutant("dispatch-ignores-turn").model(), depth=8, k_max=2)
    verdict = report.verdicts["INV-TURN"]
    assert verdict.status == "violated" and verdict.counterexample is not None
    actions = verdict.counterexample.actions()
    assert len(actions) == 8 and actions[-1] == "dispatch(0)" and "cancel(0)" in actions
    others = {inv: v.status for inv, v in report.verdicts.items() if inv != "INV-TURN"}
    assert set(others.values()) == {"proved"}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_faults_are_proved_safe(name: str) -> None:
    report = prove(mutant(name).model(), depth=6, k_max=2)
    assert {v.status for v in report.verdicts.values()} == {"proved"}
    assert list(report.verdicts) == list(INVARIANT_IDS)
