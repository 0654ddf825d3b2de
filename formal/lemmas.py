"""Candidate lemmas for strengthening an induction, and the Houdini loop that keeps the
inductive ones.

Why: the state invariants are true of every reachable state but are not inductive on their
own. A state nobody can reach (a validated call that was already stopped, a candidate that
was already validated once) satisfies them and steps into a violation; k-induction with
simple paths only rules such states out when the unreachable region is shorter than k,
which it is not here (the other call and the turns can wander for many distinct steps).
The cure is to assume more: lemmas such as "a stopped call is cancelled or failed" or "a
validated call's turn is live". Rather than write them by hand (and keep them in step with
the table), they are generated from templates:

* an *atom* is a fact about one call and its context: its lifecycle state, a flag, a
  counter's value, its turn's status, a response or tool flag (:func:`atoms`);
* a *candidate* says what a call's lifecycle state implies about one other atom, with
  either polarity (``state = validated -> parsed``, ``state = validated -> not
  was_stopped``), or relates the statuses of two turns (``turn1 = live -> not turn0 =
  live``). (Clauses between any two atoms work too, at three times the cost, and prove
  nothing more here.)

Candidates false in a sample of reachable states (random walks of the concrete model) are
dropped at once; the rest go through Houdini: z3 looks for a state satisfying every
remaining candidate whose successor breaks one, drops the broken ones, and repeats until
the conjunction is inductive. What survives is proved: it holds initially and is preserved
by every step, so it may be assumed at every state of an induction. Soundness rests on z3
alone; the samples only save time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import z3

from callsafe.formal.abstract import BAD_DISPATCH, TURN_STATUSES, AbsState, Config, SystemModel
from callsafe.formal.ops import Concrete, Ops, Val
from callsafe.formal.z3_encoding import Encoding
from callsafe.model.lifecycle import State

__all__ = ["Atom", "Lemma", "atoms", "candidates", "houdini", "sample_states"]


@dataclass(frozen=True)
class Atom:
    """A fact about a state; ``field`` names what it reads (two atoms of one field are
    not combined: their clauses are tautologies or plain value exclusions)."""

    name: str
    field: str
    holds: Callable[[Ops, AbsState], Val]


@dataclass(frozen=True)
class Lemma:
    """The clause ``(a if pa else not a) or (b if pb else not b)``."""

    a: Atom
    pa: bool
    b: Atom
    pb: bool

    def holds(self, o: Ops, s: AbsState) -> Val:
        x = self.a.holds(o, s)
        y = self.b.holds(o, s)
        return o.or_(x if self.pa else o.not_(x), y if self.pb else o.not_(y))

    def __str__(self) -> str:
        return f"{'' if self.pa else 'not '}{self.a.name} or {'' if self.pb else 'not '}{self.b.name}"


def _eq_atom(name: str, field: str, get: Callable[[AbsState], Val], value: Val) -> Atom:
    return Atom(f"{name} = {value}", field, lambda o, s: o.eq(get(s), value))


def _flag_atom(name: str, get: Callable[[AbsState], Val]) -> Atom:
    return Atom(name, name, lambda o, s: get(s))


def atoms(config: Config, call: int) -> list[Atom]:
    """The facts about call ``call``, its turn, its response and the system."""
    c, i, t = config, call, config.turn_of(call)
    out = [_eq_atom(f"c{i}.state", "state", lambda s: s.calls[i].state, v) for v in State]
    for flag in ("terminal_seen", "parsed", "confirm_requested", "confirmed", "was_stopped"):
        out.append(_flag_atom(f"c{i}.{flag}", lambda s, f=flag: getattr(s.calls[i], f)))  # type: ignore[misc]
    out += [_eq_atom(f"c{i}.frags", "frags", lambda s: s.calls[i].frags, v) for v in range(c.fragments + 1)]
    for counter in ("validations", "executions"):
        out += [
            _eq_atom(f"c{i}.{counter}", counter, lambda s, f=counter: getattr(s.calls[i], f), v)  # type: ignore[misc]
            for v in range(3)
        ]
    out += [_eq_atom(f"c{i}.bad", "bad", lambda s: s.calls[i].bad_dispatch, v) for v in ("", *BAD_DISPATCH)]
    out += [_eq_atom(f"turn{t}", f"turn{t}", lambda s: s.turns[t], v) for v in TURN_STATUSES]
    out.append(_flag_atom(f"ended{t}", lambda s: s.ended[t]))
    out.append(_flag_atom(f"quarantined{t}", lambda s: s.quarantined[t]))
    out.append(_flag_atom("tool_disabled", lambda s: s.tool_disabled))
    out.append(_flag_atom("tool_changed", lambda s: s.tool_changed))
    out += [_eq_atom("restarts", "restarts", lambda s: s.restarts, v) for v in range(c.restarts + 1)]
    return out


def _turn_atoms(config: Config) -> list[Atom]:
    return [
        _eq_atom(f"turn{t}", f"turn{t}", lambda s, t=t: s.turns[t], v)  # type: ignore[misc]
        for t in range(config.turns)
        for v in TURN_STATUSES
    ]


def candidates(config: Config) -> Iterator[Lemma]:
    """``state = s -> atom`` and ``state = s -> not atom`` for every call, state and
    other atom of that call; and every two-literal clause over two turns' statuses."""
    for i in range(config.calls):
        group = atoms(config, i)
        for a in group:
            if a.field != "state":
                continue
            for b in group:
                if b.field != "state":
                    yield Lemma(a, False, b, True)
                    yield Lemma(a, False, b, False)
    turns = _turn_atoms(config)
    for x, a in enumerate(turns):
        for b in turns[x + 1 :]:
            if a.field != b.field:
                for pa in (True, False):
                    for pb in (True, False):
                        yield Lemma(a, pa, b, pb)


def sample_states(model: SystemModel, size: int = 1000, seed: int = 7) -> set[AbsState]:
    """About ``size`` reachable states of the concrete model: from the initial state, a
    seeded random step from a random state found so far (or the newest), which spreads
    wider than walks from the start."""
    rng = random.Random(seed)
    (initial,) = model.init_states()
    found = [initial]
    seen = {initial}
    for _ in range(20 * size):
        if len(found) >= size:
            break
        s = rng.choice(found) if rng.random() < 0.5 else found[-1]
        acts = list(model.actions(s))
        if acts:
            t, _ = model.next_state(s, rng.choice(acts))
            if t not in seen:
                seen.add(t)
                found.append(t)
    return seen


def houdini(enc: Encoding, lemmas: list[Lemma], samples: set[AbsState]) -> list[Lemma]:
    """The largest subset of ``lemmas`` that holds initially and is inductive (each
    lemma true before a step, given all of them, is true after it)."""
    values = Concrete(enc.model.table, enc.model.guards)
    (initial,) = enc.model.init_states()
    samples = samples | {initial}  # the base case: every lemma holds initially
    live = [lemma for lemma in lemmas if all(lemma.holds(values, s) for s in samples)]
    x, y = enc.state_vars("h0"), enc.state_vars("h1")
    solver = z3.SolverFor("QF_BV")
    solver.add(enc.well_formed(x), enc.canonical_form(x), enc.transition(x, enc.action_var("h.act"), y))
    before = {id(lemma): enc.symbolic(lemma.holds, x) for lemma in live}
    after = {id(lemma): enc.symbolic(lemma.holds, y) for lemma in live}
    while live:
        solver.push()
        solver.add(*(before[id(lemma)] for lemma in live))
        solver.add(z3.Or(*(z3.Not(after[id(lemma)]) for lemma in live)))
        if solver.check() != z3.sat:
            solver.pop()
            break
        m = solver.model()
        live = [lemma for lemma in live if z3.is_true(m.eval(after[id(lemma)], model_completion=True))]
        solver.pop()
    return live
