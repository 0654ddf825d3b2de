"""``python -m callsafe.loopback.mcp_stdio``: callsafe's MCP tool server for an agent whose
MCP server entry is a command (the stdio transport) rather than a URL.

Why a bridge: the executor spy lives in the process that speaks to callsafe
(:mod:`callsafe.adapters.mcp_agent`), while a stdio MCP server is a child the agent starts
itself. So this server answers the agent over its stdin and stdout and forwards each
``tools/list`` and ``tools/call``, unchanged, to the Streamable HTTP server at
``CALLSAFE_MCP_URL`` (:mod:`callsafe.loopback.mcp_server`), where the call is recorded.
What that server sends back goes on to the agent too: ``notifications/tools/list_changed``
(the bridge declares ``tools.listChanged`` as the server does), a call's
``notifications/progress`` (when the agent asked for it), and the agent's cancellation of a
call reaches the server as the bridge's own (the forwarded request is cancelled with it).
``callsafe certify 'agent:COMMAND'`` gives the agent this command in ``CALLSAFE_MCP_COMMAND``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server

from callsafe.loopback.mcp_server import ToolServer

__all__ = ["serve"]


async def serve(url: str) -> None:
    """Serve MCP on stdin/stdout, forwarding to the server at ``url``."""
    agent: list[ServerSession] = []  # the agent's session, once it listed or called tools

    async def from_server(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and agent:
            await agent[0].send_tool_list_changed()

    def remember(ctx: Any) -> None:
        if not agent and isinstance(getattr(ctx, "session", None), ServerSession):
            agent.append(ctx.session)

    async with (
        streamable_http_client(url) as streams,
        ClientSession(streams[0], streams[1], message_handler=from_server) as upstream,
    ):
        await upstream.initialize()

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            remember(ctx)
            return await upstream.list_tools()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            remember(ctx)
            meta = getattr(ctx, "meta", None) or {}

            async def forward(progress: float, total: float | None, message: str | None) -> None:
                await ctx.session.report_progress(progress, total, message)

            asked = isinstance(meta, dict) and meta.get("progress_token") is not None
            result = await upstream.call_tool(
                params.name, dict(params.arguments or {}), progress_callback=forward if asked else None
            )
            if not isinstance(result, types.CallToolResult):
                raise TypeError(f"callsafe's MCP server answered {type(result).__name__}")
            return result

        server = ToolServer("callsafe", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    mcp_url = os.environ.get("CALLSAFE_MCP_URL")
    if not mcp_url:
        print("CALLSAFE_MCP_URL is not set: run under `callsafe certify 'agent:COMMAND'`", file=sys.stderr)
        raise SystemExit(2)
    anyio.run(serve, mcp_url)
