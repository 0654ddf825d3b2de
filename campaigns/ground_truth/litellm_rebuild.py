"""Ground truth for ``litellm`` over Chat Completions: every stream of ``chat_streams.py``,
read as an application reads it, with no callsafe import. Two surfaces (the matrix rows):
``final``, ``litellm.stream_chunk_builder`` over the stream's chunks built as LiteLLM's
OpenAI-compatible parsers build them (``ModelResponseStream(**payload)``); ``stream``,
``litellm.completion(stream=True)`` reading the SSE bytes through the ``openai`` client LiteLLM
is handed (an in-process ``MockTransport``, no socket), its chunks rebuilt with
``stream_chunk_builder``. On both the rebuilt ``tool_calls`` run (``json.loads`` of the
arguments) when the finish reason is a normal end. The model price list stays local
(``LITELLM_LOCAL_MODEL_COST_MAP``). Named ``litellm_rebuild`` so that it does not shadow the
package. Prints one JSON document (``judge.emit``).

Run: ``python campaigns/ground_truth/litellm_rebuild.py``."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no model price list download
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx2 as http  # the HTTP client package the SDK is built on (its dependency)
import litellm
import openai
from chat_streams import CATALOG, NORMAL_ENDS, STREAMS, TOOL_SCHEMA  # type: ignore[import-not-found]
from judge import Seen, Stream, emit, record, sse  # type: ignore[import-not-found]
from litellm.types.utils import ModelResponseStream

ROWS = {"library:litellm:openai-chat:final": "final", "library:litellm:openai-chat:stream": "stream"}
MESSAGES = [{"role": "user", "content": "x"}]


def _present(response: Any, seen: Seen) -> None:
    choice = response.choices[0]
    for call in choice.message.tool_calls or []:
        raw = call.function.arguments
        try:
            value: Any = json.loads(raw)
            note = "" if isinstance(value, dict) else "arguments are not an object"
        except (TypeError, ValueError) as exc:
            value, note = raw, f"arguments do not parse: {exc}"
        note = note or ("" if call.function.name in CATALOG else "no such tool")
        if not note and choice.finish_reason not in NORMAL_ENDS:
            note = f"finish_reason {choice.finish_reason!r}"
        seen.add(call.id, call.function.name, value, not note, note)


def final(stream: Stream) -> Seen:
    seen = Seen()
    try:
        _present(litellm.stream_chunk_builder([ModelResponseStream(**p) for p in stream.payloads]), seen)
    except Exception as exc:
        seen.error = f"{type(exc).__name__}: {exc}"[:300]
    return seen


def streamed(stream: Stream) -> Seen:
    seen = Seen()
    body = sse(stream.payloads, done=stream.done)

    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://sdk.invalid/v1",
        http_client=http.Client(transport=http.MockTransport(handler)),
        max_retries=0,
    )
    tools = [{"type": "function", "function": {"name": n, "parameters": TOOL_SCHEMA}} for n in CATALOG]
    try:
        response: Any = litellm.completion(
            model="openai/m", messages=MESSAGES, tools=tools, stream=True, client=client, num_retries=0
        )
        chunks = list(response)
        _present(litellm.stream_chunk_builder(chunks, messages=MESSAGES), seen)
    except Exception as exc:
        seen.error = f"{type(exc).__name__}: {exc}"[:300]
    return seen


def main() -> None:
    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)  # what it raises is recorded instead
    results = [record(stream, {"final": final(stream), "stream": streamed(stream)}) for stream in STREAMS]
    emit(
        "litellm",
        {"litellm": importlib.metadata.version("litellm"), "openai": importlib.metadata.version("openai")},
        ROWS,
        results,
        {"pay": TOOL_SCHEMA},
    )


if __name__ == "__main__":
    main()
