"""The guard's cost to an application: ``callsafe.guard`` against the SDK's own stream iteration.

Issue 22, item 4. What an application adds by reading its streams through the guard is
measured against what it already pays to read them through the SDK at all, on the very
same streams, side by side in one run:

* **sdk** (the floor): the SDK's stream, iterated to the end and nothing else
  (``for chunk in client.chat.completions.create(..., stream=True): pass``), with the SDK's
  HTTP client pointed at an in-process transport that answers with the stream's SSE body.
  This is the SDK's own work per chunk: SSE decoding and building its event objects;
* **sdk+loop**: the same, with the accumulation loop applications write today (arguments
  concatenated by index or block, one ``json.loads`` per call at the end): for context;
* **guard-memory**: ``turn.stream(sdk_stream)`` in a guard with the memory store and a
  no-op executor: the guard's own work (reading each SDK object back to its payload,
  parsing it, the core's decisions, the ledger);
* **guard-sqlite**: the same over the SQLite store as shipped (``synchronous="adaptive"``:
  every dispatch claim waits for the disk): the guard's cost with durable decisions.

Each run reads ``streams`` streams, each its own turn, each with two calls whose arguments
come in ``fragments`` deltas; a fresh guard (and store file) per repetition is built
outside the clock. After the clock stops, every call's arguments are checked, and every
guard is checked to have run each call exactly once.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import Config, Prepare, Section, Timing, Work, best_of_prepared, busy_note, fmt_ratio, markdown_table
from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal
from callsafe.providers import registry
from callsafe.providers.sse import encode_payloads
from callsafe.providers.streams import render_payloads
from callsafe.targets._common import library_available

__all__ = ["NAME", "TITLE", "run"]

NAME = "guard"
TITLE = "callsafe.guard: the cost over the SDK's own stream iteration"

STREAMS, QUICK_STREAMS = 40, 2
FRAGMENTS, QUICK_FRAGMENTS = 24, 6
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}
ITEMS = {"openai-chat": ("0", "1"), "openai-responses": ("fc_a", "fc_b"), "anthropic-messages": ("0", "1")}
SDKS = {
    "openai-chat": ("openai", "openai"),
    "openai-responses": ("openai", "openai"),
    "anthropic-messages": ("anthropic", "anthropic"),
}


def _arguments(n: int, call: int, fragments: int) -> tuple[dict[str, str], list[str]]:
    value = {"path": f"/tmp/f{n}-{call}.txt", "text": "lorem ipsum " * fragments}
    text = json.dumps(value)
    step = max(1, len(text) // fragments)
    return value, [text[i : i + step] for i in range(0, len(text), step)]


def _stream(protocol: str, n: int, fragments: int) -> tuple[bytes, dict[str, dict[str, str]]]:
    """One stream's SSE body and its calls' expected arguments by call id."""
    response = {"openai-chat": f"chatcmpl-{n}", "openai-responses": f"resp_{n}", "anthropic-messages": f"msg_{n}"}[
        protocol
    ]
    events: list[Event] = []
    expected: dict[str, dict[str, str]] = {}
    for k, item in enumerate(ITEMS[protocol]):
        call = f"call_{n}_{k}"
        value, parts = _arguments(n, k, fragments)
        expected[call] = value
        events.append(CallOpened("t", response, item, call, "write_file"))
        events += [Fragment("t", response, item, call, i, part) for i, part in enumerate(parts)]
    events += [
        CallTerminal("t", response, item, f"call_{n}_{k}", "", "completed") for k, item in enumerate(ITEMS[protocol])
    ]
    events.append(ResponseTerminal("t", response))
    payloads = render_payloads(protocol, events)
    for payload in payloads:  # what real servers always send, and the SDKs read
        if payload.get("type") == "message_delta":
            payload["usage"] = {"output_tokens": 1}
        if payload.get("type") == "response.completed":
            payload["response"]["output"] = [
                p["item"] for p in payloads if p.get("type") == "response.output_item.done"
            ]
    spec = registry.get(protocol)
    return encode_payloads(payloads, spec.event_name, done=spec.done_sentinel), expected


class _Server:
    """Answers request ``i`` with body ``i`` (the transport of the SDK's HTTP client)."""

    def __init__(self, bodies: list[bytes], module: Any) -> None:
        self.bodies = bodies
        self.module = module
        self.next = 0

    def __call__(self, request: Any) -> Any:
        body = self.bodies[self.next % len(self.bodies)]
        self.next += 1
        return self.module.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _client(protocol: str, server: _Server) -> Any:
    if protocol.startswith("openai"):
        import httpx
        import openai

        server.module = httpx
        http = httpx.Client(transport=httpx.MockTransport(server))
        return openai.OpenAI(api_key="bench", base_url="http://bench.test/v1", http_client=http, max_retries=0)
    import anthropic
    import httpx2

    server.module = httpx2
    return anthropic.Anthropic(
        api_key="bench",
        base_url="http://bench.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(server)),
        max_retries=0,
    )


def _open(protocol: str, client: Any) -> Any:
    """One request's stream, as the application opens it."""
    if protocol == "openai-chat":
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
    if protocol == "openai-responses":
        return client.responses.create(model="m", input="go", stream=True)
    return client.messages.create(model="m", max_tokens=1024, messages=[{"role": "user", "content": "go"}], stream=True)


def _loop(protocol: str, stream: Any) -> list[tuple[str, Any]]:
    """The accumulation loop applications write today (see docs/guard.md)."""
    out: list[tuple[str, Any]] = []
    if protocol == "openai-chat":
        calls: dict[int, list[Any]] = {}
        for chunk in stream:
            for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(tc.index, [tc.id, ""])
                entry[1] += tc.function.arguments or ""
        return [(cid, json.loads(text)) for cid, text in calls.values()]
    if protocol == "openai-responses":
        args: dict[str, str] = {}
        for event in stream:
            if event.type == "response.function_call_arguments.delta":
                args[event.item_id] = args.get(event.item_id, "") + event.delta
            elif event.type == "response.output_item.done" and event.item.type == "function_call":
                out.append((event.item.call_id, json.loads(args[event.item.id])))
        return out
    blocks: dict[int, tuple[str, list[str]]] = {}
    for event in stream:
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            blocks[event.index] = (event.content_block.id, [])
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            blocks[event.index][1].append(event.delta.partial_json)
        elif event.type == "content_block_stop" and event.index in blocks:
            tool_id, parts = blocks.pop(event.index)
            out.append((tool_id, json.loads("".join(parts) or "{}")))
    return out


def _variants(protocol: str, bodies: list[bytes], expected: dict[str, Any], folder: Path) -> list[tuple[str, Prepare]]:
    def sdk(kind: str) -> Prepare:
        @contextmanager
        def prepare() -> Iterator[Work]:
            client = _client(protocol, _Server(bodies, None))
            got: list[tuple[str, Any]] = []

            def work() -> int:
                for _ in bodies:
                    stream = _open(protocol, client)
                    if kind == "loop":
                        got.extend(_loop(protocol, stream))
                    else:
                        for _chunk in stream:
                            pass
                return 0

            yield work
            if kind == "loop" and dict(got) != expected:
                raise AssertionError(f"{protocol}: the accumulation loop read other arguments")

        return prepare

    def guarded(store: str) -> Prepare:
        @contextmanager
        def prepare() -> Iterator[Work]:
            client = _client(protocol, _Server(bodies, None))
            runs: Counter[str] = Counter()
            seen: dict[str, Any] = {}

            def executor(call: ToolCall) -> None:
                runs[call.id] += 1
                seen[call.id] = call.arguments

            with tempfile.TemporaryDirectory(dir=folder) as tmp:
                url = "memory:" if store == "memory" else f"sqlite:///{Path(tmp) / 'guard.db'}"
                guard = Guard({"write_file": SCHEMA}, executor=executor, store=url, create=True)

                def work() -> int:
                    for n in range(len(bodies)):  # a turn per stream (timed: an application starts it)
                        turn = guard.turn(f"turn-{n}", "bench", "acme")
                        for _call in turn.stream(_open(protocol, client)):
                            pass
                    return 0

                yield work
                guard.close()
            if seen != expected or set(runs.values()) != {1}:
                raise AssertionError(f"{protocol} guard-{store}: not every call ran exactly once with its arguments")

        return prepare

    return [
        ("sdk", sdk("bare")),
        ("sdk+loop", sdk("loop")),
        ("guard-memory", guarded("memory")),
        ("guard-sqlite", guarded("sqlite")),
    ]


def run(config: Config) -> Section:
    """Per protocol whose SDK is installed: ratios ``<protocol>/<variant>`` (time over the
    bare SDK iteration, wall; ``@cpu`` by CPU time) for ``loop``, ``guard-memory`` and
    ``guard-sqlite``."""
    streams = QUICK_STREAMS if config.quick else STREAMS
    fragments = QUICK_FRAGMENTS if config.quick else FRAGMENTS
    repeat = 1 if config.quick else config.repeat
    ratios: dict[str, float] = {}
    lines = [f"## {TITLE}", ""]
    note = busy_note()
    if note:
        lines += [f"> {note}", ""]
    lines += [
        f"Each run: {streams} streams read one after the other, each in a turn of its own (started in the timed",
        f"part), each with 2 `write_file` calls whose arguments arrive in {fragments} deltas; the SDK's HTTP client",
        "answers from an in-process transport.",
        "**sdk**: the SDK's stream iterated and nothing else (the floor); **sdk+loop**: plus the usual",
        "accumulation loop; **guard-memory** / **guard-sqlite**: `turn.stream(sdk_stream)` running each call",
        "once (no-op tool), memory store / SQLite as shipped (every claim fsynced). Best of "
        f"{repeat}, interleaved; ratios over **sdk** in the same run.",
        "",
    ]
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="callsafe-bench-guard-") as tmp:
        for protocol, (distribution, module) in SDKS.items():
            reason = library_available(distribution, module)
            if reason is None and module == "anthropic":
                reason = library_available("httpx2", "httpx2")
            if reason is not None:
                skipped.append(f"{protocol}: {reason}")
                continue
            built = [_stream(protocol, n, fragments) for n in range(streams)]
            bodies = [b for b, _ in built]
            expected = {k: v for _, e in built for k, v in e.items()}
            timings = best_of_prepared(_variants(protocol, bodies, expected, Path(tmp)), repeat)
            lines += [f"### {protocol} ({distribution} SDK)", "", _table(timings, streams), ""]
            floor = timings["sdk"]
            for name, key in (("sdk+loop", "loop"), ("guard-memory", "guard-memory"), ("guard-sqlite", "guard-sqlite")):
                ratios[f"{protocol}/{key}"] = timings[name].wall / floor.wall
                ratios[f"{protocol}/{key}@cpu"] = timings[name].cpu / floor.cpu
    if skipped:
        lines += ["Not measured: " + "; ".join(skipped), ""]
    return Section(NAME, TITLE, "\n".join(lines), ratios)


def _table(timings: dict[str, Timing], streams: int) -> str:
    floor = timings["sdk"]
    rows = [
        [
            name,
            f"{t.wall / 1e6:.1f}",
            f"{t.cpu / 1e3 / streams:.0f}",
            fmt_ratio(t.wall / floor.wall),
            fmt_ratio(t.cpu / floor.cpu),
        ]
        for name, t in timings.items()
    ]
    return markdown_table(["variant", "wall ms", "CPU us/stream", "ratio (wall)", "ratio (CPU)"], rows)
