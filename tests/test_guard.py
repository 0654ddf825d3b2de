"""callsafe.guard's API: what it takes, what it runs, what it refuses, and how it fails.

Streams are rendered by callsafe's providers (the same payloads the certification sends);
the SDK objects are built the way the SDKs' own ``Stream`` builds them. The end-to-end
loops through the real SDKs are in ``tests/test_guard_examples.py``; the certification
of the guard over every store in ``tests/test_guard_certify.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import skips

from callsafe.guard import (
    ClosedGuard,
    ConfigError,
    Guard,
    GuardStoreError,
    StreamError,
    ToolCall,
    ToolSpec,
    UnknownInput,
    UnknownProtocol,
    UnknownTurn,
)
from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal, TextFragment
from callsafe.providers.sse import cut
from callsafe.providers.streams import render_payloads, render_sse
from callsafe.reference_impl.errors import StoreFault

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")
ITEMS = {"openai-chat": "0", "openai-responses": "fc_1", "anthropic-messages": "0"}


def events(
    protocol: str = "openai-chat",
    response: str = "r1",
    city: str = "Paris",
    *,
    reason: str = "completed",
    call: str = "call_1",
) -> list[Event]:
    item = ITEMS[protocol]
    text = json.dumps({"city": city})
    return [
        CallOpened("t", response, item, call, "get_weather"),
        Fragment("t", response, item, call, 0, text[:4]),
        Fragment("t", response, item, call, 1, text[4:]),
        CallTerminal("t", response, item, call, "", reason),  # type: ignore[arg-type]
        ResponseTerminal("t", response, reason),  # type: ignore[arg-type]
    ]


def payloads(protocol: str = "openai-chat", **kw: Any) -> list[dict[str, Any]]:
    return render_payloads(protocol, events(protocol, **kw))


class Tools:
    """An executor that counts runs per (call id, city)."""

    def __init__(self) -> None:
        self.runs: Counter[tuple[str, str]] = Counter()

    def __call__(self, call: ToolCall) -> str:
        self.runs[(call.id, call.arguments["city"])] += 1
        return "sunny"


def make(executor: Any = None, **kw: Any) -> Guard:
    kw.setdefault("store", "memory:")
    return Guard({"get_weather": kw.pop("spec", SCHEMA)}, executor=executor, **kw)


# -- what it takes ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dicts_and_sse_cut_anywhere_run_the_call_once(protocol: str) -> None:
    raw = render_sse(protocol, events(protocol))
    for chunks in ([raw], cut(raw, range(1, len(raw), 5)), cut(raw, range(1, len(raw)))):
        tools = Tools()
        guard = make(tools)
        turn = guard.turn("t", "alice", "acme")
        ran = list(turn.stream(chunks))
        assert [c.arguments for c in ran] == [{"city": "Paris"}]
        assert ran[0].ran and ran[0].result == "sunny" and ran[0].key.tenant == "acme"
        assert tools.runs == Counter({("call_1", "Paris"): 1})
    guard = make(Tools())
    assert [c.tool for c in guard.turn("t", "alice", "acme").stream(payloads(protocol))] == ["get_weather"]


def test_openai_sdk_chunk_objects_and_the_stream_helper_events() -> None:
    pytest.importorskip("openai", reason=skips.missing("openai"))
    from openai.lib.streaming.chat import ChatCompletionStreamState

    from callsafe.targets.openai_chat import chunk_from_payload

    chunks = [chunk_from_payload(p) for p in payloads()]
    tools = Tools()
    assert len(list(make(tools).turn("t", "u", "acme").stream(chunks))) == 1
    # client.chat.completions.stream() yields "chunk" events beside derived ones
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    helper_events = [e for c in chunks for e in state.handle_chunk(c)]
    assert {e.type for e in helper_events} > {"chunk"}
    tools = Tools()
    assert len(list(make(tools).turn("t", "u", "acme").stream(helper_events))) == 1
    assert tools.runs == Counter({("call_1", "Paris"): 1})


@pytest.mark.parametrize(
    "tools",
    [
        {"get_weather": SCHEMA},
        {"get_weather": ToolSpec(schema=SCHEMA)},
        [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
        [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
        [{"name": "get_weather", "input_schema": SCHEMA}],
    ],
)
def test_the_catalog_in_every_shape_an_agent_has(tools: Any) -> None:
    guard = Guard(tools, store="memory:")
    assert list(guard.tools) == ["get_weather"] and guard.tools["get_weather"].schema == SCHEMA


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": {"t": {"type": 12}}}, "not a valid JSON Schema"),
        ({"tools": {"t": "nope"}}, "a tool is a JSON Schema"),
        ({"tools": [{"kind": "function"}]}, "a tools list entry"),
        ({"tools": 5}, "tools is a mapping"),
        ({"tools": {}, "store": "mysql://x"}, "unknown store URL"),
        ({"tools": {}, "limits": {"call_bytes": 0}}, "positive integers"),
        ({"tools": {}, "limits": {"bytes": 1}}, "unknown limits"),
        ({"tools": {}, "executor": "run"}, "executor is a callable"),
    ],
)
def test_misconfiguration_is_a_config_error(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("store", "memory:")
    with pytest.raises(ConfigError, match=message):
        Guard(**kwargs)


def test_inputs_it_does_not_read_are_typed_errors_and_run_nothing() -> None:
    tools = Tools()
    guard = make(tools)
    turn = guard.turn("t", "u", "acme")
    with pytest.raises(UnknownInput):
        list(turn.stream([42]))
    with pytest.raises(UnknownProtocol):
        list(turn.stream([{"type": "mystery"}]))
    with pytest.raises(UnknownProtocol):
        turn.open_stream("grpc")
    good = payloads()
    with pytest.raises(StreamError):  # a chunk of the wrong shape after a good start
        list(turn.stream([good[0], good[1], {"id": "r1", "choices": "broken"}, *good[2:]]))
    with pytest.raises(StreamError):
        list(turn.stream([b"data: {not json}\n\n"], protocol="openai-chat"))
    with pytest.raises(StreamError):
        list(turn.stream([b"data: \xff\n\n"], protocol="openai-chat"))
    assert tools.runs == Counter()
    assert [r.decision for r in guard.ledger()] == ["failed"]  # the call the bad chunk cut off
    reader = turn.open_stream()
    with pytest.raises(StreamError):
        reader.feed({"id": "r9", "choices": "broken"})
    with pytest.raises(StreamError, match="already failed"):
        reader.feed(good[0])
    with pytest.raises(UnknownInput):
        guard.deliver("turn_started")  # type: ignore[arg-type]
    with pytest.raises(UnknownInput):
        guard.confirm("t/call_1")  # type: ignore[arg-type]


def test_other_protocols_by_name() -> None:
    tools = Tools()
    guard = make(tools)
    evs = [
        CallOpened("t", "r1", "0", "c1", "get_weather"),
        Fragment("t", "r1", "0", "c1", 0, '{"city":"Oslo"}'),
        CallTerminal("t", "r1", "0", "c1", "", "completed"),
        ResponseTerminal("t", "r1"),
    ]
    ran = list(guard.turn("t", "u", "acme").stream([render_sse("gemini", evs)], protocol="gemini"))
    assert [c.arguments for c in ran] == [{"city": "Oslo"}]


# -- what it runs and what it refuses ----------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_replayed_stream_runs_nothing_again(protocol: str) -> None:
    tools = Tools()
    guard = make(tools)
    turn = guard.turn("t", "u", "acme")
    first = list(turn.stream(payloads(protocol)))
    again = list(turn.stream(payloads(protocol)))
    assert len(first) == 1 and again == []
    assert tools.runs == Counter({("call_1", "Paris"): 1})


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_off_response_runs_nothing_and_offers_a_retry(protocol: str) -> None:
    tools = Tools()
    guard = make(tools)
    assert list(guard.turn("t", "u", "acme").stream(payloads(protocol, reason="length"))) == []
    assert tools.runs == Counter()
    assert guard.status("t") == "retry"
    assert [(r.decision, r.terminal_reason) for r in guard.ledger()] == [("failed", "length")]


def test_a_dropped_connection_or_a_break_runs_nothing() -> None:
    tools = Tools()
    guard = make(tools)
    turn = guard.turn("t", "u", "acme")

    def dropped() -> Iterator[dict[str, Any]]:
        yield from payloads()[:3]
        raise ConnectionError("peer closed")

    with pytest.raises(ConnectionError):
        list(turn.stream(dropped()))
    for _ in turn.stream(payloads(response="r2", call="call_2")[:3]):
        break  # never reached: nothing is handed over before the end
    stream = turn.stream(payloads(response="r3", call="call_3"))
    stream.close()  # a generator left early
    assert tools.runs == Counter()
    assert {r.decision for r in guard.ledger()} == {"failed"}


def test_yield_mode_hands_each_call_over_once_with_an_idempotency_key() -> None:
    guard = make(None)
    turn = guard.turn("t", "u", "acme")
    calls = list(turn.stream(payloads()))
    assert [c.ran for c in calls] == [False]
    assert calls[0].idempotency_key == "acme/t/r1/0/call_1" and calls[0].actor == "u"
    assert list(turn.stream(payloads())) == []


def test_schema_business_rules_and_permission_refuse_before_the_executor() -> None:
    tools = Tools()
    guard = make(tools, validator=lambda call: "no Paris" if call.arguments["city"] == "Paris" else None)
    turn = guard.turn("t", "u", "acme")
    assert list(turn.stream(payloads())) == []
    assert list(turn.stream(payloads(response="r2", city="Rome", call="call_2")))
    guard2 = make(Tools(), spec=ToolSpec(schema=SCHEMA, actors=("alice",)))
    assert list(guard2.turn("t", "bob", "acme").stream(payloads())) == []
    assert list(guard2.turn("t2", "alice", "acme").stream(payloads(response="r2", call="c2")))
    assert tools.runs == Counter({("call_2", "Rome"): 1})
    assert [r.validation for r in guard.ledger()] == ["business: rejected", "ok"]


def test_arguments_that_break_the_schema_never_run() -> None:
    tools = Tools()
    guard = make(tools)
    evs = [
        CallOpened("t", "r1", "0", "call_1", "get_weather"),
        Fragment("t", "r1", "0", "call_1", 0, '{"city": 7}'),
        CallTerminal("t", "r1", "0", "call_1", "", "completed"),
        ResponseTerminal("t", "r1"),
    ]
    assert list(guard.turn("t", "u", "acme").stream(render_payloads("openai-chat", evs))) == []
    assert tools.runs == Counter() and guard.ledger()[0].decision == "failed"


def test_confirmation_asks_then_runs_once_or_never() -> None:
    tools = Tools()
    guard = make(tools, spec=ToolSpec(schema=SCHEMA, confirm=True))
    turn = guard.turn("t", "u", "acme")
    assert list(turn.stream(payloads())) == []
    assert turn.status == "awaiting_confirmation"
    (pending,) = guard.pending_confirmations()
    assert pending.arguments == {"city": "Paris"} and not pending.ran
    ran = guard.confirm(pending)
    assert ran is not None and ran.ran and ran.result == "sunny"
    assert guard.confirm(pending) is None  # a second yes runs nothing
    assert list(turn.stream(payloads(response="r2", call="call_2"))) == []
    (second,) = guard.pending_confirmations()
    guard.deny(second)
    assert guard.confirm(second.key) is None
    assert tools.runs == Counter({("call_1", "Paris"): 1})
    assert guard.pending_confirmations() == []


def test_cancel_and_the_turn_block_left_with_an_exception_stop_calls_in_flight() -> None:
    tools = Tools()
    guard = make(tools)
    turn = guard.turn("t", "u", "acme")
    reader = turn.open_stream()
    for payload in payloads()[:3]:
        assert reader.feed(payload) == []
    turn.cancel()
    assert reader.end() == []
    with pytest.raises(RuntimeError), guard.turn("t2", "u", "acme") as t2:
        reader = t2.open_stream()
        reader.feed(payloads(response="r2")[0])
        raise RuntimeError("the agent loop failed")
    assert reader.end() == []
    assert tools.runs == Counter()
    assert guard.status("t") == "retry" and guard.status("t2") == "retry"
    with pytest.raises(UnknownTurn):
        guard.cancel("t9")
    with pytest.raises(UnknownTurn):
        guard.status("t9")


def test_a_new_turn_supersedes_the_previous_one() -> None:
    tools = Tools()
    guard = make(tools)
    old = guard.turn("t1", "u", "acme").open_stream()
    for payload in payloads()[:3]:
        old.feed(payload)
    guard.turn("t2", "u", "acme")
    assert old.end() == []
    assert tools.runs == Counter()


def test_operator_controls_are_durable_and_audited() -> None:
    tools = Tools()
    guard = make(tools)
    turn = guard.turn("t", "u", "acme")
    guard.quarantine("r1", reason="injection")
    assert list(turn.stream(payloads())) == []
    guard.disable_tool("get_weather", reason="incident")
    assert list(turn.stream(payloads(response="r2", call="c2"))) == []
    t3 = guard.turn("t3", "u", "beta")
    reader = t3.open_stream()
    reader.feed(payloads(response="r3", call="c3")[0])
    guard.stop_tenant("beta", reason="abuse")
    assert reader.end() == []
    assert tools.runs == Counter()
    assert [(a, r) for a, r, _ in guard.audit()] == [
        ("quarantine_response", "injection"),
        ("disable_tool", "incident"),
        ("stop_tenant", "abuse"),
    ]


def test_catalog_changes_fail_calls_in_flight() -> None:
    tools = Tools()
    guard = make(tools)
    reader = guard.turn("t", "u", "acme").open_stream()
    for payload in payloads()[:3]:
        reader.feed(payload)
    guard.set_tool("get_weather", {"type": "object", "required": ["town"]})
    assert reader.end() == []
    guard.remove_tool("get_weather")
    assert "get_weather" not in guard.tools and tools.runs == Counter()
    live = {"get_weather": ToolSpec(schema=SCHEMA)}
    with pytest.raises(ConfigError, match="application's own mapping"):
        Guard(_ReadOnly(live), store="memory:").remove_tool("get_weather")


class _ReadOnly(Mapping[str, ToolSpec]):
    """A read-only live catalog (a Mapping that is not a dict)."""

    def __init__(self, data: dict[str, ToolSpec]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> ToolSpec:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


# -- stores, restarts, crashes -------------------------------------------------------------


def test_a_durable_store_is_created_only_when_asked_and_remembers_across_restarts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    with pytest.raises(GuardStoreError) as lost:
        make(Tools(), store=url)
    assert lost.value.fault is StoreFault.MISSING and "create=True" in str(lost.value)
    tools = Tools()
    with make(tools, store=url, create=True) as guard:
        assert len(list(guard.turn("t", "u", "acme").stream(payloads()))) == 1
        reader = guard.turn("t2", "u", "acme").open_stream()
        for payload in payloads(response="r2", call="c2")[:3]:
            reader.feed(payload)  # in flight when the process stops
    with make(tools, store=url) as guard:  # the restarted process
        turn = guard.resume_turn("t")
        assert list(turn.stream(payloads())) == []  # the provider replays the stream
        assert guard.status("t2") == "retry"
        assert [r.decision for r in guard.ledger()] == ["dispatched", "failed"]
        with pytest.raises(UnknownTurn):
            guard.resume_turn("nope")
    assert tools.runs == Counter({("call_1", "Paris"): 1})
    with pytest.raises(ClosedGuard):
        guard.turn("t3", "u", "acme")


def test_a_crash_inside_the_executor_leaves_an_unknown_outcome_for_operators(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"

    class Crash(BaseException):
        pass

    def dies(call: ToolCall) -> None:
        raise Crash  # the process dies between the claim and the outcome

    guard = make(dies, store=url, create=True)
    with pytest.raises(Crash):
        list(guard.turn("t", "u", "acme").stream(payloads()))
    guard.close()
    tools = Tools()
    with caplog.at_level(logging.WARNING, logger="callsafe.guard"), make(tools, store=url) as guard:
        assert [(str(k), tool) for k, tool in guard.unknown_outcomes()] == [("acme/t/r1/0/call_1", "get_weather")]
        assert list(guard.resume_turn("t").stream(payloads())) == []
    assert tools.runs == Counter()
    assert any(getattr(r, "callsafe_event", "") == "unknown_outcome" for r in caplog.records)


def test_an_executor_that_raises_is_recorded_and_never_retried() -> None:
    def boom(call: ToolCall) -> None:
        raise ValueError("tool failed")

    guard = make(boom)
    turn = guard.turn("t", "u", "acme")
    (call,) = turn.stream(payloads())
    assert call.ran and isinstance(call.error, ValueError)
    assert list(turn.stream(payloads())) == []
    assert guard.unknown_outcomes() == []


# -- production concerns ------------------------------------------------------------------


def test_log_lines_are_structured_and_carry_no_argument_value(caplog: pytest.LogCaptureFixture) -> None:
    secret = "Zanzibar-4242"
    guard = make(Tools(), validator=lambda call: None)
    with caplog.at_level(logging.DEBUG, logger="callsafe.guard"):
        turn = guard.turn("t", "u", "acme")
        list(turn.stream(payloads(city=secret)))
        list(turn.stream(payloads(response="r2", call="c2", city=secret, reason="length")))
        evs = [
            CallOpened("t", "r3", "0", "c3", "get_weather"),
            Fragment("t", "r3", "0", "c3", 0, f'{{"city": 5, "x": "{secret}"}}'),
            CallTerminal("t", "r3", "0", "c3", "", "completed"),
            ResponseTerminal("t", "r3"),
        ]
        list(turn.stream(render_payloads("openai-chat", evs)))
        with pytest.raises(StreamError):
            list(
                turn.stream(
                    [{"id": "r4", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": "zz", "x": secret}]}}]}]
                )
            )
    events = {getattr(r, "callsafe_event", None) for r in caplog.records}
    assert {"decision", "status", "execute", "stream_error"} <= events
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in json.dumps({k: str(v) for k, v in vars(record).items()})


def test_spans_carry_the_turns_traceparent(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = pytest.importorskip(
        "opentelemetry.sdk.trace", reason=skips.missing("opentelemetry-sdk", "pip install -e '.[dev]'")
    )
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    # importing callsafe.cli turns the SDK off for the frameworks (callsafe.offline); a
    # provider made while OTEL_SDK_DISABLED is set records nothing
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    seen: list[str | None] = []
    guard = make(lambda call: seen.append(call.traceparent), tracer=tracer)
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    list(guard.turn("t", "u", "acme", traceparent=parent).stream(payloads()))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"callsafe.guard.stream", "callsafe.guard.execute"}
    for span in spans.values():
        assert f"{span.context.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
        assert span.parent is not None and f"{span.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert spans["callsafe.guard.execute"].attributes["callsafe.outcome"] == "returned"
    assert seen == [parent] and guard.ledger()[0].traceparent == parent
    # a turn without one takes the current span's
    with tracer.start_as_current_span("request") as request:
        turn = guard.turn("t2", "u", "acme")
    assert turn.traceparent is not None and f"{request.get_span_context().trace_id:032x}" in turn.traceparent


def test_without_an_sdk_the_api_no_op_tracer_changes_nothing() -> None:
    pytest.importorskip(
        "opentelemetry.trace", reason=skips.missing("opentelemetry-api", "pip install -e '.[guard-otel]'")
    )
    tools = Tools()
    guard = make(tools)  # the global tracer provider: the api's no-op unless configured
    assert len(list(guard.turn("t", "u", "acme").stream(payloads()))) == 1
    assert guard.turn("t2", "u", "acme").traceparent is None


def test_threads_sharing_one_guard_run_each_call_exactly_once(tmp_path: Path) -> None:
    """Eight threads, each its own turn, each delivering the same stream twice (a
    replay), interleaved chunk by chunk with the others, over one SQLite-backed guard."""
    tools = Tools()
    lock = threading.Lock()
    counted = Counter[str]()

    def executor(call: ToolCall) -> None:
        with lock:
            counted[call.idempotency_key] += 1

    guard = make(executor, store=f"sqlite:///{tmp_path / 'g.db'}", create=True)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            turn = guard.turn(f"t{n}", "u", f"tenant{n % 3}", conversation=f"c{n}")
            start.wait()
            for _ in range(2):
                reader = turn.open_stream()
                for item in payloads(response=f"r{n}", call=f"call_{n}"):
                    reader.feed(item)
                    threading.Event().wait(0.001)  # let the other threads in between chunks
                reader.end()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert counted == Counter({f"tenant{n % 3}/t{n}/r{n}/0/call_{n}": 1 for n in range(8)})
    assert tools.runs == Counter()


def test_async_streams_and_a_cancelled_task() -> None:
    tools = Tools()
    guard = make(tools)

    async def chunks(items: Sequence[dict[str, Any]], stall: bool = False) -> AsyncIterator[dict[str, Any]]:
        for item in items:
            await asyncio.sleep(0)
            yield item
        if stall:
            await asyncio.sleep(3600)

    async def main() -> list[ToolCall]:
        async with guard.turn("t", "u", "acme") as turn:
            ran = [c async for c in turn.astream(chunks(payloads()))]

        async def slow() -> None:
            async with guard.turn("t2", "u", "acme") as t2:
                async for _ in t2.astream(chunks(payloads(response="r2", call="c2")[:3], stall=True)):
                    pass

        task = asyncio.create_task(slow())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ran

    ran = asyncio.run(main())
    assert [c.id for c in ran] == ["call_1"]
    assert tools.runs == Counter({("call_1", "Paris"): 1})
    assert guard.status("t2") == "retry"


def test_text_is_never_arguments() -> None:
    tools = Tools()
    guard = make(tools)
    evs = [TextFragment("t", "r1", "text", '{"city":"Lyon"}'), *events()]
    ran = list(guard.turn("t", "u", "acme").stream(render_payloads("openai-chat", evs)))
    assert [c.arguments for c in ran] == [{"city": "Paris"}]
