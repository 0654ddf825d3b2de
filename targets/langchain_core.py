"""Adapter for ``langchain-core``'s streamed message aggregation.

Surface read: ``AIMessageChunk.__add__`` (``add_ai_message_chunks`` and ``merge_lists`` in
``langchain_core/messages/ai.py`` and ``langchain_core/utils/_merge.py``) and the
``init_tool_calls`` validator, which after every addition re-parses the merged
``tool_call_chunks`` into ``tool_calls`` (with ``parse_partial_json``) or
``invalid_tool_calls``. LangChain's tool-streaming guide has applications aggregate
``gathered = gathered + chunk``; its reference says chunks are merged when their ``index``
is equal, string fields concatenated, and that ``tool_calls`` are "parsed best-effort" from
the chunks. Two surfaces:

* ``final``: the aggregate's ``tool_calls`` once the body ended (``data: [DONE]``; the
  adapter adds the ``chunk_position="last"`` chunk that ``BaseChatModel.stream`` adds).
  These are what LangGraph's prebuilt ``tools_condition`` / ``ToolNode`` execute: they
  route on ``tool_calls`` alone, whatever the finish reason.
* ``preview``: the aggregate's ``tool_calls`` during the stream. Executing a call the first
  time it appears there is what an application does that trusts "parsed" as "finished";
  this surface shows what langchain-core presents as parsed before a call ended.

langchain-core has no wire parser of its own: its provider packages build the chunks. The
adapter consumes ``openai-chat`` payloads and builds each ``AIMessageChunk`` the way
``langchain-openai`` does (``_convert_delta_to_message_chunk``): one ``tool_call_chunk(name,
args, id, index)`` per ``delta.tool_calls`` entry, the whole list dropped when an entry has
no ``index`` (a ``KeyError`` it suppresses), ``finish_reason`` into ``response_metadata``.

Call keys: :func:`~callsafe.targets._common.openai_chat_ids` (response = chunk ``id``, item =
the ``index`` of the chunk that carried the call's id, call = the merged ``id``).

Documentation: https://python.langchain.com/docs/how_to/tool_streaming/ and
https://reference.langchain.com/python/langchain-core/messages/tool/ToolCallChunk.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from callsafe.targets._common import WireTarget, openai_chat_ids

if TYPE_CHECKING:
    from langchain_core.messages import AIMessageChunk

__all__ = ["LangChainCoreTarget", "available", "chunk_from_payload"]


def available() -> str | None:
    """``None`` when ``langchain-core`` is importable, else why this adapter is skipped."""
    return LangChainCoreTarget.unavailable()


def chunk_from_payload(payload: Mapping[str, Any]) -> AIMessageChunk:
    """What ``langchain-openai`` builds from one Chat Completions chunk (tool calls only). Public so
    that the benchmarks build the very same objects."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk

    choices = payload.get("choices") or []
    choice: Mapping[str, Any] = choices[0] if choices else {}
    delta: Mapping[str, Any] = choice.get("delta") or {}
    tool_call_chunks: list[ToolCallChunk] = []
    if raw_tool_calls := delta.get("tool_calls"):
        with contextlib.suppress(KeyError):  # langchain-openai drops the list on a missing index
            tool_call_chunks = [
                tool_call_chunk(
                    name=rtc["function"].get("name"),
                    args=rtc["function"].get("arguments"),
                    id=rtc.get("id"),
                    index=rtc["index"],
                )
                for rtc in raw_tool_calls
            ]
    metadata: dict[str, Any] = {}
    if choice.get("finish_reason"):
        metadata["finish_reason"] = choice["finish_reason"]
    content = delta.get("content") if isinstance(delta.get("content"), str) else ""
    return AIMessageChunk(
        content=content or "",
        tool_call_chunks=tool_call_chunks,
        response_metadata=metadata,
        id=payload.get("id"),
    )


class LangChainCoreTarget(WireTarget):
    """``langchain-core``: ``AIMessageChunk`` addition over Chat Completions chunks."""

    library: ClassVar[str] = "langchain-core"
    module: ClassVar[str] = "langchain_core"
    protocol = "openai-chat"
    SURFACES: ClassVar[tuple[str, ...]] = ("final", "preview")

    def __init__(self, surface: str | None = None) -> None:
        super().__init__(surface)
        self._gathered: AIMessageChunk | None = None
        self._stream_id: str | None = None
        self._finished = False
        self._previewed: set[str] = set()

    def _reset(self) -> None:
        self._gathered = None
        self._stream_id = None
        self._finished = False
        self._previewed = set()

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        self._chat_error(payload)
        chunk_id = payload.get("id")
        if self._gathered is not None and self._finished and chunk_id != self._stream_id:
            self.end_stream()
        chunk = chunk_from_payload(payload)
        if self._gathered is None:
            self._stream_id = chunk_id if isinstance(chunk_id, str) else None
            self._gathered = chunk
        else:
            try:
                self._gathered = self._gathered + chunk
            except Exception as exc:
                self._failed(exc)
                raise
        if chunk.response_metadata.get("finish_reason"):
            self._finished = True
        if self.surface == "preview":
            self._present(self._gathered, preview=True)

    def end_stream(self) -> None:
        from langchain_core.messages import AIMessageChunk

        gathered = self._gathered
        self._reset()
        if gathered is None or self.surface != "final":
            return
        last = gathered + AIMessageChunk(content="", chunk_position="last")
        self._present(last, preview=False, stream_id=gathered.id if isinstance(gathered.id, str) else None)

    def _present(self, message: AIMessageChunk, *, preview: bool, stream_id: str | None = None) -> None:
        index_by_id = {c.get("id"): c.get("index") for c in message.tool_call_chunks if c.get("id")}
        for call in message.tool_calls:
            ident = call.get("id") or call["name"]
            if preview:
                if ident in self._previewed:
                    continue
                self._previewed.add(ident)
            index = index_by_id.get(call.get("id"))
            ids = openai_chat_ids(
                stream_id or self._stream_id, index if isinstance(index, int) else None, call.get("id")
            )
            self._offer(ids, call["name"], dict(call["args"]))
