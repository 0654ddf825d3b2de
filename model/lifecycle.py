"""The lifecycle of one tool call, as data (in the style of h11's ``_state.py``).

The rules, from the spec (``seed-streaming-tool-call-assembly.txt``):

1. A call is **absent** until its protocol opens it; then it is **collecting**: fragments
   are transport data, appended to that call's own buffer and nothing else.
2. Only the call's **own terminal event**, with the stop reason ``completed``, makes it a
   **terminal candidate**. A terminal event permits one parse; it does not authorise
   execution. Any other stop reason fails the call.
3. The candidate is parsed once, strictly; then validated once against the tool's
   declaration *as it stands now* and the application's business rules. Either failure
   ends in **failed**.
4. A **validated** call is bound to its turn, actor and tenant. The dispatcher checks the
   turn, confirmation, tool state and operator controls again *at execution time*; only
   then is it **dispatched**, exactly once.
5. Cancellation, supersession by a new turn, disconnect, quarantine, a disabled or changed
   tool, a tenant stop and a restart move every call that is not yet terminal into
   **cancelled** or **failed**. **Dispatched**, **cancelled** and **failed** have no way
   out: a late terminal event, a replay or a restart never revives them.

The table below maps every ``(State, CallEvent)`` pair to one of three outcomes:

* ``State``: a transition;
* :class:`Ignored`: a delivery condition with no effect (a repeated fragment, a replayed
  terminal event, a cancel that arrives after the call is already over);
* :class:`Rejected`: the event is refused, recorded with a reason, and changes nothing.

Every pair is written out: ``tests/test_lifecycle.py`` proves the table is total. The
system rules that decide *which* ``CallEvent`` an input event means for a given call (is
the turn still current? is the tenant stopped?) sit in :mod:`callsafe.model.system`. The
diagrams (:mod:`callsafe.diagrams.model`), the state graph (:mod:`callsafe.formal.graph`)
and the oracle are all generated from this table, so the picture is the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "DISPATCHING",
    "NON_DISPATCHING",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "CallEvent",
    "Ignored",
    "Outcome",
    "Rejected",
    "State",
    "next_state",
    "outcome",
]


class State(StrEnum):
    """The seven lifecycle states of the spec."""

    ABSENT = "absent"
    COLLECTING = "collecting"
    TERMINAL_CANDIDATE = "terminal_candidate"
    VALIDATED = "validated"
    DISPATCHED = "dispatched"
    CANCELLED = "cancelled"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class CallEvent(StrEnum):
    """What an input (or an internal step) means for one call, once the system rules have
    resolved it against the call's context."""

    # --- from the protocol
    OPEN = "open"  # call opened in a live, current turn
    OPEN_BLOCKED = "open_blocked"  # opened in a turn that is over, a stopped tenant, a quarantined response
    FRAGMENT = "fragment"  # argument bytes at a new position, within the byte caps
    FRAGMENT_REPEAT = "fragment_repeat"  # a position already received, identical bytes
    FRAGMENT_CONFLICT = "fragment_conflict"  # a position already received, different bytes
    OVER_LIMIT = "over_limit"  # the call's or the turn's byte cap would be exceeded
    TERMINAL_COMPLETED = "terminal_completed"  # own terminal event, stop reason completed
    TERMINAL_STOPPED = "terminal_stopped"  # own terminal event: length, content filter, error
    TERMINAL_REPEAT = "terminal_repeat"  # a terminal event id already recorded (replay)
    RESPONSE_ENDED = "response_ended"  # the response ended without this call's terminal event
    # --- internal steps of the assembler
    PARSE_OK = "parse_ok"
    PARSE_FAILED = "parse_failed"  # trailing data, }{, truncation, a gap in positions, bad text
    VALID = "valid"  # schema (catalog as it stands now) and business rules pass
    INVALID = "invalid"  # schema or business failure, unknown, renamed or removed tool
    AWAIT_CONFIRMATION = "await_confirmation"  # dispatcher: the tool needs a confirmation first
    DISPATCH = "dispatch"  # dispatcher re-check at execution time passed: run it
    DISPATCH_BLOCKED = "dispatch_blocked"  # permission denied, or the re-check at execution time failed
    # --- from the user, the application and the operator
    CONFIRMED = "confirmed"
    DENIED = "denied"
    CANCEL = "cancel"  # the user cancelled the turn
    SUPERSEDE = "supersede"  # a new turn started in the conversation
    DISCONNECT = "disconnect"  # the stream's connection dropped
    QUARANTINE = "quarantine"  # operator quarantined the response
    DISABLE_TOOL = "disable_tool"  # operator disabled the tool
    STOP_TENANT = "stop_tenant"  # operator forced the tenant's buffers into cancellation
    CATALOG_CHANGE = "catalog_change"  # the tool was renamed, removed, or its schema changed
    RESTART = "restart"  # the process restarted

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Ignored:
    """A delivery condition: no state change, nothing to report beyond a counter."""

    why: str


@dataclass(frozen=True)
class Rejected:
    """The event is refused for this call, recorded with a reason; the state stays."""

    why: str


Outcome = State | Ignored | Rejected

S = State
E = CallEvent

TERMINAL_STATES: Final = frozenset({S.DISPATCHED, S.CANCELLED, S.FAILED})
NON_DISPATCHING: Final = frozenset({S.CANCELLED, S.FAILED})
DISPATCHING: Final = frozenset({S.DISPATCHED})

# Events that end an unfinished call, and the state each one ends it in. Shared by the
# rows of every non-terminal state below, so that "whatever stops a call, stops it" is
# written once. Cancelled: someone decided to stop it. Failed: the data or the process
# could not deliver a safe call.
_STOPS: Final[dict[CallEvent, State]] = {
    E.CANCEL: S.CANCELLED,
    E.SUPERSEDE: S.CANCELLED,
    E.QUARANTINE: S.CANCELLED,
    E.DISABLE_TOOL: S.CANCELLED,
    E.STOP_TENANT: S.CANCELLED,
    E.CATALOG_CHANGE: S.CANCELLED,
    E.DISCONNECT: S.FAILED,
    E.RESTART: S.FAILED,
}

_LATE_STOP = Ignored("the call is already over; a stop has nothing left to stop")


def _row(specific: dict[CallEvent, Outcome], default: Outcome) -> dict[CallEvent, Outcome]:
    """A full row: the specific outcomes, then the default for every other event."""
    return {event: specific.get(event, default) for event in CallEvent}


_NOT_A_CANDIDATE = Rejected("internal step for a call that is not at that stage")
# A repeated open of a call that is still in flight, arriving after its turn, response or
# tenant was stopped: the stop itself already moved the call on (see system.BROADCASTS).
_REOPEN = Ignored("repeated open; the stop that closed its turn reaches the call itself")

TRANSITIONS: Final[dict[State, dict[CallEvent, Outcome]]] = {
    S.ABSENT: _row(
        {
            E.OPEN: S.COLLECTING,
            E.OPEN_BLOCKED: S.CANCELLED,
            # Data for a call that was never opened: reject rather than guess its tool.
            E.FRAGMENT: S.FAILED,
            E.FRAGMENT_REPEAT: Rejected("no fragment was received for this call, so none repeats"),
            E.FRAGMENT_CONFLICT: Rejected("no fragment was received for this call, so none conflicts"),
            E.OVER_LIMIT: S.FAILED,
            E.TERMINAL_COMPLETED: S.FAILED,
            E.TERMINAL_STOPPED: S.FAILED,
            E.TERMINAL_REPEAT: Rejected("terminal event id already recorded; nothing to revive"),
            E.CONFIRMED: Rejected("confirmation for a call that does not exist"),
            E.DENIED: Rejected("confirmation for a call that does not exist"),
            **{stop: Ignored("nothing to stop: the call does not exist") for stop in _STOPS},
            E.RESPONSE_ENDED: Ignored("nothing to end: the call does not exist"),
        },
        _NOT_A_CANDIDATE,
    ),
    S.COLLECTING: _row(
        {
            E.OPEN: Ignored("the call is already open (repeated open event)"),
            E.OPEN_BLOCKED: _REOPEN,
            E.FRAGMENT: S.COLLECTING,
            E.FRAGMENT_REPEAT: Ignored("a repeated delta is a delivery condition, not new data"),
            E.FRAGMENT_CONFLICT: S.FAILED,
            E.OVER_LIMIT: S.FAILED,
            E.TERMINAL_COMPLETED: S.TERMINAL_CANDIDATE,
            E.TERMINAL_STOPPED: S.FAILED,
            E.TERMINAL_REPEAT: Rejected("terminal event id already recorded for another call"),
            E.RESPONSE_ENDED: S.FAILED,
            E.CONFIRMED: Rejected("confirmation before the call was validated"),
            E.DENIED: S.CANCELLED,
            **_STOPS,
        },
        _NOT_A_CANDIDATE,
    ),
    S.TERMINAL_CANDIDATE: _row(
        {
            E.OPEN: Ignored("the call is already open (repeated open event)"),
            E.OPEN_BLOCKED: _REOPEN,
            E.FRAGMENT: S.FAILED,  # data after the terminal event: the call was not finished
            E.FRAGMENT_REPEAT: Ignored("a repeated delta is a delivery condition, not new data"),
            E.FRAGMENT_CONFLICT: S.FAILED,
            E.OVER_LIMIT: S.FAILED,
            E.TERMINAL_COMPLETED: Rejected("a second terminal event with a new id for one call"),
            E.TERMINAL_STOPPED: S.FAILED,
            E.TERMINAL_REPEAT: Ignored("replayed terminal event: already recorded"),
            E.RESPONSE_ENDED: Ignored("the call has its own terminal event"),
            E.PARSE_OK: S.TERMINAL_CANDIDATE,
            E.PARSE_FAILED: S.FAILED,
            E.VALID: S.VALIDATED,
            E.INVALID: S.FAILED,
            E.CONFIRMED: Rejected("confirmation before the call was validated"),
            E.DENIED: S.CANCELLED,
            **_STOPS,
        },
        _NOT_A_CANDIDATE,
    ),
    S.VALIDATED: _row(
        {
            E.OPEN: Ignored("the call is already open (repeated open event)"),
            E.OPEN_BLOCKED: _REOPEN,
            E.FRAGMENT: S.FAILED,
            E.FRAGMENT_REPEAT: Ignored("a repeated delta is a delivery condition, not new data"),
            E.FRAGMENT_CONFLICT: S.FAILED,
            E.OVER_LIMIT: S.FAILED,
            E.TERMINAL_COMPLETED: Rejected("a second terminal event with a new id for one call"),
            E.TERMINAL_STOPPED: S.FAILED,
            E.TERMINAL_REPEAT: Ignored("replayed terminal event: already recorded"),
            E.RESPONSE_ENDED: Ignored("the call has its own terminal event"),
            E.AWAIT_CONFIRMATION: S.VALIDATED,
            E.CONFIRMED: S.VALIDATED,
            E.DENIED: S.CANCELLED,
            E.DISPATCH: S.DISPATCHED,
            E.DISPATCH_BLOCKED: S.CANCELLED,
            **_STOPS,
        },
        _NOT_A_CANDIDATE,
    ),
    S.DISPATCHED: _row(
        {
            E.OPEN: Ignored("the call is already open (repeated open event)"),
            E.OPEN_BLOCKED: _LATE_STOP,
            E.FRAGMENT: Rejected("fragment for a call that already ran"),
            E.FRAGMENT_REPEAT: Ignored("a repeated delta is a delivery condition, not new data"),
            E.FRAGMENT_CONFLICT: Rejected("fragment for a call that already ran"),
            E.OVER_LIMIT: Rejected("fragment for a call that already ran"),
            E.TERMINAL_COMPLETED: Rejected("the call already ran"),
            E.TERMINAL_STOPPED: Rejected("the call already ran"),
            E.TERMINAL_REPEAT: Ignored("replayed terminal event: already dispatched once"),
            E.RESPONSE_ENDED: Ignored("the call already ran"),
            E.CONFIRMED: Rejected("the call already ran"),
            E.DENIED: Rejected("the call already ran"),
            **{stop: _LATE_STOP for stop in _STOPS},
        },
        _NOT_A_CANDIDATE,
    ),
    S.CANCELLED: _row(
        {
            E.OPEN: Rejected("the call was cancelled"),
            E.OPEN_BLOCKED: _LATE_STOP,
            E.FRAGMENT: Rejected("fragment for a cancelled call: it stays inert"),
            E.FRAGMENT_REPEAT: Rejected("fragment for a cancelled call: it stays inert"),
            E.FRAGMENT_CONFLICT: Rejected("fragment for a cancelled call: it stays inert"),
            E.OVER_LIMIT: Rejected("fragment for a cancelled call: it stays inert"),
            E.TERMINAL_COMPLETED: Rejected("late terminal event for a cancelled call"),
            E.TERMINAL_STOPPED: Rejected("late terminal event for a cancelled call"),
            E.TERMINAL_REPEAT: Rejected("late terminal event for a cancelled call"),
            E.RESPONSE_ENDED: _LATE_STOP,
            E.CONFIRMED: Rejected("confirmation for a cancelled call"),
            E.DENIED: _LATE_STOP,
            **{stop: _LATE_STOP for stop in _STOPS},
        },
        _NOT_A_CANDIDATE,
    ),
    S.FAILED: _row(
        {
            E.OPEN: Rejected("the call failed"),
            E.OPEN_BLOCKED: _LATE_STOP,
            E.FRAGMENT: Rejected("fragment for a failed call: it stays inert"),
            E.FRAGMENT_REPEAT: Rejected("fragment for a failed call: it stays inert"),
            E.FRAGMENT_CONFLICT: Rejected("fragment for a failed call: it stays inert"),
            E.OVER_LIMIT: Rejected("fragment for a failed call: it stays inert"),
            E.TERMINAL_COMPLETED: Rejected("late terminal event for a failed call"),
            E.TERMINAL_STOPPED: Rejected("late terminal event for a failed call"),
            E.TERMINAL_REPEAT: Rejected("late terminal event for a failed call"),
            E.RESPONSE_ENDED: _LATE_STOP,
            E.CONFIRMED: Rejected("confirmation for a failed call"),
            E.DENIED: _LATE_STOP,
            **{stop: _LATE_STOP for stop in _STOPS},
        },
        _NOT_A_CANDIDATE,
    ),
}

# Which internal steps belong to which state: the dispatcher and the parser only ever act
# on calls at that stage. Used by the explorer to enumerate internal actions.
INTERNAL_STEPS: Final[dict[State, tuple[CallEvent, ...]]] = {
    S.TERMINAL_CANDIDATE: (E.PARSE_OK, E.PARSE_FAILED, E.VALID, E.INVALID),
    S.VALIDATED: (E.AWAIT_CONFIRMATION, E.DISPATCH, E.DISPATCH_BLOCKED),
}


def outcome(state: State, event: CallEvent) -> Outcome:
    """The table entry for ``(state, event)``."""
    return TRANSITIONS[state][event]


def next_state(state: State, event: CallEvent) -> State:
    """The state after ``event``: the table's target, or ``state`` when the event is
    ignored or rejected."""
    result = TRANSITIONS[state][event]
    return result if isinstance(result, State) else state
