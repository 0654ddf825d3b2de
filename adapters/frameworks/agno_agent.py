"""``python -m callsafe.adapters.frameworks.agno_agent``: Agno (``agno``) running its own tools
over Chat Completions.

The program: an ``agno.agent.Agent`` over ``agno.models.openai.OpenAIChat`` whose
``async_client`` is an ``AsyncOpenAI`` of its own (the loopback provider's base URL,
``max_retries=0``, its responses watched for the call keys), one ``agno.tools.Function`` per
catalog entry (the catalog's JSON Schema as its ``parameters``, ``skip_entrypoint_processing``),
and ``Agent.arun(..., stream=True, stream_events=True)`` drained (with
``stream_events`` the run yields an event per step, and it checks its cancel flag at each). Agno reads the stream
(``OpenAIChat.parse_tool_calls``: tool deltas accumulated by ``index``, ``index or 0``),
parses each call's arguments and runs the tools; the tool body (given Agno's ``FunctionCall``
as ``fc``, whose ``call_id`` is the wire's id) hands its arguments to callsafe's executor.

Cancellation: ``Agent.acancel_run(run_id)``, Agno's own cancel of a run by its id.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


class AgnoProgram(FrameworkProgram):
    name = "agno:openai-chat:agent"
    protocol = "openai-chat"

    def __init__(self) -> None:
        super().__init__()
        self._run_id: str | None = None
        self._cancelling: asyncio.Future[Any] | None = None

    def _tool(self, name: str, schema: dict[str, Any]) -> Any:
        from agno.tools.function import Function

        def body(fc: Any = None, **arguments: Any) -> str:
            call_id = getattr(fc, "call_id", None)
            return self.execute(name, arguments, call_id if isinstance(call_id, str) else None)

        return Function(
            name=name, description=name, parameters=schema, entrypoint=body, skip_entrypoint_processing=True
        )

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        import httpx2
        from agno.agent import Agent
        from agno.models.openai import OpenAIChat
        from openai import AsyncOpenAI

        http = self.watching_client(httpx2)
        client = AsyncOpenAI(api_key="callsafe-loopback", base_url=f"{base_url}/v1", max_retries=0, http_client=http)
        model = OpenAIChat(id="gpt-4o", api_key="callsafe-loopback", async_client=client)
        tools = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = Agent(model=model, tools=tools, telemetry=False, tool_call_limit=len(tools) * 8 + 8)
        self._run_id = run_id = str(uuid.uuid4())
        try:
            async for _ in agent.arun("go", stream=True, stream_events=True, run_id=run_id):
                pass
        finally:
            self._run_id = None
            await client.close()

    def cancel(self, task: asyncio.Task[None]) -> None:
        from agno.agent import Agent

        if self._run_id is None:
            task.cancel()
            return
        self._cancelling = asyncio.ensure_future(Agent.acancel_run(self._run_id))


if __name__ == "__main__":
    raise SystemExit(main(AgnoProgram))
