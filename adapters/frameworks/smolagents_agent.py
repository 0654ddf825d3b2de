"""``python -m callsafe.adapters.frameworks.smolagents_agent``: smolagents (Hugging Face)
running its own tools over Chat Completions.

The program: a ``ToolCallingAgent`` (``stream_outputs=True``) over ``OpenAIServerModel`` (the
loopback provider's base URL; ``client_kwargs`` give the ``openai`` client ``max_retries=0``
and an ``httpx2.Client`` whose responses are watched for the call keys; ``retry=False``), one
``Tool`` per catalog entry (its ``inputs`` from the catalog's JSON Schema), and
``agent.run("go")`` in a worker thread (smolagents is synchronous). smolagents reads the
stream (``OpenAIServerModel.generate_stream``: one delta per chunk, the ``finish_reason``
never read), glues the deltas by ``index`` (``agglomerate_stream_deltas``), parses each
call's arguments (``parse_json_if_needed``: text that does not parse stays text) and runs the
calls (in threads when there are several); the tool body hands what it got to callsafe's
executor, under the id of the call the agent is running.

The agent's console (rich output, a live view of the stream) goes to stderr: stdout carries
the target protocol.

No cancellation capability: ``agent.interrupt()`` is read only when the next step starts,
so a call that is streaming runs whatever is cancelled; the cancel traces are not
applicable to this row.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted

_TYPES = {"string", "boolean", "integer", "number", "array", "object", "null"}


def _running_call_id() -> str | None:
    """The id of the call the agent is running: the ``tool_call`` (a ``ToolCall``) of
    ``process_single_tool_call`` (``ToolCallingAgent.process_tool_calls``) that awaits this
    tool body; a tool is given its arguments only, and several calls run in threads."""
    frame = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return None
        if frame.f_code.co_name == "process_single_tool_call" and "tool_call" in frame.f_locals:
            call = getattr(frame.f_locals["tool_call"], "id", None)
            return call if isinstance(call, str) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


class SmolagentsProgram(FrameworkProgram):
    name = "smolagents:openai-chat:agent"
    protocol = "openai-chat"
    capabilities: frozenset[str] = frozenset()

    def _tool(self, name: str, schema: dict[str, Any]) -> Any:
        from smolagents import Tool

        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        inputs: dict[str, dict[str, Any]] = {}
        for field, spec in properties.items():
            kind = spec.get("type") if isinstance(spec, dict) else None
            inputs[str(field)] = {
                "type": kind if isinstance(kind, str) and kind in _TYPES else "any",
                "description": str(field),
                **({} if field in required else {"nullable": True}),
            }
        program = self

        class CatalogTool(Tool):  # type: ignore[misc]
            skip_forward_signature_validation = True
            output_type = "string"

            def forward(self, *args: Any, **kwargs: Any) -> str:
                arguments: Any = args[0] if len(args) == 1 and not kwargs else kwargs
                return program.execute(name, arguments, _running_call_id())

        CatalogTool.name = name
        CatalogTool.description = name
        CatalogTool.inputs = inputs
        return CatalogTool()

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        import httpx2
        from rich.console import Console
        from smolagents import AgentLogger, LogLevel, OpenAIServerModel, ToolCallingAgent

        http = self.watching_client(httpx2, sync=True)
        model = OpenAIServerModel(
            model_id="gpt-4o",
            api_base=f"{base_url}/v1",
            api_key="callsafe-loopback",
            client_kwargs={"max_retries": 0, "http_client": http},
            retry=False,
        )
        tools = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        logger = AgentLogger(level=LogLevel.OFF, console=Console(file=sys.stderr, highlight=False))
        agent = ToolCallingAgent(tools=tools, model=model, stream_outputs=True, max_steps=2, logger=logger)
        try:
            await asyncio.to_thread(agent.run, "go")
        finally:
            http.close()


if __name__ == "__main__":
    raise SystemExit(main(SmolagentsProgram))
