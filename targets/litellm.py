"""Adapter for ``litellm``'s stream rebuilder.

Surface read: ``litellm.stream_chunk_builder(chunks)`` (source:
``litellm/litellm_core_utils/streaming_chunk_builder_utils.py``, ``ChunkProcessor.
get_combined_tool_content``), which LiteLLM's streaming documentation gives for turning the
collected ``ModelResponseStream`` chunks of a stream back into one ``ModelResponse``; LiteLLM
uses it itself to build the response its callbacks and cost tracking see. Tool calls are
grouped by ``(choice index, tool index)``; a fragment's ``id`` and ``name`` replace the
previous ones, ``arguments`` are joined.

One surface, ``final``: once the body ended (``data: [DONE]``), the rebuilt
``choices[0].message.tool_calls`` are executed (``json.loads`` of ``function.arguments``, as
LiteLLM's function-calling examples do) when the rebuilt ``finish_reason`` is a normal one
(:data:`~callsafe.targets._common.CHAT_COMPLETED_REASONS`).

Chunks are built with ``ModelResponseStream(**payload)``, as LiteLLM's OpenAI-compatible
stream parsers do with each decoded SSE payload. The adapter consumes ``openai-chat``
payloads. Importing LiteLLM fetches a model price list over the network unless told not to:
the adapter sets ``LITELLM_OFFLINE_MODE`` and ``LITELLM_LOCAL_MODEL_COST_MAP`` before the
import, and silences LiteLLM's debug banner.

Call keys: :func:`~callsafe.targets._common.openai_chat_ids` (response = chunk ``id``, item =
tool index, call = the id LiteLLM kept).

Documentation: https://docs.litellm.ai/docs/completion/stream ("Helper function ... to rebuild
the complete streaming response from the list of chunks").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from callsafe.targets._common import CHAT_COMPLETED_REASONS, WireTarget, openai_chat_ids

__all__ = ["LiteLLMTarget", "available", "chunk_from_payload", "import_offline"]


def available() -> str | None:
    """``None`` when ``litellm`` is importable, else why this adapter is skipped."""
    return LiteLLMTarget.unavailable()


def import_offline() -> Any:
    """Import ``litellm`` without letting it reach the network (model price list)."""
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def chunk_from_payload(payload: Mapping[str, Any]) -> Any:
    """One wire payload as LiteLLM's OpenAI-compatible stream parsers build it
    (``ModelResponseStream(**payload)``). Public so that the benchmarks build the very same
    objects."""
    import_offline()
    from litellm.types.utils import ModelResponseStream

    return ModelResponseStream(**dict(payload))


class LiteLLMTarget(WireTarget):
    """``litellm``: ``stream_chunk_builder`` over ``ModelResponseStream`` chunks."""

    library: ClassVar[str] = "litellm"
    module: ClassVar[str] = "litellm"
    protocol = "openai-chat"
    SURFACES: ClassVar[tuple[str, ...]] = ("final",)

    def __init__(self, surface: str | None = None) -> None:
        super().__init__(surface)
        self._chunks: list[Any] = []
        self._stream_id: str | None = None
        self._finished = False

    def _reset(self) -> None:
        self._chunks = []
        self._stream_id = None
        self._finished = False

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        self._chat_error(payload)
        chunk_id = payload.get("id")
        if self._chunks and self._finished and chunk_id != self._stream_id:
            self.end_stream()
        try:
            chunk = chunk_from_payload(payload)
        except Exception as exc:
            self._failed(exc)
            raise
        if not self._chunks:
            self._stream_id = chunk_id if isinstance(chunk_id, str) else None
        self._chunks.append(chunk)
        if any(getattr(choice, "finish_reason", None) for choice in chunk.choices):
            self._finished = True

    def end_stream(self) -> None:
        chunks, stream_id = self._chunks, self._stream_id
        self._reset()
        if not chunks:
            return
        litellm = import_offline()
        try:
            response = litellm.stream_chunk_builder(chunks)
        except Exception as exc:
            self._failed(exc)
            raise
        choices = getattr(response, "choices", None) or []
        if not choices:
            return
        choice = choices[0]
        finish = getattr(choice, "finish_reason", None)
        refused = None
        if finish not in CHAT_COMPLETED_REASONS:
            refused = f"finish_reason {finish!r} is not a normal end: an application does not run it"
        for index, call in enumerate(getattr(choice.message, "tool_calls", None) or []):
            function = getattr(call, "function", None)
            if function is None:
                continue
            ids = openai_chat_ids(stream_id, index, call.id)
            self._offer(ids, function.name, raw=function.arguments, refused=refused)
