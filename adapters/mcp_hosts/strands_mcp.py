"""A Strands Agents (``strands-agents``) agent whose tools come from an MCP server:
``strands.tools.mcp.MCPClient(url=CALLSAFE_MCP_URL)`` as the agent's tool provider, its model
``strands.models.openai.OpenAIModel`` (``OPENAI_BASE_URL`` from the environment, no retries),
run with ``Agent.stream_async``. Strands reads the stream, turns each call's input into an
object and sends it to the MCP server as a ``tools/call``. Nothing here knows callsafe."""

from __future__ import annotations

import asyncio
import os

from strands import Agent
from strands.models.openai import OpenAIModel
from strands.tools.mcp import MCPClient


async def main() -> None:
    model = OpenAIModel(client_args={"max_retries": 0}, model_id="gpt-4o")
    mcp = MCPClient(url=os.environ["CALLSAFE_MCP_URL"], startup_timeout=60)
    agent = Agent(model=model, tools=[mcp], callback_handler=None)
    try:
        async for _ in agent.stream_async("go"):
            pass
    finally:
        agent.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
