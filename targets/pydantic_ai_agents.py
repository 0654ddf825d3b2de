"""Adapters for ``pydantic-ai``'s ``Agent`` over OpenAI Responses and over Anthropic Messages,
and the agent run that every pydantic-ai ``agent`` surface shares.

Surfaces read (one each, ``agent``):

* ``pydantic-ai-slim:openai-responses:agent``: an ``Agent`` over pydantic-ai's own
  ``OpenAIResponsesModel`` (source ``pydantic_ai/models/openai/_responses_model.py``; the stream
  is mapped in ``_responses_streaming.py``, ``OpenAIResponsesStreamedResponse``);
* ``pydantic-ai-slim:anthropic-messages:agent``: an ``Agent`` over ``AnthropicModel`` (source
  ``pydantic_ai/models/anthropic/``; the stream is mapped in ``_streaming.py``,
  ``AnthropicStreamedResponse``, which reads the beta Messages stream of the ``anthropic``
  SDK).

As for the Chat Completions agent (:mod:`callsafe.targets.pydantic_ai`), the model's SDK
client (``AsyncOpenAI`` or ``AsyncAnthropic``) talks to a local ``httpx2.MockTransport`` (no
network): the first request gets the stream's payloads as server-sent events (with the
protocol's ``event:`` names), every later request a short text reply; the catalog's tools are
registered with ``Tool.from_schema``, and what the executor receives is what pydantic-ai
itself decided to run after the model response (``CallToolsNode``, its finish-reason rules
included). Tools run after the body ended; a disconnect before that fails the request, so
nothing runs.

Stream boundaries: a Responses stream ends at its terminal event (``response.completed``,
``response.incomplete``, ``response.failed``, ``error``), and a later ``response.created``
starts the next body; an Anthropic stream ends at ``message_stop`` (or ``error``), and a
``message_start`` in the middle of a message stays in the same body, as on one connection.

Call keys: :func:`~callsafe.targets._common.openai_responses_ids` (response = ``response.id``
of ``response.created``, item = the ``fc_...`` item whose ``call_id`` pydantic-ai ran) and
:func:`~callsafe.targets._common.anthropic_ids` (response = ``message.id`` of the first
``message_start``, item = the content block index that carried the ``tool_use`` id).

Documentation: https://ai.pydantic.dev/models/openai/ (``OpenAIResponsesModel``),
https://ai.pydantic.dev/models/anthropic/ and https://ai.pydantic.dev/agents/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from callsafe.targets._common import WireTarget, anthropic_ids, openai_responses_ids

if TYPE_CHECKING:
    import httpx2
    from pydantic_ai import RunContext
    from pydantic_ai.models import Model

__all__ = ["PydanticAIAnthropicTarget", "PydanticAIResponsesTarget", "run_agent", "sse_body"]

_RESPONSES_TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_RESPONSES_REPLY: Final[tuple[dict[str, Any], ...]] = (
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_callsafe_reply", "status": "in_progress", "output": []},
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {"id": "msg_reply", "type": "message", "role": "assistant", "status": "in_progress", "content": []},
    },
    {
        "type": "response.output_text.delta",
        "sequence_number": 2,
        "item_id": "msg_reply",
        "output_index": 0,
        "content_index": 0,
        "delta": "done",
    },
    {
        "type": "response.completed",
        "sequence_number": 3,
        "response": {
            "id": "resp_callsafe_reply",
            "status": "completed",
            "output": [
                {
                    "id": "msg_reply",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}],
                }
            ],
        },
    },
)
_ANTHROPIC_REPLY: Final[tuple[dict[str, Any], ...]] = (
    {
        "type": "message_start",
        "message": {
            "id": "msg_callsafe_reply",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "callsafe",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 1},
    },
    {"type": "message_stop"},
)


def sse_body(payloads: list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...], protocol: str) -> bytes:
    """One response body: each payload as a ``data:`` line (JSON with ASCII escapes, so a lone
    surrogate travels as ``\\udXXX``, as on a real wire), named with ``event:`` where the
    protocol names events, and ``data: [DONE]`` where it ends with one."""
    from callsafe.providers import registry

    spec = registry.get(protocol)
    out = bytearray()
    for payload in payloads:
        name = spec.event_name(payload)
        if name:
            out += f"event: {name}\n".encode()
        out += b"data: " + json.dumps(dict(payload)).encode() + b"\n\n"
    if spec.done_sentinel:
        out += b"data: [DONE]\n\n"
    return bytes(out)


def _instrumentation() -> list[Any]:
    """pydantic-ai's own OpenTelemetry instrumentation (the ``Instrumentation`` capability)
    when this process records spans (:mod:`callsafe.span_recording`), else none:
    ``execute_tool`` spans with the call id and arguments, chat spans with the model's output
    messages (content included)."""
    from callsafe import span_recording

    recording = span_recording.record_spans_from_environment() or span_recording.recording()
    if recording is None:
        return []
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    settings = InstrumentationSettings(tracer_provider=recording.provider, include_content=True)
    return [Instrumentation(settings=settings)]


def run_agent(
    target: WireTarget,
    first: bytes,
    follow_up: bytes,
    model: Callable[[httpx2.AsyncClient], Model],
    ids: Callable[[str | None], tuple[str, str, str]],
) -> None:
    """Serve ``first`` (then ``follow_up`` to every later request) to a real ``Agent`` over the
    model ``model`` builds on a mock HTTP client, with the target's catalog as tools, and let
    pydantic-ai decide which tools run; each run goes to the executor under ``ids(tool_call_id)``.
    The request is streamed because the run has an ``event_stream_handler``."""
    import httpx2
    from pydantic_ai import Agent, Tool

    bodies = [first]

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = bodies.pop(0) if bodies else follow_up
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))

    def make_tool(name: str) -> Any:
        def run_tool(ctx: RunContext[None], **arguments: Any) -> str:
            target._executed_by_library(ids(ctx.tool_call_id), name, arguments)
            return "ok"

        return run_tool

    env = target._env
    catalog = env.tools if env is not None else {}
    tools = [
        Tool.from_schema(make_tool(name), name=name, description=name, json_schema=dict(spec.schema), takes_ctx=True)
        for name, spec in catalog.items()
    ]
    agent = Agent(model(client), tools=tools, capabilities=_instrumentation())

    async def drain(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    try:
        agent.run_sync("callsafe", event_stream_handler=drain)
    except Exception as exc:
        target._failed(exc)
        raise


class _AgentTarget(WireTarget):
    """What both agents share: the payloads of the current body, and the run at its end."""

    library: ClassVar[str] = "pydantic-ai-slim"
    module: ClassVar[str] = "pydantic_ai"
    SURFACES: ClassVar[tuple[str, ...]] = ("agent",)
    sdk: ClassVar[str] = ""

    def __init__(self, surface: str | None = None) -> None:
        super().__init__(surface)
        self._payloads: list[Mapping[str, Any]] = []
        self._ended = False
        self._response_id: str | None = None
        self._item_by_call: dict[str, str] = {}

    @classmethod
    def unavailable(cls) -> str | None:
        from callsafe.targets._common import library_available

        return library_available(cls.library, cls.module) or library_available(cls.sdk, cls.sdk)

    def _reset(self) -> None:
        self._payloads = []
        self._ended = False
        self._response_id = None
        self._item_by_call = {}

    def _starts_body(self, kind: object) -> bool:
        raise NotImplementedError

    def _read(self, payload: Mapping[str, Any]) -> None:
        """Note the identities and the end of the body (what the application keeps)."""
        raise NotImplementedError

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self._payloads and self._ended and self._starts_body(payload.get("type")):
            self.end_stream()
        self._payloads.append(payload)
        self._read(payload)

    def end_stream(self) -> None:
        payloads, response_id, items = self._payloads, self._response_id, self._item_by_call
        self._reset()
        if payloads:
            self._run(payloads, response_id, items)

    def _run(self, payloads: list[Mapping[str, Any]], response_id: str | None, items: dict[str, str]) -> None:
        raise NotImplementedError


class PydanticAIResponsesTarget(_AgentTarget):
    """``pydantic-ai``: an ``Agent`` over ``OpenAIResponsesModel``."""

    protocol = "openai-responses"
    sdk: ClassVar[str] = "openai"

    def _starts_body(self, kind: object) -> bool:
        return kind == "response.created"

    def _read(self, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind in _RESPONSES_TERMINAL:
            self._ended = True
        response = payload.get("response")
        if kind == "response.created" and isinstance(response, Mapping) and self._response_id is None:
            rid = response.get("id")
            self._response_id = rid if isinstance(rid, str) else None
        item = payload.get("item")
        if kind in ("response.output_item.added", "response.output_item.done") and isinstance(item, Mapping):
            call_id, item_id = item.get("call_id"), item.get("id")
            if isinstance(call_id, str) and isinstance(item_id, str):
                self._item_by_call.setdefault(call_id, item_id)

    def _run(self, payloads: list[Mapping[str, Any]], response_id: str | None, items: dict[str, str]) -> None:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        def model(http: httpx2.AsyncClient) -> Model:
            client = AsyncOpenAI(
                api_key="callsafe-local", base_url="http://callsafe.invalid/v1", http_client=http, max_retries=0
            )
            return OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(openai_client=client))

        def ids(call_id: str | None) -> tuple[str, str, str]:
            return openai_responses_ids(response_id, items.get(call_id or ""), call_id)

        run_agent(self, sse_body(payloads, self.protocol), sse_body(_RESPONSES_REPLY, self.protocol), model, ids)


class PydanticAIAnthropicTarget(_AgentTarget):
    """``pydantic-ai``: an ``Agent`` over ``AnthropicModel``."""

    protocol = "anthropic-messages"
    sdk: ClassVar[str] = "anthropic"

    def _starts_body(self, kind: object) -> bool:
        return kind == "message_start"

    def _read(self, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind in ("message_stop", "error"):
            self._ended = True
        message = payload.get("message")
        if kind == "message_start" and isinstance(message, Mapping) and self._response_id is None:
            mid = message.get("id")
            self._response_id = mid if isinstance(mid, str) else None
        block = payload.get("content_block")
        if kind == "content_block_start" and isinstance(block, Mapping) and block.get("type") == "tool_use":
            tool_use_id, index = block.get("id"), payload.get("index")
            if isinstance(tool_use_id, str) and isinstance(index, int):
                self._item_by_call.setdefault(tool_use_id, str(index))

    def _run(self, payloads: list[Mapping[str, Any]], response_id: str | None, items: dict[str, str]) -> None:
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        def model(http: httpx2.AsyncClient) -> Model:
            client = AsyncAnthropic(
                api_key="callsafe-local", base_url="http://callsafe.invalid", http_client=http, max_retries=0
            )
            return AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client))

        def ids(call_id: str | None) -> tuple[str, str, str]:
            index = items.get(call_id or "")
            return anthropic_ids(response_id, int(index) if index is not None else None, call_id)

        run_agent(self, sse_body(payloads, self.protocol), sse_body(_ANTHROPIC_REPLY, self.protocol), model, ids)
