"""The operations the system rules are written in, and their concrete interpretation.

Why: the rules of :mod:`callsafe.formal.abstract` (which actions are enabled, what each does,
canonicalisation, the state invariants) are written once, against the small interface
:class:`Ops`, and read three ways:

* :class:`Concrete` (here): Python values, one step at a time; what
  :meth:`~callsafe.formal.abstract.SystemModel.next_state` runs, the reference;
* ``PyOps`` (:mod:`callsafe.formal.compiled`): Python source, compiled once per
  configuration; the inner loop of the explorer of :mod:`callsafe.formal.graph`;
* ``Z3Ops`` (:mod:`callsafe.formal.z3_encoding`): z3 terms; bounded model checking and
  k-induction;
* ``TlaOps`` (:mod:`callsafe.formal.tla`): TLA+ expressions; the module TLC checks.

So the compiled explorer, the z3 transition relation and the TLA+ ``Next`` are not a
second statement of the rules: they are the same code, evaluated over terms instead of values. The rules may
branch in Python on what is fixed for a configuration (the action, its target, the
enabled controls) but never on the state: every state-dependent choice goes through
:meth:`Ops.ite`, :meth:`Ops.pick` or the lifecycle table (:meth:`Ops.outcome`).

The per-call table and the guards enter through :meth:`Ops.outcome`,
:meth:`Ops.classify_open` and :meth:`Ops.classify_dispatch`: concretely they are a dict
lookup and a function call; symbolically, an expression generated from the table's rows
and from the guards' truth tables (:func:`truth_table`), so a mutant table or guard is
seen by every interpretation alike.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from callsafe.model import system
from callsafe.model.lifecycle import CallEvent, Outcome, State

__all__ = ["Concrete", "Guards", "Ops", "Table", "TableEntry", "truth_table"]

Table = Mapping[State, Mapping[CallEvent, Outcome]]
# A value of the rules: a Python value (concrete) or a term (z3, TLA+). The rules are
# polymorphic in it, hence ``Any``.
Val = Any
_NT = TypeVar("_NT", bound=tuple[Any, ...])


class TableEntry(NamedTuple):
    """A lifecycle table entry exercised by a step: ``(state, event) -> outcome``."""

    state: State
    event: CallEvent
    outcome: Outcome


@dataclass(frozen=True)
class Guards:
    """The guards of :mod:`callsafe.model.system` that the abstract rules consult. A model
    mutant replaces one of them; every interpretation then reads the replacement."""

    classify_open: Callable[[bool, bool, bool], CallEvent]
    classify_dispatch: Callable[[bool, bool, bool, bool, bool, bool], CallEvent]

    @classmethod
    def default(cls) -> Guards:
        """The guards as :mod:`callsafe.model.system` defines them now (looked up at call
        time, so a test that patches the module is seen)."""
        return cls(system.classify_open, system.classify_dispatch)


def truth_table(guard: Callable[..., CallEvent], arity: int) -> dict[CallEvent, list[tuple[bool, ...]]]:
    """Every input row of a boolean guard, grouped by the event it returns: how the
    symbolic interpretations turn a guard into an expression without restating it."""
    rows: dict[CallEvent, list[tuple[bool, ...]]] = {}
    for row in itertools.product((False, True), repeat=arity):
        rows.setdefault(guard(*row), []).append(row)
    return rows


class Ops(ABC):
    """What the rules may do with values. Subclasses interpret it."""

    def __init__(self, table: Table, guards: Guards) -> None:
        self.table = table
        self.guards = guards

    # -- logic and arithmetic -------------------------------------------------------

    @abstractmethod
    def lit(self, value: Val) -> Val:
        """A Python constant as a value of this interpretation."""

    @abstractmethod
    def not_(self, x: Val) -> Val: ...

    @abstractmethod
    def and_(self, *xs: Val) -> Val: ...

    @abstractmethod
    def or_(self, *xs: Val) -> Val: ...

    @abstractmethod
    def ite(self, c: Val, a: Val, b: Val) -> Val: ...

    @abstractmethod
    def eq(self, a: Val, b: Val) -> Val: ...

    @abstractmethod
    def lt(self, a: Val, b: Val) -> Val: ...

    @abstractmethod
    def add(self, a: Val, n: int) -> Val: ...

    def is_in(self, a: Val, values: Iterable[Val]) -> Val:
        return self.or_(*(self.eq(a, v) for v in values))

    def ge(self, a: Val, b: Val) -> Val:
        return self.not_(self.lt(a, b))

    def gt(self, a: Val, b: Val) -> Val:
        return self.lt(b, a)

    def inc(self, a: Val, cap: int) -> Val:
        """``min(a + 1, cap)``: counters are capped so the state space stays finite."""
        return self.ite(self.lt(a, cap), self.add(a, 1), cap)

    def pick(self, c: Val, a: _NT, b: _NT) -> _NT:
        """``a if c else b`` for two records of the same shape, field by field."""
        return type(a)(*(self.ite(c, x, y) for x, y in zip(a, b, strict=True)))

    def pick_lazy(self, c: Val, make_a: Callable[[], _NT], b: _NT) -> _NT:
        """:meth:`pick`, building ``a`` only where it may be chosen (concretely: only when
        ``c`` holds), which keeps the explorer fast."""
        return self.pick(c, make_a(), b)

    def share(self, x: Val) -> Val:
        """A hint that ``x`` is used more than once (TLA+ names it in a ``LET``)."""
        return x

    # -- the lifecycle table and the guards -----------------------------------------

    @abstractmethod
    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        """``(moved, next)``: whether the table maps ``(state, event)`` to a state (a
        transition, possibly a self-loop) and the state after it (``state`` when the
        event is ignored or rejected). ``event`` is a :class:`CallEvent` or what a guard
        returned."""

    @abstractmethod
    def moves(self, state: Val, event: CallEvent) -> Val:
        """Whether the table has a transition for ``(state, event)`` (not recorded as
        exercised: it decides whether an internal step is enabled)."""

    @abstractmethod
    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> Val: ...

    @abstractmethod
    def classify_dispatch(
        self,
        needs_confirmation: Val,
        confirmed: Val,
        turn_live: Val,
        quarantined: Val,
        tool_unchanged: Val,
        permitted: Val,
    ) -> Val: ...

    @abstractmethod
    def event_is(self, event: Val, which: CallEvent) -> Val:
        """Whether a guard's result is ``which``."""


class Concrete(Ops):
    """Python values: the interpretation the explorer runs. Records every table entry a
    step exercises in :attr:`entries` (the explorer resets it per step)."""

    def __init__(self, table: Table, guards: Guards) -> None:
        super().__init__(table, guards)
        self.entries: list[TableEntry] = []

    def lit(self, value: Val) -> Val:
        return value

    def not_(self, x: Val) -> Val:
        return not x

    def and_(self, *xs: Val) -> Val:
        return all(xs)

    def or_(self, *xs: Val) -> Val:
        return any(xs)

    def ite(self, c: Val, a: Val, b: Val) -> Val:
        return a if c else b

    def eq(self, a: Val, b: Val) -> Val:
        return a == b

    def lt(self, a: Val, b: Val) -> Val:
        return bool(a < b)

    def add(self, a: Val, n: int) -> Val:
        return a + n

    def is_in(self, a: Val, values: Iterable[Val]) -> Val:
        return a in values

    def inc(self, a: Val, cap: int) -> Val:
        return min(a + 1, cap)

    def pick(self, c: Val, a: _NT, b: _NT) -> _NT:
        return a if c else b

    def pick_lazy(self, c: Val, make_a: Callable[[], _NT], b: _NT) -> _NT:
        return make_a() if c else b

    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        result = self.table[state][event]
        self.entries.append(TableEntry(state, event, result))
        if isinstance(result, State):
            return True, result
        return False, state

    def moves(self, state: Val, event: CallEvent) -> Val:
        return isinstance(self.table[state][event], State)

    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> Val:
        return self.guards.classify_open(turn_live, response_open, quarantined)

    def classify_dispatch(
        self,
        needs_confirmation: Val,
        confirmed: Val,
        turn_live: Val,
        quarantined: Val,
        tool_unchanged: Val,
        permitted: Val,
    ) -> Val:
        return self.guards.classify_dispatch(
            needs_confirmation, confirmed, turn_live, quarantined, tool_unchanged, permitted
        )

    def event_is(self, event: Val, which: CallEvent) -> Val:
        return event is which
