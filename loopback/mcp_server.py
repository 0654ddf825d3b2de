"""callsafe as an agent's MCP tool server, and the watched path to its model endpoint.

Why: an agent that takes its tools from an MCP server and its model from an OpenAI- or
Anthropic-compatible base URL is certifiable from the outside through those two interfaces
alone. :class:`AgentInterfaces` serves both on 127.0.0.1, in a thread of its own (uvicorn,
as :mod:`callsafe.loopback.server`):

- ``/mcp``: an MCP server over Streamable HTTP (the official ``mcp`` SDK's low-level
  ``Server``). ``tools/list`` answers the current trace's catalog (each tool's JSON Schema as
  its ``inputSchema``); each ``tools/call`` is the agent executing a tool, handed to
  ``on_call(name, arguments)`` (the executor spy) and answered with that function's short
  text. The spy sits where the agent's tools really run.
- the catalog as it stands: :meth:`AgentInterfaces.tools_changed` (a trace's catalog change
  while a call streams) sends ``notifications/tools/list_changed`` to each connected host
  (the server declares ``tools.listChanged``) and waits, bounded, for a host to list again;
  a ``tools/call`` for a tool no longer listed still reaches ``on_call`` (the host dispatched
  it: the spy records the attempt) and is answered as MCP answers an unknown tool, with a
  JSON-RPC error (``-32602``, MCP "Tools", "Error Handling": protocol errors are for
  "Unknown tools").
- ``long_seconds``: each tool runs that long after it began (the spy records it at its
  start), sending ``notifications/progress`` (every ``progress_every`` seconds) when the
  request carried a ``progressToken``;
  a cancellation mid-run stops it: no further progress and no answer.
- ``/model/...``: a pass-through to the model endpoint of the moment (callsafe's loopback
  provider, ``set_upstream``): each request is forwarded as it is and each response's bytes
  are shown to ``on_bytes`` as they pass, unchanged and unbuffered, so the ids of the calls
  the agent was sent (the response id, each call's item and id, its name and argument text)
  are known when its ``tools/call`` arrives (the MCP request carries only a name and
  arguments).

Nothing here judges: :mod:`callsafe.adapters.mcp_agent` turns calls into executions under
call keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

__all__ = ["PROGRESS_STEPS", "WITHHOLD_SECONDS", "AgentInterfaces", "ToolServer"]

WITHHOLD_SECONDS = 600.0  # a withheld answer's bound: past any host's own timeout for a tools/call
PROGRESS_STEPS = 10  # notifications/progress a long tool sends over its run by default (when asked)
INVALID_PARAMS = -32602  # JSON-RPC's code, which MCP's own example gives an unknown tool


class ToolServer(Server[Any]):
    """The SDK's low-level server, declaring ``tools.listChanged`` (MCP, "Tools",
    "Capabilities": "listChanged indicates whether the server will emit notifications when
    the list of available tools changes"); callsafe's catalog changes mid-trace."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )


_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding"})


class AgentInterfaces:
    """The MCP tool server and the watched model path, on one port of 127.0.0.1."""

    def __init__(
        self,
        catalog: Callable[[], Mapping[str, Mapping[str, Any]]],
        on_call: Callable[[str, dict[str, Any]], str],
        on_bytes: Callable[[bytes], None],
        drop_answers: bool = False,
        withhold_answers: bool = False,
        long_seconds: float = 0.0,
        progress_every: float | None = None,
    ) -> None:
        self.catalog = catalog  # tool name -> JSON Schema as it stands, read at each tools/list and tools/call
        self.on_call = on_call
        self.on_bytes = on_bytes
        self.drop_answers = drop_answers  # the first answer to each distinct tools/call is lost
        self.withhold_answers = withhold_answers  # the tool runs; its answer waits for a cancellation
        self.long_seconds = long_seconds  # each tool runs this long, reporting progress when asked
        self.progress_every = progress_every or long_seconds / PROGRESS_STEPS  # seconds between reports
        self.cancelled = 0  # tools/call requests the host cancelled (and that were never answered)
        self.listed = 0  # tools/list requests answered
        self.model_requests = 0  # requests on the model path (a host that began reading its model)
        self.progress_sent = 0  # notifications/progress sent
        self.unlisted_calls = 0  # tools/call requests for a tool not listed, answered with an error
        # one request's session per host connection (the SDK's ServerSession is per request;
        # its notifications without a request go on the connection's own channel)
        self.sessions: dict[int, tuple[object, ServerSession]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.changed = threading.Condition()
        self.dropped: set[bytes] = set()
        self.upstream = ""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        server = ToolServer("callsafe", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        app = server.streamable_http_app(
            custom_starlette_routes=[Route("/model/{path:path}", self._model, methods=["GET", "POST"])]
        )
        # log_config=None: uvicorn's default dictConfig would reset the uvicorn loggers, and
        # with them the escaping filters the loopback provider beside it attached
        config = uvicorn.Config(
            self._dropping(app), log_config=None, log_level="critical", access_log=False, lifespan="on", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="callsafe-mcp", daemon=True)
        self.client: httpx.AsyncClient | None = None

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def model_url(self) -> str:
        """The agent's model base URL (a provider's paths follow: ``/v1/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}/model"

    def set_upstream(self, base_url: str) -> None:
        self.upstream = base_url.rstrip("/")

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self.sock])

    def forget_sessions(self) -> None:
        """A new host process: the sessions of the last one are not told of changes."""
        self.sessions = {}

    def tools_changed(self, wait: float) -> bool:
        """The catalog changed: send ``notifications/tools/list_changed`` to each host that
        listed or called tools, then wait up to ``wait`` seconds for a ``tools/list`` (MCP,
        "Tools", "List Changed Notification": a server that declared ``listChanged`` "SHOULD
        send a notification" when its list changes; the host lists again if it will). The
        wait makes the host's re-listing happen before the stream goes on, so what the host
        then does with a call of the changed tool does not depend on a race. Returns whether
        a host listed again (``False`` at once when no host is connected). Thread-safe."""
        loop = self.loop
        if loop is None or not self.sessions:
            return False
        with self.changed:
            listed = self.listed
        asyncio.run_coroutine_threadsafe(self._notify(), loop).result(timeout=max(wait, 1.0))
        with self.changed:
            return self.changed.wait_for(lambda: self.listed > listed, timeout=wait)

    def wait_for_model(self, since: int, wait: float) -> bool:
        """Wait up to ``wait`` seconds until the model path took a request after the first
        ``since``: the host has listed its tools and begun reading the stream, so a catalog
        change from then on reaches it while its call streams. Thread-safe."""
        with self.changed:
            return self.changed.wait_for(lambda: self.model_requests > since, timeout=wait)

    async def _notify(self) -> None:
        for key, (_, session) in list(self.sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a host gone since: it lists nothing again
                self.sessions.pop(key, None)

    def start(self) -> AgentInterfaces:
        self.thread.start()
        for _ in range(1000):
            if self.server.started:
                return self
            self.thread.join(timeout=0.01)
        raise RuntimeError("callsafe's MCP server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.sock.close()

    # -- MCP ---------------------------------------------------------------------------

    def _dropping(self, app: Any) -> Any:
        """With ``drop_answers``: the connection of a ``tools/call`` POST drops after the
        tool ran and before its answer is written, the first time each distinct call (name
        and arguments) is sent: a host that sends the call again runs it twice (INV-ONCE);
        MCP's Streamable HTTP transport says a disconnection is not a cancellation, and its
        way back to a lost answer is a resumed stream (``Last-Event-ID``), not a new call."""

        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if not self.drop_answers or scope.get("type") != "http" or scope.get("method") != "POST":
                await app(scope, receive, send)
                return
            body = bytearray()

            async def watched_receive() -> Any:
                message = await receive()
                if message.get("type") == "http.request":
                    body.extend(message.get("body", b""))
                return message

            async def dropping_send(message: Any) -> None:
                if message.get("type") == "http.response.body" and b'"result"' in message.get("body", b""):
                    call = _tool_call(bytes(body))
                    if call is not None and call not in self.dropped:
                        self.dropped.add(call)
                        raise ConnectionResetError("callsafe dropped the connection before the answer")
                await send(message)

            await app(scope, watched_receive, dropping_send)

        return wrapped

    def _remember(self, ctx: Any) -> None:
        session = getattr(ctx, "session", None)
        if isinstance(session, ServerSession):
            connection = getattr(session, "_connection", session)  # held, so that its id stays its own
            self.sessions.setdefault(id(connection), (connection, session))

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._remember(ctx)
        tools = [
            types.Tool(name=name, description=f"the {name} tool", input_schema=dict(schema))
            for name, schema in self.catalog().items()
        ]
        with self.changed:
            self.listed += 1
            self.changed.notify_all()
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self._remember(ctx)
        arguments = dict(params.arguments or {})
        listed = params.name in self.catalog()
        text = await asyncio.to_thread(self.on_call, params.name, arguments)
        if not listed:
            self.unlisted_calls += 1
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        if self.long_seconds > 0:
            await self._run_long(ctx)
        if self.withhold_answers:
            await self._withhold()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _run_long(self, ctx: Any) -> None:
        """A long-running tool: it began when the spy recorded it; it runs ``long_seconds``
        and, when the host asked for progress, reports the seconds run so far of the total
        every ``progress_every`` seconds (MCP, "Progress": the receiver "MAY then send
        progress notifications", and "the progress value MUST increase with each
        notification"). A cancellation ends it where it is (the SDK cancels this handler):
        no progress after it (progress "MUST only reference tokens that ... were provided in
        an active request") and no answer (the receiver "SHOULD NOT send a response for the
        cancelled request")."""
        meta = getattr(ctx, "meta", None) or {}
        token = meta.get("progress_token") if isinstance(meta, Mapping) else None
        run = 0.0
        try:
            while run < self.long_seconds:
                step = min(self.progress_every, self.long_seconds - run)
                await asyncio.sleep(step)
                run += step
                if token is not None:
                    total = self.long_seconds
                    await ctx.session.report_progress(run, total, f"{run:g} s of {total:g} s")
                    self.progress_sent += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def _withhold(self) -> None:
        """With ``withhold_answers``: the tool has run, and its answer waits until the host
        gives up on it: its ``notifications/cancelled`` (or, on the 2026 Streamable HTTP
        wire, the request's stream closed) cancels this handler, and the SDK sends no
        response for a cancelled request (MCP, "Cancellation": the receiver "SHOULD NOT
        send a response for the cancelled request", and "MAY ignore" a cancellation that
        arrives after processing completed: here the tool ran before the cancellation
        came). A host that then sends the call again runs the tool a second time, and
        INV-ONCE says so. The wait is bounded (``WITHHOLD_SECONDS``) so a host that never
        cancels does not keep a task forever; it is answered then."""
        try:
            await asyncio.sleep(WITHHOLD_SECONDS)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    # -- the model path ----------------------------------------------------------------

    async def _model(self, request: Request) -> Response:
        with self.changed:
            self.model_requests += 1
            self.changed.notify_all()
        if not self.upstream:
            return Response("no model stream is open", status_code=503)
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        url = f"{self.upstream}/{request.path_params['path']}"
        if request.url.query:
            url = f"{url}?{request.url.query}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        upstream = self.client.build_request(request.method, url, headers=headers, content=await request.body())
        response = await self.client.send(upstream, stream=True)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    self.on_bytes(chunk)
                    yield chunk
            finally:
                await response.aclose()

        out = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS | {"content-encoding"}}
        return StreamingResponse(body(), status_code=response.status_code, headers=out)


def _tool_call(body: bytes) -> bytes | None:
    """A ``tools/call`` request's name and arguments, canonical, or ``None``."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params") or {}
    return json.dumps([params.get("name"), params.get("arguments")], sort_keys=True).encode()


def decode_arguments(text: str) -> Any:
    """The arguments a call's streamed text decodes to, or ``None`` when it does not."""
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return None
