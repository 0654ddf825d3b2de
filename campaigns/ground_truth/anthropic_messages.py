"""Ground truth for ``anthropic`` Messages: hand-written adversarial streams served as SSE
bytes to ``client.messages.stream(...)`` (and ``client.beta.messages.stream(...)`` with the
fine-grained tool streaming beta), over an in-process ``MockTransport`` (no socket), read as an
application reads it, with no callsafe import. Surfaces (the matrix rows): ``block_stop``, each
``content_block_stop`` event's ``tool_use`` block as it comes; ``final``,
``get_final_message()`` after the body, its ``tool_use`` blocks run when ``stop_reason`` is
``tool_use``; ``final+every-block``, the same message with every ``tool_use`` block run;
``block_stop+fine-grained``, ``block_stop`` under the beta. An exception ends the read loop.
Prints one JSON document (``judge.emit``).

Run: ``python campaigns/ground_truth/anthropic_messages.py``."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic
import httpx2 as http  # the HTTP client package the SDK is built on (its dependency)
from judge import Call, Seen, Stream, emit, record, sse  # type: ignore[import-not-found]

ROWS = {
    "library:anthropic:anthropic-messages:block_stop": "block_stop",
    "library:anthropic:anthropic-messages:final": "final",
    "library:anthropic:anthropic-messages:final+every-block": "final+every-block",
    "library:anthropic:anthropic-messages:block_stop+fine-grained": "block_stop+fine-grained",
}
FINE_GRAINED = "fine-grained-tool-streaming-2025-05-14"
CATALOG = ("pay",)
SCHEMA = {  # the catalog's tool (the SDK does not read it: recorded for the comparison with the matrix)
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "memo": {"type": "string"}},
    "required": ["amount"],
    "additionalProperties": False,
}


def start(mid: str = "msg_1") -> dict[str, Any]:
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def block(index: int, tid: str, name: str = "pay") -> dict[str, Any]:
    return {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}},
    }


def delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def end(reason: str = "tool_use") -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]


def tool(index: int, tid: str, *parts: str) -> list[dict[str, Any]]:
    return [block(index, tid), *(delta(index, p) for p in parts), stop(index)]


WHOLE = ('{"amount":1', "00}")
MUST_NOT = (None,)
A100 = Call("toolu_a", "pay", ({"amount": 100},))
B2 = Call("toolu_b", "pay", ({"amount": 2},))


def _s(name: str, cls: str, events: list[dict[str, Any]], *calls: Call) -> Stream:
    return Stream(name, cls, tuple(events), calls)


STREAMS = (
    _s("clean", "control: one call in two deltas", [start(), *tool(0, "toolu_a", *WHOLE), *end()], A100),
    _s(
        "two-calls",
        "control: two calls",
        [start(), *tool(0, "toolu_a", *WHOLE), *tool(1, "toolu_b", '{"amount":2}'), *end()],
        A100,
        B2,
    ),
    _s(
        "glued-objects",
        "two JSON objects glued in one block's input",
        [start(), *tool(0, "toolu_a", '{"amount":1}', '{"amount":2}'), *end()],
        Call("toolu_a", "pay", MUST_NOT, "malformed"),
    ),
    _s(
        "schema-invalid",
        "input that parses but breaks the tool's schema (a string for an integer)",
        [start(), *tool(0, "toolu_a", '{"amount":"100"}'), *end()],
        Call("toolu_a", "pay", MUST_NOT, "invalid"),
    ),
    _s(
        "truncated-then-max-tokens",
        "input cut off, the block stopped, then stop_reason max_tokens",
        [start(), *tool(0, "toolu_a", '{"amount":10'), *end("max_tokens")],
        Call("toolu_a", "pay", MUST_NOT, "malformed"),
    ),
    _s(
        "truncated-then-tool-use",
        "input cut off, the block stopped, then stop_reason tool_use",
        [start(), *tool(0, "toolu_a", '{"amount":10'), *end()],
        Call("toolu_a", "pay", MUST_NOT, "malformed"),
    ),
    _s(
        "unstopped-block",
        "the message ends (tool_use, message_stop) with the block never stopped",
        [start(), block(0, "toolu_a"), delta(0, WHOLE[0]), *end()],
        Call("toolu_a", "pay", MUST_NOT, "stopped-open"),
    ),
    _s(
        "max-tokens-open-block",
        "stop_reason max_tokens with the block open (its text happens to parse)",
        [start(), block(0, "toolu_a"), delta(0, '{"amount":100}'), *end("max_tokens")],
        Call("toolu_a", "pay", MUST_NOT, "cut"),
    ),
    _s(
        "second-message-start",
        "a second message_start (another id) inside the open message: a splice of two messages",
        [start(), block(0, "toolu_a"), delta(0, WHOLE[0]), start("msg_2"), delta(0, WHOLE[1]), stop(0), *end()],
        Call("toolu_a", "pay", MUST_NOT, "spliced"),
    ),
    _s(
        "replayed-block-start",
        "content_block_start sent again (same index, id and name)",
        [start(), block(0, "toolu_a"), block(0, "toolu_a"), delta(0, WHOLE[0]), delta(0, WHOLE[1]), stop(0), *end()],
        A100,
    ),
    _s(
        "replayed-block-start-two-calls",
        "content_block_start replayed, then a second call",
        [
            start(),
            block(0, "toolu_a"),
            block(0, "toolu_a"),
            delta(0, '{"amount":100}'),
            stop(0),
            *tool(1, "toolu_b", '{"amount":2}'),
            *end(),
        ],
        A100,
        B2,
    ),
    _s(
        "replayed-block-stop",
        "content_block_stop sent again",
        [start(), *tool(0, "toolu_a", *WHOLE), stop(0), *end()],
        A100,
    ),
    _s(
        "delta-after-block-stop",
        "an input_json_delta for the block after its content_block_stop",
        [start(), *tool(0, "toolu_a", *WHOLE), delta(0, "0"), *end()],
        A100,
    ),
    _s(
        "delta-after-message-stop",
        "an input_json_delta after message_stop",
        [start(), *tool(0, "toolu_a", *WHOLE), *end(), delta(0, "0")],
        A100,
    ),
    _s(
        "new-block-after-message-stop",
        "a whole new tool_use block after message_stop",
        [start(), *tool(0, "toolu_a", *WHOLE), *end(), *tool(1, "toolu_b", '{"amount":2}')],
        A100,
        Call("toolu_b", "pay", MUST_NOT, "late"),
    ),
    _s(
        "no-stop-events",
        "a body that ends after the deltas: no content_block_stop, message_delta or message_stop",
        [start(), block(0, "toolu_a"), delta(0, WHOLE[0]), delta(0, WHOLE[1])],
        Call("toolu_a", "pay", MUST_NOT, "dropped"),
    ),
    _s(
        "reused-index-new-id",
        "a second tool_use block (a new id: a new call) at the stopped first block's index",
        [start(), *tool(0, "toolu_a", '{"amount":100}'), *tool(0, "toolu_b", '{"amount":2}'), *end()],
        A100,
        B2,
    ),
    _s(
        "bad-escape-in-first-of-two",
        "an invalid escape in the first call's input, then a valid call (validate per call)",
        [start(), *tool(0, "toolu_a", '{"amount":1,"memo":"\\q"}'), *tool(1, "toolu_b", '{"amount":2}'), *end()],
        Call("toolu_a", "pay", MUST_NOT, "malformed"),
        B2,
    ),
    _s(
        "surrogate-pair-split",
        "U+1F600's UTF-16 pair split across two deltas (one \\ud83d escape in each event's JSON)",
        [start(), *tool(0, "toolu_a", '{"amount":100,"memo":"\ud83d', '\ude00"}'), *end()],
        Call("toolu_a", "pay", ({"amount": 100, "memo": "\U0001f600"}, None)),
    ),
)


def _client(body: bytes) -> anthropic.Anthropic:
    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = http.Client(transport=http.MockTransport(handler))
    return anthropic.Anthropic(api_key="k", base_url="http://sdk.invalid", http_client=transport, max_retries=0)


def _runnable(name: str, value: Any) -> str:
    if not isinstance(value, dict):
        return "input is not an object"
    return "" if name in CATALOG else "no such tool"


def run(stream: Stream, fine_grained: bool) -> tuple[Seen, Seen, Seen]:
    stops, final, every = Seen(), Seen(), Seen()
    client = _client(sse(stream.payloads, event_names=True))
    messages: Any = [{"role": "user", "content": "x"}]
    try:
        if fine_grained:
            manager: Any = client.beta.messages.stream(
                model="m", max_tokens=64, messages=messages, betas=[FINE_GRAINED]
            )
        else:
            manager = client.messages.stream(model="m", max_tokens=64, messages=messages)
        with manager as s:
            for event in s:
                if event.type == "content_block_stop" and event.content_block.type == "tool_use":
                    b = event.content_block
                    note = _runnable(b.name, b.input)
                    stops.add(b.id, b.name, b.input, not note, note)
            message = s.get_final_message()
    except Exception as exc:
        stops.error = final.error = every.error = f"{type(exc).__name__}: {exc}"[:300]
        return stops, final, every
    for b in message.content:
        if b.type == "tool_use":
            note = _runnable(b.name, b.input)
            every.add(b.id, b.name, b.input, not note, note)
            if not note and message.stop_reason != "tool_use":
                note = f"stop_reason {message.stop_reason!r}"
            final.add(b.id, b.name, b.input, not note, note)
    return stops, final, every


def main() -> None:
    results = []
    for stream in STREAMS:
        stops, final, every = run(stream, False)
        fine, _, _ = run(stream, True)
        surfaces = {"block_stop": stops, "final": final, "final+every-block": every, "block_stop+fine-grained": fine}
        results.append(record(stream, surfaces))
    emit("anthropic", {"anthropic": importlib.metadata.version("anthropic")}, ROWS, results, {"pay": SCHEMA})


if __name__ == "__main__":
    main()
