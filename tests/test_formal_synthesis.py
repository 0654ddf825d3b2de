"""Hazards synthesised by z3 become concrete traces that really show the hazard: the
oracle agrees with the model's path on every call's fate, and the events keep the
hazard's order."""

from __future__ import annotations

import random

import pytest

from callsafe.formal.abstract import Config, SystemModel
from callsafe.formal.graph import explore
from callsafe.formal.ops import Concrete
from callsafe.generators.concretise import concretisable as concretise_rule
from callsafe.generators.synthesis import HAZARDS, concretisable, synthesise, synthesised_traces
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallTerminal, CancelTurn, Restart, StopTenant


def test_the_search_constraint_is_the_concretisers_rule() -> None:
    model = SystemModel(Config(2, 1, 1, frozenset({"cancel", "confirmation", "stop_tenant", "replay"}), 0))
    ops = Concrete(model.table, model.guards)
    nodes = list(explore(model=model).graph.nodes)
    for s in random.Random(5).sample(nodes, min(len(nodes), 300)):
        for a in model.all_actions:
            assert concretisable(ops, s, a) == concretise_rule(s, a), (s, a)


@pytest.mark.parametrize("name", sorted(HAZARDS))
def test_each_hazard_becomes_a_checked_trace(name: str) -> None:
    (synth,) = list(synthesise(HAZARDS[name]))
    trace = synth.trace
    assert trace.source == f"synthesised: {name}"
    verdicts = judge(trace).by_short_name()
    for call, want in trace.verdicts.items():
        assert verdicts[call].matches_author(dict(want))
        assert verdicts[call].state.value == want["state"]


def test_a_late_terminal_after_cancel_is_rejected_by_turn_ownership() -> None:
    (synth,) = list(synthesise(HAZARDS["terminal-after-cancel"]))
    kinds = [type(e) for e in synth.trace.delivered()]
    assert kinds.index(CancelTurn) < kinds.index(CallTerminal)
    oracle = judge(synth.trace)
    (verdict,) = oracle.verdicts.values()
    assert verdict.execute == "must_not"
    assert any("late terminal event for a cancelled call" in line for line in oracle.explain(verdict.key))


def test_a_replay_after_restart_does_not_run_the_call_again() -> None:
    (synth,) = list(synthesise(HAZARDS["replay-after-restart"]))
    delivered = synth.trace.delivered()
    restart = next(i for i, e in enumerate(delivered) if isinstance(e, Restart))
    assert any(isinstance(e, CallTerminal) for e in delivered[restart:])
    (verdict,) = judge(synth.trace).verdicts.values()
    assert verdict.execute == "must"  # executed once, before the restart; the replay changes nothing


def test_a_stop_during_validation_is_delivered_from_inside_the_validator() -> None:
    (synth,) = list(synthesise(HAZARDS["stop-during-validation"]))
    stops = [e for e in synth.trace.events if isinstance(e, StopTenant)]
    assert stops and all(e.during_validation for e in stops)
    assert synth.trace.verdicts == {"t1/c0": {"execute": False, "state": "cancelled"}}


def test_hazards_are_found_with_more_calls_and_turns() -> None:
    config = Config(2, 2, 1, frozenset({"cancel", "stop_tenant", "confirmation"}), 0)
    (synth,) = list(synthesise(HAZARDS["confirmation-races-stop"], config, max_length=12))
    assert [str(a) for a, _ in synth.path][-2:] == ["stop_tenant", "confirm(0)"]


def test_synthesised_traces_is_a_generator_of_named_traces() -> None:
    traces = list(synthesised_traces(["terminal-after-cancel", "cancel-during-validation"]))
    assert [name for name, _ in traces] == [
        "synthesised-terminal-after-cancel-1",
        "synthesised-cancel-during-validation-1",
    ]
    # a configuration without the hazard's controls skips it
    assert list(synthesised_traces(["confirmation-races-stop"], Config(1, 1, 1, frozenset({"cancel"}), 0))) == []
