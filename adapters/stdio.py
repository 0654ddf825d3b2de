"""Serve a Python target over the callsafe target protocol on stdin/stdout.

``serve(factory)`` is the whole program side: it answers ``init`` with what the target
declares, builds a fresh target for every trace (``start`` ... ``reset``), hands it a
:class:`~callsafe.contract.target.TargetEnv` whose executor, business validator and
``observe`` are messages to callsafe, and delivers events, wire payloads and restarts.

Why the validator nests: callsafe delivers the events of a trace marked
``during_validation`` while the validator runs, and a restart there is a crash inside the
validator. So while this side waits for a ``validation`` answer it handles what arrives
first: an event (delivered to the target, re-entrantly, exactly as the in-process harness
does), or a ``restart``, which unwinds the target's stack (a ``BaseException``, as no code
survives a crash) back to the loop, which restarts the target.

Wire mode over HTTP (``wire="http"``): the target gets ``stream(base_url)`` calls in a
thread of their own (its SDK reads the response from callsafe's loopback provider), while
this loop goes on handling application events and validation answers.

Order over HTTP, by default: ``serve(wire="http")`` declares ``"acks": "bytes"`` and hooks
the process's ``httpx`` and ``httpx2`` transports (:func:`callsafe.adapters.http_reads.install`),
so whatever client the target's SDK or framework builds, each body read of the stream
callsafe opened is reported (``read`` {bytes}) and callsafe delivers the trace's next step
only after the program has read past what came before it (docs/target-protocol.md,
"Order"). A program whose HTTP client is neither opts out with ``acks=False`` (its order is
then a settle window: best effort, and reports say so) or reports itself through
:func:`read_reporter`.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from callsafe.contract.exec_protocol import FROM_HARNESS, PROTOCOL_NAME, VERSION, ProtocolError, decode, encode
from callsafe.contract.target import Target, TargetEnv
from callsafe.model.vocabulary import (
    CallKey,
    Limits,
    Observation,
    ToolSpec,
    event_from_json,
    observation_to_json,
)

__all__ = ["Crash", "read_reporter", "serve"]


class Crash(BaseException):
    """A restart arrived while the target waited inside the validator: the process
    "died" there. Unwinds every frame of the target back to the loop."""

    def __init__(self, restart_id: int) -> None:
        super().__init__(restart_id)
        self.restart_id = restart_id


class _Server:
    def __init__(
        self,
        factory: Callable[[], Target],
        stdin: IO[bytes],
        stdout: IO[bytes],
        process_per_trace: bool,
        wire: str,
        acks: bool | str = False,
    ) -> None:
        self.factory = factory
        self.stdin = stdin
        self.stdout = stdout
        self.process_per_trace = process_per_trace
        self.wire = wire
        self.acks = acks
        self.reported = (-1, False)
        self.stream_base = ""  # the base URL of the stream callsafe opened last (``stream``)
        self.generation = 0  # how many ``stream`` messages came: a body reports for its own only
        self.target: Target | None = None
        self.step = -1
        self.tools: dict[str, ToolSpec] = {}
        self.write_lock = threading.Lock()
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.answers: dict[int, str | None] = {}
        self.answered = threading.Condition()
        self.next_validation = 0
        self.main = threading.get_ident()
        self.streams: list[threading.Thread] = []
        # While a stream's thread waits inside the validator (the outermost validation
        # ``relay_vid``), the main loop relays what arrives to it (see _validate_in_stream).
        self.relay: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.relay_vid: int | None = None

    # -- the pipe ------------------------------------------------------------------

    def send(self, message: Mapping[str, Any]) -> None:
        with self.write_lock:
            self.stdout.write(encode(message))
            self.stdout.flush()

    def _read(self) -> None:
        for line in self.stdin:
            if not line.strip():
                continue
            try:
                self.inbox.put(decode(line, FROM_HARNESS))
            except ProtocolError as exc:
                print(f"callsafe adapter: {exc}", file=sys.stderr)
                self.inbox.put(None)
                return
        self.inbox.put(None)

    def report_read(self, read: int, closed: bool, generation: int | None = None) -> None:
        """``read`` {bytes, closed}: how far the program's SDK has handled the body it reads
        (``adapters.http_reads``); sent only when it says something new, and only for the
        stream callsafe opened last (a body of an earlier one that a proxy closes late must
        not count as reads of the next)."""
        with self.write_lock:
            if generation is not None and generation != self.generation:
                return
            if (read, closed) == self.reported:
                return
            self.reported = (read, closed)
            self.stdout.write(encode({"type": "read", "bytes": read, "closed": closed}))
            self.stdout.flush()

    def reporter(self, url: str) -> Callable[[int, bool], None] | None:
        """Where a response of ``url`` reports its reads: the model stream's requests only
        (its channel at the loopback provider), never an MCP session or another host."""
        with self.write_lock:
            base, generation = self.stream_base, self.generation
        if self.acks != "bytes" or not base or not (url == base or url.startswith(base + "/")):
            return None
        return functools.partial(self.report_read, generation=generation)

    def next_message(self) -> dict[str, Any] | None:
        message = self.inbox.get()
        if message is not None and message["type"] == "validation":
            with self.answered:
                self.answers[int(message["id"])] = message["reason"]
                self.answered.notify_all()
        return message

    # -- what the target is handed ---------------------------------------------------

    def execute(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        self.send(
            {
                "type": "execute",
                "key": key.to_json(),
                "actor": actor,
                "tool": tool,
                "arguments": arguments,
                "traceparent": traceparent,
            }
        )

    def validate(self, key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
        in_stream = threading.get_ident() != self.main
        with self.answered:
            vid = self.next_validation
            self.next_validation += 1
            outermost = in_stream and self.relay_vid is None
            if outermost:
                self.relay_vid = vid  # before callsafe can answer: what comes now is relayed
        self.send({"type": "validate", "id": vid, "key": key.to_json(), "tool": tool, "arguments": dict(arguments)})
        if in_stream:
            try:
                return self._validate_in_stream(vid)
            finally:
                if outermost:
                    with self.answered:
                        if self.relay_vid == vid:
                            self.relay_vid = None
        while True:  # the main thread: handle what arrives before the answer, re-entrantly
            message = self.next_message()
            if message is None:
                raise SystemExit(0)
            if message["type"] == "validation":
                if int(message["id"]) == vid:
                    with self.answered:
                        return self.answers.pop(vid)
                continue
            if message["type"] == "restart":
                raise Crash(int(message["id"]))
            self.handle(message)

    def _validate_in_stream(self, vid: int) -> str | None:
        """A stream's thread inside the validator holds the guard's lock, as the in-process
        harness's validator does. What callsafe delivers ``during_validation`` (events, a
        restart) is relayed to this thread by the main loop and handled here, re-entrantly,
        as the in-process harness delivers it from inside the validator: on the main thread
        it would wait for that lock while this thread waits for an answer that comes only
        after it. A restart is a crash here: the target restarts (its guard closed, so
        nothing the old stack does reaches the store), then :class:`Crash` unwinds the
        stream."""
        while True:
            message = self.relay.get()
            if message is None:
                raise Crash(-1)  # callsafe went away: no code of this stream goes on
            if message["type"] == "validation":
                if int(message["id"]) == vid:
                    with self.answered:
                        return self.answers.pop(vid)
                continue
            if message["type"] == "restart":
                with self.answered:
                    self.relay_vid = None  # what comes after the restart is the main loop's
                self.handle(message)
                raise Crash(int(message["id"]))
            self.handle(message)

    def _relayed(self, message: dict[str, Any] | None) -> bool:
        """Relay ``message`` to the stream's thread waiting inside the validator, if one is;
        the answer to its outermost validation ends the relaying."""
        with self.answered:
            vid = self.relay_vid
            if vid is None:
                return False
            if message is not None and message["type"] == "validation" and int(message["id"]) == vid:
                self.relay_vid = None
        self.relay.put(message)
        return message is not None

    def observe(self, observation: Observation) -> None:
        body = observation_to_json(observation)
        ((kind, fields),) = body.items()
        fields.pop("step", None)
        self.send({"type": "observe", "observation": {kind: fields}})

    # -- the messages ------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        mid = int(message["id"])
        error: str | None = None
        try:
            if kind == "start":
                self._start(message)
            elif kind == "event":
                self.step = int(message["step"])
                if "tools" in message:
                    fresh = {name: ToolSpec.from_json(spec) for name, spec in message["tools"].items()}
                    self.tools.clear()
                    self.tools.update(fresh)
                self._target().receive(event_from_json(message["event"]))
            elif kind == "wire":
                self.step = int(message["step"])
                self._target().receive_wire(message["payload"])
            elif kind == "end_stream":
                self._target().end_stream()
            elif kind == "stream":
                with self.write_lock:
                    self.reported = (-1, False)
                    self.stream_base = str(message["base_url"]).rstrip("/")
                    self.generation += 1
                self._stream(mid, str(message["base_url"]))
                return  # answered when the stream's thread ends
            elif kind == "restart":
                self._target().restart()
            elif kind == "reset":
                self._reset()
        except Exception as exc:  # the target's own failure, reported as the harness records it
            error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc(file=sys.stderr)
        self.send({"type": "done", "id": mid, "error": error})

    def _target(self) -> Any:
        if self.target is None:
            raise RuntimeError("no trace is running (start first)")
        return self.target

    def _start(self, message: Mapping[str, Any]) -> None:
        self._reset()
        self.tools = {name: ToolSpec.from_json(spec) for name, spec in message["tools"].items()}
        self.step = -1
        target = self.factory()
        store = message.get("store_dir")
        env = TargetEnv(
            executor=self.execute,
            business_validator=self.validate,
            tools=self.tools,
            limits=Limits.from_json(message["limits"]),
            observe=self.observe,
            step=lambda: self.step,
            clock=lambda: float(max(self.step, 0)),
            store_dir=Path(store) if store else None,
        )
        self.target = target
        target.start(env)

    def _reset(self) -> None:
        for thread in self.streams:
            thread.join(timeout=5)
        self.streams = []
        target, self.target = self.target, None
        if target is not None:
            target.close()

    def _stream(self, mid: int, base_url: str) -> None:
        target = self._target()

        def run() -> None:
            error: str | None = None
            try:
                target.stream(base_url)
            except Crash:
                pass  # restarted inside the validator (handled there): this stream died with the process
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            self.send({"type": "done", "id": mid, "error": error})

        thread = threading.Thread(target=run, name=f"callsafe-stream-{mid}", daemon=True)
        self.streams.append(thread)
        thread.start()

    def loop(self) -> int:
        threading.Thread(target=self._read, name="callsafe-stdin", daemon=True).start()
        while True:
            message = self.next_message()
            if self._relayed(message):
                continue
            if message is None or message["type"] == "shutdown":
                with contextlib.suppress(Exception):
                    self._reset()
                return 0
            if message["type"] == "init":
                self._init(int(message["id"]))
                continue
            if message["type"] == "validation":
                continue  # an answer for a stream's thread, already filed
            try:
                self.handle(message)
            except Crash as crash:
                self._crashed(crash.restart_id)

    def _crashed(self, restart_id: int) -> None:
        """The process died inside the validator; the restart that said so is answered
        once the target has restarted (a crash can also strike during that restart's
        own re-delivery, hence the loop)."""
        while True:
            try:
                self.handle({"type": "restart", "id": restart_id})
                return
            except Crash as again:
                restart_id = again.restart_id

    def _init(self, mid: int) -> None:
        probe = self.factory()
        self.send(
            {
                "type": "init_ok",
                "id": mid,
                "protocol": PROTOCOL_NAME,
                "version": VERSION,
                "name": probe.name,
                "reads": probe.protocol,
                # store_faults is in process only: the protocol has no message for it
                "capabilities": sorted(probe.capabilities - {"store_faults"}),
                "process_per_trace": self.process_per_trace,
                "wire": self.wire,
                **({"acks": self.acks} if self.acks else {}),
            }
        )


def serve(
    factory: Callable[[], Target],
    *,
    process_per_trace: bool = False,
    wire: str = "stdio",
    acks: bool | str | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> int:
    """Speak the protocol for targets built by ``factory`` until stdin ends; returns the
    exit status. Nothing but messages goes to stdout: anything the target prints is sent
    to stderr instead (which callsafe captures).

    ``acks``: by default ``"bytes"`` over HTTP (the process's ``httpx``/``httpx2`` body
    reads of the model stream are reported: the order is the trace's) and nothing over
    stdio (where the order is exact anyway); ``False`` opts out (a settle window, best
    effort), ``True`` promises ``read`` {events} sent by the target itself."""
    out = stdout if stdout is not None else sys.stdout.buffer
    if stdout is None:
        sys.stdout = sys.stderr  # a stray print() must not corrupt the message stream
    if acks is None:
        acks = "bytes" if wire == "http" else False
    global _ACTIVE
    server = _Server(factory, stdin if stdin is not None else sys.stdin.buffer, out, process_per_trace, wire, acks)
    _ACTIVE = server
    if wire == "http" and acks == "bytes":
        from callsafe.adapters.http_reads import install

        install(server.reporter)
    return server.loop()


_ACTIVE: _Server | None = None


def read_reporter() -> Callable[[int, bool], None]:
    """What a program's own reader reports its reads through (a WebSocket client, an HTTP
    client that is not ``httpx``: ``serve`` hooks those itself): the ``read`` message of the
    program this process serves (``serve(..., acks="bytes")``), or nothing outside one.
    Bound to the stream callsafe opened last (call it in the stream's handler): a body of an
    earlier stream that closes late (its reader cut at a trace's end or a restart) must not
    count as reads of the next."""
    server = _ACTIVE
    if server is None or server.acks != "bytes":
        return lambda read, closed: None
    with server.write_lock:
        generation = server.generation
    return functools.partial(server.report_read, generation=generation)
