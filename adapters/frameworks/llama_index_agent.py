"""``python -m callsafe.adapters.frameworks.llama_index_agent``: LlamaIndex (``llama-index-core``
with ``llama-index-llms-openai``) running its own tools over Chat Completions, in the
``openai<3`` environment (``make venv-openai2``).

The program: a ``FunctionAgent`` (``llama_index.core.agent.workflow``) over
``llama_index.llms.openai.OpenAI`` (``api_base`` at callsafe's loopback provider,
``max_retries=0``, an ``httpx.AsyncClient`` whose responses are watched for the call keys),
one ``FunctionTool`` per catalog entry, and ``agent.run(...)`` with its event stream drained.
LlamaIndex streams the completion (``OpenAI.astream_chat_with_tools``: tool-call deltas
merged into ``additional_kwargs["tool_calls"]``), reads the calls with
``get_tool_calls_from_response`` (arguments through ``parse_partial_json``, #22580), and the
agent workflow runs them; each tool body hands its keyword arguments to callsafe's executor.

Cancellation: ``WorkflowHandler.cancel_run()``, the workflow's own cancel of a run.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


def _running_call_id() -> str | None:
    """The ``tool_id`` of the call the agent is running: the ``ev`` (a ``ToolCall``) of the
    workflow step ``call_tool`` that awaits this tool body (``base_agent.py``). A
    ``FunctionTool`` is given its keyword arguments only, and the agent runs calls
    concurrently, so the call is read off the awaiting step rather than from the order of
    runs or of the event stream."""
    frame = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return None
        if frame.f_code.co_name == "call_tool" and "ev" in frame.f_locals:
            tool_id = getattr(frame.f_locals["ev"], "tool_id", None)
            return tool_id if isinstance(tool_id, str) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


class LlamaIndexProgram(FrameworkProgram):
    name = "llama-index-core:openai-chat:agent"
    protocol = "openai-chat"

    def __init__(self) -> None:
        super().__init__()
        self._handler: Any = None
        self._cancelling: asyncio.Future[None] | None = None

    def _tool(self, name: str, schema: dict[str, Any]) -> Any:
        from llama_index.core.tools import FunctionTool
        from pydantic import ConfigDict, create_model

        required = [f for f in schema.get("required", []) if isinstance(f, str)]
        fields: Any = {field: (Any, ...) for field in required}
        args = create_model(f"{name}_args", __config__=ConfigDict(extra="allow"), **fields)

        async def body(**arguments: Any) -> str:
            return self.execute(name, arguments, _running_call_id())

        return FunctionTool.from_defaults(async_fn=body, name=name, description=name, fn_schema=args)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.llms.openai import OpenAI

        http = self.watching_client()
        llm = OpenAI(
            model="gpt-4o",
            api_key="callsafe-loopback",
            api_base=f"{base_url}/v1",
            max_retries=0,
            async_http_client=http,
        )
        tools = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = FunctionAgent(tools=tools, llm=llm, streaming=True)
        self._handler = handler = agent.run(user_msg="go", max_iterations=3)
        try:
            async for _ in handler.stream_events():
                pass
            await handler
        finally:
            self._handler = None
            await http.aclose()

    def cancel(self, task: asyncio.Task[None]) -> None:
        handler = self._handler
        if handler is None:
            task.cancel()
            return
        self._cancelling = asyncio.ensure_future(handler.cancel_run())


if __name__ == "__main__":
    raise SystemExit(main(LlamaIndexProgram))
