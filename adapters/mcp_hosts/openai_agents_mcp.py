"""An OpenAI Agents SDK (``openai-agents``) agent whose tools come from an MCP server:
``agents.mcp.MCPServerStreamableHttp`` at ``CALLSAFE_MCP_URL`` in ``Agent(mcp_servers=...)``,
its model ``OpenAIChatCompletionsModel`` over an ``AsyncOpenAI`` client (``OPENAI_BASE_URL``
from the environment, no retries), run with ``Runner.run_streamed``. The SDK reads the
stream, builds the model response, and sends each of its tool calls to the MCP server as a
``tools/call``. Nothing here knows callsafe."""

from __future__ import annotations

import asyncio
import os

from agents import Agent, ModelSettings, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI


async def main() -> None:
    set_tracing_disabled(True)  # no trace export: the agent talks only to its two endpoints
    client = AsyncOpenAI(max_retries=0)
    server = MCPServerStreamableHttp(
        params={"url": os.environ["CALLSAFE_MCP_URL"], "timeout": 60}, client_session_timeout_seconds=60
    )
    async with server:
        agent = Agent(
            name="mcp-host",
            model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client),
            model_settings=ModelSettings(parallel_tool_calls=True),
            mcp_servers=[server],
        )
        result = Runner.run_streamed(agent, "go", max_turns=3)
        async for _ in result.stream_events():
            pass
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
