"""The sans-IO assembler core: ``receive(event) -> effects``, in the style of h11.

Why sans-IO: the same decisions must hold under a test harness, a web server, several
replicas and a restart. So the core only *decides*; it holds no connection, thread or
clock, and everything that touches the world (the store, the business validator, the
executor, what people see) is an effect (:mod:`callsafe.reference_impl.effects`) that a
driver performs. Questions come back as method calls: :meth:`Core.business_result`
answers :class:`~callsafe.reference_impl.effects.ValidateBusiness`, :meth:`Core.claim_result`
answers :class:`~callsafe.reference_impl.effects.Claim`.

Why it cannot drift from the model: every state change goes through the lifecycle table
(``TRANSITIONS`` of :mod:`callsafe.model.lifecycle`); which lifecycle event an input
means comes from the model's guards (``classify_open``, ``classify_fragment``,
``classify_terminal``, ``classify_dispatch``), from its broadcast rules (``BROADCASTS``:
whom a cancel, a new turn or an operator control reaches) and from its definition of a
live turn (``SystemState.turn_live``); the rules and ``turn_live`` read this core's own
``turns`` and ``current``, which have the model's shapes for that reason. Parsing is the
model's ``strict_parse``; schema checks answer what the model's ``schema_errors`` answers
(:mod:`~callsafe.reference_impl.schema_check`: a compiled validator may only say "valid",
and only where it is known to be no looser than jsonschema). What is written here is
bookkeeping: buffers, byte counts, durability, the ledger and the status. The few
lines that mirror a model handler (a new turn becomes its conversation's current turn and
supersedes the previous one; a tenant stop closes the tenant's live turns) are held to
the model by the conformance tests, which run every trace through both.

Not thread-safe: one core per replica, driven by one thread at a time (replicas share
the store, whose claim is what makes them safe together).

The processing order is the model's (:class:`callsafe.model.system.Semantics`): an
input's broadcast first, then its own handler; internal steps (parse, validate,
dispatch) run eagerly, right after the input that enables them. The business validator
is the one place where other inputs can arrive in between; when its answer comes back
the core re-checks the call's state, and a call stopped meanwhile stays stopped.

Memory: calls in flight keep a buffer; calls that reached a terminal state leave active
assembly and keep one ``State`` each (the bounded metadata that lets late events be
rejected by the table); everything else about them is in the store's ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Final, cast

from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, CallEvent, Outcome, Rejected, State
from callsafe.model.system import (
    BROADCASTS,
    Broadcast,
    ParseFailure,
    SystemState,
    classify_dispatch,
    classify_fragment,
    classify_open,
    classify_terminal,
    strict_parse,
    utf8_len,
)
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    Fragment,
    Limits,
    QuarantineResponse,
    ResponseTerminal,
    Restart,
    StopTenant,
    TextFragment,
    ToolChanged,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.buffer import DEFAULT_SCAN_EVERY, ArgumentBuffer
from callsafe.reference_impl.effects import (
    Audit,
    BindTurn,
    Claim,
    Dispatch,
    Effect,
    EndResponse,
    Ledger,
    LedgerEntry,
    Log,
    OpenCall,
    RecordAudit,
    RecordDecision,
    RecordDisabledTool,
    RecordDisplay,
    RecordLedger,
    RecordProgress,
    RecordQuarantine,
    RecordTenantStop,
    RecordTerminalId,
    RequestConfirmation,
    SetTurnStatus,
    Status,
    ValidateBusiness,
)
from callsafe.reference_impl.errors import CallLimitExceeded, ModelDriftError, UnsupportedEvent
from callsafe.reference_impl.redaction import copy_json, redact_schema_problem
from callsafe.reference_impl.schema_check import SchemaCheck
from callsafe.reference_impl.store import CallRow, ClaimResult, Ident, Snapshot, ident_of

__all__ = ["CallView", "Core", "TurnState"]

# The table's states and events by attribute (``S.COLLECTING``, ``E.FRAGMENT``): the very
# same members, held in plain namespaces rather than read off the enum classes, because in
# Python 3.11 every attribute read on an enum class goes through ``EnumType.__getattr__``'s
# slow hook (about 0.2 us: more than the rest of a fragment's bookkeeping).
S = cast("type[State]", SimpleNamespace(**State.__members__))
E = cast("type[CallEvent]", SimpleNamespace(**CallEvent.__members__))

# The core keeps only a State for a call that left active assembly. That is sound only
# while the table gives terminal states no way out; checked here, from the table, so a
# change to the model fails loudly at import instead of silently reviving calls.
if any(isinstance(o, State) and o is not s for s in TERMINAL_STATES for o in TRANSITIONS[s].values()):
    raise ModelDriftError("the lifecycle table lets a terminal state change; the core keeps no buffer for those")

_NOTHING: Final[tuple[Effect, ...]] = ()
# How many turns that are over the core still keeps whole (``forget_over_turns``), oldest
# forgotten first: the replay window. Within it, a late or replayed event for an over turn
# is answered exactly as the model answers it (a late fragment rejected, a call opened
# after a cancel refused with its ledger row); past it, the turn is unknown here and its
# events are dropped (nothing of it can run: the store's claim re-checks the turn).
OVER_TURNS_KEPT: Final = 1024
# What the per-fragment path compares with, as module constants (one global read each).
_FRAGMENT: Final = CallEvent.FRAGMENT
_COLLECTING: Final = State.COLLECTING
# A state's ledger word, read from a dict: ``State.value`` is a descriptor call (enum's
# ``property``) that costs more than the lookup.
_DECISION: Final = {state: state.value for state in State}

# Which status a stop offers the user: an operator or product hold hands off to a person;
# everything else (the user's own cancel, a dropped stream, a bad or truncated answer, a
# restart) can simply be retried.
_HANDOFF_EVENTS: Final = frozenset(
    {E.QUARANTINE, E.DISABLE_TOOL, E.STOP_TENANT, E.CATALOG_CHANGE, E.OVER_LIMIT, E.DISPATCH_BLOCKED}
)
_QUIET_STATUSES: Final = frozenset({"preparing", "awaiting_confirmation"})

_FRAGMENT_WHY: Final = {
    E.FRAGMENT_CONFLICT: "conflicting fragment at a position already received",
    E.OVER_LIMIT: "byte limit exceeded",
    E.FRAGMENT: "fragment after the terminal event",
}


@dataclass(slots=True)
class TurnState:
    """A turn's binding and status (``live``, ``cancelled``, ``superseded``, ``stopped``),
    its byte total against the per-turn cap, and what its visible status shows."""

    turn: str
    actor: str
    tenant: str
    conversation: str
    traceparent: str | None
    status: str = "live"
    bytes: int = 0
    shown: str = ""
    stopped: bool = False  # a call of this turn ended without running
    executed: bool = False  # a call of this turn ran
    # What the core forgets with the turn once it is over (``forget_over_turns``): its
    # decided calls, its terminal event ids and its ended responses; and the counts the
    # call caps read.
    idents: list[Ident] = field(default_factory=list)
    terminal_ids: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)
    active: int = 0  # calls of the turn in active assembly
    calls: int = 0  # calls opened in the turn (the per-turn cap)
    response_calls: dict[str, int] = field(default_factory=dict)  # per response (its cap)


@dataclass(slots=True)
class _Call:
    """A call in active assembly. ``key`` and ``tool`` are what the model's broadcast
    rules read."""

    key: CallKey
    ident: Ident
    tool: str | None
    state: State
    buffer: ArgumentBuffer
    fragments: int = 0
    bytes: int = 0
    terminal_reason: str | None = None
    arguments: dict[str, Any] | None = None
    parse: str = "not parsed"
    validation: str = "not validated"
    validated_spec: ToolSpec | None = None
    confirmation_requested: bool = False
    confirmed: bool = False
    awaiting_business: bool = False
    claiming: bool = False
    # The ledger entry the claim wrote: the dispatched call's ledger row is that very row
    # (nothing about the call changes between the claim and its answer, which the driver
    # gives straight back), so it is reported as it was written rather than built again.
    claim_entry: LedgerEntry | None = None
    # TRANSITIONS[state][FRAGMENT], kept in step with ``state`` by Core._fire: the table
    # lookup the per-fragment path needs, without hashing two enums per fragment.
    on_fragment: Outcome | None = None

    def __post_init__(self) -> None:
        self.on_fragment = TRANSITIONS[self.state][E.FRAGMENT]


@dataclass(frozen=True, slots=True)
class CallView:
    """A read-only description of one call for operators and tests: never its bytes."""

    key: CallKey
    state: State
    tool: str | None
    fragments: int
    bytes: int
    doomed: str | None


def _rules_for(event_type: type[Event]) -> tuple[Broadcast, ...]:
    return tuple(rule for rule in BROADCASTS if issubclass(event_type, rule.event_type))


class Core:
    """The assembler. ``tools`` is the live catalog (read at validation and dispatch
    time, as it stands); ``snapshot`` is what the store remembers (after a restart)."""

    def __init__(
        self,
        tools: Mapping[str, ToolSpec],
        limits: Limits,
        snapshot: Snapshot | None = None,
        *,
        scan_every: int = DEFAULT_SCAN_EVERY,
        owner: str | None = None,
        forget_over_turns: bool = False,
        over_turns_kept: int = OVER_TURNS_KEPT,
        turn_calls: int | None = None,
        response_calls: int | None = None,
    ) -> None:
        self.tools = tools
        # The lease identity this core opens calls under (None: no lease, every call in the
        # store is this core's). With one, the open calls of other owners in a snapshot are
        # theirs to finish: never loaded, never failed here (a live replica's calls); the
        # calls of an owner whose lease expired are first adopted in the store
        # (``LeaseStore.adopt_orphans``), which makes them this core's own.
        self.owner = owner
        # Bounded memory (``forget_over_turns``): a turn that is over (no longer live, no
        # call of it in active assembly) is kept whole for ``over_turns_kept`` more over
        # turns (the replay window, OVER_TURNS_KEPT), then dropped with everything kept for
        # its calls. Late events for a dropped turn meet an unknown turn and are dropped
        # (its decisions are in the store, whose claim re-checks the turn and whose first
        # decision stands). Off by default: the reference keeps every turn; the guard
        # turns it on.
        self._forget = forget_over_turns
        self._keep_over = max(0, over_turns_kept)
        self._ending: set[str] = set()  # turns that may have become over during this input
        self._over: dict[str, None] = {}  # over turns still kept whole, oldest first
        # Caps on calls opened per turn and per response (None: none): a call beyond them
        # is refused with CallLimitExceeded before anything changes.
        self._turn_calls = turn_calls
        self._response_calls = response_calls
        self.limits = limits
        # The caps as the core's own ints: read for every fragment, where two reads on the
        # model's Limits cost as much as the rest of the byte accounting.
        self._call_cap = limits.call_bytes
        self._turn_cap = limits.turn_bytes
        self.scan_every = scan_every
        # ``turns`` and ``current`` are read by the model's own rules (the supersession
        # broadcast, ``SystemState.turn_live``), so they have the model's shapes:
        # turn -> record, and (tenant, conversation) -> current turn.
        self.turns: dict[str, TurnState] = {}
        self.current: dict[tuple[str, str], str] = {}
        self._active: dict[Ident, _Call] = {}
        self._decided: dict[Ident, State] = {}
        self._terminal_ids: set[str] = set()
        self._ended: set[tuple[str, str]] = set()
        self._quarantined: set[str] = set()
        self._disabled: set[str] = set()
        self._rules: dict[type[Event], tuple[Broadcast, ...]] = {}
        self._unknown_outcomes: list[CallKey] = []
        self._schema_errors = SchemaCheck()
        self._handlers: dict[type[Event], Callable[[Any], Sequence[Effect]]] = {
            TurnStarted: self._on_turn_started,
            CallOpened: self._on_call_opened,
            TextFragment: self._on_text_fragment,
            CallTerminal: self._on_call_terminal,
            ResponseTerminal: self._on_response_terminal,
            CancelTurn: self._on_cancel_turn,
            Disconnect: self._on_disconnect,
            ToolChanged: self._on_tool_changed,
            Confirm: self._on_confirm,
            QuarantineResponse: self._on_quarantine_response,
            DisableTool: self._on_disable_tool,
            StopTenant: self._on_stop_tenant,
            Restart: self._on_restart,
        }
        if snapshot is not None:
            self._restore(snapshot)

    # ------------------------------------------------------------------------------
    # public surface
    # ------------------------------------------------------------------------------

    def start(self) -> Sequence[Effect]:
        """Effects of coming up: calls that were in flight when the process stopped fail
        (the model's ``restart`` broadcast); nothing terminal becomes a candidate. Every
        claim the store holds without an outcome (the process died between the claim and
        the executor's return, or another replica's executor is still running) is logged
        for an operator: that tool may or may not have run, and nothing here will run it
        again."""
        if not self._active and not self._unknown_outcomes:
            if self._ending:
                self._forget_over()
            return _NOTHING
        effects: list[Effect] = []
        if self._active:
            self._broadcast(Restart(), effects)
        for key in self._unknown_outcomes:
            effects.append(Log(f"{key}: dispatched, no outcome recorded: whether the tool ran is unknown"))
        self._unknown_outcomes = []
        if self._ending:
            self._forget_over()
        return effects

    def take_over(self, rows: Sequence[CallRow]) -> Sequence[Effect]:
        """Calls adopted from an instance whose lease expired (a crashed replica): they fail
        as that instance's restart would have failed them (the model's ``restart``
        broadcast, applied to these calls only). A call this core already holds is left
        alone; a terminal row is only remembered."""
        adopted: list[_Call] = []
        for row in rows:
            ident = ident_of(row.key)
            if ident in self._active or ident in self._decided:
                continue
            if row.state in TERMINAL_STATES:
                self._decided[ident] = row.state
                continue
            call = _Call(row.key, ident, row.tool, row.state, ArgumentBuffer(0), row.fragments, row.bytes)
            self._active[ident] = call
            turn = self.turns.get(row.key.turn)
            if turn is not None:
                turn.active += 1
            adopted.append(call)
        effects: list[Effect] = []
        if adopted:
            self._broadcast(Restart(), effects, among=adopted)
        if self._ending:
            self._forget_over()
        return effects

    def resync(self, snapshot: Snapshot) -> Sequence[Effect]:
        """After a store write failed: take the store's word over this core's memory.

        Why: the core decides before the driver writes, so a failed write leaves memory
        ahead of the store (a call opened, a terminal event seen, a decision taken that
        the store never got). Everything this core holds is dropped and rebuilt from
        ``snapshot``, exactly as a restart rebuilds it, and the effects of coming up are
        returned: calls that were in flight fail (the model's ``restart`` broadcast, a
        non-dispatching state with a ``retry`` status); nothing is left undecided in memory
        that the store does not hold too."""
        for call in self._active.values():
            call.buffer.drop()
        self.turns.clear()
        self._active.clear()
        self._decided.clear()
        self._ending.clear()
        self._restore(snapshot)  # every other container is replaced from the snapshot
        return self.start()

    def receive(self, event: Event) -> Sequence[Effect]:
        """Apply one input event; the effects to perform, in order.

        Nearly every event is an argument fragment, so its path is written out here (no
        handler lookup, no second call): one dict lookup for the turn, one for the call,
        the guard and the state the table gives a fragment (kept on the call); the bytes go
        into the call's own buffer and nowhere else. Everything else is a handler."""
        if type(event) is not Fragment:
            handler = self._handlers.get(type(event))
            if handler is None:
                raise UnsupportedEvent(f"no rule for a {event.kind!r} event (replays are expanded before delivery)")
            answer = handler(event)
            if self._ending:
                self._forget_over()
            return answer
        turn = self.turns.get(event.turn)
        if turn is None:
            return self._unknown_turn("fragment", event.turn)
        ident = (event.turn, event.response, event.item, event.call)
        text = event.text
        position = event.position
        call_cap = self._call_cap
        # A non-empty ASCII fragment costs its length (utf8_len's answer, without the call).
        # A character is at least one byte, so a fragment with more characters than the
        # per-call cap is over it whatever its encoding: it is never encoded (a copy the
        # size of whatever a hostile stream sends), and its classification is the same.
        size = len(text) if (text and text.isascii()) or len(text) > call_cap else utf8_len(text)
        call = self._active.get(ident)
        if call is None:
            return self._fragment_without_call(turn, ident, position, size)
        call_bytes = call.bytes + size
        turn_bytes = turn.bytes + size
        buffer = call.buffer
        if position >= buffer.fresh_from:
            # A position at or past the buffer's ``fresh_from`` cannot have been received
            # (and a negative one never gets here): the guard's answer for a new position
            # within both caps is a plain fragment, which skips calling it (checked against
            # classify_fragment in tests/test_reference_hot_path.py).
            if call_bytes <= call_cap and turn_bytes <= self._turn_cap:
                call_event = _FRAGMENT
            else:
                call_event = classify_fragment(False, False, call_bytes, turn_bytes, self.limits)
        else:
            same, different = buffer.seen(position, text)
            call_event = classify_fragment(same, different, call_bytes, turn_bytes, self.limits)
            if position < 0:
                call_event = E.FRAGMENT_CONFLICT
        if call_event is _FRAGMENT and call.on_fragment is _COLLECTING:
            buffer.add(position, text)
            fragments = call.fragments = call.fragments + 1
            call.bytes = call_bytes
            turn.bytes = turn_bytes
            return (RecordProgress(turn.turn, turn_bytes, call.key, fragments, call_bytes, ident),)
        effects: list[Effect] = []
        self._fire(call, call_event, _FRAGMENT_WHY.get(call_event, ""), effects)
        return effects

    def business_result(self, key: CallKey, problem: str | None) -> Sequence[Effect]:
        """The business validator's answer for ``key`` (None: the call passes)."""
        effects = self._business_result(key, problem)
        if self._ending:
            self._forget_over()
        return effects

    def _business_result(self, key: CallKey, problem: str | None) -> Sequence[Effect]:
        call = self._active.get(ident_of(key))
        if call is None or not call.awaiting_business:
            # stopped while the validator ran: nothing revives it
            return (Log(f"{key}: business answer ignored, the call is no longer being validated"),)
        call.awaiting_business = False
        effects: list[Effect] = []
        if call.state is not S.TERMINAL_CANDIDATE:
            return effects
        if problem is not None:
            call.validation = "business: rejected"
            self._fire(call, E.INVALID, "business rule rejected the call", effects)
            return effects
        call.validation = "ok"
        if self._fire(call, E.VALID, "", effects):
            self._dispatch(call, effects)
        return effects

    def claim_result(self, key: CallKey, result: ClaimResult) -> Sequence[Effect]:
        """The store's answer to a :class:`Claim`."""
        effects = self._claim_result(key, result)
        if self._ending:
            self._forget_over()
        return effects

    def _claim_result(self, key: CallKey, result: ClaimResult) -> Sequence[Effect]:
        call = self._active.get(ident_of(key))
        if call is None or not call.claiming:
            return (Log(f"{key}: claim answer ignored, no claim was pending"),)
        call.claiming = False
        effects: list[Effect] = []
        if result is ClaimResult.BLOCKED:
            call.validation = "refused at dispatch: stopped in the store"
            self._fire(call, E.DISPATCH_BLOCKED, "refused at execution time by the store", effects)
            return effects
        arguments = call.arguments
        turn = self.turns[call.key.turn]
        if result is ClaimResult.CLAIMED and arguments is not None and call.tool is not None:
            effects.append(Dispatch(call.key, turn.actor, call.tool, arguments, turn.traceparent))
        else:
            effects.append(Log(f"{key}: already dispatched by another worker"))
        self._fire(call, E.DISPATCH, "dispatched", effects, report=result is ClaimResult.CLAIMED)
        return effects

    def view(self, key: CallKey) -> CallView | None:
        """What the core knows about a call (no bytes, no argument values)."""
        ident = ident_of(key)
        call = self._active.get(ident)
        if call is not None:
            return CallView(key, call.state, call.tool, call.fragments, call.bytes, call.buffer.doomed)
        state = self._decided.get(ident)
        if state is None:
            return None
        return CallView(key, state, None, 0, 0, None)

    @property
    def active_calls(self) -> int:
        """How many buffers are in active assembly."""
        return len(self._active)

    # ------------------------------------------------------------------------------
    # restore
    # ------------------------------------------------------------------------------

    def _restore(self, snapshot: Snapshot) -> None:
        for t in snapshot.turns.values():
            self.turns[t.turn] = TurnState(
                t.turn,
                t.actor,
                t.tenant,
                t.conversation,
                t.traceparent,
                t.status,
                t.bytes,
                t.shown,
                t.stopped,
                t.executed,
            )
        self.current = dict(snapshot.current)
        self._terminal_ids = set(snapshot.terminal_ids)
        self._ended = set(snapshot.ended_responses)
        self._quarantined = set(snapshot.quarantined)
        self._disabled = set(snapshot.disabled_tools)
        self._unknown_outcomes = list(snapshot.unknown_outcomes)
        owner = self.owner
        for ident, row in snapshot.calls.items():
            turn = self.turns.get(row.key.turn)
            if turn is not None:
                turn.idents.append(ident)
                turn.calls += 1
                turn.response_calls[row.key.response] = turn.response_calls.get(row.key.response, 0) + 1
            if row.state in TERMINAL_STATES:
                self._decided[ident] = row.state
            elif owner is not None and row.owner is not None and row.owner != owner:
                continue  # another instance's call in flight: its owner finishes it
            else:
                # in flight when the process stopped: its bytes are gone; start() fails it
                self._active[ident] = _Call(
                    row.key, ident, row.tool, row.state, ArgumentBuffer(0), row.fragments, row.bytes
                )
                if turn is not None:
                    turn.active += 1
        for turn_id, response in snapshot.ended_responses:
            state = self.turns.get(turn_id)
            if state is not None:
                state.responses.append(response)
        if self._forget:  # what a restart or a resync loads: the over turns queue again
            self._over.clear()
            self._ending.update(self.turns)

    # ------------------------------------------------------------------------------
    # the table, the broadcast rules, the end of a call
    # ------------------------------------------------------------------------------

    def _fire(self, call: _Call, event: CallEvent, why: str, effects: list[Effect], *, report: bool = True) -> bool:
        """Apply one lifecycle event through the table. True when the table gives a state
        (a change or a self-loop), False when it ignores or rejects the event."""
        result = TRANSITIONS[call.state][event]
        if isinstance(result, State):
            call.state = result
            call.on_fragment = TRANSITIONS[result][E.FRAGMENT]
            if result in TERMINAL_STATES:
                self._end(call, event, why, effects, report)
            return True
        if isinstance(result, Rejected):
            effects.append(Log(f"{call.key}: {event} rejected: {result.why}"))
        return False

    def _late(self, key: CallKey, state: State, event: CallEvent) -> Sequence[Effect]:
        """An event for a call that is not in active assembly (terminal, or absent and
        left absent by the table): the table must not move it."""
        result = TRANSITIONS[state][event]
        if isinstance(result, State) and result is not state:
            raise ModelDriftError(f"{state} --{event}--> {result} needs a buffer the core does not keep")
        if isinstance(result, Rejected):
            return (Log(f"{key}: {event} rejected: {result.why}"),)
        return _NOTHING

    def _broadcast(self, event: Event, effects: list[Effect], among: Sequence[_Call] | None = None) -> list[CallKey]:
        """The model's broadcast rules for ``event`` (over ``among``, default every call in
        active assembly); the keys of the calls it stopped."""
        rules = self._rules.get(type(event))
        if rules is None:
            rules = self._rules[type(event)] = _rules_for(type(event))
        stopped: list[CallKey] = []
        for rule in rules:
            for call in list(self._active.values()) if among is None else among:
                # The rules read ``call.key``, ``call.tool`` and ``state.turns[...]``; ours
                # have those attributes (duck-typed against the model's records).
                if call.state not in TERMINAL_STATES and rule.selects(event, cast(Any, call), cast(Any, self)):
                    self._fire(call, rule.call_event, rule.why, effects)
                    if call.state in TERMINAL_STATES:
                        stopped.append(call.key)
        return stopped

    def _entry(self, call: _Call, decision: str) -> LedgerEntry:
        turn = self.turns.get(call.key.turn)
        return LedgerEntry(
            call.key,
            call.fragments,
            call.terminal_reason,
            call.parse,
            call.validation,
            decision,
            turn.traceparent if turn is not None else None,
        )

    def _end(self, call: _Call, event: CallEvent, why: str, effects: list[Effect], report: bool) -> None:
        """The call reached a terminal state: out of active assembly, bytes dropped,
        decision durable (the dispatch claim already wrote its own), ledger and status."""
        was_active = self._active.pop(call.ident, None) is not None
        self._decided[call.ident] = call.state
        call.buffer.drop()
        call.arguments = None
        turn = self.turns.get(call.key.turn)
        if turn is not None:
            if was_active:
                turn.active -= 1
            else:
                turn.idents.append(call.ident)  # decided without being opened here
            if self._forget and turn.status != "live":
                self._ending.add(turn.turn)
        if call.state is S.DISPATCHED:
            if report:
                effects.append(Ledger(call.claim_entry or self._entry(call, "dispatched")))
                if turn is not None:
                    self._show(turn, "done", effects)
            return
        entry = self._entry(call, _DECISION[call.state])
        effects.append(RecordDecision(call.key, call.tool, call.state, why or str(event), entry))
        effects.append(Ledger(entry))
        if turn is not None:
            self._show(turn, "handoff" if event in _HANDOFF_EVENTS else "retry", effects)

    def _show(self, turn: TurnState, status: str, effects: list[Effect]) -> None:
        """The visible status, kept truthful: once a call of the turn stopped without
        anything having run, only retry/handoff (or done, once something runs) follow."""
        if status in _QUIET_STATUSES and turn.stopped and not turn.executed:
            return
        stopped = turn.stopped or status in ("retry", "handoff")
        executed = turn.executed or status == "done"
        changed = status != turn.shown
        if not changed and stopped == turn.stopped and executed == turn.executed:
            return
        turn.shown, turn.stopped, turn.executed = status, stopped, executed
        effects.append(RecordDisplay(turn.turn, status, stopped, executed))
        if changed:
            effects.append(Status(turn.turn, status))

    def _turn_live(self, turn: TurnState | None) -> bool:
        """The model's definition of a live turn (live status, and its conversation's
        current turn), read over this core's ``turns`` and ``current``."""
        return turn is not None and SystemState.turn_live(cast(Any, self), turn.turn)

    def _tool_spec(self, name: str | None) -> ToolSpec | None:
        """The tool's declaration as it stands now; None when unknown or disabled."""
        if name is None or name in self._disabled:
            return None
        return self.tools.get(name)

    def _absent(
        self, turn: TurnState, ident: Ident, tool: str | None, event: CallEvent, why: str, terminal_reason: str | None
    ) -> Sequence[Effect]:
        """An event for a call the core has never seen; only a terminal outcome is
        possible here (an ``open`` is handled by its own handler)."""
        key = CallKey(turn.tenant, *ident)
        result = TRANSITIONS[S.ABSENT][event]
        if not isinstance(result, State) or result is S.ABSENT:
            return self._late(key, S.ABSENT, event)
        if result not in TERMINAL_STATES:
            raise ModelDriftError(f"absent --{event}--> {result}: only an open may start a buffer")
        call = _Call(key, ident, tool, result, ArgumentBuffer(0), terminal_reason=terminal_reason)
        effects: list[Effect] = []
        self._end(call, event, why, effects, True)
        return effects

    # ------------------------------------------------------------------------------
    # events from the protocol
    # ------------------------------------------------------------------------------

    def _unknown_turn(self, kind: str, turn: str) -> Sequence[Effect]:
        # No turn binding means no tenant and no key: the call does not exist (model).
        return (Log(f"{kind} for unknown turn {turn} dropped"),)

    def _forget_over(self) -> None:
        """Queue the turns that became over during this input (not live, no call of theirs
        in active assembly), and drop the oldest over turns past the replay window, with
        every decision, terminal event id and ended response kept for their calls: the
        per-call memory of a finished turn goes back to nothing. The conversation's current
        turn entry goes too when it names the turn (it is not live, so the next turn
        supersedes nothing, as the model says)."""
        pending, self._ending = self._ending, set()
        for turn_id in pending:
            turn = self.turns.get(turn_id)
            if turn is not None and turn.active <= 0 and not self._turn_live(turn):
                self._over[turn_id] = None
        while len(self._over) > self._keep_over:
            turn_id = next(iter(self._over))
            del self._over[turn_id]
            turn = self.turns.get(turn_id)
            if turn is None or turn.active > 0 or self._turn_live(turn):
                continue
            decided = self._decided
            for ident in turn.idents:
                decided.pop(ident, None)
            for event_id in turn.terminal_ids:
                self._terminal_ids.discard(event_id)
            for response in turn.responses:
                self._ended.discard((turn_id, response))
            del self.turns[turn_id]
            conversation = (turn.tenant, turn.conversation)
            if self.current.get(conversation) == turn_id:
                del self.current[conversation]

    def _on_turn_started(self, ev: TurnStarted) -> Sequence[Effect]:
        effects: list[Effect] = []
        self._broadcast(ev, effects)
        bound = self.turns.get(ev.turn)
        if bound is not None:  # a repeated start (replay): the binding is fixed
            if (bound.actor, bound.tenant, bound.conversation) != (ev.actor, ev.tenant, ev.conversation):
                # Turn ids are the application's and must be unique across tenants; one
                # announced again for someone else keeps its first binding (the model's
                # rule), and an operator should know that the application reused it.
                effects.append(Log(f"turn {ev.turn} announced again with another binding: the first one stands"))
            return effects
        conversation = (ev.tenant, ev.conversation)  # the model's key: conversations are per tenant
        previous = self.current.get(conversation)
        if previous is not None:
            old = self.turns[previous]
            if old.status == "live":
                old.status = "superseded"
                effects.append(SetTurnStatus(previous, "superseded"))
            if self._forget:
                self._ending.add(previous)
        self.turns[ev.turn] = TurnState(ev.turn, ev.actor, ev.tenant, ev.conversation, ev.traceparent)
        self.current[conversation] = ev.turn
        effects.append(BindTurn(ev.turn, ev.actor, ev.tenant, ev.conversation, ev.traceparent))
        return effects

    def _on_call_opened(self, ev: CallOpened) -> Sequence[Effect]:
        # each field read once: a read on the model's event is a generic attribute lookup
        turn_id, response, item, call_id, tool = ev.turn, ev.response, ev.item, ev.call, ev.tool
        turn = self.turns.get(turn_id)
        if turn is None:
            return self._unknown_turn("open", turn_id)
        ident = (turn_id, response, item, call_id)
        event = classify_open(
            self._turn_live(turn), (turn_id, response) not in self._ended, response in self._quarantined
        )
        call = self._active.get(ident)
        if call is not None:
            effects: list[Effect] = []
            if tool != call.tool:  # id and name are set once
                self._fire(call, E.FRAGMENT_CONFLICT, "call id re-announced with another tool", effects)
            else:
                self._fire(call, event, "opened after its turn, response or tenant was stopped", effects)
            return effects
        state = self._decided.get(ident)
        if state is not None:
            return self._late(CallKey(turn.tenant, *ident), state, event)
        result = TRANSITIONS[S.ABSENT][event]
        if result is not S.COLLECTING:
            return self._absent(turn, ident, tool, event, "opened after its turn, response or tenant was stopped", None)
        in_response = turn.response_calls.get(response, 0)
        if (self._turn_calls is not None and turn.calls >= self._turn_calls) or (
            self._response_calls is not None and in_response >= self._response_calls
        ):
            raise CallLimitExceeded(
                f"turn {turn_id}: more than {self._turn_calls} calls per turn or {self._response_calls} per response"
            )
        turn.calls += 1
        turn.response_calls[response] = in_response + 1
        turn.active += 1
        turn.idents.append(ident)
        key = CallKey(turn.tenant, turn_id, response, item, call_id)  # every field by position: see tools/build_fast.py
        self._active[ident] = _Call(key, ident, tool, result, ArgumentBuffer(self.scan_every))
        effects = [OpenCall(key, tool, self.owner)]
        self._show(turn, "preparing", effects)
        return effects

    def _fragment_without_call(self, turn: TurnState, ident: Ident, position: int, size: int) -> Sequence[Effect]:
        """A fragment for a call that is not in active assembly: late for a decided call,
        or one that was never opened."""
        state = self._decided.get(ident)
        if state is not None:
            return self._late(CallKey(turn.tenant, *ident), state, E.FRAGMENT)
        event = classify_fragment(False, False, size, turn.bytes + size, self.limits)
        if position < 0:
            event = E.FRAGMENT_CONFLICT
        return self._absent(turn, ident, None, event, "fragment for a call that was never opened", None)

    def _on_text_fragment(self, ev: TextFragment) -> Sequence[Effect]:
        """Assistant text is the application's to show; it never touches an argument
        buffer (the spec: keep text output and tool arguments separate)."""
        return _NOTHING

    def _on_call_terminal(self, ev: CallTerminal) -> Sequence[Effect]:
        turn_id, event_id, stop_reason = ev.turn, ev.event_id, ev.reason  # each read once
        turn = self.turns.get(turn_id)
        if turn is None:
            return self._unknown_turn("terminal", turn_id)
        seen = event_id in self._terminal_ids
        event = classify_terminal(seen, stop_reason)
        effects: list[Effect] = []
        if not seen:
            self._terminal_ids.add(event_id)
            turn.terminal_ids.append(event_id)
            effects.append(RecordTerminalId(event_id))
        ident = (turn_id, ev.response, ev.item, ev.call)
        reason = stop_reason if event in (E.TERMINAL_COMPLETED, E.TERMINAL_STOPPED) else None
        call = self._active.get(ident)
        if call is None:
            state = self._decided.get(ident)
            if state is not None:
                effects.extend(self._late(CallKey(turn.tenant, *ident), state, event))
            else:
                why = "terminal event for a call that was never opened"
                effects.extend(self._absent(turn, ident, None, event, why, reason))
            return effects
        if isinstance(TRANSITIONS[call.state][event], State) and reason is not None:
            call.terminal_reason = reason
        changed = self._fire(call, event, f"stopped: {stop_reason}", effects)
        if changed and event is E.TERMINAL_COMPLETED:
            self._assemble(call, effects)
        return effects

    def _on_response_terminal(self, ev: ResponseTerminal) -> Sequence[Effect]:
        effects: list[Effect] = []
        self._broadcast(ev, effects)
        self._end_response(ev.turn, ev.response, effects)
        return effects

    def _on_disconnect(self, ev: Disconnect) -> Sequence[Effect]:
        effects: list[Effect] = []
        self._broadcast(ev, effects)
        self._end_response(ev.turn, ev.response, effects)
        return effects

    def _end_response(self, turn: str, response: str, effects: list[Effect]) -> None:
        if (turn, response) not in self._ended:
            self._ended.add((turn, response))
            state = self.turns.get(turn)
            if state is not None:
                state.responses.append(response)
            effects.append(EndResponse(turn, response))

    # ------------------------------------------------------------------------------
    # events from the user, the application and the operator
    # ------------------------------------------------------------------------------

    def _on_cancel_turn(self, ev: CancelTurn) -> Sequence[Effect]:
        effects: list[Effect] = []
        self._broadcast(ev, effects)
        turn = self.turns.get(ev.turn)
        if turn is not None and turn.status == "live":
            turn.status = "cancelled"
            effects.append(SetTurnStatus(ev.turn, "cancelled"))
            if self._forget:
                self._ending.add(ev.turn)
        elif turn is None:
            # A turn this replica never saw may be another replica's: the cancel must
            # still reach the store, whose claim is what stops that replica (the store
            # changes only a live turn, so for a turn nobody bound this is nothing).
            effects.append(SetTurnStatus(ev.turn, "cancelled"))
        return effects

    def _on_tool_changed(self, ev: ToolChanged) -> Sequence[Effect]:
        # The harness (or the application) owns the catalog and has already changed it;
        # calls of the changed tool stop, later calls are validated against what stands.
        effects: list[Effect] = []
        stopped = self._broadcast(ev, effects)
        effects.append(Log(f"tool {ev.tool} changed ({ev.change}): {len(stopped)} call(s) in flight cancelled"))
        return effects

    def _on_confirm(self, ev: Confirm) -> Sequence[Effect]:
        turn = self.turns.get(ev.turn)
        if turn is None:
            return self._unknown_turn("confirmation", ev.turn)
        ident = (ev.turn, ev.response, ev.item, ev.call)
        event = E.CONFIRMED if ev.approved else E.DENIED
        call = self._active.get(ident)
        if call is None:
            state = self._decided.get(ident)
            if state is not None:
                return self._late(CallKey(turn.tenant, *ident), state, event)
            return self._absent(turn, ident, None, event, "denied by the user", None)
        effects: list[Effect] = []
        if ev.approved:
            if self._fire(call, E.CONFIRMED, "", effects):
                call.confirmed = True
                self._dispatch(call, effects)
        else:
            self._fire(call, E.DENIED, "denied by the user", effects)
        return effects

    def _on_quarantine_response(self, ev: QuarantineResponse) -> Sequence[Effect]:
        effects: list[Effect] = []
        stopped = self._broadcast(ev, effects)
        if ev.response not in self._quarantined:
            self._quarantined.add(ev.response)
            effects.append(RecordQuarantine(ev.response, ev.reason))
        self._audit("quarantine_response", ev.reason, stopped, effects)
        return effects

    def _on_disable_tool(self, ev: DisableTool) -> Sequence[Effect]:
        effects: list[Effect] = []
        stopped = self._broadcast(ev, effects)
        if ev.tool not in self._disabled:
            self._disabled.add(ev.tool)
            effects.append(RecordDisabledTool(ev.tool, ev.reason))
        self._audit("disable_tool", ev.reason, stopped, effects)
        return effects

    def _on_stop_tenant(self, ev: StopTenant) -> Sequence[Effect]:
        effects: list[Effect] = []
        stopped = self._broadcast(ev, effects)
        for turn in self.turns.values():
            if turn.tenant == ev.tenant and turn.status == "live":
                turn.status = "stopped"
                effects.append(SetTurnStatus(turn.turn, "stopped"))
                if self._forget:
                    self._ending.add(turn.turn)
        effects.append(RecordTenantStop(ev.tenant, ev.reason))
        self._audit("stop_tenant", ev.reason, stopped, effects)
        return effects

    def _audit(self, action: str, reason: str, keys: list[CallKey], effects: list[Effect]) -> None:
        """Operator controls leave the reason and the affected keys, never arguments."""
        frozen = tuple(keys)
        effects.append(RecordAudit(action, reason, frozen))
        effects.append(Audit(action, reason, frozen))

    def _on_restart(self, ev: Restart) -> Sequence[Effect]:
        """A restart delivered as an event: calls in flight fail (a real restart builds a
        new core from the store; :meth:`start` does the same there)."""
        effects: list[Effect] = []
        self._broadcast(ev, effects)
        return effects

    # ------------------------------------------------------------------------------
    # internal steps: parse, validate, dispatch
    # ------------------------------------------------------------------------------

    def _assemble(self, call: _Call, effects: list[Effect]) -> None:
        """The one strict parse, at the call's own completed terminal event."""
        buffer = call.buffer
        if not buffer.complete:
            call.parse = "missing fragment"
            self._fire(call, E.PARSE_FAILED, "missing fragment before the terminal event", effects)
            return
        text = buffer.assemble()
        if text is None:
            call.parse = "malformed"
            self._fire(call, E.PARSE_FAILED, "malformed arguments", effects)
            return
        try:
            arguments = strict_parse(text)
        except (ParseFailure, ValueError, RecursionError):
            # ParseFailure is the model's verdict; a plain ValueError (an integer longer
            # than Python converts, sys.get_int_max_str_digits) or a RecursionError (nesting
            # deeper than the stack) is one that strict_parse lets through: either way the
            # text is not arguments this process can hand over, and the call fails here
            # rather than leaving its buffer stuck with an untyped error.
            call.parse = "malformed"
            self._fire(call, E.PARSE_FAILED, "malformed arguments", effects)
            return
        call.parse = "ok"
        call.arguments = arguments
        if self._fire(call, E.PARSE_OK, "", effects):
            self._validate(call, effects)

    def _validate(self, call: _Call, effects: list[Effect]) -> None:
        """Schema against the catalog as it stands, then the business validator once."""
        spec = self._tool_spec(call.tool)
        if spec is None or call.tool is None or call.arguments is None:
            call.validation = "unknown or disabled tool"
            self._fire(call, E.INVALID, "unknown, removed, renamed or disabled tool", effects)
            return
        copy: dict[str, Any] = {}
        try:
            problem = self._schema_errors(spec, call.arguments)
            if problem is None:
                copy = copy_json(call.arguments)
        except RecursionError:  # nested deeper than a validator (or a copy) can follow
            problem = "schema: nesting too deep"
        if problem is not None:
            call.validation = redact_schema_problem(problem, spec.schema)
            self._fire(call, E.INVALID, "arguments do not match the tool's schema", effects)
            return
        call.validated_spec = spec
        call.awaiting_business = True
        effects.append(ValidateBusiness(call.key, call.tool, copy))

    def _dispatch(self, call: _Call, effects: list[Effect]) -> None:
        """The permission boundary and the re-check at execution time (the model's
        ``classify_dispatch``); the claim itself happens in the store."""
        turn = self.turns.get(call.key.turn)
        spec = self._tool_spec(call.tool)
        live = self._turn_live(turn)
        quarantined = call.key.response in self._quarantined
        # identity first: the declaration is usually the very object it was validated against
        unchanged = spec is not None and (spec is call.validated_spec or spec == call.validated_spec)
        permitted = spec is not None and turn is not None and spec.permits(turn.actor)
        event = classify_dispatch(
            needs_confirmation=bool(spec is not None and spec.confirm),
            confirmed=call.confirmed,
            turn_live=live,
            quarantined=quarantined,
            tool_unchanged=unchanged,
            permitted=permitted,
        )
        if event is E.AWAIT_CONFIRMATION:
            if not call.confirmation_requested and call.tool is not None and call.arguments is not None:
                call.confirmation_requested = True
                call.buffer.seal()
                entry = self._entry(call, "awaiting_confirmation")
                effects.append(RecordLedger(entry, "awaiting confirmation"))
                effects.append(Ledger(entry))
                effects.append(RequestConfirmation(call.key, call.tool, copy_json(call.arguments)))
                if turn is not None:
                    self._show(turn, "awaiting_confirmation", effects)
            self._fire(call, event, "", effects)
            return
        if event is E.DISPATCH_BLOCKED:
            if not permitted:
                call.validation = "refused at dispatch: permission"
            elif not live:
                call.validation = "refused at dispatch: turn not current"
            elif quarantined:
                call.validation = "refused at dispatch: quarantined"
            else:
                call.validation = "refused at dispatch: tool changed"
            self._fire(call, event, "refused at execution time: permission, turn, tool or controls", effects)
            return
        if call.tool is None:  # classify_dispatch never lets an unknown tool through
            raise ModelDriftError("dispatch allowed for a call without a tool")
        call.claiming = True
        entry = call.claim_entry = self._entry(call, "dispatched")
        effects.append(Claim(call.key, call.tool, entry))
