"""Adapter for ``litellm``: its stream rebuilder, and its own streaming path over HTTP.

Surface ``final`` reads ``litellm.stream_chunk_builder(chunks)`` (source:
``litellm/litellm_core_utils/streaming_chunk_builder_utils.py``, ``ChunkProcessor.
get_combined_tool_content``), which LiteLLM's streaming documentation gives for turning the
collected ``ModelResponseStream`` chunks of a stream back into one ``ModelResponse``; LiteLLM
uses it itself to build the response its callbacks and cost tracking see. Tool calls are
grouped by ``(choice index, tool index)``; a fragment's ``id`` and ``name`` replace the
previous ones, ``arguments`` are joined.

On ``final``, once the body ended (``data: [DONE]``), the rebuilt
``choices[0].message.tool_calls`` are executed (``json.loads`` of ``function.arguments``, as
LiteLLM's function-calling examples do) when the rebuilt ``finish_reason`` is a normal one
(:data:`~callsafe.targets._common.CHAT_COMPLETED_REASONS`).

Chunks are built with ``ModelResponseStream(**payload)``, as LiteLLM's OpenAI-compatible
stream parsers do with each decoded SSE payload. The adapter consumes ``openai-chat``
payloads. Importing LiteLLM fetches a model price list over the network unless told not to:
the adapter sets ``LITELLM_OFFLINE_MODE`` and ``LITELLM_LOCAL_MODEL_COST_MAP`` before the
import, and silences LiteLLM's debug banner.

Surface ``stream`` is LiteLLM's own streaming path, what an application calls:
``litellm.completion(model="openai/gpt-4o", api_base=..., stream=True)`` against the loopback
provider (:mod:`callsafe.loopback.server`, on 127.0.0.1; adversarial chunk boundaries and
keep-alives, a dropped connection where the trace disconnects), the chunks of the returned
``CustomStreamWrapper`` collected and rebuilt with ``stream_chunk_builder(chunks, messages=...)``
as LiteLLM's streaming documentation shows, then executed under the same rule as ``final``.
Everything between the socket and the chunks is LiteLLM's (its OpenAI-compatible handler, the
``openai`` SDK's SSE decoding, the stream wrapper's finish-reason and delta handling), so an
error payload or a dropped connection reaches the application as LiteLLM raises it. Why one
server per process and not per target: the harness builds a fresh target for every trace,
and a server start would then cost more than the trace; the process's loopback server
(:func:`~callsafe.loopback.server.shared_server`) is started on first use and reused, each
stream queued on this process's channel before the request that reads it, and a stream that
no request read is marked abandoned so that it never answers a later one. No request leaves
127.0.0.1: the model cost map is the local copy (set before the import), and retries are off.

Call keys: :func:`~callsafe.targets._common.openai_chat_ids` (response = chunk ``id``, item =
tool index, call = the id LiteLLM kept).

Documentation: https://docs.litellm.ai/docs/completion/stream ("Helper function ... to rebuild
the complete streaming response from the list of chunks").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from callsafe.offline import keep_offline
from callsafe.targets._common import CHAT_COMPLETED_REASONS, WireTarget, openai_chat_ids

__all__ = ["LiteLLMTarget", "available", "chunk_from_payload", "import_offline"]

_MESSAGES: Final = ({"role": "user", "content": "callsafe"},)
_REQUEST_TIMEOUT: Final = 10.0  # seconds; the body is queued before the request, so it never waits long


def available() -> str | None:
    """``None`` when ``litellm`` is importable, else why this adapter is skipped."""
    return LiteLLMTarget.unavailable()


def import_offline() -> Any:
    """Import ``litellm`` without letting it reach the network (model price list)."""
    keep_offline()
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
    SURFACES: ClassVar[tuple[str, ...]] = ("final", "stream")

    def __init__(self, surface: str | None = None) -> None:
        super().__init__(surface)
        self._chunks: list[Any] = []
        self._payloads: list[Mapping[str, Any]] = []
        self._stream_id: str | None = None
        self._finished = False

    def _reset(self) -> None:
        self._chunks = []
        self._payloads = []
        self._stream_id = None
        self._finished = False

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self.surface == "stream":
            self._receive_raw(payload)
            return
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

    def _receive_raw(self, payload: Mapping[str, Any]) -> None:
        """``stream``: keep the payload for the body LiteLLM will read (nothing is parsed here)."""
        chunk_id = payload.get("id")
        if self._payloads and self._finished and chunk_id != self._stream_id:
            self.end_stream()
        if not self._payloads:
            self._stream_id = chunk_id if isinstance(chunk_id, str) else None
        self._payloads.append(payload)
        choices = payload.get("choices")
        if isinstance(choices, list) and any(isinstance(c, Mapping) and c.get("finish_reason") for c in choices):
            self._finished = True

    def _broken(self) -> None:
        """``stream``: the body LiteLLM reads drops here. LiteLLM raises (recorded in
        :attr:`errors`); the dropped connection is the trace's own event, so the exception ends
        the read loop without breaking the run, as a disconnect does for every adapter."""
        payloads, stream_id = self._payloads, self._stream_id
        self._reset()
        if self.surface == "stream" and payloads:
            with contextlib.suppress(Exception):
                self._stream(payloads, stream_id, dropped=True)

    def end_stream(self) -> None:
        if self.surface == "stream":
            payloads, stream_id = self._payloads, self._stream_id
            self._reset()
            if payloads:
                self._stream(payloads, stream_id, dropped=False)
            return
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
        self._present(response, stream_id)

    def _stream(self, payloads: list[Mapping[str, Any]], stream_id: str | None, *, dropped: bool) -> None:
        """Serve one body on the loopback provider and read it through ``litellm.completion``."""
        from callsafe.loopback.server import shared_server

        litellm = import_offline()
        server = shared_server()
        channel = f"litellm-{os.getpid()}"
        stream = server.open_stream(self.protocol, channel)
        for payload in payloads:
            stream.push(payload)
        if dropped:
            stream.abort()
        else:
            stream.finish(done_sentinel=True)
        messages = [dict(m) for m in _MESSAGES]
        try:
            response = litellm.completion(
                model="openai/gpt-4o",
                api_base=f"{server.channel_url(channel)}/v1",
                api_key="callsafe-local",
                messages=messages,
                stream=True,
                max_retries=0,
                timeout=_REQUEST_TIMEOUT,
            )
            chunks = list(response)
            rebuilt = litellm.stream_chunk_builder(chunks, messages=messages) if chunks else None
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            if not stream.served:
                stream.abandoned = True  # never answer a later request with this body
        if rebuilt is not None:
            self._present(rebuilt, stream_id)

    def _present(self, response: Any, stream_id: str | None) -> None:
        """The rebuilt response's tool calls, run when its finish reason is a normal end."""
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
