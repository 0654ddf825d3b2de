"""Adversarial Chat Completions streams, written out by hand, for the ground-truth scripts
that feed an OpenAI-compatible SDK (``openai_chat.py``, ``litellm_rebuild.py``). Standard
library only. Each stream names the bug class it stands for and the readings of each call
(see ``judge.py``)."""

from __future__ import annotations

from typing import Any, Final

from judge import Call, Stream  # type: ignore[import-not-found]

TOOL_SCHEMA: Final = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "memo": {"type": "string"}},
    "required": ["amount"],
    "additionalProperties": False,
}
CATALOG: Final = ("pay",)
NORMAL_ENDS: Final = frozenset({"tool_calls", "stop", "function_call"})


def chunk(tool_calls: list[dict[str, Any]] | None = None, finish: str | None = None, cid: str = "c1") -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"}
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}


def opens(index: int, call_id: str, arguments: str = "", name: str = "pay") -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def more(index: int, arguments: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": arguments}}


def pay(amount: int, **extra: Any) -> dict[str, Any]:
    return {"amount": amount, **extra}


def _s(name: str, cls: str, chunks: list[dict[str, Any]], *calls: Call, done: bool = True) -> Stream:
    return Stream(name, cls, tuple(chunks), tuple(calls), done)


MUST_NOT = (None,)
A100 = Call("call_a", "pay", (pay(100),))
B2 = Call("call_b", "pay", (pay(2),))

STREAMS: Final[tuple[Stream, ...]] = (
    _s(
        "clean",
        "control: one call in two fragments",
        [chunk([opens(0, "call_a", '{"amount":1')]), chunk([more(0, "00}")]), chunk(finish="tool_calls")],
        A100,
    ),
    _s(
        "two-calls",
        "control: two calls, one after the other",
        [
            chunk([opens(0, "call_a", '{"amount":100}')]),
            chunk([opens(1, "call_b", '{"amount":2}')]),
            chunk(finish="tool_calls"),
        ],
        A100,
        B2,
    ),
    _s(
        "interleaved",
        "parallel calls whose fragments interleave",
        [
            chunk([opens(0, "call_a", '{"amount":1')]),
            chunk([opens(1, "call_b", '{"amount":')]),
            chunk([more(0, "00}")]),
            chunk([more(1, "2}")]),
            chunk(finish="tool_calls"),
        ],
        A100,
        B2,
    ),
    _s(
        "reused-index-new-id",
        "a second call at the first one's index, with its own id (a new id opens a new call)",
        [
            chunk([opens(0, "call_a", '{"amount":100}')]),
            chunk([opens(0, "call_b", '{"amount":2}')]),
            chunk(finish="tool_calls"),
        ],
        A100,
        B2,
    ),
    _s(
        "repeated-id-and-name",
        "id and name repeated on every fragment (Qwen and others)",
        [chunk([opens(0, "call_a", '{"amount":1')]), chunk([opens(0, "call_a", "00}")]), chunk(finish="tool_calls")],
        A100,
    ),
    _s(
        "finish-on-every-chunk",
        "finish_reason on every chunk: fragments after the first finish (late data)",
        [chunk([opens(0, "call_a", '{"amount":1')], "tool_calls"), chunk([more(0, "00}")], "tool_calls")],
        Call("call_a", "pay", MUST_NOT, "late"),
    ),
    _s(
        "new-call-after-finish",
        "a whole new call after the finish_reason",
        [
            chunk([opens(0, "call_a", '{"amount":100}')]),
            chunk(finish="tool_calls"),
            chunk([opens(1, "call_b", '{"amount":2}')]),
        ],
        A100,
        Call("call_b", "pay", MUST_NOT, "late"),
    ),
    _s(
        "length-open-call",
        "finish_reason length with the call's arguments cut off",
        [chunk([opens(0, "call_a", '{"amount":10')]), chunk(finish="length")],
        Call("call_a", "pay", MUST_NOT, "cut"),
    ),
    _s(
        "length-whole-text",
        "finish_reason length after arguments that happen to parse",
        [chunk([opens(0, "call_a", '{"amount":100}')]), chunk(finish="length")],
        Call("call_a", "pay", MUST_NOT, "cut"),
    ),
    _s(
        "no-finish-reason",
        "a body that ends ([DONE]) with no finish_reason",
        [chunk([opens(0, "call_a", '{"amount":100}')])],
        Call("call_a", "pay", MUST_NOT, "stopped-open"),
    ),
    _s(
        "no-finish-no-done",
        "a body that ends with no finish_reason and no [DONE]",
        [chunk([opens(0, "call_a", '{"amount":100}')])],
        Call("call_a", "pay", MUST_NOT, "dropped"),
        done=False,
    ),
    _s(
        "glued-objects",
        "two JSON objects glued in one call's arguments",
        [chunk([opens(0, "call_a", '{"amount":1}')]), chunk([more(0, '{"amount":2}')]), chunk(finish="tool_calls")],
        Call("call_a", "pay", MUST_NOT, "malformed"),
    ),
    _s(
        "truncated-arguments",
        "arguments cut off, then a normal finish",
        [chunk([opens(0, "call_a", '{"amount":10')]), chunk(finish="tool_calls")],
        Call("call_a", "pay", MUST_NOT, "malformed"),
    ),
    _s(
        "schema-invalid",
        "arguments that parse but break the tool's schema (a string for an integer)",
        [chunk([opens(0, "call_a", '{"amount":"100"}')]), chunk(finish="tool_calls")],
        Call("call_a", "pay", MUST_NOT, "invalid"),
    ),
    _s(
        "empty-arguments",
        "a call whose arguments are the empty string",
        [chunk([opens(0, "call_a", "")]), chunk(finish="tool_calls")],
        Call("call_a", "pay", MUST_NOT, "empty"),
    ),
    _s(
        "one-bad-call-of-two",
        "a malformed call before a valid one (validate per call, not per stream)",
        [
            chunk([opens(0, "call_a", '{"amount":10')]),
            chunk([opens(1, "call_b", '{"amount":2}')]),
            chunk(finish="tool_calls"),
        ],
        Call("call_a", "pay", MUST_NOT, "malformed"),
        B2,
    ),
    _s(
        "surrogate-pair-split",
        "U+1F600's UTF-16 pair split across two events (one \\ud83d escape in each event's JSON)",
        [
            chunk([opens(0, "call_a", '{"amount":100,"memo":"\ud83d')]),
            chunk([more(0, '\ude00"}')]),
            chunk(finish="tool_calls"),
        ],
        Call("call_a", "pay", (pay(100, memo="\U0001f600"), None)),
    ),
)
