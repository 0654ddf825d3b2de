"""What the sans-IO core asks the world to do: effects, and the durable facts among them.

Why effects: the core (:mod:`callsafe.reference_impl.core`) decides; it never performs
I/O. Everything that touches the world is a small value returned from
``receive``, performed in order by a driver (:mod:`callsafe.reference_impl.driver`):

* :class:`Fact` subclasses are **durable**: the driver writes every fact between two
  questions (or the executor) in one transaction before it performs any outward effect
  of that stretch, so nothing observable happens before the decision behind it is
  durable, and no input's decisions are ever half written.
* :class:`ValidateBusiness` and :class:`Claim` are **questions**: the driver answers them
  through :meth:`Core.business_result` and :meth:`Core.claim_result`. The business
  validator may deliver other events while it runs (a cancel, an operator stop), which is
  why the answer comes back as a separate call and the core re-checks the call's state.
* the rest are outward: run a tool, ask for confirmation, show a status, report a ledger
  or audit row, log a line.

Effects are values: the core builds each one and never touches it again, and neither does
a driver or a store. They are not ``frozen`` dataclasses because, on CPython 3.11, a frozen
dataclass pays an ``object.__setattr__`` call per field when it is built (about four
times the cost of a plain one): a small call makes a dozen effects, and freezing them cost
about a tenth of what the core spends on such a call. :class:`LedgerEntry`, the one value a
store keeps and hands back to readers, is a ``NamedTuple``: immutable, and cheap to build.
No effect other than :class:`ValidateBusiness`, :class:`RequestConfirmation` and
:class:`Dispatch` carries argument values, and each of those carries an object no one
else holds: a copy, or (for :class:`Dispatch`) the parsed value the core lets go of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import CallKey

__all__ = [
    "Audit",
    "BindTurn",
    "Claim",
    "Dispatch",
    "Effect",
    "EndResponse",
    "Fact",
    "Ledger",
    "LedgerEntry",
    "Log",
    "OpenCall",
    "RecordAudit",
    "RecordDecision",
    "RecordDisabledTool",
    "RecordDisplay",
    "RecordLedger",
    "RecordOutcome",
    "RecordProgress",
    "RecordQuarantine",
    "RecordTenantStop",
    "RecordTerminalId",
    "RequestConfirmation",
    "SetTurnStatus",
    "Status",
    "ValidateBusiness",
]


class LedgerEntry(NamedTuple):
    """One assembly decision, as the ledger keeps it: never argument values. ``decision``
    is ``dispatched``, ``cancelled``, ``failed`` or ``awaiting_confirmation``."""

    key: CallKey
    fragments: int
    terminal_reason: str | None
    parse: str
    validation: str
    decision: str
    traceparent: str | None


class Effect:
    """Base of everything the core returns."""

    __slots__ = ()


class Fact(Effect):
    """A durable change; consecutive facts are written in one store transaction."""

    __slots__ = ()


# -- questions --------------------------------------------------------------------------


@dataclass(slots=True)
class ValidateBusiness(Effect):
    """Run the application's business validator once for this final call; answer with
    ``core.business_result(key, problem_or_none)``."""

    key: CallKey
    tool: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Claim(Effect):
    """The dispatcher's re-check passed in memory: claim the call in the store, atomically
    (exactly one claimer, across replicas and restarts), recording ``entry`` with it;
    answer with ``core.claim_result(key, result)``."""

    key: CallKey
    tool: str
    entry: LedgerEntry


# -- outward ----------------------------------------------------------------------------


@dataclass(slots=True)
class Dispatch(Effect):
    """Run the tool (the claim is already durable)."""

    key: CallKey
    actor: str
    tool: str
    arguments: dict[str, Any]
    traceparent: str | None


@dataclass(slots=True)
class RequestConfirmation(Effect):
    """Ask the user to confirm this validated call."""

    key: CallKey
    tool: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Status(Effect):
    """Show the user a status for a turn: preparing, awaiting_confirmation, done, retry,
    handoff."""

    turn: str
    status: str


@dataclass(slots=True)
class Ledger(Effect):
    """Report a ledger row (already durable through :class:`RecordDecision`,
    :class:`RecordLedger` or the claim)."""

    entry: LedgerEntry


@dataclass(slots=True)
class Audit(Effect):
    """Report an operator control (already durable through :class:`RecordAudit`)."""

    action: str
    reason: str
    keys: tuple[CallKey, ...]


@dataclass(slots=True)
class Log(Effect):
    """A diagnostic line: identifiers and fixed wording only, never argument text."""

    text: str


# -- durable facts ----------------------------------------------------------------------


@dataclass(slots=True)
class BindTurn(Fact):
    """A new turn: its binding, and it becomes its conversation's current turn."""

    turn: str
    actor: str
    tenant: str
    conversation: str
    traceparent: str | None


@dataclass(slots=True)
class SetTurnStatus(Fact):
    """A live turn stopped being live: ``cancelled``, ``superseded`` or ``stopped``."""

    turn: str
    status: str


@dataclass(slots=True)
class RecordProgress(Fact):
    """A fragment was accepted: the turn's byte total (the per-turn cap survives a
    restart) and the call's fragment count and bytes (for the ledger after a restart).

    The one effect made per fragment, written by :meth:`Store.progress`. It carries the
    call's ``(turn, response, item, call)`` as well as its key: the core holds that tuple
    already, and a store that keys its rows by it need not build it again per fragment."""

    turn: str
    turn_bytes: int
    key: CallKey
    fragments: int
    call_bytes: int
    ident: tuple[str, str, str, str]


@dataclass(slots=True)
class RecordDisplay(Fact):
    """What the turn's status shows, and whether a call of it stopped or ran; kept so
    that the visible status stays truthful across a restart."""

    turn: str
    shown: str
    stopped: bool
    executed: bool


@dataclass(slots=True)
class OpenCall(Fact):
    """A call is collecting: after a restart it fails, never becomes a candidate.

    ``owner``: the lease identity of the core that opened it (None: a core without a
    lease, whose every call is its own); a starting or resyncing core fails only its own
    calls and those whose owner's lease expired (:mod:`~callsafe.reference_impl.leases`)."""

    key: CallKey
    tool: str
    owner: str | None = None


@dataclass(slots=True)
class RecordDecision(Fact):
    """A call reached a terminal state other than by the dispatch claim; the ledger row
    is written in the same transaction. The first terminal decision for a key wins."""

    key: CallKey
    tool: str | None
    state: State
    why: str
    entry: LedgerEntry


@dataclass(slots=True)
class RecordLedger(Fact):
    """A ledger row for a decision that is not terminal (awaiting confirmation)."""

    entry: LedgerEntry
    why: str


@dataclass(slots=True)
class RecordOutcome(Fact):
    """The executor came back for a dispatched call: ``returned``, or ``raised <type>``.

    Written by the driver, never by the core (the core does not see the executor), in
    the first transaction after the executor returns. The claim is the intent record and
    this is its completion: a claim without an outcome is an execution whose outcome is
    unknown (the process died between the two, or the executor is still running), which
    :meth:`~callsafe.reference_impl.store.Store.unknown_outcomes` lists for an operator.
    Never an argument value: the outcome is a fixed word and an exception's type name."""

    key: CallKey
    outcome: str


@dataclass(slots=True)
class RecordTerminalId(Fact):
    """A terminal event id was delivered: a replay of it can never dispatch again."""

    event_id: str


@dataclass(slots=True)
class EndResponse(Fact):
    """The response ended or its connection dropped: no call may open on it."""

    turn: str
    response: str


@dataclass(slots=True)
class RecordQuarantine(Fact):
    response: str
    reason: str


@dataclass(slots=True)
class RecordDisabledTool(Fact):
    tool: str
    reason: str


@dataclass(slots=True)
class RecordTenantStop(Fact):
    tenant: str
    reason: str


@dataclass(slots=True)
class RecordAudit(Fact):
    """An operator control, its reason and the call keys it stopped."""

    action: str
    reason: str
    keys: tuple[CallKey, ...]
