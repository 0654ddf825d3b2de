"""A small agent as a user writes it: its model is whatever ``OPENAI_BASE_URL`` serves, its
tools are whatever the MCP server at ``CALLSAFE_MCP_URL`` lists. It streams one chat
completion with those tools, assembles the streamed tool calls, and calls each through MCP.
Nothing in it knows callsafe.

``--stdio`` takes its tools from the MCP server command in ``CALLSAFE_MCP_COMMAND``.
``--timeout SECONDS`` gives each ``tools/call`` that long (the SDK then cancels the request:
``notifications/cancelled``, or its stream closed on the 2026 HTTP wire). ``--retry`` calls a
tool again when its answer is lost or timed out (the tool runs twice). ``--naive`` is the agent with two bugs users ship (public reports in
``shared/research/public-streaming-bugs.md``): it keys calls by their ``index`` alone (two
parallel calls that share an index merge into one), and it runs what it assembled whatever
the stream's ``finish_reason`` (a reply cut at ``length`` runs its truncated call).

Catalog changes: the agent lists its tools again on ``notifications/tools/list_changed`` and
runs no call of a tool its list no longer has (it waits for a re-listing in flight before it
runs its calls); ``--stale`` keeps the list it started with (and calls what the model asked).
``--progress`` asks for each call's ``notifications/progress`` (a ``progressToken``) and
prints them to stderr."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from typing import Any

import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI


def _timeout() -> float | None:
    argv = sys.argv[1:]
    return float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None


async def progress(value: float, total: float | None, message: str | None) -> None:
    print(f"progress {value:g}/{total if total is None else f'{total:g}'}: {message}", file=sys.stderr)


async def call_tool(session: ClientSession, name: str, arguments: Any, retry: bool) -> None:
    """``--retry``: a lost or timed-out answer is retried by calling again (the tool then
    runs twice); otherwise it is reported and the agent goes on."""
    watch = progress if "--progress" in sys.argv[1:] else None
    try:
        await session.call_tool(name, arguments, read_timeout_seconds=_timeout(), progress_callback=watch)
    except Exception as exc:  # the MCP client raises its MCPError for a lost or timed-out answer
        print(f"{name}: no answer ({exc})", file=sys.stderr)
        if retry:
            try:
                await session.call_tool(name, arguments, read_timeout_seconds=_timeout(), progress_callback=watch)
            except Exception as again:
                print(f"{name}: no answer again ({again})", file=sys.stderr)


async def main(naive: bool) -> None:
    if "--stdio" in sys.argv[1:]:  # the MCP server entry as a command
        command, *args = shlex.split(os.environ["CALLSAFE_MCP_COMMAND"])
        transport: Any = stdio_client(StdioServerParameters(command=command, args=args, env=dict(os.environ)))
    else:
        transport = streamable_http_client(os.environ["CALLSAFE_MCP_URL"])
    stale = "--stale" in sys.argv[1:]
    known: set[str] = set()
    relisting: list[asyncio.Task[None]] = []

    async def relist() -> None:
        listed = await session.list_tools()
        known.clear()
        known.update(t.name for t in listed.tools)
        print(f"tools now: {sorted(known)}", file=sys.stderr)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and not stale:
            relisting.append(asyncio.ensure_future(relist()))  # not inline: the session's reader must go on

    async with transport as streams, ClientSession(streams[0], streams[1], message_handler=on_message) as session:
        await session.initialize()
        listed = await session.list_tools()
        known.update(t.name for t in listed.tools)
        tools: list[Any] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
            }
            for t in listed.tools
        ]
        client = AsyncOpenAI(max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "go"}], tools=tools, stream=True
        )
        calls: dict[str, dict[str, str]] = {}  # call id (naive: index) -> name, arguments
        at_index: dict[int, str] = {}  # index -> the id of the call it carries now
        finish = None
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.index != 0:
                    continue
                for delta in choice.delta.tool_calls or []:
                    if naive:
                        key = str(delta.index)
                    else:
                        if delta.id:
                            at_index[delta.index] = delta.id
                        key = at_index.get(delta.index, "")
                        if not key:
                            continue  # a fragment of no call that was opened
                    call = calls.setdefault(key, {"name": "", "arguments": ""})
                    if delta.function and delta.function.name and not call["name"]:
                        call["name"] = delta.function.name
                    if delta.function and delta.function.arguments:
                        call["arguments"] += delta.function.arguments
                if choice.finish_reason:
                    finish = choice.finish_reason
        await client.close()
        if not naive and finish != "tool_calls":
            return  # cut short, filtered or ended without calls: nothing is finished
        await asyncio.gather(*relisting)  # a re-listing in flight ends before any call runs
        for call in calls.values():
            if not naive and call["name"] not in known:
                print(f"{call['name']}: no longer offered; not run", file=sys.stderr)
                continue
            try:
                arguments = json.loads(call["arguments"] or "{}")
            except ValueError:
                if not naive:
                    continue  # never run arguments that do not decode
                arguments = {"raw": call["arguments"]}
            await call_tool(session, call["name"], arguments, retry="--retry" in sys.argv[1:])


if __name__ == "__main__":
    asyncio.run(main("--naive" in sys.argv[1:]))
