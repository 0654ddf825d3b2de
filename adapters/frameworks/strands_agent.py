"""``python -m callsafe.adapters.frameworks.strands_agent``: Strands Agents (``strands-agents``)
running its own tools over Chat Completions.

The program: an ``Agent`` over ``strands.models.openai.OpenAIModel`` with an ``AsyncOpenAI``
client of its own (the loopback provider's base URL, ``max_retries=0``), one
``PythonAgentTool`` per catalog entry (the catalog's JSON Schema as its ``inputSchema``),
and ``Agent.stream_async``. Strands reads the stream (``OpenAIModel.stream``: tool deltas
grouped by ``index`` until the first ``finish_reason``), turns each call's input into an
object (``event_loop/streaming.py``, ``handle_content_block_stop``: input that does not
parse becomes ``{}``, harness-sdk #2051) and runs the tools; the tool body hands what it
got to callsafe's executor.

Cancellation: ``Agent.cancel()``, Strands' thread-safe cancel of the running invocation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
from openai import AsyncOpenAI
from strands import Agent
from strands.models.openai import OpenAIModel
from strands.tools.tools import PythonAgentTool
from strands.types.tools import ToolResult, ToolUse

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


class StrandsProgram(FrameworkProgram):
    name = "strands-agents:openai-chat:agent"
    protocol = "openai-chat"

    def __init__(self) -> None:
        super().__init__()
        self._agent: Agent | None = None

    def _tool(self, name: str, schema: dict[str, Any]) -> PythonAgentTool:
        def body(tool_use: ToolUse, **_: Any) -> ToolResult:
            text = self.execute(name, tool_use["input"], tool_use["toolUseId"])
            return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

        spec: Any = {"name": name, "description": name, "inputSchema": {"json": schema}}
        return PythonAgentTool(name, spec, body)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        http = self.watching_client(httpx2)
        client = AsyncOpenAI(api_key="callsafe-loopback", base_url=f"{base_url}/v1", max_retries=0, http_client=http)
        model = OpenAIModel(client=client, model_id="gpt-4o")
        tools: list[Any] = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        self._agent = agent = Agent(model=model, tools=tools, callback_handler=None)
        try:
            async for _ in agent.stream_async("go"):
                pass
        finally:
            self._agent = None
            await client.close()

    def cancel(self, task: asyncio.Task[None]) -> None:
        if self._agent is not None:
            self._agent.cancel()
        else:
            task.cancel()


if __name__ == "__main__":
    raise SystemExit(main(StrandsProgram))
