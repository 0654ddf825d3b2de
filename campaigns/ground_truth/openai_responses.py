"""Ground truth for ``openai`` Responses: hand-written adversarial streams served as SSE bytes
to ``client.responses.stream(...)`` (an in-process ``MockTransport``, no socket), read as an
application reads it, with no callsafe import. Two surfaces (the matrix rows):
``arguments_done``, each ``response.function_call_arguments.done`` as it comes, for a
``function_call`` item the application saw added (OpenAI's streaming function-calling
pattern; ``json.loads`` of its ``arguments``); ``final``, ``get_final_response()`` after the
body, its ``function_call`` items run with ``parsed_arguments`` (strict tools). An exception
ends the read loop. Prints one JSON document (``judge.emit``).

Run: ``python campaigns/ground_truth/openai_responses.py``."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx2 as http  # the HTTP client package the SDK is built on (its dependency)
import openai
from judge import Call, Seen, Stream, emit, record, sse  # type: ignore[import-not-found]

ROWS = {
    "library:openai:openai-responses:arguments_done": "arguments_done",
    "library:openai:openai-responses:final": "final",
}
SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "memo": {"type": "string"}},
    "required": ["amount", "memo"],
    "additionalProperties": False,
}
CATALOG = ("pay",)


class Body:
    """A Responses event stream under construction: numbered events, one response."""

    def __init__(self, rid: str = "resp_1") -> None:
        self.events: list[dict[str, Any]] = []
        self.rid = rid
        self.items: dict[int, dict[str, Any]] = {}
        self.add("response.created", response={"id": rid, "status": "in_progress", "output": []})

    def add(self, kind: str, **fields: Any) -> Body:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})
        return self

    def opens(self, n: int, call_id: str, name: str = "pay") -> Body:
        item = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        self.items[n] = item
        return self.add("response.output_item.added", output_index=n, item=dict(item))

    def delta(self, n: int, text: str) -> Body:
        self.items[n]["arguments"] += text
        return self.add("response.function_call_arguments.delta", item_id=f"fc_{n}", output_index=n, delta=text)

    def args_done(self, n: int, text: str | None = None) -> Body:
        text = self.items[n]["arguments"] if text is None else text
        return self.add("response.function_call_arguments.done", item_id=f"fc_{n}", output_index=n, arguments=text)

    def item_done(self, n: int, text: str | None = None, status: str = "completed") -> Body:
        item = {**self.items[n], "status": status}
        if text is not None:
            item["arguments"] = text
        self.items[n] = item
        return self.add("response.output_item.done", output_index=n, item=dict(item))

    def call(self, n: int, call_id: str, *parts: str) -> Body:
        self.opens(n, call_id)
        for part in parts:
            self.delta(n, part)
        return self.args_done(n).item_done(n)

    def end(self, kind: str = "response.completed", status: str = "completed", **extra: Any) -> Body:
        output = [dict(item) for _, item in sorted(self.items.items())]
        return self.add(kind, response={"id": self.rid, "status": status, "output": output, **extra})


def pay(amount: int, memo: str = "x") -> dict[str, Any]:
    return {"amount": amount, "memo": memo}


WHOLE = ('{"amount":1', '00,"memo":"x"}')
MUST_NOT = (None,)
A100 = Call("call_a", "pay", (pay(100),))
B2 = Call("call_b", "pay", (pay(2),))


def _streams() -> list[Stream]:
    out: list[Stream] = []

    def s(name: str, cls: str, body: Body, *calls: Call) -> None:
        out.append(Stream(name, cls, tuple(body.events), calls))

    s("clean", "control: one call in two deltas", Body().call(0, "call_a", *WHOLE).end(), A100)
    s(
        "two-calls",
        "control: two calls",
        Body().call(0, "call_a", *WHOLE).call(1, "call_b", '{"amount":2,"memo":"x"}').end(),
        A100,
        B2,
    )
    b = (
        Body()
        .opens(0, "call_a")
        .opens(1, "call_b")
        .delta(0, WHOLE[0])
        .delta(1, '{"amount":2,')
        .delta(0, WHOLE[1])
        .delta(1, '"memo":"x"}')
    )
    s(
        "interleaved",
        "parallel calls whose deltas interleave",
        b.args_done(0).args_done(1).item_done(0).item_done(1).end(),
        A100,
        B2,
    )
    s(
        "no-completed",
        "a body that ends after the item's done events, with no response.completed",
        Body().call(0, "call_a", *WHOLE),
        Call("call_a", "pay", (pay(100), None)),
    )
    s(
        "no-done-events",
        "a body that ends after the deltas: no done event, no response end",
        Body().opens(0, "call_a").delta(0, WHOLE[0]).delta(0, WHOLE[1]),
        Call("call_a", "pay", MUST_NOT, "dropped"),
    )
    b = Body().opens(0, "call_a").delta(0, WHOLE[0]).delta(0, WHOLE[1]).args_done(0).item_done(0, status="incomplete")
    s(
        "done-then-incomplete",
        "arguments.done, then the item and the response end incomplete (max_output_tokens)",
        b.end("response.incomplete", "incomplete", incomplete_details={"reason": "max_output_tokens"}),
        Call("call_a", "pay", MUST_NOT, "cut"),
    )
    b = Body().opens(0, "call_a").delta(0, WHOLE[0]).delta(0, WHOLE[1]).args_done(0)
    b.events.append(dict(b.events[-1]))  # the same event again, its sequence_number included
    s("replayed-arguments-done", "response.function_call_arguments.done replayed", b.item_done(0).end(), A100)
    b = (
        Body()
        .opens(0, "call_a")
        .delta(0, WHOLE[0])
        .delta(0, WHOLE[1])
        .args_done(0, '{"amount":999,"memo":"x"}')
        .item_done(0)
    )
    s(
        "done-disagrees-with-deltas",
        "arguments.done carries other arguments than the deltas (the done event's are final, or the call is refused)",
        b.end(),
        Call("call_a", "pay", (pay(999), None)),
    )
    s(
        "arguments-only-in-done",
        "no delta: the arguments come only in the done events",
        Body()
        .opens(0, "call_a")
        .args_done(0, '{"amount":100,"memo":"x"}')
        .item_done(0, '{"amount":100,"memo":"x"}')
        .end(),
        A100,
    )
    b = Body().opens(0, "call_a").delta(0, '{"amount":10').call(1, "call_b", '{"amount":2,"memo":"x"}')
    s(
        "unfinished-item-and-a-whole-one",
        "an item that never gets its done events beside a complete call",
        b.end(),
        Call("call_a", "pay", MUST_NOT, "open"),
        B2,
    )
    s(
        "one-bad-call-of-two",
        "a malformed call before a valid one (validate per call, not per stream)",
        Body().call(0, "call_a", '{"amount":10').call(1, "call_b", '{"amount":2,"memo":"x"}').end(),
        Call("call_a", "pay", MUST_NOT, "malformed"),
        B2,
    )
    s(
        "schema-invalid",
        "arguments that parse but break the tool's schema (a string for an integer)",
        Body().call(0, "call_a", '{"amount":"100","memo":"x"}').end(),
        Call("call_a", "pay", MUST_NOT, "invalid"),
    )
    s(
        "glued-objects",
        "two JSON objects glued in one call's arguments",
        Body().call(0, "call_a", '{"amount":1,"memo":"x"}', '{"amount":2,"memo":"x"}').end(),
        Call("call_a", "pay", MUST_NOT, "malformed"),
    )
    s(
        "surrogate-pair-split",
        "U+1F600's UTF-16 pair split across two deltas (one \\ud83d escape in each event's JSON)",
        Body().call(0, "call_a", '{"amount":100,"memo":"\ud83d', '\ude00"}').end(),
        Call("call_a", "pay", (pay(100, "\U0001f600"), None)),
    )
    b = Body().opens(0, "call_a").delta(0, WHOLE[0]).delta(0, WHOLE[1]).item_done(0)
    s(
        "no-arguments-done-event",
        "no response.function_call_arguments.done: the item ends with output_item.done (its arguments whole)",
        b.end(),
        A100,
    )
    b = Body().opens(0, "call_a")
    b.events.append(dict(b.events[-1]))  # the same event again, its sequence_number included
    s(
        "replayed-output-item-added",
        "response.output_item.added replayed",
        b.delta(0, WHOLE[0]).delta(0, WHOLE[1]).args_done(0).item_done(0).end(),
        A100,
    )
    b = Body().call(0, "call_a", *WHOLE)
    b.add("response.function_call_arguments.delta", item_id="fc_0", output_index=0, delta="0")
    s("delta-after-item-done", "a delta for the item after its output_item.done", b.end(), A100)
    b = Body().call(0, "call_a", *WHOLE).end()
    b.opens(1, "call_b").delta(1, '{"amount":2,"memo":"x"}').args_done(1).item_done(1)
    s(
        "new-call-after-completed",
        "a whole new function_call item after response.completed",
        b,
        A100,
        Call("call_b", "pay", MUST_NOT, "late"),
    )
    b = Body().call(0, "call_a", *WHOLE)
    b.items[1] = b.items.pop(0)
    b.opens(0, "call_b").delta(0, '{"amount":2,"memo":"x"}').args_done(0).item_done(0)
    s(
        "reused-output-index-new-item",
        "a second item (its own id and call_id: a new call) at the first one's output_index",
        b.end(),
        A100,
        B2,
    )
    return out


def _client(body: bytes) -> openai.OpenAI:
    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = http.Client(transport=http.MockTransport(handler))
    return openai.OpenAI(api_key="k", base_url="http://sdk.invalid/v1", http_client=transport, max_retries=0)


def run(stream: Stream) -> tuple[Seen, Seen]:
    done, final = Seen(), Seen()
    tools: Any = [{"type": "function", "name": n, "parameters": SCHEMA, "strict": True} for n in CATALOG]
    items: dict[int, tuple[str, str]] = {}  # output_index -> call_id, name: the application's bookkeeping
    try:
        with _client(sse(stream.payloads, event_names=True)).responses.stream(model="m", input="x", tools=tools) as s:
            for event in s:
                if event.type == "response.output_item.added" and event.item.type == "function_call":
                    items[event.output_index] = (event.item.call_id, event.item.name)
                elif event.type == "response.function_call_arguments.done" and event.output_index in items:
                    call_id, name = items[event.output_index]
                    try:
                        value: Any = json.loads(event.arguments)
                        note = "" if isinstance(value, dict) else "arguments are not an object"
                    except ValueError as exc:
                        value, note = event.arguments, f"arguments do not parse: {exc}"
                    note = note or ("" if name in CATALOG else "no such tool")
                    done.add(call_id, name, value, not note, note)
            response = s.get_final_response()
    except Exception as exc:
        final.error = f"{type(exc).__name__}: {exc}"[:300]
        done.error = done.error or final.error
        return done, final
    for output in response.output or []:
        if output.type == "function_call":
            parsed = output.parsed_arguments
            note = "" if isinstance(parsed, dict) and output.name in CATALOG else "not runnable"
            final.add(output.call_id, output.name, parsed, not note, note)
    return done, final


def main() -> None:
    results = []
    for stream in _streams():
        done, final = run(stream)
        results.append(record(stream, {"arguments_done": done, "final": final}))
    emit("openai", {"openai": importlib.metadata.version("openai")}, ROWS, results, {"pay": SCHEMA})


if __name__ == "__main__":
    main()
