"""The abstract transition system as a z3 transition relation.

Why a generated encoding: a hand-written z3 model would be a second statement of the
rules, free to drift from the explorer's. Here nothing is restated. :class:`Z3Ops`
interprets the operations of :mod:`callsafe.formal.ops`, and the rules of
:mod:`callsafe.formal.abstract` (:func:`~callsafe.formal.abstract.enabled`,
:func:`~callsafe.formal.abstract.successor`, :func:`~callsafe.formal.abstract.canonical`,
the invariants of :data:`~callsafe.formal.abstract.CALL_CHECKS`) are evaluated over z3
terms instead of Python values:

* the lifecycle table becomes, per event, the disjunction of the states it moves from and
  an ``If`` chain of their targets, generated from the model's table (so a mutant table is
  encoded as it is);
* each guard becomes its truth table (:func:`callsafe.formal.ops.truth_table`): the
  guard function is evaluated on every input row and each event is the disjunction of the
  rows that return it;
* the action catalogue is :meth:`SystemModel.all_actions`; one integer per step says which
  action was taken, and every state variable of the next step is an ``If`` chain over it.

:class:`Encoding` builds the relation once over a "current" and a "next" copy of the state
variables, and instantiates it per step by substitution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import z3

from callsafe.formal.abstract import (
    BAD_DISPATCH,
    INVARIANT_IDS,
    TURN_STATUSES,
    AbsCall,
    AbsState,
    Action,
    Config,
    SystemModel,
    canonical,
    enabled,
    invariant_holds,
    successor,
)
from callsafe.formal.ops import Guards, Ops, Table, Val, truth_table
from callsafe.model.lifecycle import CallEvent, State

__all__ = ["Encoding", "Z3Ops", "leaves", "rebuild"]

_BAD_VALUES: Final = ("", *BAD_DISPATCH)
_BAD_NAMES: Final = ("none", "stopped", "unfinished", "not_current", "unconfirmed")


@dataclass(frozen=True)
class _Cases:
    """What a guard returned, symbolically: mutually exclusive ``(condition, event)``."""

    cases: tuple[tuple[Any, CallEvent], ...]


class _Codes:
    """Finite values as small unsigned bit-vector codes: lifecycle states, turn statuses
    and what was wrong at a dispatch. Everything in the encoding is then a Boolean or a
    bit-vector, which z3 bit-blasts to SAT (far faster here than enumeration sorts or
    integers, which it would hand to its arithmetic and datatype theories)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.state_code: dict[State, int] = {s: n for n, s in enumerate(State)}
        # Lifecycle states are ``str`` too ("cancelled" is also a turn status): kept apart.
        self.str_code: dict[str, int] = {v: n for n, v in enumerate(TURN_STATUSES)}
        self.str_code.update({v: n for n, v in enumerate(_BAD_VALUES)})
        self.decoders: dict[str, tuple[Any, ...]] = {
            "state": tuple(State),
            "turn": TURN_STATUSES,
            "bad": _BAD_VALUES,
        }

    def code(self, value: Any) -> int:
        if isinstance(value, State):
            return self.state_code[value]
        return self.str_code[value]


class Z3Ops(Ops):
    """The rules over z3 terms."""

    def __init__(self, table: Table, guards: Guards, width: int = 4) -> None:
        super().__init__(table, guards)
        self.width = width
        self.codes = _Codes(width)
        self._open_rows = truth_table(guards.classify_open, 3)
        self._dispatch_rows = truth_table(guards.classify_dispatch, 6)

    def lit(self, value: Val) -> Val:
        if isinstance(value, z3.ExprRef):
            return value
        if isinstance(value, bool):
            return z3.BoolVal(value)
        if isinstance(value, int):
            return z3.BitVecVal(value, self.width)
        return z3.BitVecVal(self.codes.code(value), self.width)

    def not_(self, x: Val) -> Val:
        return z3.Not(self.lit(x))

    def and_(self, *xs: Val) -> Val:
        terms = [self.lit(x) for x in xs]
        return z3.And(*terms) if terms else z3.BoolVal(True)

    def or_(self, *xs: Val) -> Val:
        terms = [self.lit(x) for x in xs]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def ite(self, c: Val, a: Val, b: Val) -> Val:
        return z3.If(self.lit(c), self.lit(a), self.lit(b))

    def eq(self, a: Val, b: Val) -> Val:
        return self.lit(a) == self.lit(b)

    def lt(self, a: Val, b: Val) -> Val:
        return z3.ULT(self.lit(a), self.lit(b))

    def add(self, a: Val, n: int) -> Val:
        return self.lit(a) + n

    # -- the table and the guards ----------------------------------------------------

    def _fixed(self, state: Val, event: CallEvent) -> tuple[Val, Val]:
        moves = [(s, r) for s, row in self.table.items() if isinstance(r := row[event], State)]
        moved = self.or_(*(self.eq(state, s) for s, _ in moves))
        after = self.lit(state)
        for s, target in reversed(moves):
            if target is not s:
                after = z3.If(self.eq(state, s), self.lit(target), after)
        return moved, after

    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        if isinstance(event, CallEvent):
            return self._fixed(state, event)
        moved: Val = z3.BoolVal(False)
        after: Val = self.lit(state)
        for cond, e in reversed(event.cases):
            m, a = self._fixed(state, e)
            moved = z3.If(cond, m, moved)
            after = z3.If(cond, a, after)
        return moved, after

    def moves(self, state: Val, event: CallEvent) -> Val:
        return self.or_(*(self.eq(state, s) for s, row in self.table.items() if isinstance(row[event], State)))

    def _cases(self, rows: dict[CallEvent, list[tuple[bool, ...]]], inputs: Sequence[Val]) -> _Cases:
        """A guard's truth table applied to ``inputs``; inputs that are Python constants
        select rows instead of becoming literals."""
        out = []
        for event, event_rows in rows.items():
            disjuncts = []
            for row in event_rows:
                literals = []
                for want, x in zip(row, inputs, strict=True):
                    if isinstance(x, bool):
                        if x != want:
                            break
                        continue
                    literals.append(self.lit(x) if want else self.not_(x))
                else:
                    disjuncts.append(self.and_(*literals))
            if disjuncts:
                out.append((z3.simplify(self.or_(*disjuncts)), event))
        return _Cases(tuple(out))

    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> Val:
        return self._cases(self._open_rows, (turn_live, response_open, quarantined))

    def classify_dispatch(
        self,
        needs_confirmation: Val,
        confirmed: Val,
        turn_live: Val,
        quarantined: Val,
        tool_unchanged: Val,
        permitted: Val,
    ) -> Val:
        return self._cases(
            self._dispatch_rows, (needs_confirmation, confirmed, turn_live, quarantined, tool_unchanged, permitted)
        )

    def event_is(self, event: Val, which: CallEvent) -> Val:
        if isinstance(event, CallEvent):
            return z3.BoolVal(event is which)
        return self.or_(*(cond for cond, e in event.cases if e is which))


# --------------------------------------------------------------------------------------
# State vectors
# --------------------------------------------------------------------------------------


def leaves(s: AbsState) -> list[Any]:
    """The state's values in a fixed order (calls' fields, turns, ended, quarantined,
    tool flags, restarts)."""
    out: list[Any] = [v for call in s.calls for v in call]
    out += [*s.turns, *s.ended, *s.quarantined, s.tool_disabled, s.tool_changed, s.restarts]
    return out


def rebuild(config: Config, values: Sequence[Any]) -> AbsState:
    """The inverse of :func:`leaves`."""
    width = len(AbsCall._fields)
    n, t = config.calls, config.turns
    calls = tuple(AbsCall(*values[i * width : (i + 1) * width]) for i in range(n))
    rest = list(values[n * width :])
    return AbsState(calls, tuple(rest[:t]), tuple(rest[t : 2 * t]), tuple(rest[2 * t : 3 * t]), *rest[3 * t :])


# How each field of a call is encoded: a Boolean, a counter, or a code (see _Codes).
_CALL_KINDS: Final = {
    "state": "state",
    "frags": "int",
    "validations": "int",
    "executions": "int",
    "bad_dispatch": "bad",
}


def _kinds(config: Config) -> list[str]:
    """The encoding of each of :func:`leaves`, in order."""
    per_call = [_CALL_KINDS.get(f, "bool") for f in AbsCall._fields]
    t = config.turns
    return per_call * config.calls + ["turn"] * t + ["bool"] * (2 * t) + ["bool", "bool", "int"]


class Encoding:
    """The transition relation of one model (a configuration, its table, its guards)."""

    def __init__(self, model: SystemModel) -> None:
        self.model = model
        self.config = model.config
        c = model.config
        self.width = max(c.fragments, c.restarts, len(State) - 1).bit_length() + 1
        self.ops = Z3Ops(model.table, model.guards, self.width)
        self.actions: tuple[Action, ...] = model.all_actions
        self.kinds = _kinds(c)
        self._cur = self.state_vars("cur")
        self._nxt = self.state_vars("nxt")
        self._act = self.action_var("act")
        self._relation = self._build_relation()
        self._steps: dict[int, AbsState] = {}

    # -- variables -------------------------------------------------------------------

    def state_vars(self, prefix: str) -> AbsState:
        """Fresh z3 constants for one state, named ``<prefix>.<field>``."""
        c = self.config
        names = [f"c{i}.{f}" for i in range(c.calls) for f in AbsCall._fields]
        names += [f"turn{t}" for t in range(c.turns)]
        names += [f"ended{t}" for t in range(c.turns)] + [f"quarantined{t}" for t in range(c.turns)]
        names += ["tool_disabled", "tool_changed", "restarts"]
        return rebuild(
            c,
            [
                z3.Bool(f"{prefix}.{name}") if kind == "bool" else z3.BitVec(f"{prefix}.{name}", self.width)
                for name, kind in zip(names, self.kinds, strict=True)
            ],
        )

    def state(self, step: int) -> AbsState:
        """The state variables of step ``step`` of a path."""
        if step not in self._steps:
            self._steps[step] = self.state_vars(f"s{step}")
        return self._steps[step]

    def action_var(self, name: str) -> Any:
        """A variable for an action: an index into :attr:`actions`."""
        return z3.BitVec(name, max(len(self.actions).bit_length(), 1) + 1)

    def action(self, step: int) -> Any:
        """The action taken from step ``step`` to ``step + 1``."""
        return self.action_var(f"a{step}")

    # -- formulas --------------------------------------------------------------------

    def init(self, s: AbsState) -> Any:
        (initial,) = self.model.init_states()
        return self.equal(s, initial)

    def well_formed(self, s: AbsState) -> Any:
        """The ranges of the bit-vector variables: codes and counters within their domains."""
        c = self.config
        parts = [z3.ULE(s.restarts, c.restarts)]
        for call in s.calls:
            parts += [z3.ULE(call.frags, c.fragments), z3.ULE(call.validations, 2), z3.ULE(call.executions, 2)]
            parts += [z3.ULE(call.state, len(State) - 1), z3.ULE(call.bad_dispatch, len(_BAD_VALUES) - 1)]
        parts += [z3.ULE(t, len(TURN_STATUSES) - 1) for t in s.turns]
        return z3.And(*parts)

    def canonical_form(self, s: AbsState) -> Any:
        """``s`` is its own canonical form (every reachable state is)."""
        if not self.model.canonicalise:
            return z3.BoolVal(True)
        return self.equal(s, canonical(self.ops, self.config, s))

    def equal(self, s: AbsState, t: AbsState) -> Any:
        return z3.And(*(self.ops.eq(a, b) for a, b in zip(leaves(s), leaves(t), strict=True)))

    def invariant(self, s: AbsState, invariant: str) -> Any:
        return self.ops.lit(invariant_holds(self.ops, s, invariant))

    def invariants(self, s: AbsState, ids: Sequence[str] = INVARIANT_IDS) -> Any:
        return z3.And(*(self.invariant(s, i) for i in ids))

    def enabled(self, s: AbsState, a: Action) -> Any:
        return self.ops.lit(enabled(self.ops, self.config, s, a))

    def _build_relation(self) -> Any:
        o, c, s = self.ops, self.config, self._cur
        en = []
        nexts = []
        for a in self.actions:
            en.append(self.ops.lit(enabled(o, c, s, a)))
            succ = successor(o, c, s, a)
            if self.model.canonicalise:
                succ = canonical(o, c, succ)
            nexts.append([o.lit(v) for v in leaves(succ)])
        act = self._act
        chosen = en[-1]
        for j in range(len(self.actions) - 2, -1, -1):
            chosen = z3.If(act == j, en[j], chosen)
        parts = [z3.ULT(act, len(self.actions)), chosen]
        for k, var in enumerate(leaves(self._nxt)):
            value = nexts[-1][k]
            for j in range(len(self.actions) - 2, -1, -1):
                value = z3.If(act == j, nexts[j][k], value)
            parts.append(var == value)
        return z3.And(*parts)

    def transition(self, s: AbsState, a: Any, t: AbsState) -> Any:
        """``t`` follows ``s`` by the action whose index is ``a``."""
        pairs = [(x, y) for x, y in zip(leaves(self._cur), leaves(s), strict=True)]
        pairs += [(x, y) for x, y in zip(leaves(self._nxt), leaves(t), strict=True)]
        pairs.append((self._act, a))
        return z3.substitute(self._relation, *pairs)

    def step(self, k: int) -> Any:
        """The transition from step ``k`` to step ``k + 1``."""
        return self.transition(self.state(k), self.action(k), self.state(k + 1))

    # -- models back to values -------------------------------------------------------

    def decode_state(self, m: Any, s: AbsState) -> AbsState:
        values: list[Any] = []
        for var, kind in zip(leaves(s), self.kinds, strict=True):
            v = m.eval(var, model_completion=True)
            if kind == "bool":
                values.append(z3.is_true(v))
            elif kind == "int":
                values.append(v.as_long())
            else:
                values.append(self.ops.codes.decoders[kind][v.as_long()])
        return rebuild(self.config, values)

    def decode_action(self, m: Any, step: int) -> Action:
        index: int = m.eval(self.action(step), model_completion=True).as_long()
        return self.actions[index]

    def decode_path(self, m: Any, length: int) -> tuple[AbsState, list[tuple[Action, AbsState]]]:
        """The initial state and ``(action, state after)`` steps of a path of ``length``."""
        initial = self.decode_state(m, self.state(0))
        return initial, [(self.decode_action(m, k), self.decode_state(m, self.state(k + 1))) for k in range(length)]

    def symbolic(self, fn: Callable[[Ops, AbsState], Val], s: AbsState) -> Any:
        """Any rule written over :class:`Ops`, evaluated over ``s`` as a z3 term."""
        return self.ops.lit(fn(self.ops, s))
