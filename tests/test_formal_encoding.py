"""The z3 encoding is the explorer's machine: the same successors from every state it is
asked about, the same state counts as before the rules were rewritten over Ops, and the
correct model proved for traces of any length."""

from __future__ import annotations

import random

import pytest
import z3

from callsafe.formal.abstract import (
    CONTROLS,
    INVARIANT_IDS,
    AbsState,
    Config,
    SystemModel,
    canonical,
    state_invariants,
    successor,
)
from callsafe.formal.explain import describe_change, render_path
from callsafe.formal.graph import explore
from callsafe.formal.z3_encoding import Encoding, leaves, rebuild
from callsafe.formal.z3_proof import bounded_check, k_induction, prove, replay
from callsafe.model.lifecycle import INTERNAL_STEPS, TRANSITIONS, CallEvent, State

ALL = frozenset(CONTROLS)


@pytest.mark.parametrize(
    ("config", "states", "transitions"),
    [
        # Counted by the explorer before its rules were rewritten over Ops: the rewrite
        # changed no state, no transition.
        (Config(1, 1, 1, ALL, 1), 217, 2817),
        (Config(1, 1, 2, ALL, 1), 241, 3205),
        (Config(1, 2, 2, ALL, 1), 628, 9114),
        (Config(2, 2, 2, frozenset({"cancel", "malformed", "permission", "quarantine", "limits"}), 0), 919, 7945),
    ],
)
def test_state_counts_are_unchanged(config: Config, states: int, transitions: int) -> None:
    exploration = explore(config)
    assert (exploration.stats().states, exploration.transitions) == (states, transitions)


def test_internal_steps_run_where_the_table_gives_them_a_move() -> None:
    # The explorer enables an internal step where the table has a transition for its
    # event; for the real table that is exactly lifecycle.INTERNAL_STEPS.
    for state in State:
        moving = {e for e in CallEvent if isinstance(TRANSITIONS[state][e], State)}
        assert moving & {e for steps in INTERNAL_STEPS.values() for e in steps} == set(INTERNAL_STEPS.get(state, ()))


class _Probe:
    """The encoding's enabled conditions and successors as terms over one state's
    variables, evaluated for concrete states by z3 itself (model evaluation)."""

    def __init__(self, enc: Encoding) -> None:
        self.enc = enc
        self.cur = enc.state_vars("probe")
        self.rules = []
        for a in enc.actions:
            nxt = successor(enc.ops, enc.config, self.cur, a)
            if enc.model.canonicalise:
                nxt = canonical(enc.ops, enc.config, nxt)
            self.rules.append((str(a), enc.enabled(self.cur, a), [enc.ops.lit(v) for v in leaves(nxt)]))

    def successors(self, s: AbsState) -> dict[str, AbsState]:
        solver = z3.Solver()
        solver.add(self.enc.equal(self.cur, s))
        assert solver.check() == z3.sat
        m = solver.model()
        out = {}
        for name, guard, values in self.rules:
            if z3.is_true(m.eval(guard, model_completion=True)):
                decoded = []
                for value, kind in zip(values, self.enc.kinds, strict=True):
                    v = m.eval(value, model_completion=True)
                    if kind == "bool":
                        decoded.append(z3.is_true(v))
                    elif kind == "int":
                        decoded.append(v.as_long())
                    else:
                        decoded.append(self.enc.ops.codes.decoders[kind][v.as_long()])
                out[name] = rebuild(self.enc.config, decoded)
        return out


@pytest.mark.parametrize(
    "config",
    [
        Config(1, 1, 1, ALL, 1),
        Config(2, 2, 1, frozenset({"cancel", "confirmation", "replay", "restart", "quarantine"}), 1),
    ],
)
def test_z3_successors_are_the_explorers(config: Config) -> None:
    model = SystemModel(config)
    probe = _Probe(Encoding(model))
    nodes = sorted(explore(model=model).graph.nodes, key=repr)
    for s in random.Random(3).sample(nodes, 60):
        expected = {str(a): model.next_state(s, a)[0] for a in model.actions(s)}
        assert probe.successors(s) == expected


def test_z3_invariants_are_the_explorers() -> None:
    model = SystemModel(Config(1, 1, 1, ALL, 1))
    enc = Encoding(model)
    cur = enc.state_vars("probe")
    exploration = explore(model=model)
    broken = [s._replace(calls=(s.calls[0]._replace(executions=2, validations=2),)) for s in exploration.graph.nodes]
    for s in [*random.Random(4).sample(list(exploration.graph.nodes), 20), *broken[:20]]:
        sub = [(v, enc.ops.lit(x)) for v, x in zip(leaves(cur), leaves(s), strict=True)]
        failing = {inv for inv, _ in state_invariants(s)}
        for inv in INVARIANT_IDS:
            holds = z3.is_true(z3.simplify(z3.substitute(enc.invariant(cur, inv), *sub)))
            assert holds == (inv not in failing), (s, inv)


def test_bounded_check_finds_no_violation_in_the_correct_model() -> None:
    enc = Encoding(SystemModel(Config(1, 1, 1, ALL, 1)))
    found = bounded_check(enc, 8)
    assert {inv: cex for inv, (cex, _) in found.items() if cex is not None} == {}


def test_plain_k_induction_fails_and_strengthened_induction_proves_everything() -> None:
    model = SystemModel(Config(1, 1, 1, frozenset({"cancel", "confirmation", "restart", "replay"}), 1))
    plain = k_induction(Encoding(model), INVARIANT_IDS, 3)
    assert plain.k is None and plain.broken  # an unreachable state steps into a violation
    report = prove(model, depth=10, k_max=3)
    assert {v.status for v in report.verdicts.values()} == {"proved"}
    assert all("k-induction at k=1" in v.how for v in report.verdicts.values())
    assert 0 < len(report.used) <= len(report.lemmas)
    # every lemma holds in every reachable state
    values = [s for s in explore(model=model).graph.nodes]
    from callsafe.formal.ops import Concrete

    ops = Concrete(model.table, model.guards)
    assert all(lemma.holds(ops, s) for lemma in report.lemmas for s in values)


def test_a_path_z3_did_not_find_in_the_model_is_refused() -> None:
    from callsafe.formal.abstract import Action
    from callsafe.formal.z3_proof import EncodingMismatch

    model = SystemModel(Config(1, 1, 1, frozenset(), 0))
    (s0,) = model.init_states()
    s1, _ = model.next_state(s0, Action("start_turn", 0))
    replay(model, s0, [(Action("start_turn", 0), s1)])
    with pytest.raises(EncodingMismatch):
        replay(model, s0, [(Action("open", 0), s1)])


def test_counterexamples_read_as_actions_and_what_changed() -> None:
    model = SystemModel(Config(1, 1, 1, frozenset({"cancel"}), 0))
    (s0,) = model.init_states()
    from callsafe.formal.abstract import Action

    s1, _ = model.next_state(s0, Action("start_turn", 0))
    s2, _ = model.next_state(s1, Action("open", 0))
    s3, _ = model.next_state(s2, Action("cancel", 0))
    assert render_path(s0, [(Action("start_turn", 0), s1), (Action("open", 0), s2), (Action("cancel", 0), s3)]) == [
        "1. start_turn(0) results in turn 0 unstarted -> live",
        "2. open(0) results in call 0 absent -> collecting",
        "3. cancel(0) results in call 0 collecting -> cancelled, stopped; turn 0 live -> cancelled",
    ]
    assert describe_change(s3, s3) == "nothing changes"
