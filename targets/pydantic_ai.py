"""Adapter for ``pydantic-ai``: its streamed-parts manager, and a real ``Agent`` that runs tools.

Surfaces read:

* ``agent``: an ``Agent`` over pydantic-ai's own ``OpenAIChatModel`` whose ``AsyncOpenAI``
  client talks to a local ``httpx2.MockTransport`` (no network): the transport answers the
  first request with the stream's payloads as server-sent events (ending ``data: [DONE]``)
  and every later request with a short text reply. The catalog's tools are registered with
  ``Tool.from_schema``; what the executor receives is what pydantic-ai itself decided to run
  (``CallToolsNode`` after the model response, source ``pydantic_ai/_agent_graph.py``),
  including its finish-reason rules (``check_incomplete_tool_call``) and its default of
  ``'stop'`` for a stream that ended without a finish reason
  (``OpenAIStreamedResponse._missing_finish_reason``). The request is streamed because the
  run has an ``event_stream_handler``. Tools run after the body ended, which is where
  pydantic-ai runs them; a disconnect before that fails the request, so nothing runs.
* ``parts``: ``ModelResponsePartsManager.handle_tool_call_delta`` (source:
  ``pydantic_ai/_parts_manager.py``) fed exactly as ``OpenAIStreamedResponse.
  _map_tool_call_delta`` feeds it (``vendor_part_id`` = tool ``index``, name, argument
  fragment, ``tool_call_id``), and at the end of the body the ``ToolCallPart``s of
  ``get_parts()`` executed with ``args_as_dict()`` when the finish reason is a normal one
  (a missing reason counts as ``stop``, pydantic-ai's rule). This is the accumulation under
  the agent, without the agent's own checks.

Both consume ``openai-chat`` payloads (chunks built with ``openai._models.construct_type``, as
the ``openai`` SDK that pydantic-ai uses builds them).

Call keys: :func:`~callsafe.targets._common.openai_chat_ids` (response = chunk ``id``, item =
the tool ``index`` that first carried the call id, call = the ``tool_call_id`` pydantic-ai
kept).

Documentation: https://ai.pydantic.dev/agents/ (running agents, ``event_stream_handler``) and
https://ai.pydantic.dev/tools/ (``Tool.from_schema``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from callsafe.targets._common import CHAT_COMPLETED_REASONS, WireTarget, openai_chat_ids

if TYPE_CHECKING:
    import httpx2
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall
    from pydantic_ai._parts_manager import ModelResponsePartsManager
    from pydantic_ai.models import Model

__all__ = ["PydanticAITarget", "available"]

_FOLLOW_UP: Final[dict[str, Any]] = {
    "id": "callsafe-follow-up",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "gpt-4o",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
}


def available() -> str | None:
    """``None`` when ``pydantic-ai`` (slim is enough) and ``openai`` are importable, else why
    this adapter is skipped."""
    return PydanticAITarget.unavailable()


def _sse(payloads: list[Mapping[str, Any]]) -> bytes:
    """A Chat Completions response body: one ``data:`` line per payload, then ``[DONE]``."""
    lines = [b"data: " + json.dumps(dict(p)).encode() + b"\n\n" for p in payloads]
    return b"".join(lines) + b"data: [DONE]\n\n"


class PydanticAITarget(WireTarget):
    """``pydantic-ai``: an ``Agent`` that runs the catalog's tools, or its parts manager."""

    library: ClassVar[str] = "pydantic-ai-slim"
    module: ClassVar[str] = "pydantic_ai"
    protocol = "openai-chat"
    SURFACES: ClassVar[tuple[str, ...]] = ("agent", "parts")

    def __init__(self, surface: str | None = None) -> None:
        super().__init__(surface)
        self._payloads: list[Mapping[str, Any]] = []
        self._stream_id: str | None = None
        self._finished: str | None = None
        self._index_by_call: dict[str, int] = {}
        self._manager: ModelResponsePartsManager | None = None

    @classmethod
    def unavailable(cls) -> str | None:
        from callsafe.targets._common import library_available

        return library_available(cls.library, cls.module) or library_available("openai", "openai")

    def _reset(self) -> None:
        self._payloads = []
        self._stream_id = None
        self._finished = None
        self._index_by_call = {}
        self._manager = None

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        from callsafe.targets.openai_chat import chunk_from_payload

        if self.surface == "parts":
            self._chat_error(payload)  # the agent surface runs the SDK's own stream, which raises itself
        chunk_id = payload.get("id")
        if self._payloads and self._finished and chunk_id != self._stream_id:
            self.end_stream()
        if not self._payloads:
            self._stream_id = chunk_id if isinstance(chunk_id, str) else None
        self._payloads.append(payload)
        chunk = chunk_from_payload(payload)
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        if choice.finish_reason:
            self._finished = choice.finish_reason
        for dtc in (choice.delta.tool_calls if choice.delta is not None else None) or []:
            if dtc.id and dtc.id not in self._index_by_call:
                self._index_by_call[dtc.id] = dtc.index
            if self.surface == "parts":
                self._feed_parts(dtc)

    def _feed_parts(self, dtc: ChoiceDeltaToolCall) -> None:
        """One ``delta.tool_calls`` entry, as ``OpenAIStreamedResponse._map_tool_call_delta`` passes it."""
        from pydantic_ai._parts_manager import ModelResponsePartsManager
        from pydantic_ai.models import ModelRequestParameters

        if self._manager is None:
            self._manager = ModelResponsePartsManager(model_request_parameters=ModelRequestParameters())
        try:
            self._manager.handle_tool_call_delta(
                vendor_part_id=dtc.index,
                tool_name=dtc.function.name if dtc.function is not None else None,
                args=dtc.function.arguments if dtc.function is not None else None,
                tool_call_id=dtc.id,
            )
        except Exception as exc:
            self._failed(exc)
            raise

    def end_stream(self) -> None:
        payloads, stream_id, finished = self._payloads, self._stream_id, self._finished
        index_by_call, manager = self._index_by_call, self._manager
        self._reset()
        if not payloads:
            return
        if self.surface == "agent":
            self._run_agent(payloads, stream_id, index_by_call)
            return
        if manager is None:
            return
        refused = None
        if (finished or "stop") not in CHAT_COMPLETED_REASONS:
            refused = f"finish_reason {finished!r} is not a normal end: an application does not run it"
        from pydantic_ai.messages import ToolCallPart

        for part in manager.get_parts():
            if not isinstance(part, ToolCallPart):
                continue
            ids = openai_chat_ids(stream_id, index_by_call.get(part.tool_call_id), part.tool_call_id)
            raw = part.args if isinstance(part.args, str) else None
            try:
                arguments = part.args_as_dict(raise_if_invalid=True)
            except (ValueError, AssertionError):
                self._offer(ids, part.tool_name, raw=raw, refused=refused)
                continue
            self._offer(ids, part.tool_name, arguments, raw=raw, refused=refused)

    def _run_agent(self, payloads: list[Mapping[str, Any]], stream_id: str | None, index: dict[str, int]) -> None:
        """Serve the stream to a real ``Agent`` and let it decide which tools run."""
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from callsafe.targets.pydantic_ai_agents import run_agent

        def model(http: httpx2.AsyncClient) -> Model:
            client = AsyncOpenAI(
                api_key="callsafe-local", base_url="http://callsafe.invalid/v1", http_client=http, max_retries=0
            )
            return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))

        def ids(call_id: str | None) -> tuple[str, str, str]:
            return openai_chat_ids(stream_id, index.get(call_id or ""), call_id)

        run_agent(self, _sse(payloads), _sse([_FOLLOW_UP]), model, ids)
