"""An ``httpx`` transport that tells callsafe how far into each response body the program's
SDK has read: the program side of the target protocol's ``read`` {bytes} (``"acks":
"bytes"``).

Why bytes and why at the pull: an SDK's HTTP stream is pull-based. Its SSE decoder asks the
HTTP client for more bytes only once it has handed the application every event the bytes so
far completed, and the application asks the SDK for the next event only once it has handled
the last one (run its tools, written its ledger). So the moment the SDK asks for bytes past
offset N, everything the first N bytes carried has been handled. That is observable here,
in the program, without knowing the SDK's events (an SDK that skips an event type, or
yields two objects for one event, counts the same), and it is not observable anywhere else:
the loopback only sees its writes reach the socket. Reporting at the pull, before the read
blocks, lets callsafe deliver the trace's next step (a restart, a catalog change) only after
the program has seen what came before it in the trace.

By design, not by opt-in: :func:`install` (which ``serve(wire="http")`` calls) hooks the
transports of ``httpx`` and ``httpx2`` for the whole process, synchronous and asynchronous,
so every client a framework builds for itself (an ``AsyncOpenAI`` inside an agent runner, a
Gemini client, a proxy's upstream client) reports its reads, whatever transport wraps them.
Only the model stream counts: a response is reported when its request went to the base URL
of the stream callsafe opened (its channel at the loopback provider) and its body is a stream
(``text/event-stream`` or AWS's event stream); an MCP session, a JSON answer or any other
request is not.
"""

from __future__ import annotations

import functools
import importlib
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any, Final

__all__ = [
    "Report",
    "http_module",
    "install",
    "installed",
    "plain_client",
    "reporting_client",
    "reporting_transport",
    "tls_context",
    "uninstall",
]

Report = Callable[[int, bool], None]  # (bytes handled so far, stopped reading this body)
Sink = Callable[[str], Report | None]  # a request's URL -> where its body reports (None: nowhere)

_STREAM_TYPES: Final = ("text/event-stream", "application/vnd.amazon.eventstream")
_sink: list[Sink] = []  # the sink install() set (one per process)


def http_module(sdk: str) -> ModuleType:
    """The HTTP library an SDK's client is built on (``httpx``, or ``httpx2`` for the SDKs
    that moved to it: they refuse a client of the other)."""
    base = importlib.import_module(f"{sdk}._base_client")
    module = getattr(base, "httpx2", None) or getattr(base, "httpx", None)
    if not isinstance(module, ModuleType):
        module = importlib.import_module("httpx")
    return module


@functools.cache
def _async_stream(http: ModuleType) -> type[Any]:
    """The asynchronous reporting stream of one HTTP library: what an ``AsyncClient`` reads."""

    class AsyncReportingStream(http.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, report: Report) -> None:
            self.inner = inner
            self.report = report
            self.read = 0
            self.closed = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            chunks = self.inner.__aiter__()
            while True:
                self.report(self.read, False)  # everything before this offset has been handled
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                self.read += len(chunk)
                yield chunk

        async def aclose(self) -> None:
            if not self.closed:
                self.closed = True
                self.report(self.read, True)
            await self.inner.aclose()

    return AsyncReportingStream


def _reporter(request: Any, response: Any) -> Report | None:
    """Where this response's body reports: the sink's answer for the request's URL, for a
    streamed body only."""
    if not _sink:
        return None
    kind = str(response.headers.get("content-type", "")).split(";")[0].strip().lower()
    if kind not in _STREAM_TYPES:
        return None
    return _sink[0](str(request.url))


def _patch(http: ModuleType) -> None:
    """Hook one HTTP library's transports (once): every response they return whose request
    the sink accepts has its body wrapped in a reporting stream. Patching the base
    transports' methods reaches the clients already built and any transport that delegates
    to them (a watching or mocking wrapper reads through them)."""
    sync, aio = http.HTTPTransport, http.AsyncHTTPTransport
    if getattr(sync, "_callsafe_reads", False):
        return
    stream, astream = _classes(http)[0], _async_stream(http)
    handle, ahandle = sync.handle_request, aio.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        response = handle(self, request)
        report = _reporter(request, response)
        if report is not None and isinstance(response.stream, http.SyncByteStream):
            response.stream = stream(response.stream, report)
        return response

    async def handle_async_request(self: Any, request: Any) -> Any:
        response = await ahandle(self, request)
        report = _reporter(request, response)
        if report is not None and isinstance(response.stream, http.AsyncByteStream):
            response.stream = astream(response.stream, report)
        return response

    sync.handle_request = handle_request
    aio.handle_async_request = handle_async_request
    sync._callsafe_reads = aio._callsafe_reads = True


def install(sink: Sink) -> None:
    """Report the body reads of every streamed response of this process's ``httpx`` and
    ``httpx2`` transports to ``sink(url)`` (``None``: that request is not the model stream).
    Idempotent; a later call replaces the sink."""
    _sink[:] = [sink]
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _patch(module)


def uninstall() -> None:
    """Stop reporting (the hooks stay, inert: a response then reports nowhere)."""
    _sink.clear()


def installed() -> bool:
    """Whether :func:`install` has hooked this process's HTTP transports."""
    return bool(_sink)


@functools.cache
def _classes(http: ModuleType) -> tuple[type[Any], type[Any]]:
    """The reporting stream and transport for one HTTP library (httpx and httpx2 share the API)."""

    class ReportingStream(http.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, report: Report) -> None:
            self.inner = inner
            self.report = report
            self.read = 0
            self.closed = False

        def __iter__(self) -> Iterator[bytes]:
            chunks = iter(self.inner)
            while True:
                self.report(self.read, False)  # everything before this offset has been handled
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                self.read += len(chunk)
                yield chunk

        def close(self) -> None:
            if not self.closed:
                self.closed = True
                self.report(self.read, True)
            self.inner.close()

    class ReadReportingTransport(http.BaseTransport):  # type: ignore[name-defined,misc]
        """Wraps a transport; every response body reports as it is pulled and when closed."""

        def __init__(self, report: Report, inner: Any = None) -> None:
            self.report = report
            self.inner = inner if inner is not None else http.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            response = self.inner.handle_request(request)
            if isinstance(response.stream, http.SyncByteStream):
                response.stream = ReportingStream(response.stream, self.report)
            return response

        def close(self) -> None:
            self.inner.close()

    return ReportingStream, ReadReportingTransport


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every HTTP client of the program. Building one loads the CA
    bundle (about 150 ms here), which ``httpx.HTTPTransport()`` does for every client: a
    program that builds a client per stream, as an application per request does, paid it on
    every trace, more than the rest of a trace over the loopback (``bench/program_rows.py``).
    The loopback is plain HTTP; nothing here changes how a certificate would be checked."""
    return ssl.create_default_context()


def reporting_transport(report: Report, http: ModuleType) -> Any:
    """A transport of ``http`` (httpx or httpx2) whose response bodies report through ``report``."""
    return _classes(http)[1](report, http.HTTPTransport(verify=tls_context()))


def reporting_client(sdk: str, report: Report, timeout: float = 60.0) -> Any:
    """A synchronous client for ``sdk`` (``"openai"``, ``"anthropic"``) whose reads report."""
    http = http_module(sdk)
    return http.Client(transport=reporting_transport(report, http), timeout=http.Timeout(timeout))


def plain_client(sdk: str, timeout: float = 60.0) -> Any:
    """A synchronous client for ``sdk`` over the process's TLS context: what the SDK builds
    by default, without loading the CA bundle again (a program whose reads are not bytes
    over this client, the Realtime API's WebSocket, still builds an SDK client per stream)."""
    http = http_module(sdk)
    return http.Client(transport=http.HTTPTransport(verify=tls_context()), timeout=http.Timeout(timeout))
