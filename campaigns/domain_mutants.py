"""Mutants written against the rich concrete domain, and correct variants of the reference.

Why a second zoo: the first (:mod:`callsafe.campaigns.mutants`) holds the failure classes of
the public bug reports, each visible with one tenant, one tool and ``{"v":100}``. The bugs
here live in the data, the identities and what a restart keeps, so they show only when a
trace holds several tenants with colliding ids, agent loops, tools with business rules
and confirmation, repeated digits and multi-byte text, caps placed at a trace's own
sizes, and operator events repeated, re-announced and followed by a restart
(:mod:`callsafe.generators.domain`). Each is one small change: either at the boundary of
the reference (the events it sees, the services it is handed) or one method of its core
(:class:`~callsafe.reference_impl.core.Core`), swapped in through
:attr:`ReferenceTarget.core_class <callsafe.targets.reference.ReferenceTarget.core_class>`.

The correct variants at the end make choices the spec leaves open (reject out-of-order
positions, run executions after the event's handling, fail a call as soon as its text
can never parse); ``callsafe selftest`` certifies that they pass, so that a certifier that
blames them is caught too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from callsafe.campaigns.mutants import Ident, _ident, _Mutant
from callsafe.contract.target import TargetEnv
from callsafe.model.lifecycle import CallEvent, State
from callsafe.model.system import classify_open
from callsafe.model.vocabulary import (
    CallAddressed,
    CallKey,
    CallOpened,
    CancelTurn,
    Confirm,
    Disconnect,
    Event,
    Fragment,
    LedgerRow,
    Limits,
    Observation,
    ResponseTerminal,
    StatusShown,
    StopTenant,
    ToolChanged,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.effects import Effect, Log, RecordDisabledTool, RecordDisplay, SetTurnStatus, Status
from callsafe.reference_impl.store import Snapshot

__all__ = ["CORRECT_FACTORIES", "FACTORIES"]  # targets are named by class: "module:ClassName"

E = CallEvent


class _CoreMutant(_Mutant):
    """The reference with a subclass of its core (one method changed)."""

    core: type[Core] = Core

    def __init__(self) -> None:
        super().__init__()
        self.inner.core_class = self.core


# --------------------------------------------------------------------------------------
# identities: tenants, shared ids, agent loops, tools
# --------------------------------------------------------------------------------------


class ArgumentsByCallId(_Mutant):
    """Keeps the validated arguments in a cache keyed by the protocol's call id alone: a
    call of another tenant, turn or response with the same id overwrites them before a
    confirmed call runs."""

    name = "arguments-by-call-id"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        validator, executor = env.business_validator, env.executor
        cache: dict[str, Any] = {}

        def validate(key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
            cache[key.call] = dict(arguments)
            return validator(key, tool, arguments)

        def execute(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            executor(key, actor, tool, cache.get(key.call, arguments), traceparent)

        return dataclasses.replace(env, business_validator=validate, executor=execute)


class ConversationWithoutTenant(_Mutant):
    """Keys conversations by their name alone: another tenant's new turn in a conversation
    of the same name supersedes (stops) this tenant's turn."""

    name = "conversation-without-tenant"

    def __init__(self) -> None:
        super().__init__()
        self.current: dict[str, tuple[str, str]] = {}  # conversation name -> (turn, tenant)

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TurnStarted):
            previous = self.current.get(event.conversation)
            if previous is not None and previous[1] != event.tenant and previous[0] != event.turn:
                yield CancelTurn(previous[0])
            self.current[event.conversation] = (event.turn, event.tenant)
        yield event


class StopEveryTenant(_Mutant):
    """An operator's tenant stop reaches every tenant's buffers."""

    name = "stop-every-tenant"

    def __init__(self) -> None:
        super().__init__()
        self.tenants: list[str] = []

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TurnStarted) and event.tenant not in self.tenants:
            self.tenants.append(event.tenant)
        yield event
        if isinstance(event, StopTenant):
            yield from (dataclasses.replace(event, tenant=t) for t in self.tenants if t != event.tenant)


class _ConfirmByIdsCore(Core):
    def _on_confirm(self, ev: Confirm) -> Sequence[Effect]:
        ident = (ev.turn, ev.response, ev.item, ev.call)
        if ident not in self._active:
            for other in self._active:
                if other[1:] == ident[1:]:
                    return super()._on_confirm(dataclasses.replace(ev, turn=other[0]))
        return super()._on_confirm(ev)


class ConfirmAnotherTurn(_CoreMutant):
    """Finds the call a confirmation answers by its response, item and call id, whatever
    the turn: a confirmation given in another turn runs this turn's call."""

    name = "confirm-another-turn"
    core = _ConfirmByIdsCore


class ItemWithoutResponse(_Mutant):
    """Keys buffers by turn, item index and call id, without the response: in an agent
    loop, the next response's call at the same index is taken for the first one."""

    name = "item-without-response"

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[tuple[str, str, str], str] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, CallAddressed):
            slot = (event.turn, event.item, event.call)
            response = self.first.setdefault(slot, event.response)
            yield dataclasses.replace(event, response=response)
        else:
            yield event


class ResponseEndById(_Mutant):
    """Records a response's end by its id alone: a response of another turn that reuses
    the id is taken as ended too."""

    name = "response-end-by-id"

    def __init__(self) -> None:
        super().__init__()
        self.turns: list[str] = []

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TurnStarted) and event.turn not in self.turns:
            self.turns.append(event.turn)
        yield event
        if isinstance(event, (ResponseTerminal, Disconnect)):
            yield from (dataclasses.replace(event, turn=t) for t in self.turns if t != event.turn)


class SkipRulesWhenConfirmed(_Mutant):
    """Skips the business validator for tools that need confirmation (the user confirms,
    so the rules are taken as answered)."""

    name = "skip-rules-when-confirmed"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        validator = env.business_validator
        tools = env.tools

        def validate(key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
            spec = tools.get(tool)
            if spec is not None and spec.confirm:
                return None
            return validator(key, tool, arguments)

        return dataclasses.replace(env, business_validator=validate)


class RulesOfFirstTool(_Mutant):
    """Builds the business validator once, for the first tool it validates, and reuses it
    for every tool."""

    name = "rules-of-first-tool"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        validator = env.business_validator
        first: list[str] = []

        def validate(key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
            if not first:
                first.append(tool)
            return validator(key, first[0], arguments)

        return dataclasses.replace(env, business_validator=validate)


class _DisableNewCallsCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._later: set[str] = set()

    def _on_disable_tool(self, ev: Any) -> Sequence[Effect]:
        self._later.add(ev.tool)
        effects: list[Effect] = [RecordDisabledTool(ev.tool, ev.reason)]
        self._audit("disable_tool", ev.reason, [], effects)
        return effects

    def _on_call_opened(self, ev: Any) -> Sequence[Effect]:
        effects = list(super()._on_call_opened(ev))
        call = self._active.get((ev.turn, ev.response, ev.item, ev.call))
        if call is not None and ev.tool in self._later:
            self._fire(call, E.DISABLE_TOOL, "tool disabled", effects)
        return effects


class DisableNewCallsOnly(_CoreMutant):
    """Applies a tool's disabling to calls opened after it; calls in flight still run."""

    name = "disable-new-calls-only"
    core = _DisableNewCallsCore


class _CachedCatalogCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cache: dict[str, ToolSpec] = {}

    def _tool_spec(self, name: str | None) -> ToolSpec | None:
        if name is not None and name not in self._disabled and name in self._cache:
            return self._cache[name]
        spec = super()._tool_spec(name)
        if spec is not None and name is not None:
            self._cache[name] = spec
        return spec

    def _on_tool_changed(self, ev: ToolChanged) -> Sequence[Effect]:
        return ()


class CachedCatalog(_CoreMutant):
    """Reads tool declarations through a cache that a catalog change does not invalidate:
    calls of a renamed or removed tool go on and run."""

    name = "cached-catalog"
    core = _CachedCatalogCore


# --------------------------------------------------------------------------------------
# values and fragmentation
# --------------------------------------------------------------------------------------


class DedupeByText(_Mutant):
    """De-duplicates deltas by their text, in arrival order: a delta equal to the previous
    one is taken for a repeat, so ``111`` + ``111`` becomes ``111``."""

    name = "dedupe-by-text"

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[Ident, tuple[int, str]] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, Fragment):
            ident = _ident(event)
            count, last = self.calls.get(ident, (0, None))
            if event.text == last:
                return
            self.calls[ident] = (count + 1, event.text)
            yield dataclasses.replace(event, position=count)
        else:
            yield event


class Latin1Deltas(_Mutant):
    """Decodes each delta's bytes on its own, with a charset sniffed per delta: a delta
    holding multi-byte UTF-8 is taken for Latin-1, so ``é`` arrives as ``Ã©``."""

    name = "latin1-deltas"

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, Fragment) and not event.text.isascii():
            data = event.text.encode("utf-8", "surrogatepass")
            yield dataclasses.replace(event, text=data.decode("latin-1"))
        else:
            yield event


# --------------------------------------------------------------------------------------
# byte caps
# --------------------------------------------------------------------------------------


class _CharsCore(Core):
    def receive(self, event: Event) -> Sequence[Effect]:
        if type(event) is not Fragment:
            return super().receive(event)
        extra = len(event.text.encode("utf-8", "surrogatepass")) - len(event.text)
        turn = self.turns.get(event.turn)
        call = self._active.get(_ident(event))
        if not extra or turn is None or call is None:
            return super().receive(event)
        call.bytes -= extra  # the caps see characters: the bytes beyond them are not counted
        turn.bytes -= extra
        effects = super().receive(event)
        if call.state is not State.COLLECTING:
            call.bytes += extra
            turn.bytes += extra
        return effects


class CharsForBytes(_CoreMutant):
    """Counts characters, not bytes, against the caps."""

    name = "chars-for-bytes"
    core = _CharsCore


class CapOffByOne(_Mutant):
    """Refuses a call only once it is two bytes over a cap (``>`` written as ``> cap + 1``)."""

    name = "cap-off-by-one"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        limits = Limits(env.limits.call_bytes + 1, env.limits.turn_bytes + 1)
        return dataclasses.replace(env, limits=limits)


class _PerResponseCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._by_response: dict[tuple[str, str], int] = {}

    def receive(self, event: Event) -> Sequence[Effect]:
        if type(event) is not Fragment or event.turn not in self.turns:
            return super().receive(event)
        turn = self.turns[event.turn]
        slot = (event.turn, event.response)
        whole, before = turn.bytes, self._by_response.get(slot, 0)
        turn.bytes = before  # the turn's cap sees only this response's bytes
        effects = super().receive(event)
        added = turn.bytes - before
        self._by_response[slot] = before + added
        turn.bytes = whole + added
        return effects


class TurnCapPerResponse(_CoreMutant):
    """Counts the per-turn cap per response: an agent loop's responses each start at zero."""

    name = "turn-cap-per-response"
    core = _PerResponseCore


class _ResetBytesCore(Core):
    def _restore(self, snapshot: Snapshot) -> None:
        super()._restore(snapshot)
        for turn in self.turns.values():
            turn.bytes = 0


class TurnBytesResetOnRestart(_CoreMutant):
    """Keeps a turn's byte count in memory only: after a restart the turn starts at zero."""

    name = "turn-bytes-reset-on-restart"
    core = _ResetBytesCore


# --------------------------------------------------------------------------------------
# application and operator events: repeated, re-announced, then a restart
# --------------------------------------------------------------------------------------


class _ForgetQuarantineCore(Core):
    def _restore(self, snapshot: Snapshot) -> None:
        super()._restore(snapshot)
        self._quarantined = set()


class ForgetQuarantineOnRestart(_CoreMutant):
    """Does not reload quarantined responses at start: after a restart a new call in a
    quarantined response runs."""

    name = "forget-quarantine-on-restart"
    core = _ForgetQuarantineCore


class _ForgetDisabledCore(Core):
    def _restore(self, snapshot: Snapshot) -> None:
        super()._restore(snapshot)
        self._disabled = set()


class ForgetDisableOnRestart(_CoreMutant):
    """Does not reload disabled tools at start: after a restart the disabled tool runs."""

    name = "forget-disable-on-restart"
    core = _ForgetDisabledCore


class _StickyStopCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopped_tenants: set[str] = set()

    def _on_stop_tenant(self, ev: StopTenant) -> Sequence[Effect]:
        self._stopped_tenants.add(ev.tenant)
        return super()._on_stop_tenant(ev)

    def _on_turn_started(self, ev: TurnStarted) -> Sequence[Effect]:
        effects = list(super()._on_turn_started(ev))
        turn = self.turns.get(ev.turn)
        if ev.tenant in self._stopped_tenants and turn is not None and turn.status == "live":
            turn.status = "stopped"
            effects.append(SetTurnStatus(ev.turn, "stopped"))
        return effects


class TenantStopSticks(_CoreMutant):
    """Keeps a tenant stopped: the tenant's later turns are stopped too (the spec: a later
    turn starts fresh)."""

    name = "tenant-stop-sticks"
    core = _StickyStopCore


class _LatestBindingCore(Core):
    def _on_turn_started(self, ev: TurnStarted) -> Sequence[Effect]:
        bound = self.turns.get(ev.turn)
        if bound is not None and (bound.actor, bound.tenant) != (ev.actor, ev.tenant):
            bound.actor, bound.tenant = ev.actor, ev.tenant
            for call in self._active.values():
                if call.key.turn == ev.turn:
                    call.key = dataclasses.replace(call.key, tenant=ev.tenant)
            return ()
        return super()._on_turn_started(ev)


class LatestBindingWins(_CoreMutant):
    """Takes a turn announced again with another actor and tenant at its latest word."""

    name = "latest-binding-wins"
    core = _LatestBindingCore


class ConfirmRunsAgain(_Mutant):
    """The confirm handler runs the tool itself: a repeated confirmation runs it again."""

    name = "confirm-runs-again"

    def __init__(self) -> None:
        super().__init__()
        self.ran: dict[Ident, tuple[CallKey, str, str, Any, str | None]] = {}

    def wrap(self, env: TargetEnv) -> TargetEnv:
        executor = env.executor

        def execute(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            self.ran[(key.turn, key.response, key.item, key.call)] = (key, actor, tool, arguments, traceparent)
            executor(key, actor, tool, arguments, traceparent)

        self.executor = executor
        return dataclasses.replace(env, executor=execute)

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, Confirm) and event.approved and _ident(event) in self.ran:
            self.executor(*self.ran[_ident(event)])
            return
        yield event


class DenyIgnored(_Mutant):
    """Takes a denial as "ask again later": the call keeps waiting, and a later
    confirmation runs it."""

    name = "deny-ignored"

    def rewrite(self, event: Event) -> Iterator[Event]:
        if not (isinstance(event, Confirm) and not event.approved):
            yield event


class _QuarantineCollectingCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held_quarantine: set[str] = set()

    def _on_quarantine_response(self, ev: Any) -> Sequence[Effect]:
        held = {i: c for i, c in self._active.items() if c.state is not State.COLLECTING}
        for ident in held:
            del self._active[ident]
        try:
            return super()._on_quarantine_response(ev)
        finally:
            self._active.update(held)
            self._quarantined.discard(ev.response)
            self._held_quarantine.add(ev.response)

    def _on_call_opened(self, ev: Any) -> Sequence[Effect]:
        late = ev.response in self._held_quarantine
        if late:
            self._quarantined.add(ev.response)
        try:
            return super()._on_call_opened(ev)
        finally:
            if late:
                self._quarantined.discard(ev.response)


class QuarantineOnlyCollecting(_CoreMutant):
    """Quarantines only the response's calls still collecting (and calls opened later);
    a call already waiting for confirmation is not held, and runs once confirmed."""

    name = "quarantine-only-collecting"
    core = _QuarantineCollectingCore


class CancelByConversation(_Mutant):
    """Delivers a user's cancel to every live turn of the conversation's name, whatever
    the tenant: another tenant's turn in a conversation of the same name is cancelled."""

    name = "cancel-by-conversation"

    def __init__(self) -> None:
        super().__init__()
        self.conversations: dict[str, str] = {}  # turn -> conversation name

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TurnStarted):
            self.conversations.setdefault(event.turn, event.conversation)
        yield event
        if isinstance(event, CancelTurn) and event.turn in self.conversations:
            name = self.conversations[event.turn]
            yield from (CancelTurn(t) for t, c in self.conversations.items() if c == name and t != event.turn)


# --------------------------------------------------------------------------------------
# correct variants: choices the spec leaves open
# --------------------------------------------------------------------------------------


class _RejectGapsCore(Core):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._highest: dict[Ident, int] = {}

    def receive(self, event: Event) -> Sequence[Effect]:
        if type(event) is Fragment:
            ident = _ident(event)
            call = self._active.get(ident)
            highest = self._highest.get(ident, -1)
            if call is not None and call.state is State.COLLECTING and event.position < highest:
                same, different = call.buffer.seen(event.position, event.text)
                if not (same or different):  # a new position below one already received
                    effects: list[Effect] = []
                    self._fire(call, E.FRAGMENT_CONFLICT, "fragment below a position already received", effects)
                    return effects
            if call is not None:
                self._highest[ident] = max(highest, event.position)
        return super().receive(event)


class RejectOutOfOrder(_CoreMutant):
    """Correct: rejects (fails) a call when a fragment arrives at a new position below one
    already received, instead of reassembling by position (the spec: "reject or
    reassemble by its documented position")."""

    name = "reject-out-of-order"
    core = _RejectGapsCore


class DeferExecutions(_Mutant):
    """Correct: an outbox. Executions wait until the event that caused them has been
    handled, then run in order; whatever the implementation reports after a held
    execution (its status, its ledger row) waits behind it, so nothing claims an action
    ran before it did."""

    name = "defer-executions"

    def __init__(self) -> None:
        super().__init__()
        self.outbox: list[Callable[[], None]] = []
        self.depth = 0

    def wrap(self, env: TargetEnv) -> TargetEnv:
        executor, observe = env.executor, env.observe

        def later(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            self.outbox.append(lambda: executor(key, actor, tool, arguments, traceparent))

        def report(observation: Observation) -> None:
            if self.outbox:
                self.outbox.append(lambda: observe(observation))
            else:
                observe(observation)

        return dataclasses.replace(env, executor=later, observe=report)

    def receive(self, event: Event) -> None:
        self.depth += 1
        try:
            super().receive(event)
        finally:
            self.depth -= 1
        if self.depth == 0:
            while self.outbox:
                self.outbox.pop(0)()


class _FailDoomedCore(Core):
    def receive(self, event: Event) -> Sequence[Effect]:
        effects = super().receive(event)
        if type(event) is Fragment:
            call = self._active.get(_ident(event))
            if call is not None and call.state is State.COLLECTING and call.buffer.doomed is not None:
                out = list(effects)
                self._fire(call, E.FRAGMENT_CONFLICT, f"arguments can never parse: {call.buffer.doomed}", out)
                return out
        return effects


class FailDoomedEarly(_CoreMutant):
    """Correct: fails a call as soon as its text can never be one JSON object, instead of
    at its terminal event (the scanner checks every fragment)."""

    name = "fail-doomed-early"
    core = _FailDoomedCore

    def __init__(self) -> None:
        super().__init__()
        self.inner._scan_every = 0


class _FailOnRepeatCore(Core):
    def receive(self, event: Event) -> Sequence[Effect]:
        if type(event) is Fragment:
            call = self._active.get(_ident(event))
            if call is not None and call.state is State.COLLECTING:
                same, _different = call.buffer.seen(event.position, event.text)
                if same:
                    effects: list[Effect] = []
                    self._fire(call, E.FRAGMENT_CONFLICT, "a position already received arrived again", effects)
                    return effects
        return super().receive(event)


class FailOnRepeat(_CoreMutant):
    """Correct: fails a call when any position arrives again, even with the same bytes,
    instead of dropping the repeat (the spec: "reject or reassemble by its documented
    position"; a repeat runs nothing twice either way)."""

    name = "fail-on-repeat"
    core = _FailOnRepeatCore


class _RefuseAtOpenCore(Core):
    def _on_call_opened(self, ev: CallOpened) -> Sequence[Effect]:
        turn = self.turns.get(ev.turn)
        ident = (ev.turn, ev.response, ev.item, ev.call)
        fresh = turn is not None and ident not in self._active and ident not in self._decided
        if fresh and turn is not None and self._tool_spec(ev.tool) is None:
            live = classify_open(
                self._turn_live(turn), (ev.turn, ev.response) not in self._ended, ev.response in self._quarantined
            )
            if live is E.OPEN:
                return self._absent(turn, ident, ev.tool, E.OPEN_BLOCKED, "unknown or disabled tool", None)
        return super()._on_call_opened(ev)


class RefuseUnknownAtOpen(_CoreMutant):
    """Correct: a call opened for a tool that is unknown or disabled at that moment is
    cancelled at its opening, not failed at its validation ("unknown tool name ... move
    the buffer to a non-dispatching terminal state": both inert)."""

    name = "refuse-unknown-at-open"
    core = _RefuseAtOpenCore


class _KeepAcrossChangeCore(Core):
    def _on_tool_changed(self, ev: ToolChanged) -> Sequence[Effect]:
        # nothing stops: each call is validated against the catalog as it stands at its
        # terminal event, and the dispatcher's re-check refuses one whose tool changed
        # after it was validated
        return [Log(f"tool {ev.tool} changed ({ev.change}); calls in flight validate against it")]


class KeepCallsAcrossCatalogChange(_CoreMutant):
    """Correct: a catalog change stops no call in flight; the call is validated against the
    catalog as it stands at its terminal event (docs/adapters.md: "validate against the
    catalog as it stands"; the spec never says a catalog update cancels a call). A
    byte-identical re-declaration of the tool then changes nothing."""

    name = "keep-calls-across-catalog-change"
    core = _KeepAcrossChangeCore


# The spec's own words for its ledger and status ("Dispatch: inert / await confirmation /
# reject"; "a non-actionable 'preparing request' cue"; "a truthful retry or handoff route").
_SPEC_DECISIONS = {
    "collecting": "inert",
    "cancelled": "reject",
    "failed": "reject",
    "awaiting_confirmation": "await confirmation",
    "dispatched": "dispatched",
}
_SPEC_STATUS = {"preparing": "preparing request", "awaiting_confirmation": "await confirmation", "handoff": "hand-off"}


class _Reworded(_Mutant):
    """The reference, its ledger decisions, results and statuses written in other words."""

    decisions: ClassVar[Mapping[str, str]] = {}
    statuses: ClassVar[Mapping[str, str]] = {}
    results: ClassVar[Mapping[str, str]] = {}

    def wrap(self, env: TargetEnv) -> TargetEnv:
        observe = env.observe

        def reworded(observation: Observation) -> None:
            if isinstance(observation, LedgerRow):
                observation = dataclasses.replace(
                    observation,
                    decision=self.decisions.get(observation.decision, observation.decision),
                    parse=self.results.get(observation.parse, observation.parse),
                    validation=self.results.get(observation.validation, observation.validation),
                )
            elif isinstance(observation, StatusShown):
                observation = dataclasses.replace(
                    observation, status=self.statuses.get(observation.status, observation.status)
                )
            observe(observation)

        return dataclasses.replace(env, observe=reworded)


class SpecWords(_Reworded):
    """Correct: the ledger and the status in the spec's own words ("reject" for a cancelled
    and a failed call alike, "await confirmation", "preparing request", "hand-off")."""

    name = "spec-words"
    decisions = _SPEC_DECISIONS
    statuses = _SPEC_STATUS


class DeclaredWords(_Reworded):
    """Correct: words of its own, declared through the Target contract's ``record_words``
    (what each means), so that the records are judged by what they say."""

    name = "declared-words"
    decisions: ClassVar[Mapping[str, str]] = {
        "dispatched": "sent",
        "cancelled": "dropped",
        "failed": "dropped",
        "awaiting_confirmation": "held",
    }
    statuses: ClassVar[Mapping[str, str]] = {
        "preparing": "working",
        "awaiting_confirmation": "asking",
        "done": "finished",
        "retry": "try again",
    }
    results: ClassVar[Mapping[str, str]] = {"ok": "fine"}
    record_words: ClassVar[Mapping[str, Mapping[str, str]]] = {
        "decision": {"sent": "dispatched", "dropped": "not_dispatched", "held": "awaiting_confirmation"},
        "status": {"working": "preparing", "asking": "awaiting_confirmation", "finished": "done", "try again": "retry"},
        "result": {"fine": "ok"},
    }


class _PreparingEachCallCore(Core):
    def _show(self, turn: Any, status: str, effects: list[Effect]) -> None:
        if status == "preparing" and turn.stopped and not turn.executed and turn.shown != status:
            # a new call after a retry offer: "preparing" is true again; what is on screen
            # is durable, so a restart knows the offer no longer is
            turn.shown = status
            effects.append(RecordDisplay(turn.turn, status, turn.stopped, turn.executed))
            effects.append(Status(turn.turn, status))
            return
        super()._show(turn, status, effects)


class PreparingAfterRetry(_CoreMutant):
    """Correct: a new call of a turn that was offered a retry shows "preparing" again (the
    reference stays on the offer); a later stop offers retry or hand-off again."""

    name = "preparing-after-retry"
    core = _PreparingEachCallCore


_ALL_MUTANTS: tuple[type[_Mutant], ...] = (
    ArgumentsByCallId,
    ConversationWithoutTenant,
    StopEveryTenant,
    ConfirmAnotherTurn,
    ItemWithoutResponse,
    ResponseEndById,
    SkipRulesWhenConfirmed,
    RulesOfFirstTool,
    DisableNewCallsOnly,
    CachedCatalog,
    DedupeByText,
    Latin1Deltas,
    CharsForBytes,
    CapOffByOne,
    TurnCapPerResponse,
    TurnBytesResetOnRestart,
    ForgetQuarantineOnRestart,
    ForgetDisableOnRestart,
    TenantStopSticks,
    LatestBindingWins,
    ConfirmRunsAgain,
    DenyIgnored,
    QuarantineOnlyCollecting,
    CancelByConversation,
)
FACTORIES: dict[str, type[_Mutant]] = {cls.name: cls for cls in _ALL_MUTANTS}

CORRECT_FACTORIES: dict[str, type[_Mutant]] = {
    cls.name: cls
    for cls in (
        RejectOutOfOrder,
        DeferExecutions,
        FailDoomedEarly,
        FailOnRepeat,
        RefuseUnknownAtOpen,
        KeepCallsAcrossCatalogChange,
        SpecWords,
        DeclaredWords,
        PreparingAfterRetry,
    )
}
