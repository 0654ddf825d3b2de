"""Ground truth for ``langchain-core`` over Chat Completions: every stream of
``chat_streams.py``, each chunk built into an ``AIMessageChunk`` the way ``langchain-openai``
builds it (``_convert_delta_to_message_chunk``: one ``tool_call_chunk`` per
``delta.tool_calls`` entry, ``finish_reason`` in ``response_metadata``) and aggregated with
``+`` as LangChain's tool-streaming guide shows, with no callsafe import. Two surfaces (the
matrix rows): ``final``, the aggregate's ``tool_calls`` once the body ended (with the
``chunk_position="last"`` chunk ``BaseChatModel.stream`` adds), all run, as LangGraph's
``ToolNode`` runs them whatever the finish reason; ``preview``, each call the first time it
appears in the aggregate's ``tool_calls`` during the stream. Prints one JSON document
(``judge.emit``).

Run: ``python campaigns/ground_truth/langchain_core_chat.py``."""

from __future__ import annotations

import contextlib
import importlib.metadata
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chat_streams import CATALOG, STREAMS, TOOL_SCHEMA  # type: ignore[import-not-found]
from judge import Seen, Stream, emit, record  # type: ignore[import-not-found]
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk

ROWS = {"library:langchain-core:openai-chat:final": "final", "library:langchain-core:openai-chat:preview": "preview"}


def message_chunk(payload: dict[str, Any]) -> AIMessageChunk:
    choice = (payload.get("choices") or [{}])[0]
    delta = choice.get("delta") or {}
    chunks: list[ToolCallChunk] = []
    with contextlib.suppress(KeyError):  # langchain-openai drops the list on a missing index
        chunks = [
            tool_call_chunk(
                name=t["function"].get("name"), args=t["function"].get("arguments"), id=t.get("id"), index=t["index"]
            )
            for t in delta.get("tool_calls") or []
        ]
    metadata = {"finish_reason": choice["finish_reason"]} if choice.get("finish_reason") else {}
    return AIMessageChunk(content="", tool_call_chunks=chunks, response_metadata=metadata, id=payload.get("id"))


def _add(seen: Seen, call: Any) -> None:
    note = "" if call["name"] in CATALOG else "no such tool"
    seen.add(call.get("id"), call["name"], dict(call["args"]), not note, note)


def run(stream: Stream) -> tuple[Seen, Seen]:
    final, preview = Seen(), Seen()
    gathered: AIMessageChunk | None = None
    previewed: set[str] = set()
    try:
        for payload in stream.payloads:
            chunk = message_chunk(payload)
            gathered = chunk if gathered is None else gathered + chunk
            for call in gathered.tool_calls:
                ident = call.get("id") or call["name"]
                if ident not in previewed:
                    previewed.add(ident)
                    _add(preview, call)
        if gathered is not None:
            last = gathered + AIMessageChunk(content="", chunk_position="last")
            for call in last.tool_calls:
                _add(final, call)
    except Exception as exc:
        final.error = preview.error = f"{type(exc).__name__}: {exc}"[:300]
    return final, preview


def main() -> None:
    results = []
    for stream in STREAMS:
        final, preview = run(stream)
        results.append(record(stream, {"final": final, "preview": preview}))
    emit(
        "langchain-core",
        {"langchain-core": importlib.metadata.version("langchain-core")},
        ROWS,
        results,
        {"pay": TOOL_SCHEMA},
    )


if __name__ == "__main__":
    main()
