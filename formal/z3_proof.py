"""Bounded model checking and k-induction of the state invariants, with z3.

Why both: bounded model checking (BMC) finds the shortest violation of each invariant, if
there is one within the depth, and says nothing beyond it. k-induction turns "no violation
in k steps" into "no violation ever": if any k consecutive steps that keep the invariants
must keep them at the next step too, and no path shorter than k breaks them, they hold on
every path of any length. Induction is done for the conjunction of the invariants BMC did
not break (each helps prove the others), over simple paths (no state repeats), first
plain, then strengthened with the lemmas :func:`callsafe.formal.lemmas.houdini` proves.
An invariant the induction cannot carry is reported as holding to the BMC depth only.

The verdicts are for one configuration (its numbers of calls, turns, fragments, restarts
and its controls): "proved" means for traces of any length within those bounds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import z3

from callsafe.formal.abstract import INVARIANT_IDS, AbsState, Action, SystemModel
from callsafe.formal.explain import render_path
from callsafe.formal.lemmas import Lemma, candidates, houdini, sample_states
from callsafe.formal.z3_encoding import Encoding

__all__ = [
    "Counterexample",
    "EncodingMismatch",
    "Induction",
    "InvariantVerdict",
    "ProofReport",
    "bounded_check",
    "k_induction",
    "prove",
    "replay",
]

Status = Literal["proved", "bounded", "violated"]


@dataclass(frozen=True)
class Counterexample:
    """A path from the initial state to a state that breaks ``invariant``."""

    invariant: str
    initial: AbsState
    steps: tuple[tuple[Action, AbsState], ...]

    def __len__(self) -> int:
        return len(self.steps)

    def actions(self) -> list[str]:
        return [str(a) for a, _ in self.steps]

    def lines(self) -> list[str]:
        return render_path(self.initial, self.steps)


@dataclass(frozen=True)
class InvariantVerdict:
    invariant: str
    status: Status
    depth: int  # violated: the counterexample's length; otherwise the BMC depth
    how: str  # proved: "k-induction at k=2 (simple paths, 57 lemmas)"
    seconds: float  # BMC time to the verdict, plus the induction for proved ones
    counterexample: Counterexample | None = None

    def summary(self) -> str:
        if self.status == "proved":
            return f"proved ({self.how})"
        if self.status == "bounded":
            return f"holds to depth {self.depth} ({self.how})"
        return f"violated at depth {self.depth}"


@dataclass
class ProofReport:
    model: SystemModel
    depth: int
    verdicts: dict[str, InvariantVerdict]
    bmc_seconds: float
    induction_seconds: float
    lemmas: list[Lemma] = field(default_factory=list)  # proved by Houdini
    used: tuple[Lemma, ...] = ()  # those the induction needed
    plain_k: int | None = None  # k at which plain k-induction succeeded (None: it did not)
    k_limit: int = 0  # the largest k tried

    def to_json(self) -> dict[str, object]:
        return {
            "config": self.model.config.to_json(),
            "depth": self.depth,
            "bmc_seconds": round(self.bmc_seconds, 3),
            "induction_seconds": round(self.induction_seconds, 3),
            "plain_k_induction": self.plain_k,
            "k_limit": self.k_limit,
            "lemmas": len(self.lemmas),
            "lemmas_used": [str(lemma) for lemma in self.used],
            "invariants": {
                inv: {
                    "status": v.status,
                    "depth": v.depth,
                    "how": v.how,
                    "seconds": round(v.seconds, 3),
                    "counterexample": v.counterexample.actions() if v.counterexample else None,
                }
                for inv, v in self.verdicts.items()
            },
        }


class EncodingMismatch(AssertionError):
    """A z3 path that the concrete model does not take: the encoding and the explorer
    disagree (a bug in an interpretation of the rules, never a property of the model)."""


def replay(model: SystemModel, initial: AbsState, steps: Sequence[tuple[Action, AbsState]]) -> None:
    """Check a path found by z3 step by step against the concrete model."""
    (start,) = model.init_states()
    if initial != start:
        raise EncodingMismatch(f"z3 path starts at {initial}, the model at {start}")
    state = initial
    for n, (action, after) in enumerate(steps, 1):
        if action not in set(model.actions(state)):
            raise EncodingMismatch(f"step {n}: {action} is not enabled in {state}")
        expected, _ = model.next_state(state, action)
        if expected != after:
            raise EncodingMismatch(f"step {n}: {action} leads to {expected}, z3 says {after}")
        state = after


def bounded_check(
    enc: Encoding, depth: int, invariants: Sequence[str] = INVARIANT_IDS
) -> dict[str, tuple[Counterexample | None, float]]:
    """For each invariant, a shortest counterexample of at most ``depth`` steps (or
    None), and the seconds BMC took to decide it."""
    start = time.perf_counter()
    solver = z3.SolverFor("QF_BV")
    solver.add(enc.init(enc.state(0)))
    found: dict[str, tuple[Counterexample | None, float]] = {}
    pending = list(invariants)
    for d in range(depth + 1):
        solver.push()  # one query for all: at most depths, nothing breaks
        solver.add(z3.Or(*(z3.Not(enc.invariant(enc.state(d), inv)) for inv in pending)))
        anything = solver.check() == z3.sat
        solver.pop()
        for inv in list(pending) if anything else []:
            solver.push()
            solver.add(z3.Not(enc.invariant(enc.state(d), inv)))
            if solver.check() == z3.sat:
                initial, steps = enc.decode_path(solver.model(), d)
                replay(enc.model, initial, steps)
                found[inv] = (Counterexample(inv, initial, tuple(steps)), time.perf_counter() - start)
                pending.remove(inv)
            solver.pop()
        if not pending:
            break
        if d < depth:
            solver.add(enc.step(d))
    for inv in pending:
        found[inv] = (None, time.perf_counter() - start)
    return found


@dataclass(frozen=True)
class Induction:
    """The outcome of :func:`k_induction`: the least ``k`` at which it succeeded (None
    if none up to the limit), the invariants the last counterexample to induction broke,
    and the lemmas the proof used (an unsat core: enough, not necessarily fewest)."""

    k: int | None
    broken: frozenset[str] = frozenset()
    used: tuple[Lemma, ...] = ()


def k_induction(enc: Encoding, invariants: Sequence[str], k_max: int, lemmas: Sequence[Lemma] = ()) -> Induction:
    """The least ``k <= k_max`` at which the conjunction of ``invariants`` is
    k-inductive over simple paths, assuming ``lemmas`` (proved invariants) at every state."""
    solver = z3.SolverFor("QF_BV")
    selectors = [z3.Bool(f"lemma{n}") for n in range(len(lemmas))]
    states = [enc.state_vars("k0")]

    def constrain(s: AbsState) -> None:
        solver.add(enc.well_formed(s), enc.canonical_form(s))
        pairs = zip(selectors, lemmas, strict=True)
        solver.add(*(z3.Implies(sel, enc.symbolic(lemma.holds, s)) for sel, lemma in pairs))

    constrain(states[0])
    broken: frozenset[str] = frozenset()
    for k in range(1, k_max + 1):
        prev = states[-1]
        nxt = enc.state_vars(f"k{k}")
        states.append(nxt)
        constrain(nxt)
        solver.add(enc.invariants(prev, invariants))
        solver.add(enc.transition(prev, enc.action_var(f"k.act{k - 1}"), nxt))
        solver.add(*(z3.Not(enc.equal(s, nxt)) for s in states[:-1]))
        goal = z3.Bool(f"goal{k}")
        solver.add(z3.Implies(goal, z3.Not(enc.invariants(nxt, invariants))))
        result = solver.check(goal, *selectors)
        if result == z3.unsat:
            core = {str(x) for x in solver.unsat_core()}
            used = tuple(lemma for sel, lemma in zip(selectors, lemmas, strict=True) if str(sel) in core)
            return Induction(k, frozenset(), used)
        if result == z3.sat:
            m = solver.model()
            broken = frozenset(inv for inv in invariants if not z3.is_true(m.eval(enc.invariant(nxt, inv), True)))
        solver.add(z3.Not(goal))
    return Induction(None, broken)


def prove(
    model: SystemModel,
    depth: int = 12,
    k_max: int = 4,
    strengthen: bool = True,
    invariants: Sequence[str] = INVARIANT_IDS,
) -> ProofReport:
    """BMC to ``depth``, then k-induction (up to ``k_max``) of what BMC did not break."""
    (initial,) = model.init_states()
    if model.canonicalise and model.canonical(initial) != initial:
        # the induction assumes every state it starts from is canonical, as reachable ones are
        raise ValueError("the initial state is not canonical: the induction's assumption would be unsound")
    enc = Encoding(model)
    start = time.perf_counter()
    bmc = bounded_check(enc, depth, invariants)
    bmc_seconds = time.perf_counter() - start
    verdicts: dict[str, InvariantVerdict] = {}
    for inv, (cex, seconds) in bmc.items():
        if cex is not None:
            verdicts[inv] = InvariantVerdict(inv, "violated", len(cex), "bounded model checking", seconds, cex)
    holding = [inv for inv in invariants if bmc[inv][0] is None]
    start = time.perf_counter()
    lemmas: list[Lemma] = []
    used: tuple[Lemma, ...] = ()
    proved: dict[str, str] = {}
    k_limit = min(k_max, depth + 1)  # the base case is the BMC run: paths shorter than k
    todo = list(holding)
    plain = k_induction(enc, todo, k_limit) if todo else Induction(None)
    if plain.k is not None:
        proved.update({inv: f"k-induction at k={plain.k}, simple paths" for inv in todo})
        todo = []
    if todo and strengthen:
        lemmas = houdini(enc, list(candidates(model.config)), sample_states(model))
        while todo:
            strong = k_induction(enc, todo, k_limit, lemmas)
            if strong.k is not None:
                used = strong.used
                how = f"k-induction at k={strong.k}, simple paths, {len(used)} of {len(lemmas)} lemmas"
                proved.update({inv: how for inv in todo})
                break
            if not strong.broken:  # unknown: give up on the rest
                break
            todo = [inv for inv in todo if inv not in strong.broken]
    induction_seconds = time.perf_counter() - start
    for inv in holding:
        seconds = bmc[inv][1]
        if inv in proved:
            verdicts[inv] = InvariantVerdict(inv, "proved", depth, proved[inv], seconds + induction_seconds)
        else:
            verdicts[inv] = InvariantVerdict(inv, "bounded", depth, "not k-inductive up to k=" + str(k_limit), seconds)
    ordered = {inv: verdicts[inv] for inv in invariants}
    return ProofReport(model, depth, ordered, bmc_seconds, induction_seconds, lemmas, used, plain.k, k_limit)
