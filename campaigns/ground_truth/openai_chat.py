"""Ground truth for ``openai`` Chat Completions: every stream of ``chat_streams.py`` served as
SSE bytes to ``client.chat.completions.stream(...)`` (an in-process ``MockTransport``, no
socket), read as an application reads it, with no callsafe import. Two surfaces, with strict
and with non-strict tools (the four matrix rows): ``done_event``, each
``tool_calls.function.arguments.done`` event as it comes (``parsed_arguments`` with strict
tools, ``json.loads(arguments)`` without); ``final``, ``get_final_completion()`` after the
body, its ``tool_calls`` run when the finish reason is a normal end. An exception ends the
application's read loop: nothing after it is presented. Prints one JSON document
(``judge.emit``); ``tests/test_ground_truth.py`` compares it with the matrix.

Run: ``python campaigns/ground_truth/openai_chat.py``."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx2 as http  # the HTTP client package the SDK is built on (its dependency)
import openai
from chat_streams import CATALOG, NORMAL_ENDS, STREAMS, TOOL_SCHEMA  # type: ignore[import-not-found]
from judge import Seen, Stream, emit, record, sse  # type: ignore[import-not-found]

ROWS = {
    "library:openai:openai-chat:done_event": "done_event",
    "library:openai:openai-chat:final": "final",
    "library:openai:openai-chat:done_event+nonstrict": "done_event+nonstrict",
    "library:openai:openai-chat:final+nonstrict": "final+nonstrict",
}


def _client(body: bytes) -> openai.OpenAI:
    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = http.Client(transport=http.MockTransport(handler))
    return openai.OpenAI(api_key="k", base_url="http://sdk.invalid/v1", http_client=transport, max_retries=0)


def _arguments(parsed: Any, raw: str | None, strict: bool) -> tuple[Any, str]:
    """The arguments as the application reads them, and why they cannot run (or "")."""
    if strict:
        value = parsed
    else:
        try:
            value = json.loads(raw or "")
        except ValueError as exc:
            return raw, f"arguments do not parse: {exc}"
    return value, "" if isinstance(value, dict) else "arguments are not an object"


def run(stream: Stream, strict: bool) -> tuple[Seen, Seen]:
    done, final = Seen(), Seen()
    tools: Any = [
        {"type": "function", "function": {"name": n, "parameters": TOOL_SCHEMA, "strict": strict}} for n in CATALOG
    ]
    client = _client(sse(stream.payloads, done=stream.done))
    try:
        with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "x"}], tools=tools) as s:
            for event in s:
                if event.type != "tool_calls.function.arguments.done":
                    continue
                snapshot = s.current_completion_snapshot.choices[0].message.tool_calls or []
                call_id = snapshot[event.index].id if event.index < len(snapshot) else None
                value, note = _arguments(event.parsed_arguments, event.arguments, strict)
                note = note or ("" if event.name in CATALOG else "no such tool")
                done.add(call_id, event.name, value, not note, note)
            completion = s.get_final_completion()
    except Exception as exc:  # the application's read loop ends here
        done.error = final.error = f"{type(exc).__name__}: {exc}"[:300]
        return done, final
    choice = completion.choices[0]
    for call in choice.message.tool_calls or []:
        if call.type != "function":
            continue
        value, note = _arguments(call.function.parsed_arguments, call.function.arguments, strict)
        note = note or ("" if call.function.name in CATALOG else "no such tool")
        if not note and choice.finish_reason not in NORMAL_ENDS:
            note = f"finish_reason {choice.finish_reason!r}"
        final.add(call.id, call.function.name, value, not note, note)
    return done, final


def main() -> None:
    results = []
    for stream in STREAMS:
        strict_done, strict_final = run(stream, True)
        loose_done, loose_final = run(stream, False)
        surfaces = {
            "done_event": strict_done,
            "final": strict_final,
            "done_event+nonstrict": loose_done,
            "final+nonstrict": loose_final,
        }
        results.append(record(stream, surfaces))
    emit("openai", {"openai": importlib.metadata.version("openai")}, ROWS, results, {"pay": TOOL_SCHEMA})


if __name__ == "__main__":
    main()
