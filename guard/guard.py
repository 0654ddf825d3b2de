"""The guard: the reference implementation behind an API an agent loop calls.

Why it is built on the reference implementation rather than beside it: the sans-IO core
(:mod:`callsafe.reference_impl.core`) and its driver are what callsafe certifies, on every
adversity, over every store. The guard adds only what an application needs around them:
reading the SDKs' stream objects (through the provider parsers, :mod:`callsafe.providers`),
turns as objects, methods for confirmation and the operator controls, a lock, spans and
log lines. It decides nothing itself, so it keeps every invariant the core keeps; and the
toolkit certifies the guard itself too (``callsafe certify guard:memory:openai-chat``).

Two ways to run a call, chosen by ``executor``:

* **executor mode** (``executor=callable``): the guard calls ``executor(call)`` once the
  store's claim says this process may run it (at most once, across replays, replicas and
  restarts); :meth:`Turn.stream` then yields each call that ran, with ``result`` (what the
  executor returned) or ``error`` (what it raised: the guard records ``raised <Type>`` and
  never runs it again);
* **yield mode** (``executor=None``): :meth:`Turn.stream` yields each permitted call, and
  the application runs it. The claim is durable before the call is yielded; the outcome
  recorded is that the call was handed over. Use ``call.idempotency_key`` as the tool's
  idempotency key, so a crash between the hand-over and the tool's own commit is safe.

**Thread-safety.** Every method that changes something takes one internal re-entrant lock,
so one guard may be shared by threads and by the tasks of one event loop; the core and
its store see one input at a time. :meth:`Guard.status` and
:meth:`Guard.pending_confirmations` read without it, so they answer while another thread
waits on the store; the store's claim, not the lock, is what makes a call run once. The
lock is held while an input's effects run, the validator and (in executor mode) the
executor included: tools that take long should run in yield mode, where the application
runs them outside the lock. Reading a stream's next item (network I/O) is outside the
lock. A re-entrant call from inside the validator or executor (cancelling the turn, say)
is allowed and applied at once, as the spec's "during validation" window says. Every
PostgreSQL operation is bounded on the client (``store_timeout``), so a thread waiting
for the lock behind a stalled store waits a bounded time too.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, NamedTuple, Self

from callsafe.guard.catalog import catalog_of, spec_of
from callsafe.guard.errors import (
    ClosedGuard,
    ConfigError,
    GuardStoreError,
    LimitExceeded,
    StreamError,
    UnknownInput,
    UnknownTurn,
)
from callsafe.guard.inputs import SKIP, check_protocol, detect_protocol, error_event_of, payload_of
from callsafe.guard.stores import describe_store, open_store
from callsafe.guard.telemetry import LOGGER_NAME, Telemetry, log_event, log_observation
from callsafe.model.lifecycle import TERMINAL_STATES
from callsafe.model.vocabulary import (
    CallKey,
    CancelTurn,
    Confirm,
    DisableTool,
    Event,
    Limits,
    Observation,
    QuarantineResponse,
    StopTenant,
    ToolChanged,
    ToolSpec,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.providers.base import Parser, ProviderError
from callsafe.providers.sse import DONE, SSEDecoder
from callsafe.providers.sse import payload_of as sse_payload
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import LedgerEntry, RequestConfirmation
from callsafe.reference_impl.errors import AssemblerError, CallLimitExceeded, StoreError
from callsafe.reference_impl.leases import DEFAULT_LEASE_SECONDS, Heartbeat, Lease, new_identity
from callsafe.reference_impl.retention import Retention, keeps_retention
from callsafe.reference_impl.store import Store, holds_leases

__all__ = ["Executor", "Guard", "LedgerRecord", "StreamReader", "ToolCall", "Turn", "Validator"]


@dataclass(frozen=True)
class ToolCall:
    """One finished, validated, bound and permitted call (or one awaiting confirmation).

    ``key`` is the call's identity ``(tenant, turn, response, item, call)``; ``arguments``
    are the parsed arguments (a dict no one else holds). In executor mode a yielded call
    has ``ran`` set, and ``result`` or ``error`` from the executor."""

    key: CallKey
    tool: str
    arguments: dict[str, Any]
    actor: str
    traceparent: str | None = None
    ran: bool = False
    result: Any = None
    error: BaseException | None = None

    @property
    def id(self) -> str:
        """The provider's call id (``call_...``, ``toolu_...``): what the tool result answers."""
        return self.key.call

    @property
    def turn(self) -> str:
        return self.key.turn

    @property
    def tenant(self) -> str:
        return self.key.tenant

    @property
    def response(self) -> str:
        return self.key.response

    @property
    def idempotency_key(self) -> str:
        """A stable key for the tool's own idempotency (the same for a replayed call)."""
        return str(self.key)


class LedgerRecord(NamedTuple):
    """One ledger row: an assembly decision and why. Never an argument value."""

    key: CallKey
    fragments: int
    terminal_reason: str | None
    parse: str
    validation: str
    decision: str
    traceparent: str | None
    why: str


Executor = Callable[[ToolCall], object]
Validator = Callable[[ToolCall], str | None]


# Caps on tool calls opened per turn and per response, beside the model's byte caps: a
# stream that opens new call ids without end costs no memory or store write past them.
DEFAULT_CALL_CAPS: Final = {"turn_calls": 4096, "response_calls": 256}


def _call_caps_of(limits: Limits | Mapping[str, int] | None) -> dict[str, int]:
    caps = dict(DEFAULT_CALL_CAPS)
    if isinstance(limits, Mapping):
        caps.update({k: v for k, v in limits.items() if k in caps})
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in caps.values()):
        raise ConfigError("turn_calls and response_calls are positive integers (calls)")
    return caps


def _limits_of(limits: Limits | Mapping[str, int] | None) -> Limits:
    if limits is None:
        return Limits()
    if isinstance(limits, Limits):
        value = limits
    elif isinstance(limits, Mapping):
        known = {"call_bytes", "turn_bytes", *DEFAULT_CALL_CAPS}
        unknown = set(limits) - known
        if unknown:
            raise ConfigError(f"unknown limits {sorted(unknown)}; known: {', '.join(sorted(known))}")
        value = Limits(**{k: v for k, v in limits.items() if k in ("call_bytes", "turn_bytes")})
    else:
        raise ConfigError(f"limits is a Limits or a mapping, got {type(limits).__name__}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (value.call_bytes, value.turn_bytes)):
        raise ConfigError("limits are positive integers (bytes)")
    return value


class _GuardDriver(Driver):
    """The reference driver, telling the guard the arguments a confirmation is about (the
    observation it makes carries none, by design)."""

    def __init__(self, *args: Any, on_confirmation: Callable[[RequestConfirmation], None], **kwargs: Any) -> None:
        self._on_confirmation = on_confirmation
        super().__init__(*args, **kwargs)

    def _request_confirmation(self, effect: RequestConfirmation) -> None:
        self._on_confirmation(effect)
        super()._request_confirmation(effect)


class Guard:
    """The certified assembler for an agent loop. See the module docstring and
    ``docs/guard.md``.

    ``tools``: ``{name: JSON Schema or ToolSpec}`` or a request's ``tools=`` list;
    ``executor``: ``executor(call)`` runs a tool (None: yield mode); ``validator``:
    ``validator(call)`` returns None or why the call is refused (business rules, run once
    per finished call after the schema check); ``limits``: byte caps per call and per turn;
    ``store``: ``"sqlite:///path"``, ``"postgresql://..."``, ``"memory:"`` or a Store;
    ``create``: make a durable store that does not exist yet (first start only);
    ``namespace``: the PostgreSQL schema (replicas share one); ``observer``: called with
    every :class:`~callsafe.model.vocabulary.Observation` (ledger rows, statuses, audit
    rows, confirmation requests, notes); ``tracer``: an OpenTelemetry tracer (default: the
    global one, when ``opentelemetry-api`` is installed); ``clock``: the time for ledger
    rows and leases; ``instance``: this guard's identity among the replicas sharing the
    store (default: a unique one; a stable one makes a restart take its own leftover
    calls at once); ``lease_seconds``: how long its lease outlives its last heartbeat,
    i.e. how long a killed guard's calls in flight wait before a replica fails them;
    ``heartbeat``: renew the lease from a thread (False: call :meth:`heartbeat`);
    ``store_timeout``: the client-side bound in seconds of one PostgreSQL operation
    (default 40; see ``docs/guard.md``, "Bounded stalls"); ``retention``: a
    :class:`~callsafe.reference_impl.retention.Retention` policy applied online by a thread
    every ``retention.every`` seconds (None: none; :meth:`prune` runs one pass; see
    ``docs/guard.md``, "Retention")."""

    def __init__(
        self,
        tools: object,
        executor: Executor | None = None,
        validator: Validator | None = None,
        limits: Limits | Mapping[str, int] | None = None,
        *,
        store: str | Store,
        create: bool = False,
        namespace: str | None = None,
        observer: Callable[[Observation], None] | None = None,
        logger: logging.Logger | None = None,
        tracer: Any = None,
        clock: Callable[[], float] = time.time,
        step: Callable[[], int] | None = None,
        instance: str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        heartbeat: bool = True,
        store_timeout: float | None = None,
        retention: Retention | None = None,
    ) -> None:
        if executor is not None and not callable(executor):
            raise ConfigError("executor is a callable taking a ToolCall, or None (yield mode)")
        if validator is not None and not callable(validator):
            raise ConfigError("validator is a callable taking a ToolCall, or None")
        if observer is not None and not callable(observer):
            raise ConfigError("observer is a callable taking an Observation, or None")
        self._tools = catalog_of(tools)
        self._limits = _limits_of(limits)
        self._caps = _call_caps_of(limits)
        self._executor = executor
        self._validator = validator
        self._observer = observer
        self._log = logger or logging.getLogger(LOGGER_NAME)
        self._telemetry = Telemetry(tracer)
        self._clock = clock
        self._inputs = itertools.count()
        self._input = -1
        self._step = step or (lambda: self._input)
        self._lock = threading.RLock()
        self._ready: list[ToolCall] = []  # handed over during the current input
        self._confirmations: dict[CallKey, ToolCall] = {}
        self._turns: dict[str, TurnStarted] = {}
        self._closed = False
        self._heartbeat: Heartbeat | None = None
        self._pruner: Heartbeat | None = None
        if retention is not None and not isinstance(retention, Retention):
            raise ConfigError("retention is a callsafe.guard.Retention policy, or None")
        self._retention = retention
        if instance is not None and not isinstance(instance, str):
            raise ConfigError("instance is a string naming this guard (unique among live replicas), or None")
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not lease_seconds > 0:
            raise ConfigError("lease_seconds is a positive number of seconds")
        self.instance = instance or new_identity()
        self.store_kind = describe_store(store)
        self._store = open_store(store, create=create, namespace=namespace, operation_timeout=store_timeout)
        if retention is not None and not keeps_retention(self._store):
            self._store.close()
            raise ConfigError(
                f"a {self.store_kind} store keeps no retention: use SQLite or PostgreSQL, or retention=None"
            )
        try:
            self._lease = Lease(self._store, self.instance, lease_seconds, clock) if holds_leases(self._store) else None
        except ValueError as exc:
            self._store.close()
            raise ConfigError(str(exc)) from None
        try:
            adopted = self._lease.acquire() if self._lease is not None else []
            if adopted:
                log_event(
                    self._log,
                    logging.WARNING,
                    "calls_taken_over",
                    "guard %(instance)s: %(count)s call(s) in flight of a stopped instance taken over, to be failed",
                    instance=self.instance,
                    count=len(adopted),
                )
            owner = self.instance if self._lease is not None else None
            self._core = Core(
                self._tools,
                self._limits,
                self._store.load(),
                owner=owner,
                forget_over_turns=True,  # bounded memory: a finished turn's calls leave it
                turn_calls=self._caps["turn_calls"],
                response_calls=self._caps["response_calls"],
            )
            self._driver = _GuardDriver(
                self._core,
                self._store,
                executor=self._hand_over,
                business_validator=self._validate,
                observe=self._observe,
                step=self._step,
                clock=clock,
                on_confirmation=self._confirmation_requested,
            )
            for key, tool in self._store.unknown_outcomes():
                log_event(
                    self._log,
                    logging.WARNING,
                    "unknown_outcome",
                    "call %(key)s (%(tool)s): claimed before a crash, outcome unknown",
                    key=key,
                    tool=tool,
                )
            self._driver.run(self._core.start())
        except StoreError as exc:
            self._store.close()
            raise GuardStoreError(f"the store failed at start: {exc}", exc.fault) from exc
        if self._lease is not None and heartbeat:
            self._heartbeat = Heartbeat(
                self.heartbeat, self._lease.interval, self._heartbeat_failed, f"callsafe-lease-{self.instance}"
            )
            self._heartbeat.start()
        if retention is not None:
            self._pruner = Heartbeat(
                self.prune, retention.every, self._prune_failed, f"callsafe-retention-{self.instance}"
            )
            self._pruner.start()

    # -- context manager -----------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the lease and the store (its data stays). Calls in flight are not
        decided: with the lease released they are orphans, which the next guard to start
        on the store (or a live replica's next heartbeat) fails, as after a restart."""
        beating, self._heartbeat = self._heartbeat, None
        if beating is not None:  # outside the lock: a beat in progress may be waiting for it
            beating.stop()
        pruning, self._pruner = self._pruner, None
        if pruning is not None:
            pruning.stop()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._lease is not None:
                    self._lease.release()
            except StoreError as exc:  # the lease then expires by itself
                log_event(
                    self._log,
                    logging.WARNING,
                    "lease_not_released",
                    "guard %(instance)s: lease not released (%(fault)s): it expires in %(ttl)s s",
                    instance=self.instance,
                    fault=exc.fault,
                    ttl=self._lease.ttl if self._lease is not None else 0.0,
                )
            finally:
                self._store.close()

    # -- leases --------------------------------------------------------------------

    def heartbeat(self) -> int:
        """Renew this guard's lease, then fail the calls in flight of instances whose lease
        expired (killed replicas): how many calls were taken over. The heartbeat thread
        calls it every ``lease_seconds / 3``; a guard built with ``heartbeat=False`` (tests,
        an application with its own scheduler) calls it itself. Raises
        :class:`~callsafe.guard.errors.GuardStoreError` when the store fails."""
        lease = self._lease
        if lease is None:
            return 0
        self._check_open()
        try:
            live = lease.renew()  # the store's own lock: not the guard's
        except StoreError as exc:
            raise GuardStoreError(f"the lease could not be renewed: {exc}", exc.fault) from exc
        if not live:
            log_event(
                self._log,
                logging.WARNING,
                "lease_lapsed",
                "guard %(instance)s: its lease had lapsed before this heartbeat; other replicas may have failed "
                "its calls in flight",
                instance=self.instance,
            )
        with self._lock:
            self._check_open()
            try:
                rows = lease.orphans()
            except StoreError as exc:
                raise GuardStoreError(f"the store failed: {exc}", exc.fault) from exc
            if not rows:
                return 0
            log_event(
                self._log,
                logging.WARNING,
                "calls_taken_over",
                "guard %(instance)s: %(count)s call(s) in flight of an instance whose lease expired taken over, "
                "to be failed",
                instance=self.instance,
                count=len(rows),
            )
            self._input = next(self._inputs)
            try:
                self._driver.run(self._core.take_over(rows))
            except StoreError as exc:
                raise GuardStoreError(f"the store failed: {exc}", exc.fault) from exc
        return len(rows)

    def leases(self) -> list[tuple[str, float, float]]:
        """Every live or expired lease in the store ``(instance, heartbeat, expires)``."""
        if self._lease is None:
            return []
        with self._lock:
            rows: list[tuple[str, float, float]] = self._store_call(self._lease.store.leases)
        return rows

    def _background_failed(self, exc: BaseException, event: str, message: str, **fields: Any) -> None:
        """A background thread's pass failed (the heartbeat, retention): a warning with the
        store's fault, unless the guard was closed under it."""
        if isinstance(exc, ClosedGuard):
            return
        fault = getattr(exc, "fault", None)
        fault_name = getattr(fault, "value", type(exc).__name__)
        log_event(self._log, logging.WARNING, event, message, instance=self.instance, fault=fault_name, **fields)

    def _heartbeat_failed(self, exc: BaseException) -> None:
        self._background_failed(
            exc,
            "heartbeat_failed",
            "guard %(instance)s: heartbeat failed (%(fault)s); the lease expires %(ttl)s s after the last renewal",
            ttl=self._lease.ttl if self._lease is not None else 0.0,
        )

    # -- retention -----------------------------------------------------------------

    def prune(self) -> dict[str, int]:
        """One pass of this guard's retention policy now (the retention thread calls it
        every ``retention.every`` seconds): how many rows of each table went. Outside the
        guard's lock: each batch is one short store transaction, between which inputs go
        on. Raises :class:`~callsafe.guard.errors.GuardStoreError` when the store fails."""
        policy, store = self._retention, self._store
        if policy is None or not keeps_retention(store):
            return {}
        self._check_open()
        try:
            gone = store.prune_retained(policy, self._clock())
        except StoreError as exc:
            raise GuardStoreError(f"retention failed: {exc}", exc.fault) from exc
        if any(gone.values()):
            log_event(
                self._log,
                logging.INFO,
                "pruned",
                "guard %(instance)s: retention deleted %(turns)s turn(s), %(calls)s call(s), %(ids)s terminal id(s)",
                instance=self.instance,
                turns=gone.get("turns", 0),
                calls=gone.get("calls", 0),
                ids=gone.get("terminal_ids", 0),
            )
        return gone

    def _prune_failed(self, exc: BaseException) -> None:
        self._background_failed(
            exc, "prune_failed", "guard %(instance)s: a retention pass failed (%(fault)s); the next one tries again"
        )

    # -- turns ---------------------------------------------------------------------

    def turn(
        self,
        turn_id: str,
        actor: str,
        tenant: str,
        *,
        conversation: str = "main",
        traceparent: str | None = None,
    ) -> Turn:
        """Start a turn: calls read in it are bound to ``actor`` and ``tenant``; it
        supersedes the conversation's previous turn (whose calls still in flight can no
        longer run). Without ``traceparent`` the current OpenTelemetry span's is used.
        Also a context manager: leaving it with an exception cancels the turn."""
        for name, value in (("turn_id", turn_id), ("actor", actor), ("tenant", tenant), ("conversation", conversation)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{name} is a non-empty string")
        if traceparent is None:
            traceparent = self._telemetry.current_traceparent()
        started = TurnStarted(turn_id, actor, tenant, conversation, traceparent)
        with self._lock:
            self._check_open()
            self._turns[turn_id] = started
            self._deliver(started)
            del self._turns[turn_id]  # the core holds it now (and forgets it once it is over)
        return Turn(self, started)

    def resume_turn(self, turn_id: str) -> Turn:
        """The turn as the store remembers it, for a process that restarted in the middle of
        it (no new turn is started: its binding, its calls' decisions and whether it is
        still live are the store's). Raises :class:`~callsafe.guard.errors.UnknownTurn`."""
        with self._lock:
            self._check_open()
            state = self._core.turns.get(turn_id)
            if state is None:
                raise UnknownTurn(f"no turn {turn_id!r} in this guard's store")
            started = TurnStarted(state.turn, state.actor, state.tenant, state.conversation, state.traceparent)
            self._turns.setdefault(turn_id, started)
        return Turn(self, started)

    def cancel(self, turn_id: str) -> None:
        """The user said stop: no call of the turn runs from now on."""
        with self._lock:
            self._known(turn_id)
            self._deliver(CancelTurn(turn_id))

    # -- confirmation --------------------------------------------------------------

    def pending_confirmations(self) -> list[ToolCall]:
        """Calls that passed every check and wait for the user's answer. Read without the
        lock (a copy of the dict, made at once): it answers while another thread is in
        store I/O."""
        return list(self._confirmations.copy().values())

    def confirm(self, call: ToolCall | CallKey, approved: bool = True) -> ToolCall | None:
        """The user's answer. When approved and still permitted, the call runs (executor
        mode) or is returned to be run (yield mode); otherwise None."""
        key = call.key if isinstance(call, ToolCall) else call
        if not isinstance(key, CallKey):
            raise UnknownInput(f"confirm() takes a ToolCall or a CallKey, got {type(call).__name__}")
        with self._lock:
            self._known(key.turn)
            self._confirmations.pop(key, None)
            ready = self._deliver(Confirm(key.turn, key.response, key.item, key.call, approved))
        return next((c for c in ready if c.key == key), None)

    def deny(self, call: ToolCall | CallKey) -> None:
        """The user refused: the call never runs."""
        self.confirm(call, approved=False)

    # -- operator controls ---------------------------------------------------------

    def quarantine(self, response: str, reason: str = "operator") -> None:
        """Every call of this provider response becomes inert, durably (replicas too)."""
        with self._lock:
            self._deliver(QuarantineResponse(response, reason))

    def disable_tool(self, name: str, reason: str = "operator") -> None:
        """The tool is disabled, durably; its calls in flight become inert."""
        with self._lock:
            self._deliver(DisableTool(name, reason))

    def stop_tenant(self, tenant: str, reason: str = "operator") -> None:
        """Every call in flight of the tenant is cancelled and its live turns closed."""
        with self._lock:
            self._deliver(StopTenant(tenant, reason))

    # -- the catalog ---------------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, ToolSpec]:
        """The catalog as it stands (read at validation and dispatch time)."""
        return self._tools

    def set_tool(self, name: str, schema: ToolSpec | Mapping[str, Any]) -> None:
        """Change (or add) a tool's declaration; calls in flight of it fail (they were
        produced against the old one)."""
        spec = spec_of(name, schema)
        with self._lock:
            self._own_catalog()[name] = spec
            self._deliver(ToolChanged(name, "schema", schema=dict(spec.schema)))

    def remove_tool(self, name: str) -> None:
        """Remove a tool; calls in flight of it fail."""
        with self._lock:
            self._own_catalog().pop(name, None)
            self._deliver(ToolChanged(name, "remove"))

    def _own_catalog(self) -> dict[str, ToolSpec]:
        if not isinstance(self._tools, dict):
            raise ConfigError("the catalog is the application's own mapping: change it there, then call deliver()")
        return self._tools

    # -- what is readable ------------------------------------------------------------

    def status(self, turn_id: str) -> str | None:
        """What the user sees for the turn: ``preparing``, ``awaiting_confirmation``,
        ``done``, ``retry``, ``handoff`` (None before anything was shown).

        Read without the guard's lock, so it answers at once while another thread is in
        store I/O (a stalled database included): the status last shown, which one input
        sets in one assignment (a reader sees it before or after, never half-made)."""
        state = self._core.turns.get(turn_id)
        if state is None:
            raise UnknownTurn(f"no turn {turn_id!r} in this guard's store")
        return state.shown or None

    def ledger(self) -> list[LedgerRecord]:
        """Every decision, oldest first (from the store: all replicas' rows)."""
        with self._lock:
            rows: list[tuple[LedgerEntry, str]] = self._store_call(self._store.ledger)
        return [LedgerRecord(*entry, why) for entry, why in rows]

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        """Every operator control ``(action, reason, keys it stopped)``, oldest first."""
        with self._lock:
            rows: list[tuple[str, str, tuple[CallKey, ...]]] = self._store_call(self._store.audit)
        return rows

    def unknown_outcomes(self) -> list[tuple[CallKey, str]]:
        """Calls claimed to run whose outcome was never recorded ``(key, tool)``: the process
        died between the claim and the executor's return (or another replica's executor is
        still running). The guard never runs them again; an operator checks the tool."""
        with self._lock:
            rows: list[tuple[CallKey, str]] = self._store_call(self._store.unknown_outcomes)
        return rows

    @property
    def store(self) -> Store:
        """The open store (for operators)."""
        return self._store

    # -- the escape hatch ------------------------------------------------------------

    def deliver(self, event: Event) -> list[ToolCall]:
        """Deliver one abstract event (:mod:`callsafe.model.vocabulary`) as it is; the calls
        handed over because of it. For inputs no method covers (a catalog change the
        application made to its own mapping, a recorded trace)."""
        if not isinstance(event, Event):
            raise UnknownInput(f"deliver() takes a callsafe Event, got {type(event).__name__}")
        with self._lock:
            if isinstance(event, TurnStarted):
                self._turns[event.turn] = event
            return self._deliver(event)

    # -- inside ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedGuard("this guard was closed")

    def _known(self, turn_id: str) -> None:
        self._check_open()
        if turn_id not in self._turns and turn_id not in self._core.turns:
            raise UnknownTurn(f"no turn {turn_id!r} was started in this guard")

    def _store_call(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except StoreError as exc:
            raise GuardStoreError(f"the store failed: {exc}", exc.fault) from exc

    def _deliver(self, event: Event) -> list[ToolCall]:
        """One input, under the lock (held by the caller): the calls handed over."""
        self._check_open()
        outer = self._ready
        self._ready = []
        self._input = next(self._inputs)
        try:
            self._driver.receive(event)
        except StoreError as exc:
            raise GuardStoreError(f"the store failed: {exc}", exc.fault) from exc
        except CallLimitExceeded as exc:
            raise LimitExceeded(str(exc)) from None
        except AssemblerError as exc:
            raise UnknownInput(str(exc)) from exc
        finally:
            # a re-entrant input (from inside the validator) returns its own calls to its
            # own caller; the outer input's list is restored, so each call is returned once
            ready, self._ready = self._ready, outer
            if self._confirmations:  # requests the input stopped (a cancel, a supersession)
                self._prune_confirmations()
        return ready

    def _prune_confirmations(self) -> None:
        """Forget confirmation requests whose call no longer waits (stopped, or its turn is
        over): nothing else would ever remove them."""
        for key in list(self._confirmations):
            view = self._core.view(key)
            if view is None or view.state in TERMINAL_STATES:
                del self._confirmations[key]

    def _deliver_all(self, events: Sequence[Event]) -> list[ToolCall]:
        ready: list[ToolCall] = []
        for event in events:
            ready.extend(self._deliver(event))
        return ready

    def _observe(self, obs: Observation) -> None:
        log_observation(self._log, obs)
        if self._observer is not None:
            self._observer(obs)

    def _confirmation_requested(self, effect: RequestConfirmation) -> None:
        turn = self._turns.get(effect.key.turn)
        state = self._core.turns.get(effect.key.turn)
        actor = turn.actor if turn is not None else (state.actor if state is not None else "")
        traceparent = state.traceparent if state is not None else None
        self._confirmations[effect.key] = ToolCall(effect.key, effect.tool, effect.arguments, actor, traceparent)

    def _validate(self, key: CallKey, tool: str, arguments: Any) -> str | None:
        if self._validator is None:
            return None
        state = self._core.turns.get(key.turn)
        call = ToolCall(key, tool, arguments, state.actor if state else "", state.traceparent if state else None)
        return self._validator(call)

    def _hand_over(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None) -> None:
        """The store's claim said this process runs the call: run it or yield it."""
        self._confirmations.pop(key, None)
        call = ToolCall(key, tool, arguments, actor, traceparent)
        attributes = {"callsafe.tool": tool, "callsafe.call_key": str(key), "callsafe.tenant": key.tenant}
        with self._telemetry.execute(traceparent, attributes) as span:
            if self._executor is None:
                self._ready.append(call)
                log_event(
                    self._log, logging.INFO, "execute", "call %(key)s (%(tool)s): handed over", key=key, tool=tool
                )
                return
            try:
                result = self._executor(call)
            except Exception as exc:
                self._ready.append(dataclasses.replace(call, ran=True, error=exc))
                log_event(
                    self._log,
                    logging.WARNING,
                    "execute",
                    "call %(key)s (%(tool)s): executor raised %(error)s",
                    key=key,
                    tool=tool,
                    error=type(exc).__name__,
                )
                if span is not None:
                    span.set_attribute("callsafe.outcome", f"raised {type(exc).__name__}")
                raise  # the driver records "raised <Type>": never run again
            self._ready.append(dataclasses.replace(call, ran=True, result=result))
            log_event(self._log, logging.INFO, "execute", "call %(key)s (%(tool)s): ran", key=key, tool=tool)
            if span is not None:
                span.set_attribute("callsafe.outcome", "returned")


class Turn:
    """One user turn of a guard: read its provider streams, cancel it, read its status.
    A context manager: leaving it with an exception (the agent loop failed, the task was
    cancelled) cancels the turn, so nothing of it runs later."""

    def __init__(self, guard: Guard, started: TurnStarted) -> None:
        self.guard = guard
        self.id = started.turn
        self.actor = started.actor
        self.tenant = started.tenant
        self.traceparent = started.traceparent
        self._responses = itertools.count(1)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None and not self.guard._closed:
            self.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)

    @property
    def status(self) -> str | None:
        return self.guard.status(self.id)

    def cancel(self) -> None:
        """The user said stop."""
        self.guard.cancel(self.id)

    def open_stream(self, protocol: str | None = None, response: str | None = None) -> StreamReader:
        """A reader for one provider stream (one HTTP response body) of this turn.

        ``response``: the response's id where the wire names none (Bedrock's ConverseStream:
        the request id AWS returns in ``x-amzn-RequestId``, or the application's own number
        for the request); without it a unique one is made up, which is enough to keep the
        stream's calls apart but names nothing an operator can quarantine."""
        fallback = response or f"{self.id}-r{next(self._responses)}-{uuid.uuid4().hex[:8]}"
        return StreamReader(self.guard, self, protocol, fallback)

    def stream(self, source: Iterable[object], protocol: str | None = None) -> Iterator[ToolCall]:
        """Read a provider stream (SDK events, dict payloads or SSE byte chunks); yield each
        call as it is handed over. A stream that ends without raising ended cleanly; an
        exception out of ``source`` (a dropped connection) ends it as disconnected, and so
        does leaving the loop early (``break``)."""
        reader = self.open_stream(protocol)
        clean = False
        try:
            try:
                for item in source:
                    yield from reader.feed(item)
            except Exception as exc:
                reader.read_error(exc)
                raise
            clean = True
            yield from reader.end(clean=True)
        finally:
            if not clean:
                reader.end(clean=False)

    async def astream(self, source: AsyncIterable[object], protocol: str | None = None) -> AsyncIterator[ToolCall]:
        """:meth:`stream` for ``async for``: an SDK's ``AsyncStream`` or any async iterable."""
        reader = self.open_stream(protocol)
        clean = False
        try:
            try:
                async for item in source:
                    for call in reader.feed(item):
                        yield call
            except Exception as exc:
                reader.read_error(exc)
                raise
            clean = True
            for call in reader.end(clean=True):
                yield call
        finally:
            if not clean:
                reader.end(clean=False)


class StreamReader:
    """One provider stream, item by item: :meth:`feed` each SDK event, dict payload or
    chunk of SSE bytes, then :meth:`end`. Each returns the calls handed over."""

    def __init__(self, guard: Guard, turn: Turn, protocol: str | None, fallback_response: str) -> None:
        self.guard = guard
        self.turn = turn
        self.protocol = check_protocol(protocol) if protocol is not None else None
        self._fallback = fallback_response
        self._parser: Parser | None = None
        self._sse: SSEDecoder | None = None
        self._done = False  # data: [DONE] seen
        self._broken: StreamError | None = None
        self._ended = False
        self._span: Any = None
        self.calls = 0

    def feed(self, item: object) -> list[ToolCall]:
        """Read one item of the stream. Raises :class:`~callsafe.guard.errors.StreamError`
        when the stream cannot be read (after ending it as disconnected)."""
        if self._broken is not None:
            raise StreamError(f"the stream already failed: {self._broken}")
        if self._ended:
            raise ClosedGuard("this stream already ended")
        try:
            payloads = self._payloads(item)
            ready: list[ToolCall] = []
            for payload in payloads:
                ready.extend(self._read(payload))
            return ready
        except ProviderError as exc:
            return self._fail(exc)
        except LimitExceeded as exc:
            return self._fail(exc)

    def read_error(self, exc: BaseException) -> list[ToolCall]:
        """The source raised ``exc``: when it is an SDK's exception for an error event the
        server sent (which the SDK consumes), read that event, so the calls it stopped are
        recorded as stopped by an error; otherwise nothing (the stream then ends as a
        dropped connection)."""
        if self._ended or self._broken is not None or self._parser is None:
            return []
        payload = error_event_of(exc, self.protocol)
        if payload is None:
            return []
        try:
            return self.feed(payload)
        except StreamError:
            return []

    def end(self, clean: bool = True) -> list[ToolCall]:
        """The body ended (``clean``) or the connection dropped (not ``clean``)."""
        if self._ended:
            return []
        self._ended = True
        ready: list[ToolCall] = []
        if self._sse is not None and self._broken is None:
            try:
                for sse in self._sse.close():
                    if sse.data != DONE and not self._done:
                        ready.extend(self._read(sse_payload(sse)))
            except ProviderError:
                clean = False
            clean = (clean and not self._sse.truncated) or self._done
        if self._parser is not None:
            with self.guard._lock:
                ready.extend(self.guard._deliver_all(self._parser.finish(clean=clean and self._broken is None)))
        self.calls += len(ready)
        self.guard._telemetry.end(self._span, {"callsafe.calls": self.calls, "callsafe.clean": clean})
        return ready

    # -- inside ----------------------------------------------------------------------

    def _payloads(self, item: object) -> list[Mapping[str, Any]]:
        if isinstance(item, (bytes, bytearray, memoryview)):
            if self._parser is not None and self._sse is None:
                raise UnknownInput("a stream is read as SDK events or as SSE bytes, not both")
            if self._sse is None:
                self._sse = SSEDecoder()
            out: list[Mapping[str, Any]] = []
            for sse in self._sse.feed(bytes(item)):
                if self._done:
                    raise ProviderError("SSE: data after [DONE]")
                if sse.data == DONE:
                    self._done = True
                    continue
                out.append(sse_payload(sse))
            return out
        if self._sse is not None:
            raise UnknownInput("a stream is read as SDK events or as SSE bytes, not both")
        payload = payload_of(item)
        return [] if payload is SKIP else [payload]  # type: ignore[list-item]

    def _read(self, payload: Mapping[str, Any]) -> list[ToolCall]:
        guard = self.guard
        with guard._lock:
            guard._check_open()
            if self._parser is None:
                self.protocol = self.protocol or detect_protocol(payload)
                self._parser = registry.get(self.protocol).new_parser(self.turn.id, self._fallback)
                self._span = guard._telemetry.start_stream(
                    self.turn.traceparent,
                    {
                        "callsafe.protocol": self.protocol,
                        "callsafe.turn": self.turn.id,
                        "callsafe.tenant": self.turn.tenant,
                    },
                )
            ready = guard._deliver_all(self._parser.feed(dict(payload)))
        self.calls += len(ready)
        return ready

    def _fail(self, exc: ProviderError | LimitExceeded) -> list[ToolCall]:
        """The stream cannot be read (or opened too many calls): it ends as a dropped
        connection, then the error."""
        error = exc if isinstance(exc, LimitExceeded) else StreamError(str(exc))
        self._broken = error
        if self._parser is not None:
            with self.guard._lock:
                self.guard._deliver_all(self._parser.finish(clean=False))
        self._ended = True
        self.guard._telemetry.end(self._span, {"callsafe.calls": self.calls, "callsafe.clean": False}, error)
        log_event(
            self.guard._log,
            logging.WARNING,
            "stream_error",
            "stream of turn %(turn)s failed: %(error)s",
            turn=self.turn.id,
            error=type(exc).__name__,
        )
        if error is exc:
            raise error
        raise error from exc
