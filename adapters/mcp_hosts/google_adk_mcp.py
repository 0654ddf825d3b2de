"""A Google Agent Development Kit (``google-adk``) agent whose tools come from an MCP server:
``McpToolset`` over ``StreamableHTTPConnectionParams(url=CALLSAFE_MCP_URL)`` in an
``LlmAgent``, its model ``gemini-2.5-flash`` through ``google-genai`` (the base URL is
``GOOGLE_GEMINI_BASE_URL`` from the environment), run with ``InMemoryRunner.run_async`` in
SSE streaming mode. ADK reads the stream, builds the final model response and sends each of
its function calls to the MCP server as a ``tools/call``. Nothing here knows callsafe:
``callsafe certify 'agent:--protocol gemini -- python -m callsafe.adapters.mcp_hosts.google_adk_mcp'``."""

from __future__ import annotations

import asyncio
import os

from google.adk.agents import LlmAgent
from google.adk.agents._streaming_mode import StreamingMode
from google.adk.agents.run_config import RunConfig
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool.mcp_session_manager import StreamableHTTPConnectionParams
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google.genai import types


async def main() -> None:
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=os.environ["CALLSAFE_MCP_URL"]))
    agent = LlmAgent(name="mcp_host", model="gemini-2.5-flash", tools=[toolset])
    runner = InMemoryRunner(agent=agent, app_name="mcp_host")
    try:
        session = await runner.session_service.create_session(app_name="mcp_host", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        config = RunConfig(streaming_mode=StreamingMode.SSE, max_llm_calls=3)
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message, run_config=config):
            pass
    finally:
        await toolset.close()
        await runner.close()


if __name__ == "__main__":
    asyncio.run(main())
