"""Small targets for testing the harness (importable as ``toy_targets:<factory>``).

* :class:`ModelTarget`: the model's own semantics driven one event at a time, with every
  capability: it must pass everything, and it reaches every transition a trace can reach.
* :class:`SimpleAssembler`: a careful assembler written by hand, the size of what a user
  would write, declaring only the capabilities it has (cancellation, business validation,
  turn binding); scenarios that need more are "not applicable" for it.
* Broken variants of it, each with one classic bug: ``dispatch_on_first_parse`` (runs a
  call as soon as its buffer parses), ``no_dedupe`` (appends fragments in arrival order),
  ``ignore_cancel`` (does not honour the user's stop).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.ecma_regex import validator_class
from callsafe.model.leaks import withhold_path
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, State
from callsafe.model.oracle import STOPPING_EVENTS
from callsafe.model.system import CallRecord, ParseFailure, Semantics, strict_parse
from callsafe.model.vocabulary import (
    AuditRow,
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    ConfirmationRequested,
    DisableTool,
    Disconnect,
    Event,
    Fragment,
    LedgerRow,
    QuarantineResponse,
    ResponseTerminal,
    Restart,
    StatusShown,
    StopTenant,
    Trace,
    TurnStarted,
)

# --------------------------------------------------------------------------------------
# The model as a target
# --------------------------------------------------------------------------------------


class _DrivenSemantics(Semantics):
    """The model, asking the harness's business validator where it validates: the harness
    delivers events marked during_validation from inside that call."""

    def __init__(self, trace: Trace, owner: ModelTarget) -> None:
        super().__init__(trace)
        self.owner = owner

    def _apply_pending(self) -> None:
        last = self.expected[-1]
        record = self.state.calls[(last.key.turn, last.key.response, last.key.item, last.key.call)]
        self.owner.env.business_validator(last.key, last.tool, record.arguments)


class ModelTarget:
    name = "model"
    protocol = "abstract"
    capabilities = CAPABILITIES - {"store_faults"}

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.sem = _DrivenSemantics(Trace(events=(), tools=dict(env.tools), limits=env.limits), self)
        self.steps_done = 0
        self.expected_done = 0
        self.preparing: set[str] = set()
        self.executed_turns: set[str] = set()
        self.stopped_turns: set[str] = set()
        self.last_status: dict[str, str] = {}

    def receive(self, event: Event) -> None:
        self.sem.step_index = self.env.step()
        self.sem.apply(event)
        self._effects(event)

    def restart(self) -> None:
        self.receive(Restart())

    def close(self) -> None:
        pass

    def _status(self, turn: str, status: str) -> None:
        self.last_status[turn] = status
        self.env.observe(StatusShown(self.env.step(), turn, status))

    def _record(self, key: CallKey) -> CallRecord:
        return self.sem.state.calls[(key.turn, key.response, key.item, key.call)]

    def _validation(self, record: CallRecord) -> str:
        """The model's validation text with a path of undeclared keys withheld, as the
        reference writes it: a key matched by ``patternProperties`` came from the stream."""
        spec = self.sem.state.tools.get(record.tool or "")
        if spec is None or not record.validation.startswith("schema: "):
            return record.validation
        return withhold_path(record.validation, spec.schema)

    def _ledger(self, record: CallRecord, decision: str) -> None:
        turn = self.sem.state.turns.get(record.key.turn)
        self.env.observe(
            LedgerRow(
                self.env.step(),
                record.key,
                len(record.fragments),
                record.terminal_reason,
                record.parse,
                self._validation(record),
                decision,
                turn.traceparent if turn else None,
            )
        )

    def _effects(self, event: Event) -> None:
        stopped: list[CallKey] = []
        while self.steps_done < len(self.sem.steps) or self.expected_done < len(self.sem.expected):
            while self.steps_done < len(self.sem.steps):
                step = self.sem.steps[self.steps_done]
                self.steps_done += 1
                if step.note:
                    continue
                if step.event is CallEvent.OPEN and step.key.turn not in self.preparing:
                    self.preparing.add(step.key.turn)
                    self._status(step.key.turn, "preparing")
                if step.after in TERMINAL_STATES and step.before not in TERMINAL_STATES:
                    self._ledger(self._record(step.key), step.after.value)
                    if step.event in STOPPING_EVENTS and step.after is not State.DISPATCHED:
                        self.stopped_turns.add(step.key.turn)
                        stopped.append(step.key)
            while self.expected_done < len(self.sem.expected):
                e = self.sem.expected[self.expected_done]
                self.expected_done += 1
                if e.what == "confirm":
                    self.env.observe(ConfirmationRequested(self.env.step(), e.key, e.tool))
                    self._ledger(self._record(e.key), "awaiting_confirmation")
                    self._status(e.key.turn, "awaiting_confirmation")
                elif e.what == "execute":
                    turn = self.sem.state.turns[e.key.turn]
                    self.env.executor(e.key, turn.actor, e.tool, e.arguments, turn.traceparent)
                    self.executed_turns.add(e.key.turn)
                    self._status(e.key.turn, "done")
        if isinstance(event, (QuarantineResponse, DisableTool, StopTenant)) and stopped:
            self.env.observe(AuditRow(self.env.step(), event.kind, event.reason, tuple(stopped)))
        for turn in sorted(self.stopped_turns - self.executed_turns):
            if self.last_status.get(turn) not in ("retry", "handoff"):
                self._status(turn, "retry")


# --------------------------------------------------------------------------------------
# A hand-written assembler
# --------------------------------------------------------------------------------------


@dataclass
class _Turn:
    actor: str
    tenant: str
    conversation: str
    traceparent: str | None
    live: bool = True


@dataclass
class _Buffer:
    key: CallKey
    tool: str | None
    state: str = "collecting"  # collecting | validating | done | failed | cancelled
    parts: dict[int, str] = field(default_factory=dict)
    arrival: list[str] = field(default_factory=list)
    size: int = 0


class SimpleAssembler:
    """Per-call buffers keyed by the exact tuple, positions, byte caps, one strict parse
    at the call's own completed terminal event, schema then business validation, and a
    re-check of turn, permission and tool at execution time."""

    name = "simple"
    protocol = "abstract"
    capabilities = frozenset({"cancellation", "business_validation", "turn_binding"})

    def __init__(self, dispatch_on_first_parse: bool = False, dedupe: bool = True, honour_cancel: bool = True) -> None:
        self.dispatch_on_first_parse = dispatch_on_first_parse
        self.dedupe = dedupe
        self.honour_cancel = honour_cancel

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.turns: dict[str, _Turn] = {}
        self.current: dict[tuple[str, str], str] = {}  # (tenant, conversation) -> turn
        self.buffers: dict[tuple[str, str, str, str], _Buffer] = {}
        self.terminal_ids: set[str] = set()
        self.ended: set[tuple[str, str]] = set()
        self.turn_bytes: dict[str, int] = {}

    def restart(self) -> None:  # no durable store: the capability is not declared
        pass

    def close(self) -> None:
        pass

    # -- helpers ------------------------------------------------------------------------

    def _live(self, turn: str) -> bool:
        t = self.turns.get(turn)
        return t is not None and t.live and self.current.get((t.tenant, t.conversation)) == turn

    def _stop(self, select: Any, state: str, including_validating: bool = True) -> None:
        for buf in self.buffers.values():
            active = buf.state == "collecting" or (including_validating and buf.state == "validating")
            if active and select(buf):
                buf.state = state

    def _buffer(self, ev: Any) -> _Buffer | None:
        return self.buffers.get((ev.turn, ev.response, ev.item, ev.call))

    def _new(self, ev: Any, tool: str | None, state: str) -> _Buffer:
        key = CallKey(self.turns[ev.turn].tenant, ev.turn, ev.response, ev.item, ev.call)
        buf = _Buffer(key, tool, state)
        self.buffers[(ev.turn, ev.response, ev.item, ev.call)] = buf
        return buf

    def _text(self, buf: _Buffer) -> str:
        if not self.dedupe:
            return "".join(buf.arrival)
        return "".join(buf.parts[p] for p in sorted(buf.parts))

    def _execute(self, buf: _Buffer, arguments: Any) -> None:
        turn = self.turns[buf.key.turn]
        buf.state = "done"
        self.env.executor(buf.key, turn.actor, buf.tool or "", arguments, turn.traceparent)

    # -- events -------------------------------------------------------------------------

    def receive(self, ev: Event) -> None:
        if isinstance(ev, TurnStarted):
            if ev.turn in self.turns:
                return
            # conversations are per tenant: another tenant's conversation of the same name is another
            older = {
                t for t, rec in self.turns.items() if (rec.tenant, rec.conversation) == (ev.tenant, ev.conversation)
            }
            self._stop(lambda b: b.key.turn in older, "cancelled")
            for t in older:
                self.turns[t].live = False
            self.turns[ev.turn] = _Turn(ev.actor, ev.tenant, ev.conversation, ev.traceparent)
            self.current[(ev.tenant, ev.conversation)] = ev.turn
        elif isinstance(ev, CancelTurn):
            if self.honour_cancel and ev.turn in self.turns:
                self.turns[ev.turn].live = False
                self._stop(lambda b: b.key.turn == ev.turn, "cancelled")
        elif isinstance(ev, Disconnect):
            self.ended.add((ev.turn, ev.response))
            self._stop(lambda b: (b.key.turn, b.key.response) == (ev.turn, ev.response), "failed")
        elif isinstance(ev, ResponseTerminal):
            self.ended.add((ev.turn, ev.response))
            self._stop(lambda b: (b.key.turn, b.key.response) == (ev.turn, ev.response), "failed", False)
        elif isinstance(ev, CallOpened):
            if ev.turn not in self.turns:
                return
            buf = self._buffer(ev)
            if buf is not None:
                if buf.tool != ev.tool and buf.state in ("collecting", "validating"):
                    buf.state = "failed"  # one call id, two tool names
                return
            open_ok = self._live(ev.turn) and (ev.turn, ev.response) not in self.ended
            self._new(ev, ev.tool, "collecting" if open_ok else "cancelled")
        elif isinstance(ev, Fragment):
            self._fragment(ev)
        elif isinstance(ev, CallTerminal):
            self._terminal(ev)

    def _fragment(self, ev: Fragment) -> None:
        if ev.turn not in self.turns:
            return
        buf = self._buffer(ev)
        if buf is None:
            self._new(ev, None, "failed")  # data for a call never announced
            return
        if buf.state == "validating":
            # Data after the terminal event: the call was not finished (a repeat is harmless).
            if buf.parts.get(ev.position) != ev.text:
                buf.state = "failed"
            return
        if buf.state != "collecting":
            return
        size = len(ev.text.encode("utf-8", "surrogatepass"))
        if self.dedupe:
            previous = buf.parts.get(ev.position)
            if previous == ev.text:
                return
            if previous is not None or ev.position < 0:
                buf.state = "failed"
                return
        limits = self.env.limits
        if buf.size + size > limits.call_bytes or self.turn_bytes.get(ev.turn, 0) + size > limits.turn_bytes:
            buf.state = "failed"
            return
        buf.parts[ev.position] = ev.text
        buf.arrival.append(ev.text)
        buf.size += size
        self.turn_bytes[ev.turn] = self.turn_bytes.get(ev.turn, 0) + size
        if self.dispatch_on_first_parse:
            try:
                arguments = json.loads(self._text(buf))
            except ValueError:
                return
            if isinstance(arguments, dict):
                self._execute(buf, arguments)

    def _terminal(self, ev: CallTerminal) -> None:
        if ev.turn not in self.turns:
            return
        seen = ev.event_id in self.terminal_ids
        self.terminal_ids.add(ev.event_id)
        buf = self._buffer(ev)
        if buf is None:
            self._new(ev, None, "failed")
            return
        if buf.state == "validating" and not seen and ev.reason != "completed":
            buf.state = "failed"  # a stop reason arriving while the call is being validated
            return
        if seen or buf.state != "collecting":
            return
        if ev.reason != "completed":
            buf.state = "failed"
            return
        if self.dedupe and sorted(buf.parts) != list(range(len(buf.parts))):
            buf.state = "failed"
            return
        try:
            arguments = strict_parse(self._text(buf))
        except ParseFailure:
            buf.state = "failed"
            return
        spec = self.env.tools.get(buf.tool or "")
        # JSON Schema 2020-12 patterns are ECMA-262 (python-jsonschema's re reads `$` otherwise)
        if spec is None or not validator_class(spec.schema)(spec.schema).is_valid(arguments):
            buf.state = "failed"
            return
        buf.state = "validating"
        problem = self.env.business_validator(buf.key, buf.tool or "", arguments)
        if buf.state != "validating":
            return  # stopped while it was being validated
        if problem is not None:
            buf.state = "failed"
            return
        turn = self.turns[buf.key.turn]
        if not self._live(buf.key.turn) or not spec.permits(turn.actor) or self.env.tools.get(buf.tool or "") != spec:
            buf.state = "cancelled"
            return
        self._execute(buf, arguments)


def model_target() -> ModelTarget:
    return ModelTarget()


def simple() -> SimpleAssembler:
    return SimpleAssembler()


def dispatch_on_first_parse() -> SimpleAssembler:
    return SimpleAssembler(dispatch_on_first_parse=True)


def no_dedupe() -> SimpleAssembler:
    return SimpleAssembler(dedupe=False)


def ignore_cancel() -> SimpleAssembler:
    return SimpleAssembler(honour_cancel=False)


class NeverExecutes(SimpleAssembler):
    """Safe by doing nothing: must fail certification on liveness."""

    name = "never"

    def _execute(self, buf: _Buffer, arguments: Any) -> None:
        buf.state = "done"


def never_executes() -> NeverExecutes:
    return NeverExecutes()


# --------------------------------------------------------------------------------------
# Targets that break: each raises (or hangs) at one point of the contract
# --------------------------------------------------------------------------------------


class Misbehaves(ModelTarget):
    """The model, breaking at one point: ``where`` is "start", "receive" or "restart";
    ``hang`` makes it wait for ever there instead of raising."""

    name = "misbehaves"

    def __init__(self, where: str, hang: bool = False) -> None:
        self.where = where
        self.hang = hang

    def _break(self, where: str) -> None:
        if where != self.where:
            return
        if self.hang:
            while True:  # a busy wait on something that never comes
                time.sleep(0.05)
        raise RuntimeError(f"the adapter broke in {where}")

    def start(self, env: TargetEnv) -> None:
        self._break("start")
        super().start(env)

    def receive(self, event: Event) -> None:
        if isinstance(event, Fragment):  # the turn starts fine; the first fragment breaks it
            self._break("receive")
        super().receive(event)

    def restart(self) -> None:
        self._break("restart")
        super().restart()


def raises_in_factory() -> ModelTarget:
    raise RuntimeError("the factory broke")


def raises_in_start() -> Misbehaves:
    return Misbehaves("start")


def raises_in_receive() -> Misbehaves:
    return Misbehaves("receive")


def raises_in_restart() -> Misbehaves:
    return Misbehaves("restart")


def hangs_in_receive() -> Misbehaves:
    return Misbehaves("receive", hang=True)


class NoTenant(SimpleAssembler):
    """Builds its call keys without a tenant (``CallKey(None, ...)``), as an adapter that
    never read ``TurnStarted.tenant`` would: its reports must still read back."""

    name = "no-tenant"

    def _execute(self, buf: _Buffer, arguments: Any) -> None:
        turn = self.turns[buf.key.turn]
        buf.state = "done"
        key = CallKey(None, buf.key.turn, buf.key.response, buf.key.item, buf.key.call)  # type: ignore[arg-type]
        self.env.executor(key, turn.actor, buf.tool or "", arguments, turn.traceparent)


def no_tenant() -> NoTenant:
    return NoTenant()


_RUNS = {"count": 0}


class Interrupted(ModelTarget):
    """Ctrl-C arrives (as ``KeyboardInterrupt``) while the tenth trace runs."""

    def start(self, env: TargetEnv) -> None:
        _RUNS["count"] += 1
        if _RUNS["count"] == 10:
            raise KeyboardInterrupt
        super().start(env)


def interrupted() -> Interrupted:
    return Interrupted()


def factory() -> SimpleAssembler:
    """Named like the README's ``my_adapter:factory``: the console title then reads
    ``...:factory: simple``, which rich would turn into an emoji if it parsed it."""
    return SimpleAssembler()


def hangs_in_factory() -> ModelTarget:
    while True:
        time.sleep(0.05)


class DeafToSignals(ModelTarget):
    """Stuck where no signal reaches it (as native code that never returns to Python): it
    blocks the timer signal, then waits."""

    def receive(self, event: Event) -> None:
        if isinstance(event, Fragment):
            import signal

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)  # one call that never comes back to the interpreter
        super().receive(event)


def deaf_to_signals() -> DeafToSignals:
    return DeafToSignals()
