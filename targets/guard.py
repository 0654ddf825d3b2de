"""``callsafe.guard`` as a certification target, through the same wire path as the library
adapters.

``callsafe certify guard:memory:openai-chat`` (``guard:STORE:PROTOCOL``; stores ``memory``,
``sqlite``, ``postgres``; any protocol of :mod:`callsafe.providers.registry`) runs each
trace rendered as that provider's payloads, as a client library gets them, into a
:class:`~callsafe.guard.Guard` built the way an application builds one: the harness's
catalog (a live view), its executor and business validator wrapped as the guard's
``executor(call)`` and ``validator(call)``, its limits, and a store URL or object. Every
application event goes through the guard's public methods (``turn``, ``cancel``,
``confirm``, ``quarantine``, ``disable_tool``, ``stop_tenant``); a dropped connection ends
the current stream as disconnected; a catalog change, which the harness has already made
to the live catalog, is delivered as the event it is (``Guard.deliver``).

``restart()`` does what a process restart does to an application: the guard is closed
and a new one opened on the same store (never creating it), with a new stream state.
The guard declares every capability: it is judged on everything the reference is.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.guard import Guard, StreamReader, ToolCall, Turn
from callsafe.model.vocabulary import (
    CallKey,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    QuarantineResponse,
    StopTenant,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.store import Store

__all__ = ["GUARD_STORES", "GuardTarget", "factory"]

GUARD_STORES: Final = ("memory", "sqlite", "postgres")


class GuardTarget:
    """A :class:`~callsafe.guard.Guard` behind the Target contract, reading ``protocol``."""

    # no store_fault(): the guard's stores are the reference's, whose fault handling the
    # reference target is certified with
    capabilities: frozenset[str] = CAPABILITIES - {"store_faults"}

    def __init__(self, store: str = "memory", protocol: str = "openai-chat", *, dsn: str | None = None) -> None:
        from callsafe.providers import registry

        if store not in GUARD_STORES:
            raise StoreError(f"unknown guard store {store!r}; choose one of {GUARD_STORES}")
        registry.get(protocol)  # an unknown protocol is a KeyError naming the known ones
        self.store_kind = store
        self.protocol = protocol
        self.name = f"guard:{store}:{protocol}"
        self._dsn = dsn
        self._env: TargetEnv | None = None
        self._memory: MemoryStore | None = None
        self._namespace: str | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.guard: Guard | None = None
        self._turn: Turn | None = None
        self._reader: StreamReader | None = None
        self._validated: list[CallKey] = []
        self._streams: dict[str, int] = {}  # turn -> streams opened for it (unnamed responses)

    # -- Target ------------------------------------------------------------------------

    def start(self, env: TargetEnv) -> None:
        self._env = env
        self._streams = {}
        if self.store_kind == "memory":
            self._memory = MemoryStore()
        elif self.store_kind == "postgres":
            import uuid

            self._dsn = self._dsn or os.environ.get("CALLSAFE_PG_DSN")
            if not self._dsn:
                raise StoreError("the postgres store needs a DSN (argument dsn or $CALLSAFE_PG_DSN)")
            self._namespace = f"callsafe_guard_{uuid.uuid4().hex[:12]}"
        self._open(create=True)

    def _prompted(self, guard: Guard, key: CallKey) -> CallKey:
        """The key of the call the user answers about. Where the wire names no response
        (Gemini Live), the guard named the response itself, so the answer is for the call
        with this turn, item and call id that the guard put up for confirmation (or is
        validating: an answer may come meanwhile), as an application answers the prompt it
        showed."""
        if self.protocol not in registry.MODULES or registry.get(self.protocol).names_responses:
            return key
        same = (key.tenant, key.turn, key.item, key.call)
        known = [c.key for c in guard.pending_confirmations()] + self._validated[::-1]
        return next((k for k in known if (k.tenant, k.turn, k.item, k.call) == same), key)

    def receive(self, event: Event) -> None:
        guard = self._need()
        if isinstance(event, TurnStarted):
            # a stream still open stays bound to the turn in force when it opened
            self._turn = guard.turn(
                event.turn,
                event.actor,
                event.tenant,
                conversation=event.conversation,
                traceparent=event.traceparent,
            )
        elif isinstance(event, Disconnect):
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.end(clean=False)
        elif isinstance(event, CancelTurn):
            guard.cancel(event.turn)
        elif isinstance(event, Confirm):
            guard.confirm(self._prompted(guard, event.key(self._tenant_of(event.turn))), approved=event.approved)
        elif isinstance(event, QuarantineResponse):
            guard.quarantine(event.response, event.reason)
        elif isinstance(event, DisableTool):
            guard.disable_tool(event.tool, event.reason)
        elif isinstance(event, StopTenant):
            guard.stop_tenant(event.tenant, event.reason)
        else:  # a catalog change (already made to the live catalog), anything else as it is
            guard.deliver(event)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self._reader is None:
            if self._turn is None:
                return  # no turn in force: an application has no stream to read
            self._reader = self._turn.open_stream(self.protocol, self._response_name(self._turn.id))
        self._reader.feed(payload)

    def _response_name(self, turn: str) -> str | None:
        """The response's id where the wire names none (Bedrock): the application numbers
        the streams of each turn (:func:`callsafe.providers.bedrock_converse.response_name`),
        across restarts, as its conversation history does."""
        from callsafe.providers.registry import unnamed_response

        name = unnamed_response(self.protocol)
        if name is None:
            return None
        nth = self._streams.get(turn, 0)
        self._streams[turn] = nth + 1
        return name(turn, nth)

    def end_stream(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.end(clean=True)

    def restart(self) -> None:
        if self.guard is not None:
            self.guard.close()
        turn = self._turn.id if self._turn is not None else None
        self.guard = None
        self._turn = None
        self._reader = None  # the connection is gone with the process
        guard = self._open(create=False)
        if turn is not None:  # the application picks its turn up again from the store
            self._turn = guard.resume_turn(turn)

    def close(self) -> None:
        guard, self.guard = self.guard, None
        self._turn = None
        self._reader = None
        if guard is not None:
            store = guard.store
            guard.close()
            from callsafe.reference_impl.postgres_store import PostgresStore

            if isinstance(store, PostgresStore):
                store.drop()
                store.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- inside ------------------------------------------------------------------------

    def _need(self) -> Guard:
        if self.guard is None:
            raise StoreError("receive() outside start() ... close()")
        return self.guard

    def _tenant_of(self, turn: str) -> str:
        guard = self._need()
        state = guard._core.turns.get(turn)
        return state.tenant if state is not None else ""

    def _store(self, create: bool) -> str | Store:
        env = self._env
        assert env is not None
        if self.store_kind == "memory":
            assert self._memory is not None
            return self._memory
        if self.store_kind == "sqlite":
            folder = env.store_dir
            if folder is None:
                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="callsafe-guard-")
                folder = Path(self._tmp.name)
            return f"sqlite:///{Path(folder) / 'guard.sqlite3'}"
        assert self._dsn is not None
        return self._dsn

    def _open(self, *, create: bool) -> Guard:
        env = self._env
        assert env is not None
        executor = env.executor
        validator = env.business_validator

        def run(call: ToolCall) -> None:
            executor(call.key, call.actor, call.tool, call.arguments, call.traceparent)

        def check(call: ToolCall) -> str | None:
            self._validated.append(call.key)  # the keys the guard named (a wire without response ids)
            return validator(call.key, call.tool, call.arguments)

        self.guard = Guard(
            env.tools,
            executor=run,
            validator=check,
            limits=env.limits,
            store=self._store(create),
            create=create,
            namespace=self._namespace,
            observer=env.observe,
            clock=env.clock,
            step=env.step,
        )
        return self.guard


def factory(**options: Any) -> GuardTarget:
    """``callsafe.targets.guard:factory``: a guard target (memory store, openai-chat unless
    ``store=`` / ``protocol=`` say otherwise)."""
    return GuardTarget(**options)
