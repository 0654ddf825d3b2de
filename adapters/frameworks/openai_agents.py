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

Spans: the SDK traces with an API of its own (not OpenTelemetry), exported to OpenAI's
endpoint by default and off under callsafe. When the process records spans
(``CALLSAFE_RECORD_SPANS``, :mod:`callsafe.span_recording`), :class:`OtelBridge` replaces
that exporter and turns each finished SDK span into an OpenTelemetry span: a function span
into ``execute_tool {name}`` (its input as ``gen_ai.tool.call.arguments``; the SDK records
no tool call id), a generation span into ``chat {model}`` with its output's tool calls as
``gen_ai.output.messages``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx2
from agents import Agent, FunctionTool, ModelSettings, Runner, set_trace_processors, set_tracing_disabled
from agents.exceptions import ModelBehaviorError
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.tool import _parse_function_tool_json_input
from agents.tool_context import ToolContext
from agents.tracing import FunctionSpanData, GenerationSpanData, TracingProcessor
from openai import AsyncOpenAI

from callsafe import span_recording
from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


def _nanoseconds(stamp: str | None) -> int | None:
    """The SDK's ISO 8601 time as nanoseconds since the epoch."""
    if stamp is None:
        return None
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1_000_000_000)
    except ValueError:
        return None


def _output_messages(output: Any) -> tuple[str, str | None]:
    """A generation span's output as GenAI ``gen_ai.output.messages`` (tool call parts) and
    the response id. For a streamed Chat Completions run the SDK records the Responses-shaped
    response it built (``models/_trace.py``: ``final_response.model_dump()``), whose
    ``function_call`` items carry the call id, name and arguments; a plain Chat Completions
    message's ``tool_calls`` are read too."""
    messages, response_id = [], None
    for message in output if isinstance(output, list) else []:
        if not isinstance(message, Mapping):
            continue
        parts: list[dict[str, Any]] = []
        if isinstance(message.get("output"), list):  # a Responses-shaped response
            response_id = str(message.get("id")) if message.get("id") is not None else None
            for item in message["output"]:
                if isinstance(item, Mapping) and item.get("type") == "function_call":
                    parts.append(
                        {
                            "type": "tool_call",
                            "id": item.get("call_id"),
                            "name": item.get("name"),
                            "arguments": item.get("arguments"),
                        }
                    )
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments"),
                    }
                )
        messages.append({"role": "assistant", "parts": parts})
    return json.dumps(messages), response_id


class OtelBridge(TracingProcessor):
    """Each finished span of the SDK's own tracing as an OpenTelemetry span of the global
    tracer provider, at the SDK's times (see the module's docstring)."""

    def __init__(self) -> None:
        from opentelemetry import trace as otel_trace  # made only when recording, which needs it

        self._tracer = otel_trace.get_tracer("callsafe.openai_agents_bridge")

    def on_trace_start(self, trace: Any) -> None:
        return None

    def on_trace_end(self, trace: Any) -> None:
        return None

    def on_span_start(self, span: Any) -> None:
        return None

    def on_span_end(self, span: Any) -> None:
        data = span.span_data
        attributes: dict[str, Any] = {"openai_agents.trace_id": span.trace_id, "openai_agents.span_id": span.span_id}
        if isinstance(data, FunctionSpanData):
            name = f"execute_tool {data.name}"
            attributes.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": data.name})
            if data.input is not None:
                attributes["gen_ai.tool.call.arguments"] = data.input
        elif isinstance(data, GenerationSpanData):
            name = f"chat {data.model or ''}".strip()
            attributes["gen_ai.operation.name"] = "chat"
            if data.output is not None:
                messages, response_id = _output_messages(list(data.output))
                attributes["gen_ai.output.messages"] = messages
                if response_id not in (None, FAKE_RESPONSES_ID):  # Chat Completions: the SDK's placeholder
                    attributes["gen_ai.response.id"] = response_id
        else:
            name = f"openai_agents.{data.type}"
        made = self._tracer.start_span(name, start_time=_nanoseconds(span.started_at), attributes=attributes)
        made.end(end_time=_nanoseconds(span.ended_at))

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


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
        if span_recording.recording() is not None:
            set_trace_processors([OtelBridge()])  # in place of the exporter to OpenAI's endpoint
            set_tracing_disabled(False)
        else:
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
