"""``python -m callsafe.adapters.frameworks.openai_agents``: the OpenAI Agents SDK
(``openai-agents``) running its own tools over Chat Completions.

The program is what an application writes: an ``Agent`` whose model is
``OpenAIChatCompletionsModel`` over an ``AsyncOpenAI`` client (the base URL is callsafe's
loopback provider, ``max_retries=0``), one ``FunctionTool`` per catalog entry, and
``Runner.run_streamed``; the SDK reads the stream (``ChatCmplStreamHandler``,
``agents/models/chatcmpl_stream_handler.py``), builds the model response, and runs the
tool calls in it. Each tool body decodes its input as the SDK's ``@function_tool`` does
(``_parse_function_tool_json_input``: an empty input is ``{}``, JSON that does not decode
never runs) and hands the call to callsafe's executor.

Cancellation: ``RunResultStreaming.cancel()`` (mode ``immediate``), the SDK's own way to
stop a streamed run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
from agents import Agent, FunctionTool, ModelSettings, Runner, set_tracing_disabled
from agents.exceptions import ModelBehaviorError
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.tool import _parse_function_tool_json_input
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


class OpenAIAgentsProgram(FrameworkProgram):
    name = "openai-agents:openai-chat:agent"
    protocol = "openai-chat"

    def __init__(self) -> None:
        super().__init__()
        self._result: Any = None

    def _tool(self, name: str, schema: dict[str, Any]) -> FunctionTool:
        async def invoke(ctx: ToolContext[Any], raw: str) -> str:
            try:
                arguments = _parse_function_tool_json_input(tool_name=name, input_json=raw)
            except ModelBehaviorError as exc:
                return f"error: {exc}"
            return self.execute(name, arguments, ctx.tool_call_id)

        return FunctionTool(
            name=name,
            description=name,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        set_tracing_disabled(True)
        client = AsyncOpenAI(
            api_key="callsafe-loopback",
            base_url=f"{base_url}/v1",
            max_retries=0,
            http_client=self.watching_client(httpx2),
        )
        tools: list[Any] = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = Agent(
            name="callsafe",
            model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client),
            model_settings=ModelSettings(parallel_tool_calls=True),
            tools=tools,
        )
        self._result = result = Runner.run_streamed(agent, "go", max_turns=3)
        try:
            async for _ in result.stream_events():
                pass
        finally:
            self._result = None
            await client.close()

    def cancel(self, task: asyncio.Task[None]) -> None:
        if self._result is not None:
            self._result.cancel()
        else:
            task.cancel()


if __name__ == "__main__":
    raise SystemExit(main(OpenAIAgentsProgram))
