"""``python -m callsafe.adapters.frameworks.strands_bedrock``: Strands Agents
(``strands-agents``) running its own tools over its default model, ``BedrockModel``
(Bedrock's ConverseStream through ``boto3``).

The program: an ``Agent`` over ``strands.models.bedrock.BedrockModel`` pointed at the
loopback provider (``endpoint_url``, a region, no retries, a ``boto3.Session`` with fake
credentials: nothing reaches AWS or the instance metadata service), one
``PythonAgentTool`` per catalog entry, and ``Agent.stream_async``. Strands reads the
stream in a thread (``BedrockModel._stream``: botocore's event-stream decoder, each event
passed on as it is), builds each tool use's input from its deltas
(``event_loop/streaming.py``, ``handle_content_block_stop``: input that does not parse
becomes ``{}``, harness-sdk #2051) and runs the tools; the tool body hands what it got to
callsafe's executor.

Call keys: the item of each tool use is its ``contentBlockIndex``, read from the events
the model yields (the program watches them as they pass: :meth:`WireIds.read_event`); the
response is the turn's stream number
(:func:`callsafe.providers.bedrock_converse.response_name`), since Bedrock names none.

Cancellation: ``Agent.cancel()``, Strands' thread-safe cancel of the running invocation.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator
from typing import Any

import boto3
from botocore.config import Config
from strands import Agent
from strands.models.bedrock import BedrockModel
from strands.tools.tools import PythonAgentTool
from strands.types.tools import ToolResult, ToolUse

from callsafe.adapters.frameworks._program import FrameworkProgram, WireIds, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted
from callsafe.providers.bedrock_converse import response_name

MODEL_ID = "us.anthropic.claude-sonnet-4-20250514-v1:0"


@functools.cache
def _session() -> boto3.Session:
    """One session per process: its loader reads botocore's service model once, not per stream."""
    return boto3.Session(aws_access_key_id="callsafe", aws_secret_access_key="loopback", region_name="us-east-1")


class WatchedBedrockModel(BedrockModel):
    """``BedrockModel`` whose yielded events are shown to the program's :class:`WireIds`
    as they pass (nothing is changed)."""

    ids: WireIds | None = None

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        async for event in super().stream(*args, **kwargs):
            if self.ids is not None and isinstance(event, dict):
                self.ids.read_event(event)
            yield event


class StrandsBedrockProgram(FrameworkProgram):
    name = "strands-agents:bedrock-converse:agent"
    protocol = "bedrock-converse"

    def __init__(self) -> None:
        super().__init__()
        self._agent: Agent | None = None
        self._streams: dict[str, int] = {}  # turn -> model streams read for it

    def start(self, env: TargetEnv) -> None:
        super().start(env)
        self._streams = {}

    def _tool(self, name: str, schema: dict[str, Any]) -> PythonAgentTool:
        def body(tool_use: ToolUse, **_: Any) -> ToolResult:
            text = self.execute(name, tool_use["input"], tool_use["toolUseId"])
            return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

        spec: Any = {"name": name, "description": name, "inputSchema": {"json": schema}}
        return PythonAgentTool(name, spec, body)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        nth = self._streams.get(turn.turn, 0)
        self._streams[turn.turn] = nth + 1
        self.ids.response = response_name(turn.turn, nth)
        model = WatchedBedrockModel(
            model_id=MODEL_ID,
            boto_session=_session(),
            endpoint_url=base_url,
            boto_client_config=Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=30),
        )
        model.ids = self.ids
        tools: list[Any] = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        self._agent = agent = Agent(model=model, tools=tools, callback_handler=None)
        try:
            async for _ in agent.stream_async("go"):
                pass
        finally:
            self._agent = None

    def cancel(self, task: asyncio.Task[None]) -> None:
        if self._agent is not None:
            self._agent.cancel()
        else:
            task.cancel()


if __name__ == "__main__":
    raise SystemExit(main(StrandsBedrockProgram, acks=False))  # botocore reads with urllib3: no hook sees it
