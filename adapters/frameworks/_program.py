"""What every agent-framework program shares: the target-protocol side, the framework's run
in an event loop of its own, the call keys read off the wire, and the tool bodies that go
to callsafe's executor.

Why the framework runs whole: an agent framework reads the model's stream with its own
HTTP client, decides which tool calls are finished, and runs them itself. A program here
builds the framework's agent over callsafe's loopback provider (the base URL the harness
gives in ``stream``), registers one tool per catalog entry whose body calls the harness's
executor, and starts the run; what reaches the executor is what the framework decided to
run, with the arguments it passed. Nothing in the framework is replaced.

Call keys: the framework hands its tool the arguments (and at best the call id); the
response id and the call's item are on the wire. :class:`WireIds` watches the bytes of the
framework's HTTP responses as they pass (an ``httpx`` transport that only looks) and notes,
per protocol, the response id and each call's item, as :mod:`callsafe.targets._common`
names them.

Cancellation: ``cancel_turn`` for the turn of the running stream, a new turn, and a
dropped connection go to the framework's own cancel API (:meth:`FrameworkProgram.cancel`,
by default cancelling the run's asyncio task); the program then waits, for a bounded time,
until the run has stopped, so that a tool the framework still runs after the cancel is
seen at the cancel's step, deterministically. A framework without such an API declares no
``cancellation`` capability and those traces are not applicable to it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx

from callsafe import span_recording
from callsafe.adapters.stdio import serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, CancelTurn, Disconnect, Event, TurnStarted

__all__ = ["FrameworkProgram", "WireIds", "main", "watching_client"]

_STOP_WAIT = 2.0  # seconds a cancelled run gets to stop (Strands stops only when its next chunk arrives)


class WireIds:
    """The identities the framework's HTTP responses carried, read off the SSE bytes: the
    response id, and per call id its item (and, for calls without an id, their order)."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.response: str = ""
        self.items: dict[str, str] = {}
        self.order: list[tuple[str, str]] = []  # (item, call id) in order of opening
        self.arguments: dict[str, str] = {}  # item -> argument text streamed (Chat Completions)
        self.claimed: set[str] = set()  # call ids already keyed by their arguments
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line.startswith(b"data:"):
                continue
            try:
                payload = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(payload, dict):
                self._read(payload)

    def _note(self, item: str, call: str) -> None:
        if call not in self.items:
            self.items[call] = item
            self.order.append((item, call))

    def _read(self, p: Mapping[str, Any]) -> None:
        if self.protocol == "openai-chat":
            if isinstance(p.get("id"), str) and not self.response:
                self.response = p["id"]
            for choice in p.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                for delta in (choice.get("delta") or {}).get("tool_calls") or []:
                    if not isinstance(delta, dict):
                        continue
                    item = str(delta.get("index", ""))
                    if isinstance(delta.get("id"), str):
                        self._note(item, delta["id"])
                    text = (delta.get("function") or {}).get("arguments")
                    if isinstance(text, str):
                        self.arguments[item] = self.arguments.get(item, "") + text
        elif self.protocol == "openai-responses":
            response = p.get("response")
            if p.get("type") == "response.created" and isinstance(response, dict) and not self.response:
                self.response = str(response.get("id", ""))
            output = p.get("item")
            if isinstance(output, dict) and isinstance(output.get("call_id"), str):
                self._note(str(output.get("id", "")), output["call_id"])
        elif self.protocol == "anthropic-messages":
            message = p.get("message")
            if p.get("type") == "message_start" and isinstance(message, dict) and not self.response:
                self.response = str(message.get("id", ""))
            block = p.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._note(str(p.get("index", "")), block["id"])
        elif self.protocol == "openai-realtime":  # the Realtime API's server events (WebSocket messages)
            created = p.get("response")
            if p.get("type") == "response.created" and isinstance(created, dict):
                self.response = str(created.get("id", ""))
            added = p.get("item")
            if isinstance(added, dict) and isinstance(added.get("call_id"), str):
                self._note(str(added.get("id", "")), added["call_id"])
        elif self.protocol == "bedrock-converse":  # decoded events (the wire is binary: read_event)
            start = p.get("contentBlockStart")
            tool = (start.get("start") or {}).get("toolUse") if isinstance(start, dict) else None
            if isinstance(start, dict) and isinstance(tool, dict) and isinstance(tool.get("toolUseId"), str):
                self._note(str(start.get("contentBlockIndex", "")), tool["toolUseId"])
        elif self.protocol == "gemini":
            if isinstance(p.get("responseId"), str) and not self.response:
                self.response = p["responseId"]
            for candidate in (p.get("candidates") or [])[:1]:
                for part in ((candidate or {}).get("content") or {}).get("parts") or []:
                    call = part.get("functionCall") if isinstance(part, dict) else None
                    if isinstance(call, dict) and call.get("name"):
                        item = str(len(self.order))
                        self._note(item, str(call.get("id") or f"{self.response}#{item}"))

    def read_event(self, payload: Mapping[str, Any]) -> None:
        """One decoded event, for a wire that is not SSE (Bedrock's event stream, which the
        framework's SDK decodes, or a Realtime WebSocket's server events: the program sees
        the events, not the bytes)."""
        self._read(payload)

    def key(self, turn: TurnStarted, call_id: str | None, nth: int = 0) -> CallKey:
        """The call key of the call ``call_id`` (or, without one, the ``nth`` call opened)."""
        if call_id is not None and call_id in self.items:
            return CallKey(turn.tenant, turn.turn, self.response, self.items[call_id], call_id)
        if call_id is None and nth < len(self.order):
            item, call = self.order[nth]
            return CallKey(turn.tenant, turn.turn, self.response, item, call)
        return CallKey(turn.tenant, turn.turn, self.response, "", call_id or f"{self.response}#?")

    def key_by_arguments(self, turn: TurnStarted, arguments: Any, nth: int) -> CallKey:
        """The key of a call a framework ran without its id: the first call opened whose
        streamed arguments parse to exactly ``arguments`` and that no earlier run claimed.
        A framework that runs a response's calls in parallel threads (crewAI) runs them in
        any order, so the n-th run is not the n-th call; only when the arguments match no
        call, or the stream carried none (not Chat Completions), is the n-th call taken."""
        for item, call in self.order:
            if call in self.claimed or item not in self.arguments:
                continue
            try:
                streamed = json.loads(self.arguments[item])
            except ValueError:
                continue
            if streamed == arguments:
                self.claimed.add(call)
                return CallKey(turn.tenant, turn.turn, self.response, item, call)
        return self.key(turn, None, nth)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of the process: building one loads the CA bundle,
    which took most of a short trace's time (the loopback is plain HTTP; nothing here
    changes how a certificate would be checked)."""
    return ssl.create_default_context()


def watching_client(ids: WireIds | Callable[[], WireIds], module: Any = None, sync: bool = False) -> Any:
    """An ``AsyncClient`` (``sync``: a ``Client``) of ``module`` (``httpx``, or ``httpx2``,
    which the ``openai`` SDK 3 uses) over its real transport, each response's bytes shown to
    ``ids`` (or to what ``ids()`` returns at that moment) as they pass (nothing is changed or
    buffered)."""
    http = module if module is not None else httpx
    current: Callable[[], WireIds] = ids if callable(ids) else (lambda: ids)

    class Watched(http.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                current().feed(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Watching(http.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self.inner = http.AsyncHTTPTransport(verify=_tls())

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            response.stream = Watched(response.stream)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    class WatchedSync(http.SyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                current().feed(chunk)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class WatchingSync(http.BaseTransport):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self.inner = http.HTTPTransport(verify=_tls())

        def handle_request(self, request: Any) -> Any:
            response = self.inner.handle_request(request)
            response.stream = WatchedSync(response.stream)
            return response

        def close(self) -> None:
            self.inner.close()

    if sync:
        return http.Client(transport=WatchingSync(), timeout=30)
    return http.AsyncClient(transport=Watching(), timeout=30)


class FrameworkProgram:
    """One framework's program: subclasses build the agent and run it (:meth:`run`)."""

    name: str = ""
    protocol: str = ""
    capabilities: frozenset[str] = frozenset({"cancellation"})

    def __init__(self) -> None:
        self.env: TargetEnv | None = None
        self.turn: TurnStarted | None = None
        self.ids = WireIds(self.protocol)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self.cancelled = False

    # -- the Target side -------------------------------------------------------------

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.turn = None
        span_recording.begin_run()

    def receive(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            if self.turn is not None and event.turn != self.turn.turn:
                self._cancel_and_wait()  # a new turn supersedes the running one
            self.turn = event
            span_recording.bind_turn(event.turn, event.tenant, event.actor)
        elif (isinstance(event, CancelTurn) and self.turn is not None and event.turn == self.turn.turn) or isinstance(
            event, Disconnect
        ):
            self._cancel_and_wait()

    def receive_wire(self, payload: Any) -> None:
        raise RuntimeError("this program reads its stream over HTTP (wire='http')")

    def end_stream(self) -> None:
        """The body ended: the framework's reader sees it end."""

    def restart(self) -> None:
        self._cancel_and_wait()
        self.turn = None

    def close(self) -> None:
        self._cancel_and_wait()
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        if env is None or turn is None:
            return
        self.ids = WireIds(self.protocol)
        self.cancelled = False
        loop = asyncio.new_event_loop()
        self._stopped.clear()
        try:
            self._loop = loop
            task = loop.create_task(self.run(base_url, env, turn))
            self._task = task
            self._running.set()
            try:
                loop.run_until_complete(task)
            except asyncio.CancelledError:
                pass  # cancelled by callsafe's cancel event: the run stopped
            finally:
                self._running.clear()
                loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            self._task = None
            self._loop = None
            loop.close()
            self._stopped.set()

    # -- cancellation ----------------------------------------------------------------

    def _cancel_and_wait(self) -> None:
        loop, task = self._loop, self._task
        if loop is None or task is None or task.done():
            return
        self.cancelled = True
        loop.call_soon_threadsafe(self.cancel, task)
        if not self._stopped.wait(_STOP_WAIT):
            print(f"{self.name}: the run did not stop within {_STOP_WAIT:g} s of its cancel", file=sys.stderr)

    def cancel(self, task: asyncio.Task[None]) -> None:
        """The framework's cancel API, called in the run's event loop; by default the run's
        asyncio task is cancelled (what a framework's own docs say to do to stop a run)."""
        task.cancel()

    # -- what subclasses write -------------------------------------------------------

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        raise NotImplementedError

    def execute(self, tool: str, arguments: Any, call_id: str | None, nth: int = 0) -> str:
        """A tool body: hand the call to callsafe's executor under its key; returns the
        tool's result text for the framework."""
        env, turn = self.env, self.turn
        if env is None or turn is None:
            raise RuntimeError("a tool ran outside a trace")
        env.executor(self.ids.key(turn, call_id, nth), turn.actor, tool, arguments, turn.traceparent)
        return "ok"

    def execute_by_arguments(self, tool: str, arguments: Any, nth: int) -> str:
        """A tool body for a framework that gives a tool neither its call id nor a fixed run
        order: the call is keyed by its arguments (:meth:`WireIds.key_by_arguments`)."""
        env, turn = self.env, self.turn
        if env is None or turn is None:
            raise RuntimeError("a tool ran outside a trace")
        key = self.ids.key_by_arguments(turn, arguments, nth)
        env.executor(key, turn.actor, tool, arguments, turn.traceparent)
        return "ok"

    def watching_client(self, module: Any = None, sync: bool = False) -> Any:
        """An HTTP client over the real transport whose responses are watched for the ids
        of this stream (:func:`watching_client`)."""
        return watching_client(lambda: self.ids, module, sync)


def main(factory: Callable[[], FrameworkProgram], acks: bool | str | None = None) -> int:
    """Serve the program over the target protocol, reading its streams over HTTP; its
    framework's own spans are recorded when ``CALLSAFE_RECORD_SPANS`` says where
    (:mod:`callsafe.span_recording`). ``acks=False`` for a framework whose HTTP client is
    neither httpx nor httpx2 (botocore's urllib3): the process hook cannot see its reads, and
    a program that declares acknowledgements and never sends one hangs."""
    span_recording.record_spans_from_environment()
    return serve(factory, wire="http", acks=acks)
