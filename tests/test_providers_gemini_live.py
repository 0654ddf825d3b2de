"""The Gemini Live provider: what its server messages mean (whole calls, a repeated call,
``toolCallCancellation``, barge-in, an empty id), that the harness regroups a trace's calls
as the Live wire sends them, and that what callsafe renders is what the ``google-genai``
SDK's own types read."""

from __future__ import annotations

from typing import Any

import pytest

from callsafe.certify.wire import align_responses, prepare, whole_calls
from callsafe.guard import Guard, ToolCall
from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    Executed,
    Fragment,
    QuarantineResponse,
    ResponseTerminal,
    TextFragment,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.providers.base import MalformedEvent, NotRepresentable, terminal_event_id
from callsafe.providers.gemini_live import CANCELLED_SUFFIX
from callsafe.providers.streams import parse_payloads

P = "gemini-live"
T, R = "t1", "r1"


def tool_call(*calls: tuple[str, str, dict[str, Any] | None]) -> dict[str, Any]:
    out = []
    for call_id, name, args in calls:
        body: dict[str, Any] = {"id": call_id, "name": name}
        if args is not None:
            body["args"] = args
        out.append(body)
    return {"toolCall": {"functionCalls": out}}


TURN_COMPLETE = {"serverContent": {"turnComplete": True}}
INTERRUPTED = {"serverContent": {"interrupted": True}}


def parse(*payloads: dict[str, Any], clean: bool = True) -> Any:
    return parse_payloads(P, payloads, turn=T, response=R, clean=clean)


def key(item: str, call: str, response: str = R) -> dict[str, str]:
    return {"turn": T, "response": response, "item": item, "call": call}


def test_a_tool_call_is_a_whole_call_and_its_terminal() -> None:
    text = {"serverContent": {"modelTurn": {"parts": [{"text": "ok"}, {"text": "hm", "thought": True}]}}}
    parsed = parse(
        {"setupComplete": {}}, text, tool_call(("c1", "refund", {"amount": 10}), ("c2", "note", None)), TURN_COMPLETE
    )
    assert parsed.error is None
    assert parsed.events == [
        TextFragment(T, R, "text", "ok"),
        CallOpened(**key("0", "c1"), tool="refund"),
        Fragment(**key("0", "c1"), position=0, text='{"amount":10}'),
        CallTerminal(**key("0", "c1"), event_id=terminal_event_id(R, "0", "c1")),
        CallOpened(**key("1", "c2"), tool="note"),
        Fragment(**key("1", "c2"), position=0, text="{}"),
        CallTerminal(**key("1", "c2"), event_id=terminal_event_id(R, "1", "c2")),
        ResponseTerminal(T, R, "completed"),
    ]


def test_turns_one_after_another_are_named_from_the_fallback() -> None:
    parsed = parse(tool_call(("c1", "a", {})), TURN_COMPLETE, tool_call(("c2", "a", {})), TURN_COMPLETE)
    ends = [e for e in parsed.events if isinstance(e, ResponseTerminal)]
    assert [e.response for e in ends] == [R, f"{R}#1"]
    assert [e.item for e in parsed.events if isinstance(e, CallOpened)] == ["0", "0"]


def test_a_call_repeated_in_a_second_message_runs_once() -> None:
    """mastra #22969: the same call in two messages is the same call; the model runs it once."""
    b = TraceBuilder(tools={"refund": {"type": "object"}}).turn(T, response=R)
    events = parse(tool_call(("c1", "refund", {"amount": 10})), tool_call(("c1", "refund", {"amount": 10})))
    trace = Trace(events=(*b.build().events, *events.events), tools=b.build().tools)
    assert [v.execute for v in judge(trace).verdicts.values()] == ["must"]
    changed = parse(tool_call(("c1", "refund", {"amount": 10})), tool_call(("c1", "refund", {"amount": 99})))
    assert len([e for e in changed.events if isinstance(e, CallTerminal)]) == 1  # the conflict ends nothing


def test_tool_call_cancellation_stops_the_named_call_with_an_id_of_its_own() -> None:
    parser = registry.get(P).new_parser(T, R)
    parser.feed(tool_call(("c1", "refund", {"amount": 10})))
    stop = parser.feed({"toolCallCancellation": {"ids": ["c1", "never-issued"]}})
    assert stop == [
        CallTerminal(**key("0", "c1"), event_id=terminal_event_id(R, "0", "c1") + CANCELLED_SUFFIX, reason="error")
    ]
    assert parser.unknown_cancellations == 1
    assert "toolCallCancellation" in parser.stop_causes[(R, "0", "c1")]
    assert parser.feed(INTERRUPTED) == [ResponseTerminal(T, R, "error")]
    assert parser.interruptions == 1
    assert parser.feed(TURN_COMPLETE) == []  # a turnComplete after the interruption ends nothing


@pytest.mark.parametrize("confirm", [True, False])
def test_a_cancellation_prevents_dispatch_of_a_call_awaiting_confirmation(confirm: bool) -> None:
    """The spec's "every cancellation prevents dispatch": a call put up for confirmation and
    cancelled by the server never runs, even when the user then approves it; a call that
    already ran is not undone."""
    tools = {"refund": ToolSpec(schema={"type": "object"}, confirm=confirm)}
    ran: list[ToolCall] = []
    guard = Guard(tools, executor=ran.append, store="memory:")
    turn = guard.turn(T, "u1", "acme")
    payloads = [tool_call(("c1", "refund", {"amount": 10})), {"toolCallCancellation": {"ids": ["c1"]}}, INTERRUPTED]
    list(turn.stream(payloads, protocol=P))
    for call in guard.pending_confirmations():
        guard.confirm(call)
    guard.close()
    assert [c.arguments for c in ran] == ([] if confirm else [{"amount": 10}])


def test_an_empty_or_missing_id_is_malformed() -> None:
    for bad in (tool_call(("", "refund", {})), {"toolCall": {"functionCalls": [{"name": "refund"}]}}):
        parsed = parse(bad)
        assert isinstance(parsed.error, MalformedEvent)
        assert parsed.events[-1].kind == "disconnect"  # the turn it began is dropped


def test_other_messages_carry_nothing_and_unknown_ones_are_refused() -> None:
    quiet = [{"usageMetadata": {"totalTokenCount": 3}}, {"goAway": {"timeLeft": "1s"}}, {}]
    assert parse(*quiet).events == []
    assert isinstance(parse({"candidates": []}).error, MalformedEvent)


@pytest.mark.parametrize(
    ("why", "reason"),
    [
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("PROHIBITED_INPUT_CONTENT", "content_filter"),
        ("NEED_MORE_INPUT", "completed"),
    ],
)
def test_turn_complete_reasons(why: str, reason: str) -> None:
    text = {"serverContent": {"modelTurn": {"parts": [{"text": "x"}]}}}
    parsed = parse(text, {"serverContent": {"turnComplete": True, "turnCompleteReason": why}})
    assert parsed.events[-1] == ResponseTerminal(T, R, reason)  # type: ignore[arg-type]


def test_a_call_that_never_completes_is_not_representable() -> None:
    opened = [CallOpened(**key("0", "c1"), tool="t"), Fragment(**key("0", "c1"), position=0, text="{}")]
    renderer = registry.get(P).new_renderer()
    with pytest.raises(NotRepresentable):
        renderer.render(
            [*opened, CallTerminal(**key("0", "c1"), event_id="e", reason="error"), ResponseTerminal(T, R, "error")]
        )
    with pytest.raises(NotRepresentable):
        registry.get(P).new_renderer().render([*opened, ResponseTerminal(T, R, "completed")])
    barge_in = (
        registry.get(P).new_renderer().render([TextFragment(T, R, "text", "hi"), ResponseTerminal(T, R, "error")])
    )
    assert barge_in[-1] == INTERRUPTED


def test_the_sdk_reads_what_callsafe_renders() -> None:
    types = pytest.importorskip("google.genai.types")
    events = [
        CallOpened(**key("0", "c1"), tool="refund"),
        Fragment(**key("0", "c1"), position=0, text='{"amount":'),
        Fragment(**key("0", "c1"), position=1, text="10}"),
        CallTerminal(**key("0", "c1"), event_id="e"),
        ResponseTerminal(T, R, "completed"),
    ]
    payloads = registry.get(P).new_renderer().render(events)
    messages = [types.LiveServerMessage._from_response(response=p, kwargs={}) for p in payloads]
    call = messages[0].tool_call.function_calls[0]
    assert (call.id, call.name, call.args) == ("c1", "refund", {"amount": 10})
    assert messages[-1].server_content.turn_complete is True
    # the guard reads the SDK's messages (snake_case fields, camelCase aliases) as the wire
    ran: list[ToolCall] = []
    guard = Guard({"refund": {"type": "object"}}, executor=ran.append, store="memory:")
    list(guard.turn(T, "u1", "acme").stream(messages, protocol=P))
    guard.close()
    assert [c.arguments for c in ran] == [{"amount": 10}]


def _trace(*middle: Any) -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn(T, actor="u1", tenant="acme", response=R)
    b = b.open("c1", "pay", item="i0")
    for step in middle:
        b = step(b)
    return b.fragment("c1", '{"a":').fragment("c1", " 1}").terminal("c1").response_end().build()


def test_the_harness_regroups_each_call_whole_at_its_terminal() -> None:
    trace = _trace(lambda b: b.cancel())
    regrouped = whole_calls(trace, P)
    kinds = [e.kind for e in regrouped.events]
    assert kinds == ["turn_started", "cancel_turn", "call_opened", "fragment", "call_terminal", "response_terminal"]
    fragment = next(e for e in regrouped.events if isinstance(e, Fragment))
    assert (fragment.item, fragment.position, fragment.text) == ("0", 0, '{"a":1}')
    relabelled, plan = prepare(trace, P)
    assert isinstance(relabelled.events[1], CancelTurn) and plan.streams == 1
    with pytest.raises(NotRepresentable):  # a quarantine names a response the Live wire never names
        prepare(_trace(lambda b: b.quarantine(R)), P)
    stopped = TraceBuilder().turn(T, response=R).open("c1", "pay").fragment("c1", "{}")
    with pytest.raises(NotRepresentable):
        whole_calls(stopped.terminal("c1", reason="length").response_end(reason="length").build(), P)


def test_a_run_s_response_names_are_matched_to_the_trace_s() -> None:
    trace = Trace(
        events=(
            TurnStarted(T, "u1", "acme"),
            CallOpened(**key("0", "c1"), tool="pay"),
            Fragment(**key("0", "c1"), position=0, text="{}"),
            CallTerminal(**key("0", "c1"), event_id="e"),
            ResponseTerminal(T, R),
            QuarantineResponse("other"),
        )
    )
    ran = Executed(3, CallKey("acme", T, "guard-made", "0", "c1"), "u1", "pay", {})
    stray = Executed(3, CallKey("acme", T, "guard-made-2", "9", "c9"), "u1", "pay", {})
    aligned = align_responses(trace, P, [ran, stray])
    assert [o.key.response for o in aligned] == [R, "guard-made-2"]  # type: ignore[attr-defined]
    assert align_responses(trace, "openai-chat", [ran]) == [ran]  # a wire that names its responses
    assert Confirm(**key("0", "c1")).key("acme").response == R
