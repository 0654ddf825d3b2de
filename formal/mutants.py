"""Deliberately wrong models: what weak implementations do, as edits of the model.

Why: a checker that never fails proves nothing about itself. Each mutant is a small,
named edit of the lifecycle table or of a guard, the way a weak implementation differs
from the spec ("the dispatcher checks only that the arguments are complete", "terminal
ids live in memory"). Every checker must find each mutant's counterexample, and they must
agree: the explicit-state explorer (:mod:`callsafe.formal.graph`), z3
(:mod:`callsafe.formal.z3_proof`) and TLC (:mod:`callsafe.formal.tla`) each read the same
edited table and guards, so they find the same shortest counterexample
(``tests/test_formal_mutants.py``).

Mutants are data, never monkeypatches: :meth:`Mutant.model` builds a
:class:`~callsafe.formal.abstract.SystemModel` with its own table and guards, so mutants
can be checked side by side, in any process.

A mutant whose table lets a call out of a terminal state is explored without
canonicalisation: forgetting a terminal call's details is sound only because nothing
leaves a terminal state.

:data:`MASKED` holds single faults the model's defence in depth hides: each is wrong, and
yet no state invariant can break, because another rule stops the call first (the
dispatcher's turn check is redundant while every stop also reaches the call). Every checker
must agree that they are safe; an implementation certified with them must still have the
second rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from callsafe.formal.abstract import CONTROLS, Config, SystemModel
from callsafe.formal.ops import Guards, Table
from callsafe.model import lifecycle
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, Ignored, Outcome, State

__all__ = ["MASKED", "MUTANTS", "Mutant", "all_mutants", "mutant"]

E = CallEvent
S = State

_ALL: Final = frozenset(CONTROLS)


def _without(*controls: str) -> frozenset[str]:
    return _ALL - set(controls)


@dataclass(frozen=True)
class Mutant:
    """A wrong model: ``edits`` replace table entries, ``guards`` rewrites the guards.
    ``config`` is a small configuration in which the fault shows (or, for a masked one,
    would show if anything could); ``breaks`` the invariants it is expected to break."""

    name: str
    description: str
    config: Config
    edits: Mapping[tuple[State, CallEvent], Outcome] = field(default_factory=dict)
    guards: Callable[[Guards], Guards] | None = None
    breaks: frozenset[str] = frozenset()

    def table(self) -> Table:
        table = {state: dict(row) for state, row in lifecycle.TRANSITIONS.items()}
        for (state, event), result in self.edits.items():
            table[state][event] = result
        return table

    def revives(self) -> bool:
        """Whether the edited table lets a call out of a terminal state."""
        return any(s in TERMINAL_STATES and isinstance(r, State) and r is not s for (s, _), r in self.edits.items())

    def model(self, config: Config | None = None) -> SystemModel:
        guards = Guards.default()
        if self.guards is not None:
            guards = self.guards(guards)
        return SystemModel(config or self.config, self.table(), guards, canonicalise=not self.revives())


def _ignores_turn(g: Guards) -> Guards:
    """The dispatcher checks everything but whether the turn is still live and current."""
    dispatch = g.classify_dispatch
    return Guards(g.classify_open, lambda n, c, live, q, u, p: dispatch(n, c, True, q, u, p))


def _ignores_confirmation(g: Guards) -> Guards:
    """The dispatcher never waits for a confirmation."""
    dispatch = g.classify_dispatch
    return Guards(g.classify_open, lambda n, c, live, q, u, p: dispatch(False, c, live, q, u, p))


_CANCEL_IS_A_FLAG = Ignored("mutant: a cancel only marks the turn; buffers go on")

MUTANTS: Final[dict[str, Mutant]] = {
    m.name: m
    for m in (
        Mutant(
            "dispatch-ignores-turn",
            "The spec's counterexample: a cancel only marks the turn (buffers go on collecting) and the dispatcher"
            " checks only that the arguments are complete, so a delayed final delta completes a call after stop.",
            Config(1, 1, 1, frozenset({"cancel"}), 0),
            {(s, E.CANCEL): _CANCEL_IS_A_FLAG for s in (S.COLLECTING, S.TERMINAL_CANDIDATE, S.VALIDATED)},
            _ignores_turn,
            frozenset({"INV-TURN"}),
        ),
        Mutant(
            "restart-forgets",
            "Terminal event ids and decisions are kept in memory only: after a restart, a replayed call is new"
            " to the process and is validated and executed again.",
            Config(1, 1, 1, frozenset({"restart"}), 1),
            {(s, E.RESTART): S.ABSENT for s in TERMINAL_STATES},
            None,
            # a dispatched call forgotten is "absent with an execution" (INV-CANCEL); validated and
            # executed again, with a validation count of two at its second dispatch (INV-TERMINAL)
            frozenset({"INV-CANCEL", "INV-ONCE", "INV-TERMINAL", "INV-VALIDATE-ONCE"}),
        ),
        Mutant(
            "late-terminal-revives",
            "A late terminal event revives a cancelled or failed call because its JSON happens to parse.",
            Config(1, 1, 1, frozenset({"disconnect"}), 0),
            {(s, E.TERMINAL_COMPLETED): S.TERMINAL_CANDIDATE for s in (S.CANCELLED, S.FAILED)},
            None,
            frozenset({"INV-CANCEL"}),
        ),
        Mutant(
            "dispatch-from-candidate",
            "The call runs on its terminal event: before its arguments are parsed and validated.",
            Config(1, 1, 1, frozenset(), 0),
            {(S.TERMINAL_CANDIDATE, E.DISPATCH): S.DISPATCHED},
            None,
            frozenset({"INV-TERMINAL"}),
        ),
        Mutant(
            "validate-twice",
            "The business validator runs again at dispatch time (side effects twice, a check that can flip).",
            Config(1, 1, 1, frozenset(), 0),
            {(S.VALIDATED, E.VALID): S.VALIDATED},
            None,
            frozenset({"INV-VALIDATE-ONCE", "INV-TERMINAL"}),  # then dispatched after two validations
        ),
        Mutant(
            "skip-confirmation",
            "The dispatcher runs a call that needs a confirmation without waiting for it.",
            Config(1, 1, 1, frozenset({"confirmation"}), 0),
            {},
            _ignores_confirmation,
            frozenset({"INV-CONFIRM"}),
        ),
        Mutant(
            "reconnect-reopens",
            "A reconnect that re-delivers the open event gives a failed or cancelled call a fresh buffer: after a"
            " restart, the call collects again and runs.",
            Config(1, 1, 1, frozenset({"restart", "replay"}), 1),
            {(s, E.OPEN): S.COLLECTING for s in (S.CANCELLED, S.FAILED)},
            None,
            frozenset({"INV-CANCEL", "INV-VALIDATE-ONCE"}),  # a call failed by validation is validated again
        ),
        Mutant(
            "confirm-revives-denied",
            "A confirmation that races a denial (or a stop) brings the cancelled call back to validated.",
            Config(1, 1, 1, frozenset({"confirmation"}), 0),
            {(S.CANCELLED, E.CONFIRMED): S.VALIDATED},
            None,
            frozenset({"INV-CANCEL"}),
        ),
        Mutant(
            "dispatch-twice",
            "No durable dispatch decision: a second worker (or a retry) dispatches a dispatched call again.",
            Config(1, 1, 1, frozenset(), 0),
            {(S.DISPATCHED, E.DISPATCH): S.DISPATCHED},
            None,
            frozenset({"INV-ONCE", "INV-TERMINAL"}),  # the second dispatch is not of a fresh validated call
        ),
    )
}

MASKED: Final[dict[str, Mutant]] = {
    m.name: m
    for m in (
        Mutant(
            "no-turn-guard",
            "The dispatcher does not check the turn at execution time. Masked: every stop also moves the call to"
            " cancelled, so no validated call of a dead turn is left to dispatch.",
            Config(1, 2, 1, frozenset({"cancel", "stop_tenant"}), 0),
            {},
            _ignores_turn,
        ),
        Mutant(
            "cancel-is-a-flag",
            "A cancel only marks the turn; buffers go on. Masked: the dispatcher's turn check refuses the call.",
            Config(1, 1, 1, frozenset({"cancel"}), 0),
            {(s, E.CANCEL): _CANCEL_IS_A_FLAG for s in (S.COLLECTING, S.TERMINAL_CANDIDATE, S.VALIDATED)},
        ),
    )
}


def all_mutants() -> dict[str, Mutant]:
    """The mutants that break an invariant and the masked ones, by name."""
    return {**MUTANTS, **MASKED}


def mutant(name: str) -> Mutant:
    """The mutant called ``name``; raises KeyError listing the known names."""
    known = all_mutants()
    if name not in known:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
