"""The loopback provider's server: uvicorn running a tiny ASGI app in a thread.

Why uvicorn and ASGI: the SDKs under test speak HTTP/1.1 with chunked bodies and keep-alive
connections, and a hand-written server would be one more thing to get wrong; an ASGI app
is only what is ours (which stream answers which request, and how its bytes are cut).

What it sends is adversarial on purpose, within what HTTP and SSE allow:

* **chunk boundaries** fall inside an event's ``data:`` (or ``event:``) field name, inside
  the first multi-byte UTF-8 character of the event, and between the two newlines that end
  it; each piece is its own HTTP chunk;
* **keep-alives**: an SSE comment line (``: keep-alive``) before the first event and after
  every third;
* **a dropped connection** where the trace disconnects: the body stops without its final
  chunk, as a connection reset does;
* **a reconnect that replays**, as each provider documents it (``docs/target-protocol.md``,
  "Reconnects"). Chat Completions and Anthropic Messages do not resume a stream: a
  reconnect is a new request, and it gets the trace's next connection (the events after the
  disconnect, a :class:`~callsafe.model.vocabulary.Replay` expanded, rendered as a stream of
  its own from its start). For certify, that is the program's next request
  (:class:`LiveStream`, planned by :mod:`callsafe.certify.wire`); for ``callsafe serve``,
  the n-th request gets the n-th connection (:class:`StaticTrace`). OpenAI Responses also
  resumes a background response: ``GET .../responses/{id}?stream=true&starting_after=N``
  gets the response's events whose ``sequence_number`` is above N (``callsafe serve``).
  And with ``callsafe serve --event-ids`` every event carries an ``id:``; a request with
  ``Last-Event-ID`` gets the rest of the stream from the event after it. Off by default, as
  the providers send no ids, and because the ``openai`` Python SDK (3.57) then breaks on a
  keep-alive: its SSE decoder dispatches an empty event after a comment once an ``id`` was
  seen (the SSE standard dispatches nothing for an empty data buffer) and fails to parse it
  as JSON.

Requests are routed by their path's end: ``.../chat/completions`` (``openai-chat``),
``.../responses`` (``openai-responses``), ``.../messages`` (``anthropic-messages``),
``.../models/{model}:streamGenerateContent?alt=sse`` (``gemini``), so any base path works
(``http://127.0.0.1:PORT/v1`` for OpenAI, ``http://127.0.0.1:PORT`` for Anthropic, whose
SDK adds ``/v1``, and for Gemini, whose SDKs add ``/v1beta/models/...``). Gemini is served
as SSE only: without ``alt=sse`` the API streams one JSON array instead, which is refused
here with a 400 that says so rather than answered in a form the trace was not cut for.

Bounded by what it reads: a request body over ``max_body`` (:data:`MAX_BODY`, 1 MiB;
``callsafe serve --max-body``) gets a 413 and a closed connection, and the rest of it is
never read. uvicorn's log records (``CALLSAFE_LOOPBACK_LOG=info`` shows every request)
are escaped (:class:`callsafe.safe_text.EscapedRecords`): a request's path is the
client's, and uvicorn logs it percent-decoded, control characters and all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any, Final

import uvicorn

from callsafe.loopback.gemini_live import PATH_END as LIVE_PATH_END
from callsafe.loopback.gemini_live import serve_live_session
from callsafe.loopback.realtime import PATH as REALTIME_PATH
from callsafe.loopback.realtime import serve_session
from callsafe.loopback.tls import LoopbackCertificate, make_certificate
from callsafe.model.vocabulary import Disconnect, Event, Replay, ResponseTerminal, TextFragment
from callsafe.providers import registry
from callsafe.providers.base import WIRE_EVENTS, NotRepresentable
from callsafe.providers.eventstream import CONTENT_TYPE as EVENTSTREAM
from callsafe.providers.eventstream import bedrock_frame, frame_chunks
from callsafe.providers.sse import DONE, cut, encode_event, payload_json
from callsafe.providers.streams import as_servers_send, render_payloads
from callsafe.safe_text import escape_logger

__all__ = [
    "ENDPOINTS",
    "MAX_BODY",
    "LiveStream",
    "LoopbackServer",
    "StaticTrace",
    "adversarial_chunks",
    "shared_server",
]

ENDPOINTS: Final = {
    "/chat/completions": "openai-chat",
    "/responses": "openai-responses",
    "/messages": "anthropic-messages",
    ":streamGenerateContent": "gemini",  # .../models/{model}:streamGenerateContent?alt=sse
    "/converse-stream": "bedrock-converse",  # .../model/{modelId}/converse-stream
}
KEEP_ALIVE: Final = b": keep-alive\n\n"
# The largest request body read (1 MiB): the body is read only to tell an agent's follow-up
# request, and a request far larger than any conversation is refused with 413 before (by
# its Content-Length) or as soon as (chunked) it passes the cap, so memory stays bounded.
MAX_BODY: Final = 1 << 20
# Gemini streams get no keep-alive comment: the google-genai SDK (2.34) parses every line of
# the body that is not ``data:`` as JSON (``_api_client.py``, ``_load_json_from_response``),
# so one comment line fails the whole stream, and the Gemini API sends none.
# Bedrock's binary event stream has no comment frames at all.
NO_KEEP_ALIVE: Final = frozenset({"gemini", "bedrock-converse", "openai-realtime", "gemini-live"})
TEXT_ITEM_PROTOCOLS: Final = frozenset({"openai-chat", "gemini", "gemini-live"})  # text has no item of its own
_RESUME: Final = re.compile(r"/responses/[^/]+/?$")  # GET: resume a Responses stream
_END: Final = b""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _Dropped(Exception):
    """Raised inside the app to drop the connection mid-body (uvicorn then closes it)."""


def adversarial_chunks(event: bytes) -> list[bytes]:
    """One SSE event cut where decoders go wrong: inside the field name of its first line,
    inside its first multi-byte UTF-8 character, and between its two final newlines."""
    points = [3, len(event) - 1]
    for i, byte in enumerate(event):
        if byte >= 0xC0:  # the lead byte of a multi-byte character: cut right after it
            points.append(i + 1)
            break
    return cut(event, points)


def _encode(protocol: str, payload: Mapping[str, Any], event_id: int | None = None) -> bytes:
    spec = registry.get(protocol)
    data = encode_event(payload_json(payload), spec.event_name(payload))
    return (f"id: {event_id}\n".encode() + data) if event_id is not None else data


def _pieces(protocol: str, payload: Mapping[str, Any], event_id: int | None = None) -> list[bytes]:
    """One payload as the HTTP chunks that carry it: an SSE event cut by
    :func:`adversarial_chunks`, or, for a protocol whose transport is AWS's binary event
    stream (Bedrock), its frame cut inside the prelude, after it, in the payload and before
    the CRC (:func:`callsafe.providers.eventstream.frame_chunks`; frames carry no ids)."""
    if registry.get(protocol).transport == "aws-eventstream":
        return frame_chunks(bedrock_frame(payload))
    return adversarial_chunks(_encode(protocol, payload, event_id))


def _route(path: str) -> str | None:
    for suffix, protocol in ENDPOINTS.items():
        if path.rstrip("/").endswith(suffix):
            return protocol
    return None


def _websocket_implementation() -> str:
    """uvicorn's WebSocket protocol for the Realtime API (:mod:`callsafe.loopback.realtime`):
    the maintained ``websockets`` library (a core dependency); without it, no WebSocket at
    all (``none``), so that the HTTP endpoints still serve rather than the server failing
    to start."""
    import importlib.util

    return "websockets-sansio" if importlib.util.find_spec("websockets") is not None else "none"


def _write_delay() -> float:
    """Seconds before each piece of a live stream is written: latency injected by tests
    (``CALLSAFE_LOOPBACK_WRITE_DELAY``, read per stream), which must change no verdict."""
    try:
        return max(0.0, float(os.environ.get("CALLSAFE_LOOPBACK_WRITE_DELAY", "0")))
    except ValueError:
        return 0.0


class LiveStream:
    """A response fed payload by payload while the harness runs a trace: one HTTP body,
    served to the first request for its protocol."""

    def __init__(self, server: LoopbackServer, protocol: str) -> None:
        self.server = server
        self.protocol = protocol
        self.queue: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self.count = 0
        self.sent = 0  # body bytes pushed so far: what a program acknowledging bytes must read past
        self.abandoned = False  # the program's handler ended without requesting it: never served
        self.served = False

    def _put(self, item: bytes | BaseException) -> None:
        if isinstance(item, bytes):
            self.sent += len(item)
        self.server.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def push(self, payload: Mapping[str, Any]) -> None:
        self.count += 1
        if registry.get(self.protocol).transport == "websocket":
            self._put(message_bytes(payload))  # one WebSocket text message per server event
            return
        if (self.count - 1) % 3 == 0 and self.protocol not in NO_KEEP_ALIVE:
            self._put(KEEP_ALIVE)
        for piece in _pieces(self.protocol, payload):
            self._put(piece)

    def finish(self, done_sentinel: bool) -> None:
        """The body ends normally (after ``data: [DONE]`` where the protocol sends it)."""
        if done_sentinel:
            for piece in adversarial_chunks(encode_event(DONE)):
                self._put(piece)
        self._put(_END)

    def abort(self) -> None:
        """The connection drops here."""
        self._put(_Dropped("the trace disconnects here"))

    async def serve_messages(self, send_text: Callable[[str], Awaitable[None]]) -> bool:
        """Serve the stream as WebSocket text messages (the Realtime API); true when the
        trace drops the connection after them."""
        self.served = True
        delay = _write_delay()
        while True:
            item = await self.queue.get()
            if delay:
                await asyncio.sleep(delay)
            if isinstance(item, BaseException):
                return True
            if item == _END:
                return False
            await send_text(item.decode("utf-8"))

    async def serve(self, send: Send) -> None:
        delay = _write_delay()
        while True:
            item = await self.queue.get()
            if delay:
                await asyncio.sleep(delay)  # injected latency (tests): the order must not depend on it
            if isinstance(item, BaseException):
                raise item
            if item == _END:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": item, "more_body": True})


def _connections(protocol: str, events: Sequence[Event]) -> list[tuple[list[dict[str, Any]], bool]]:
    """The trace's connections: its delivered events (each :class:`Replay` expanded) cut at
    every :class:`Disconnect`, each part rendered as a stream of its own, and whether it
    ends by dropping. Parts with no wire event are no connection; from the first part that
    cannot open a stream of its own (it continues a call it never opened, as a resume by
    ``Last-Event-ID`` or ``starting_after`` does), there are no more."""
    delivered: list[Event] = []
    for event in events:
        if isinstance(event, Replay):
            delivered += [e for e in events[event.start : event.stop] if not isinstance(e, Replay)]
        else:
            delivered.append(event)
    out: list[tuple[list[dict[str, Any]], bool]] = []
    part: list[Event] = []
    for n, event in enumerate(delivered):
        if not isinstance(event, Disconnect):
            part.append(event)
        if isinstance(event, Disconnect) or n == len(delivered) - 1:
            wire = [e for e in part if isinstance(e, WIRE_EVENTS)]
            if wire:
                try:
                    payloads = render_payloads(protocol, wire)
                except NotRepresentable:
                    if not out:
                        raise
                    break  # it continues a call no new stream opens: only a resume reaches it
                as_servers_send(protocol, [payloads])
                out.append((payloads, isinstance(event, Disconnect)))
            part = []
    return out


class StaticTrace:
    """``callsafe serve``: the n-th request gets the trace's n-th connection (the last one
    again once they are used up): where the trace disconnects, the body drops, and the
    client's reconnect, a new request as Chat Completions and Anthropic have it, gets the
    events after the disconnect (replays expanded) as a new stream. With ``event_ids`` a
    request with ``Last-Event-ID`` gets the events after that id (the rest of the stream);
    for OpenAI Responses, ``GET .../responses/{id}?stream=true&starting_after=N`` gets the
    response's events after sequence number N."""

    def __init__(self, protocol: str, events: Sequence[Event], event_ids: bool = False) -> None:
        self.protocol = protocol
        self.event_ids = event_ids
        self.connections = _connections(protocol, events)
        self.requests = 0  # plain requests so far (not resumed by an id or a cursor)
        events = [e for e in events if isinstance(e, WIRE_EVENTS)]  # turns and controls are the application's
        cut_at = next((i for i, e in enumerate(events) if isinstance(e, Disconnect)), None)
        wire = [e for e in events if not isinstance(e, Disconnect)]
        self.full = render_payloads(protocol, wire)
        self.head = self.full if cut_at is None else render_payloads(protocol, events[:cut_at])
        as_servers_send(protocol, [self.full])  # what real servers always send (usage, output)
        as_servers_send(protocol, [self.head])
        self.drops = cut_at is not None

    def next_payloads(self) -> tuple[list[dict[str, Any]], bool]:
        """The payloads of the next plain request (or Realtime WebSocket session), and
        whether its connection drops after them."""
        if not self.connections:
            return self.head, self.drops
        payloads, drops = self.connections[min(self.requests, len(self.connections) - 1)]
        self.requests += 1
        return payloads, drops

    def chunks(self, last_event_id: int | None, starting_after: int | None = None) -> tuple[list[bytes], bool]:
        """The pieces of one response, and whether it ends by dropping the connection."""
        if starting_after is not None:  # the Responses resume: by sequence number, never a drop
            start, drops = 0, False
            payloads = [p for p in self.full if int(p.get("sequence_number", -1)) > starting_after]
        elif last_event_id is not None:
            start, payloads, drops = last_event_id + 1, self.full[last_event_id + 1 :], False
        else:
            start = 0
            payloads, drops = self.next_payloads()
        out: list[bytes] = []
        for n, payload in enumerate(payloads):
            if n % 3 == 0 and self.protocol not in NO_KEEP_ALIVE:
                out.append(KEEP_ALIVE)
            out += _pieces(self.protocol, payload, start + n if self.event_ids else None)
        if not drops and registry.get(self.protocol).done_sentinel:
            out += adversarial_chunks(encode_event(DONE))
        return out, drops


class LoopbackServer:
    """uvicorn on 127.0.0.1 in a thread of its own; ``port=0`` takes a free port."""

    def __init__(
        self,
        port: int = 0,
        static: StaticTrace | None = None,
        host: str = "127.0.0.1",
        max_body: int = MAX_BODY,
    ) -> None:
        if max_body < 1:
            raise ValueError("max_body is a positive number of bytes")
        self.static = static
        self.max_body = max_body
        self.channels: dict[str, asyncio.Queue[LiveStream]] = {}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = uvicorn.Server(self._config())
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            escape_logger(name)  # a request's path and headers are the client's: escaped in every record
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="callsafe-loopback", daemon=True)
        self.requests = 0
        self._tls_lock = threading.Lock()
        self._certificate: LoopbackCertificate | None = None
        self._tls: tuple[uvicorn.Server, socket.socket, concurrent.futures.Future[None]] | None = None

    def _config(self, **tls: str) -> uvicorn.Config:
        level = os.environ.get("CALLSAFE_LOOPBACK_LOG", "critical")  # "info" shows every request and error
        return uvicorn.Config(
            self.app,
            log_level=level,
            access_log=level != "critical",
            lifespan="off",
            ws=_websocket_implementation(),
            ws_max_size=self.max_body,
            interface="asgi3",
            **tls,  # type: ignore[arg-type]
        )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve(sockets=[self.sock]))

    def start(self) -> LoopbackServer:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return self
            self.thread.join(timeout=0.01)
        raise RuntimeError("the loopback provider did not start")

    def stop(self) -> None:
        tls = self._tls
        if tls is not None:
            tls[0].should_exit = True
            with contextlib.suppress(Exception):
                tls[2].result(timeout=5)
            with contextlib.suppress(OSError):
                tls[1].close()
        self.server.should_exit = True
        self.thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._certificate is not None:  # its private temporary directory goes with it
            shutil.rmtree(self._certificate.certfile.parent, ignore_errors=True)

    def certificate(self) -> LoopbackCertificate:
        """The certificate of the TLS listener (made on first use; :mod:`callsafe.loopback.tls`):
        its ``certfile`` is what a program trusts (``SSL_CERT_FILE``)."""
        with self._tls_lock:
            if self._certificate is None:
                self._certificate = make_certificate(self.host)
            return self._certificate

    def tls_base_url(self) -> str:
        """``https://HOST:PORT`` of a second listener, with TLS, serving the same app (the same
        channels and trace): for clients that speak only TLS, as google-genai's Live client
        (``wss://``). Started on first use, in the server's own event loop."""
        certificate = self.certificate()
        with self._tls_lock:
            if self._tls is None:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.host, 0))
                server = uvicorn.Server(
                    self._config(ssl_certfile=str(certificate.certfile), ssl_keyfile=str(certificate.keyfile))
                )
                future = asyncio.run_coroutine_threadsafe(server.serve(sockets=[sock]), self.loop)
                for _ in range(3000):
                    if server.started or future.done():
                        break
                    time.sleep(0.01)
                if not server.started:
                    raise RuntimeError("the loopback provider's TLS listener did not start")
                self._tls = (server, sock, future)
            return f"https://{self.host}:{self._tls[1].getsockname()[1]}"

    def tls_channel_url(self, channel: str) -> str:
        """The TLS address of one program's channel (:meth:`tls_base_url`)."""
        return f"{self.tls_base_url()}/c/{channel}"

    def channel_url(self, channel: str) -> str:
        """The base address of one program's channel: its requests get its streams only."""
        return f"{self.base_url}/c/{channel}"

    def _queue(self, channel: str) -> asyncio.Queue[LiveStream]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue()
        return queue

    def open_stream(self, protocol: str, channel: str = "") -> LiveStream:
        """A new response for the channel's next request (from the harness's thread)."""
        stream = LiveStream(self, protocol)
        self.loop.call_soon_threadsafe(lambda: self._queue(channel).put_nowait(stream))
        return stream

    # -- the ASGI app ------------------------------------------------------------------

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        body = await self._body(scope, receive)
        if body is None:
            await _json(
                send,
                413,
                {"error": {"message": f"request body over {self.max_body} bytes (callsafe serve --max-body)"}},
                close=True,
            )
            return
        self.requests += 1
        protocol = _route(str(scope.get("path", "")))
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        if self.static is not None and scope.get("method") == "GET" and _RESUME.search(str(scope.get("path", ""))):
            await self._resume_static(send, query)
            return
        if scope.get("method") != "POST" or protocol is None:
            await _json(send, 404, {"error": {"message": f"no streaming endpoint at {scope.get('path')!r}"}})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if protocol == "gemini" and "sse" not in urllib.parse.parse_qs(query).get("alt", []):
            message = "callsafe serves streamGenerateContent as SSE only: add ?alt=sse"
            await _json(send, 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
            return
        if self.static is not None:
            await self._serve_static(send, protocol, headers.get("last-event-id"))
            return
        path = str(scope.get("path", ""))
        channel = path.split("/")[2] if path.startswith("/c/") and path.count("/") > 2 else ""
        if is_follow_up(protocol, bytes(body)) and self._queue(channel).empty():
            # an agent's follow-up that nobody scripted: the short reply. A stream already
            # queued for the channel (a test or a program that scripts the next answer) is
            # served instead, in order, as every other request's.
            await _serve_reply(send, protocol)
            return
        while True:
            try:
                stream = await asyncio.wait_for(self._queue(channel).get(), timeout=30)
            except TimeoutError:
                await _json(send, 503, {"error": {"message": "no stream is ready for this request"}})
                return
            if not stream.abandoned:
                stream.served = True
                break
        if stream.protocol != protocol:
            await _json(send, 400, {"error": {"message": f"this stream is {stream.protocol}, not {protocol}"}})
            return
        await _start_stream(send, protocol)
        await stream.serve(send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket: the OpenAI Realtime API at ``.../realtime``
        (:mod:`callsafe.loopback.realtime`) or a Gemini Live session at
        ``...BidiGenerateContent`` (:mod:`callsafe.loopback.gemini_live`), for a trace served
        as that protocol; any other is refused in the handshake (403)."""
        self.requests += 1
        static = self.static
        path = str(scope.get("path", "")).rstrip("/")
        if path.endswith(REALTIME_PATH):
            protocol, serve = "openai-realtime", serve_session
        elif path.endswith(LIVE_PATH_END):
            protocol, serve = "gemini-live", serve_live_session
        else:
            await send({"type": "websocket.close", "code": 1008})
            return
        if static is not None and static.protocol != protocol:
            await send({"type": "websocket.close", "code": 1008})
            return
        if static is not None:
            await serve(scope, receive, send, _StaticSession(static))
            return
        channel = path.split("/")[2] if path.startswith("/c/") and path.count("/") > 2 else ""
        await serve(scope, receive, send, _LiveSession(self, channel, protocol))

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The request body, or None when it is over :attr:`max_body` bytes: refused by its
        ``Content-Length`` before a byte of it is read, or (chunked) as soon as what arrived
        passes the cap; the rest is never read (the 413 closes the connection)."""
        for name, value in scope.get("headers", []):
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return None  # uvicorn refuses a malformed length itself; never read one
                if declared > self.max_body:
                    return None
        body = bytearray()
        while True:  # only whether it carries tool results is read
            part = await receive()
            if part.get("type") == "http.disconnect":
                break
            body += part.get("body", b"")
            if len(body) > self.max_body:
                return None
            if not part.get("more_body", False):
                break
        return bytes(body)

    async def _resume_static(self, send: Send, query: str) -> None:
        """``GET .../responses/{id}?stream=true&starting_after=N``: OpenAI's resume of a
        background response's stream, after sequence number N (all of it without N)."""
        static = self.static
        assert static is not None
        if static.protocol != "openai-responses":
            await _json(send, 404, {"error": {"message": f"this trace is served as {static.protocol}"}})
            return
        params = urllib.parse.parse_qs(query)
        if params.get("stream", [""])[0].lower() != "true":
            await _json(send, 400, {"error": {"message": "only the stream of a response is served: add stream=true"}})
            return
        after = params.get("starting_after", ["-1"])[0]
        try:
            cursor = int(after)
        except ValueError:
            await _json(send, 400, {"error": {"message": f"starting_after must be an integer, got {after!r}"}})
            return
        chunks, _ = static.chunks(None, starting_after=cursor)
        await _start_sse(send)
        for piece in chunks:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _serve_static(self, send: Send, protocol: str, last: str | None) -> None:
        static = self.static
        assert static is not None
        if protocol != static.protocol:
            await _json(send, 400, {"error": {"message": f"this trace is served as {static.protocol}"}})
            return
        try:
            last_id = int(last) if last is not None else None
        except ValueError:
            await _json(send, 400, {"error": {"message": f"Last-Event-ID must be an integer, got {last!r}"}})
            return
        chunks, drops = static.chunks(last_id)
        await _start_stream(send, protocol)
        for piece in chunks:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        if drops:
            raise _Dropped("the trace disconnects here")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _StaticSession:
    """``callsafe serve``: a Realtime session's first response request gets the trace's next
    connection, every later one the short reply."""

    def __init__(self, static: StaticTrace) -> None:
        self.static = static

    async def respond(self, send_text: Callable[[str], Awaitable[None]], first: bool) -> bool:
        payloads, drops = self.static.next_payloads() if first else (reply_payloads(self.static.protocol), False)
        for payload in payloads:
            await send_text(message_bytes(payload).decode("utf-8"))
        return drops


class _LiveSession:
    """certify: each response request of a Realtime or Live session gets the channel's next
    live stream, as an HTTP request does; a later request nobody scripted gets the short reply."""

    def __init__(self, server: LoopbackServer, channel: str, protocol: str) -> None:
        self.server = server
        self.channel = channel
        self.protocol = protocol

    async def respond(self, send_text: Callable[[str], Awaitable[None]], first: bool) -> bool:
        queue = self.server._queue(self.channel)
        if not first and queue.empty():
            for payload in reply_payloads(self.protocol):
                await send_text(message_bytes(payload).decode("utf-8"))
            return False
        while True:
            try:
                stream = await asyncio.wait_for(queue.get(), timeout=30)
            except TimeoutError:
                return True  # no stream is ready for this request: the session ends
            if not stream.abandoned:
                break
        if stream.protocol != self.protocol:
            return True
        return await stream.serve_messages(send_text)


def message_bytes(payload: Mapping[str, Any]) -> bytes:
    """One server event as the UTF-8 text of its WebSocket message (what a client counts)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def is_follow_up(protocol: str, body: bytes) -> bool:
    """Whether a request is an agent's follow-up: its conversation already holds the model's
    answer (an assistant turn: Chat and Anthropic ``role: "assistant"``, Gemini ``role:
    "model"``, Responses ``function_call`` items or an assistant message) or a tool result
    (Chat ``role: "tool"``, Responses ``function_call_output``). Agent frameworks make that
    request on their own once the trace's response has been read (after their tools ran, or
    after a response they could not use); it is no part of the trace, so it gets
    :func:`reply_payloads` rather than the channel's next stream (the harness's next
    response, or nothing). A reconnect repeats the first request, which holds neither."""
    try:
        request = json.loads(body) if body else None
    except ValueError:
        return False
    if not isinstance(request, dict):
        return False
    turns = [m for m in _list(request.get("messages" if protocol != "gemini" else "contents")) if isinstance(m, dict)]
    if protocol in ("openai-chat", "anthropic-messages", "bedrock-converse"):
        return any(m.get("role") in ("assistant", "tool") for m in turns)
    if protocol == "gemini":
        return any(m.get("role") == "model" for m in turns)
    if protocol == "openai-responses":
        return any(
            isinstance(i, dict)
            and (i.get("type") in ("function_call", "function_call_output") or i.get("role") == "assistant")
            for i in _list(request.get("input"))
        )
    return False


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def reply_payloads(protocol: str) -> list[dict[str, Any]]:
    """A short text reply ("done") that ends normally, in ``protocol``'s payloads: what the
    model says after the tools ran."""
    events = [
        TextFragment("reply", "resp_callsafe_reply", "text" if protocol in TEXT_ITEM_PROTOCOLS else "0", "done"),
        ResponseTerminal("reply", "resp_callsafe_reply", "completed"),
    ]
    payloads = render_payloads(protocol, events)
    as_servers_send(protocol, [payloads])
    return payloads


async def _serve_reply(send: Send, protocol: str) -> None:
    await _start_stream(send, protocol)
    for payload in reply_payloads(protocol):
        await send({"type": "http.response.body", "body": b"".join(_pieces(protocol, payload)), "more_body": True})
    if registry.get(protocol).done_sentinel:
        await send({"type": "http.response.body", "body": encode_event(DONE), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _start_sse(send: Send) -> None:
    await _start_stream(send, "openai-chat")


async def _start_stream(send: Send, protocol: str) -> None:
    """A 200 with the protocol's streaming content type: SSE, or AWS's event stream."""
    binary = registry.get(protocol).transport == "aws-eventstream"
    kind = EVENTSTREAM.encode() if binary else b"text/event-stream; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", kind), (b"cache-control", b"no-cache")],
        }
    )


async def _json(send: Send, status: int, body: Mapping[str, Any], *, close: bool = False) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json")]
    if close:  # the request's body was not read: the connection cannot carry another request
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


_SHARED: LoopbackServer | None = None
_SHARED_LOCK = threading.Lock()


def shared_server() -> LoopbackServer:
    """This process's loopback provider for live streams, started on first use."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = LoopbackServer().start()
        return _SHARED
