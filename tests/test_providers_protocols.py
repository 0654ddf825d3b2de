"""The decisions each protocol module documents, one test each, judged by the oracle where
the decision is about what executes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callsafe.model.oracle import Verdict, judge
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Disconnect,
    Event,
    Fragment,
    ResponseTerminal,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.providers.base import NotRepresentable, ProtocolViolation
from callsafe.providers.gemini import ArgsWriter, GeminiRenderer, format_json_path, parse_json_path
from callsafe.providers.sse import encode_payloads
from callsafe.providers.streams import ParsedStream, parse_payloads, parse_sse, render_sse

T = "t1"


def parse(protocol: str, payloads: list[dict[str, Any]], clean: bool = True) -> ParsedStream:
    return parse_payloads(protocol, payloads, turn=T, response="r", clean=clean)


def verdicts(events: list[Event]) -> dict[str, Verdict]:
    tools = {e.tool: ToolSpec() for e in events if isinstance(e, CallOpened)}
    trace = Trace(events=(TurnStarted(turn=T, actor="u", tenant="acme"), *events), tools=tools)
    return {v.key.call: v for v in judge(trace).verdicts.values()}


def executed(events: list[Event]) -> dict[str, Any]:
    return {call: v.arguments for call, v in verdicts(events).items() if v.execute == "must"}


def of(kind: type[Event], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# --------------------------------------------------------------------------------------
# Chat Completions
# --------------------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def tool(index: int, call_id: str | None = None, name: str | None = None, args: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id is not None:
        entry["id"] = call_id
    if name is not None:
        entry["function"]["name"] = name
    return {"tool_calls": [entry]}


def test_chat_finish_reason_on_every_chunk_ends_calls_once_at_the_end() -> None:
    """A finish reason on every chunk (jcode #1326) ends nothing early and nothing twice; the
    data that came after the first one is late data (issue 18), so the call fails instead of
    running ``amount: 100``, a reading the end of the choice does not give."""
    events = parse(
        "openai-chat",
        [
            chunk(tool(0, "a", "pay", '{"amount":1'), "tool_calls"),  # a prefix that would almost parse
            chunk(tool(0, args="00}"), "tool_calls"),
            chunk({}, "tool_calls"),
        ],
    ).events
    terminals = of(CallTerminal, events)
    assert len(terminals) == 1 and terminals[0].reason == "error"
    assert events.index(terminals[0]) > max(events.index(f) for f in of(Fragment, events))
    assert executed(events) == {}


def test_chat_a_fragment_after_the_finish_reason_is_late_data_and_fails_the_call() -> None:
    """Issue 18, defect 1: ``'{"to":"bob","amount":1'``, ``finish_reason: tool_calls``, then
    ``"00}"`` ran ``amount: 100``. Two readings of the call exist (cut at the end, or with
    the late data), so the call must not run; a call that got nothing late still runs."""
    late = parse(
        "openai-chat",
        [
            chunk(tool(0, "a", "pay", '{"to":"bob","amount":1')),
            chunk(tool(1, "b", "pay", '{"to":"eve"}')),
            chunk({}, "tool_calls"),
            chunk(tool(0, args="00}")),
        ],
    ).events
    assert {t.call: t.reason for t in of(CallTerminal, late)} == {"a": "error", "b": "completed"}
    assert executed(late) == {"b": {"to": "eve"}}
    verdict = verdicts(late)["a"]
    assert verdict.execute == "must_not" and verdict.state.value == "failed"
    opened_late = parse("openai-chat", [chunk({}, "tool_calls"), chunk(tool(0, "c", "pay", "{}"))]).events
    assert executed(opened_late) == {} and [t.reason for t in of(CallTerminal, opened_late)] == ["error"]
    repeated = parse(  # the finish reason, id and name again, with no data: nothing is late
        "openai-chat",
        [chunk(tool(0, "a", "pay", "{}"), "tool_calls"), chunk(tool(0, "a", "pay"), "tool_calls")],
    ).events
    assert executed(repeated) == {"a": {}}


def test_chat_a_length_stop_is_final() -> None:
    """Issue 18, defect 2: after ``finish_reason: length`` a later chunk saying
    ``tool_calls`` won (the last finish reason overrode the stop). A ``length`` stop is
    final, in either order: ``tool_calls`` then ``length`` is also a stop."""
    for first, second in (("length", "tool_calls"), ("tool_calls", "length"), ("length", "stop")):
        events = parse("openai-chat", [chunk(tool(0, "a", "pay", "{}"), first), chunk({}, second)]).events
        assert [t.reason for t in of(CallTerminal, events)] == ["length"], (first, second)
        assert of(ResponseTerminal, events)[0].reason == "length"
        assert executed(events) == {}, (first, second)
    content_filter = parse("openai-chat", [chunk(tool(0, "a", "pay", "{}"), "content_filter"), chunk({}, "length")])
    assert [t.reason for t in of(CallTerminal, content_filter.events)] == ["content_filter"]


def test_chat_repeated_id_and_name_are_not_concatenated() -> None:
    events = parse(
        "openai-chat",
        [chunk(tool(0, "a", "lookup", '{"q":')), chunk(tool(0, "a", "lookup", '"x"}')), chunk({}, "tool_calls")],
    ).events
    assert [(o.call, o.tool) for o in of(CallOpened, events)] == [("a", "lookup")]
    assert executed(events) == {"a": {"q": "x"}}


def test_chat_a_second_id_at_an_index_is_a_new_call() -> None:
    events = parse(
        "openai-chat",
        [chunk(tool(0, "a", "pay", '{"to":"x"}')), chunk(tool(0, "b", "pay", '{"to":"y"}')), chunk({}, "tool_calls")],
    ).events
    assert executed(events) == {"a": {"to": "x"}, "b": {"to": "y"}}  # never '{"to":"x"}{"to":"y"}'


def test_chat_renders_a_shared_index_only_in_wire_order() -> None:
    def key(call: str) -> dict[str, str]:
        return {"turn": T, "response": "c1", "item": "0", "call": call}

    a, b = key("a"), key("b")
    ends: list[Event] = [
        CallTerminal(**a, event_id="r/0/a/end"),
        CallTerminal(**b, event_id="r/0/b/end"),
        ResponseTerminal(turn=T, response="c1"),
    ]
    ordered: list[Event] = [
        CallOpened(**a, tool="pay"),
        Fragment(**a, position=0, text="{}"),
        CallOpened(**b, tool="pay"),
        Fragment(**b, position=0, text="{}"),
    ]
    payloads = registry.get("openai-chat").new_renderer().render([*ordered, *ends])
    assert executed(parse("openai-chat", payloads).events) == {"a": {}, "b": {}}
    late = [ordered[0], ordered[2], ordered[1], ordered[3]]  # a's chunk after b took index 0
    with pytest.raises(NotRepresentable):
        registry.get("openai-chat").new_renderer().render([*late, *ends])


def test_chat_a_second_name_for_one_call_fails_it() -> None:
    events = parse(
        "openai-chat", [chunk(tool(0, "a", "lookup", "{}")), chunk(tool(0, name="pay")), chunk({}, "stop")]
    ).events
    assert verdicts(events)["a"].execute == "must_not"


def test_chat_arguments_before_a_name_are_a_violation() -> None:
    parsed = parse("openai-chat", [chunk(tool(0, "a", None, "{}"))])
    assert isinstance(parsed.error, ProtocolViolation)
    assert of(Disconnect, parsed.events)


def test_chat_end_without_finish_reason_or_with_a_dropped_connection() -> None:
    clean = parse("openai-chat", [chunk(tool(0, "a", "pay", "{}"))]).events
    assert [t.reason for t in of(CallTerminal, clean)] == ["error"]
    dropped = parse("openai-chat", [chunk(tool(0, "a", "pay", "{}"), "tool_calls")], clean=False).events
    assert not of(CallTerminal, dropped) and of(Disconnect, dropped)
    assert executed(clean) == executed(dropped) == {}


def test_chat_error_payload_and_other_choices() -> None:
    events = parse(
        "openai-chat",
        [chunk(tool(0, "b", "pay", "{}"), index=1), chunk(tool(0, "a", "pay", "{}")), {"error": {"message": "x"}}],
    ).events
    assert [(t.call, t.reason) for t in of(CallTerminal, events)] == [("a", "error")]
    assert of(ResponseTerminal, events)[0].reason == "error"


def test_chat_sse_done_and_data_after_it() -> None:
    data = encode_payloads([chunk(tool(0, "a", "pay", "{}"), "tool_calls")], done=True)
    assert executed(parse_sse("openai-chat", [data], turn=T, response="r").events) == {"a": {}}
    late = parse_sse("openai-chat", [data + b'data: {"id":"c1","choices":[]}\n\n'], turn=T, response="r")
    assert isinstance(late.error, ProtocolViolation)


# --------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------


def added(item: str, call: str, seq: int | None, index: int = 0, name: str = "pay") -> dict[str, Any]:
    body = {"id": item, "type": "function_call", "call_id": call, "name": name, "arguments": ""}
    event: dict[str, Any] = {"type": "response.output_item.added", "output_index": index, "item": body}
    return event if seq is None else {**event, "sequence_number": seq}


def delta(item: str, text: str, seq: int | None, index: int = 0) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "response.function_call_arguments.delta", "item_id": item, "output_index": index}
    event["delta"] = text
    return event if seq is None else {**event, "sequence_number": seq}


def done(item: str, call: str, seq: int | None, index: int = 0, arguments: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": item, "type": "function_call", "call_id": call, "name": "pay", "status": "completed"}
    if arguments is not None:
        body["arguments"] = arguments
    event: dict[str, Any] = {"type": "response.output_item.done", "output_index": index, "item": body}
    return event if seq is None else {**event, "sequence_number": seq}


CREATED = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp"}}
COMPLETED = {"type": "response.completed", "response": {"id": "resp"}}


def test_responses_positions_from_sequence_numbers_out_of_order() -> None:
    events = parse(
        "openai-responses",
        [CREATED, added("fc", "c", 1), delta("fc", "1}", 3), delta("fc", '{"a":', 2), done("fc", "c", 4)],
    ).events
    assert [(f.position, f.text) for f in of(Fragment, events)] == [(1, "1}"), (0, '{"a":')]
    v = verdicts(events)["c"]
    assert (v.execute, v.arguments) == ("may", {"a": 1})


def test_responses_interleaved_calls_in_order_have_no_gaps() -> None:
    events = parse(
        "openai-responses",
        [
            CREATED,
            added("f1", "c1", 1, 0),
            added("f2", "c2", 2, 1),
            delta("f1", '{"a":', 3, 0),
            delta("f2", '{"b":', 4, 1),
            {
                "type": "response.output_text.delta",
                "item_id": "m",
                "output_index": 2,
                "delta": "hi",
                "sequence_number": 5,
            },
            delta("f1", "1}", 6, 0),
            delta("f2", "2}", 7, 1),
            done("f1", "c1", 8, 0),
            done("f2", "c2", 9, 1),
            COMPLETED,
        ],
    ).events
    assert executed(events) == {"c1": {"a": 1}, "c2": {"b": 2}}


def test_responses_replayed_and_conflicting_deltas() -> None:
    base = [CREATED, added("fc", "c", 1), delta("fc", '{"a":', 2), delta("fc", "1}", 3)]
    # a replayed delta keeps its position: de-duplicated it runs with the streamed arguments,
    # and failing the call on the repeat is the other reading the spec allows ("reject or
    # reassemble by its documented position"); a conflicting one runs under no reading
    replay = verdicts(parse("openai-responses", [*base, delta("fc", '{"a":', 2), done("fc", "c", 4)]).events)
    assert replay["c"].execute == "may" and replay["c"].arguments == {"a": 1}
    conflict = parse("openai-responses", [*base, delta("fc", '{"b":', 2), done("fc", "c", 4)]).events
    assert executed(conflict) == {} and verdicts(conflict)["c"].execute == "must_not"


def test_responses_done_arguments_that_contradict_the_deltas_fail_the_call() -> None:
    events = parse(
        "openai-responses",
        [CREATED, added("fc", "c", 1), delta("fc", '{"a":1}', 2), done("fc", "c", 3, arguments='{"a":2}')],
    ).events
    assert [t.reason for t in of(CallTerminal, events)] == ["error"]


def test_responses_arguments_only_in_the_done_event() -> None:
    events = parse(
        "openai-responses", [CREATED, added("fc", "c", 1), done("fc", "c", 2, arguments='{"a":1}'), COMPLETED]
    ).events
    assert executed(events) == {"c": {"a": 1}}


def test_responses_incomplete_item_waits_for_the_response_end() -> None:
    item_done = done("fc", "c", 3, arguments='{"a":1}')
    item_done["item"]["status"] = "incomplete"
    incomplete = {
        "type": "response.incomplete",
        "response": {"id": "resp", "incomplete_details": {"reason": "max_output_tokens"}},
    }
    events = parse(
        "openai-responses", [CREATED, added("fc", "c", 1), delta("fc", '{"a":1}', 2), item_done, incomplete]
    ).events
    assert [t.reason for t in of(CallTerminal, events)] == ["length"]


@pytest.mark.parametrize(
    "payloads",
    [
        [CREATED, added("f1", "c1", 1, 0), added("f2", "c2", 2, 0)],  # one output_index, two items
        [CREATED, added("f1", "c1", 1, 0), added("f1", "c9", 2, 0)],  # one item, two call ids
        [CREATED, delta("nope", "{}", 1)],  # a delta for an item never added
        [CREATED, added("fc", "c", 1), delta("fc", "{}", None)],  # numbered and unnumbered events
        [CREATED, {"type": "response.created", "response": {"id": "other"}}],  # nested responses
    ],
)
def test_responses_violations(payloads: list[dict[str, Any]]) -> None:
    assert isinstance(parse("openai-responses", payloads).error, ProtocolViolation)


def test_responses_sequential_responses_in_one_stream() -> None:
    second = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp2"}}
    events = parse(
        "openai-responses",
        [CREATED, added("f", "a", 1), delta("f", "{}", 2), done("f", "a", 3), COMPLETED,
         second, added("f", "b", 1), delta("f", "{}", 2), done("f", "b", 3),
         {"type": "response.completed", "response": {"id": "resp2"}}],
    ).events  # fmt: skip
    assert executed(events) == {"a": {}, "b": {}}


# --------------------------------------------------------------------------------------
# Anthropic
# --------------------------------------------------------------------------------------


def start(index: int, call: str, name: str = "pay", input_: Any = None, kind: str = "tool_use") -> dict[str, Any]:
    block = {"type": kind, "id": call, "name": name, "input": {} if input_ is None else input_}
    return {"type": "content_block_start", "index": index, "content_block": block}


def json_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


MSG = {"type": "message_start", "message": {"id": "m1", "content": []}}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_end(reason: str) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": reason}}, {"type": "message_stop"}]


def test_anthropic_max_tokens_fails_only_the_calls_not_stopped() -> None:
    events = parse(
        "anthropic-messages",
        [
            MSG,
            start(0, "a"),
            json_delta(0, "{}"),
            stop(0),
            start(1, "b"),
            json_delta(1, '{"x":'),
            *message_end("max_tokens"),
        ],
    ).events
    assert [(t.call, t.reason) for t in of(CallTerminal, events)] == [("a", "completed"), ("b", "length")]
    assert executed(events) == {"a": {}}


def test_anthropic_start_input_is_the_arguments_without_deltas() -> None:
    events = parse(
        "anthropic-messages", [MSG, start(0, "a", input_={"n": 1}), stop(0), *message_end("tool_use")]
    ).events
    assert executed(events) == {"a": {"n": 1}}
    both = parse("anthropic-messages", [MSG, start(0, "a", input_={"n": 1}), json_delta(0, '{"n":2}'), stop(0)])
    assert isinstance(both.error, ProtocolViolation)


def test_anthropic_server_tools_are_not_client_calls() -> None:
    events = parse(
        "anthropic-messages",
        [
            MSG,
            start(0, "srv", "web_search", kind="server_tool_use"),
            json_delta(0, '{"q":1}'),
            stop(0),
            *message_end("end_turn"),
        ],
    ).events
    assert not of(CallOpened, events) and not of(Fragment, events)


def test_anthropic_error_event_and_dropped_stream() -> None:
    error = parse(
        "anthropic-messages", [MSG, start(0, "a"), json_delta(0, "{}"), {"type": "error", "error": {}}]
    ).events
    assert [t.reason for t in of(CallTerminal, error)] == ["error"]
    dropped = parse("anthropic-messages", [MSG, start(0, "a"), json_delta(0, "{}")]).events
    assert of(Disconnect, dropped) and executed(dropped) == {}


# --------------------------------------------------------------------------------------
# Bedrock, Cohere, Interactions
# --------------------------------------------------------------------------------------


def test_bedrock_stop_reasons_and_exceptions() -> None:
    begin = [
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "a", "name": "pay"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"x":'}}}},
    ]
    length = parse("bedrock-converse", [*begin, {"messageStop": {"stopReason": "max_tokens"}}]).events
    assert [t.reason for t in of(CallTerminal, length)] == ["length"]
    failed = parse("bedrock-converse", [*begin, {"modelStreamErrorException": {"message": "x"}}]).events
    assert [t.reason for t in of(CallTerminal, failed)] == ["error"]
    twice = parse(
        "bedrock-converse", [{"messageStart": {"role": "assistant"}}, {"messageStart": {"role": "assistant"}}]
    )
    assert isinstance(twice.error, ProtocolViolation)


def test_cohere_max_tokens_and_no_content_filter() -> None:
    events = parse(
        "cohere-v2",
        [
            {"type": "message-start", "id": "m"},
            {
                "type": "tool-call-start",
                "index": 0,
                "delta": {"message": {"tool_calls": {"id": "a", "function": {"name": "pay"}}}},
            },
            {"type": "message-end", "delta": {"finish_reason": "MAX_TOKENS"}},
        ],
    ).events
    assert [t.reason for t in of(CallTerminal, events)] == ["length"]
    with pytest.raises(NotRepresentable):
        registry.get("cohere-v2").new_renderer().render(
            [ResponseTerminal(turn=T, response="m", reason="content_filter")]
        )


@pytest.mark.parametrize(("status", "reason"), [("failed", "error"), ("cancelled", "error"), ("incomplete", "length")])
def test_interactions_statuses(status: str, reason: str) -> None:
    events = parse(
        "gemini-interactions",
        [
            {"event_type": "interaction.created", "interaction": {"id": "i"}},
            {"event_type": "step.start", "index": 0, "step": {"type": "function_call", "id": "a", "name": "pay"}},
            {"event_type": "interaction.completed", "interaction": {"id": "i", "status": status}},
        ],
    ).events
    assert [t.reason for t in of(CallTerminal, events)] == [reason]


# --------------------------------------------------------------------------------------
# Gemini
# --------------------------------------------------------------------------------------


def write(*pieces: tuple[str, str, Any, bool]) -> str:
    writer = ArgsWriter()
    text = "".join(writer.piece(parse_json_path(p), kind, value, more) for p, kind, value, more in pieces)
    return text + writer.close()


def test_gemini_writer_builds_nested_json() -> None:
    text = write(
        ("$.r.items[0].n", "stringValue", "a", True),
        ("$.r.items[0].n", "stringValue", "b", False),
        ("$.r.items[0].q", "numberValue", 2, False),
        ("$.r.items[1].n", "nullValue", "NULL_VALUE", False),
        ("$.r.ok", "boolValue", True, False),
        ("$['odd key']", "stringValue", "é", False),
    )
    assert text == '{"r":{"items":[{"n":"ab","q":2},{"n":null}],"ok":true},"odd key":"é"}'


@pytest.mark.parametrize(
    "pieces",
    [
        [("$.a[1]", "numberValue", 1, False)],  # array elements out of order
        [("$.a[0]", "numberValue", 1, False), ("$.a.b", "numberValue", 1, False)],  # a key inside an array
        [("$.s", "stringValue", "x", True), ("$.t", "numberValue", 1, False)],  # a string never ended
        [("$", "numberValue", 1, False)],  # the whole arguments at once
    ],
)
def test_gemini_writer_violations(pieces: list[tuple[str, str, Any, bool]]) -> None:
    with pytest.raises(ProtocolViolation):
        write(*pieces)


def test_gemini_revisited_key_is_a_duplicate_the_model_rejects() -> None:
    text = write(
        ("$.a.x", "numberValue", 1, False), ("$.b", "numberValue", 2, False), ("$.a.y", "numberValue", 3, False)
    )
    assert text == '{"a":{"x":1},"b":2,"a":{"y":3}}'


@given(st.lists(st.one_of(st.integers(0, 50), st.text(max_size=6)), max_size=6))
def test_gemini_json_paths_round_trip(path: list[str | int]) -> None:
    assert parse_json_path(format_json_path(path)) == path


def gemini_chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"responseId": "g", "candidates": [candidate]}


def test_gemini_call_ids_and_early_stop() -> None:
    events = parse(
        "gemini",
        [
            gemini_chunk({"functionCall": {"name": "pay", "args": {"a": 1}, "id": "given"}}),
            gemini_chunk({"functionCall": {"name": "pay", "willContinue": True}}),
            gemini_chunk(finish="MAX_TOKENS"),
        ],
    ).events
    assert [(t.call, t.reason) for t in of(CallTerminal, events)] == [("given", "completed"), ("g#1", "length")]
    late = parse("gemini", [gemini_chunk(finish="STOP"), gemini_chunk({"text": "more"})])
    assert isinstance(late.error, ProtocolViolation)


def gemini_call(*fragments: str) -> list[Event]:
    key = {"turn": T, "response": "g", "item": "0", "call": "g#0"}
    frags = [Fragment(**key, position=i, text=t) for i, t in enumerate(fragments)]
    return [CallOpened(**key, tool="pay"), *frags, CallTerminal(**key, event_id="e")]


@pytest.mark.parametrize("text", ['{"a":1', '{"a":1}{"b":2}', '{"a":1,"a":2}', '{"a":[]}', '{"a":{}}', "[1]"])
def test_gemini_renders_only_one_object_with_values(text: str) -> None:
    with pytest.raises(NotRepresentable):
        GeminiRenderer().render(gemini_call(text))


def test_gemini_missing_closing_part_renders_and_fails() -> None:
    """The shape of the capture whose closing functionCall never arrives."""
    events = [*gemini_call('{"a":', '"x"}')[:-1], ResponseTerminal(turn=T, response="g")]
    data = render_sse("gemini", events)
    back = parse_sse("gemini", [data], turn=T, response="r").events
    assert "".join(f.text for f in of(Fragment, back)) == '{"a":"x"'  # no closing part, no closing brace
    assert verdicts(back)["g#0"].execute == "must_not"


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------


def test_registry() -> None:
    assert registry.names() == [
        "openai-responses",
        "openai-chat",
        "anthropic-messages",
        "bedrock-converse",
        "gemini",
        "gemini-interactions",
        "cohere-v2",
        "openai-realtime",
        "gemini-live",
    ]
    for name in registry.names():
        assert registry.get(name).name == name
    with pytest.raises(KeyError):
        registry.get("nope")


def test_chat_the_id_or_the_name_in_a_later_chunk() -> None:
    """vercel/ai #14722, Zoo-Code #695: a call's name and id may come in separate chunks, in
    either order; the call opens with both (a call that never gets an id keeps the
    index-derived one), so a library that adopts the late id is not charged for it."""
    name_first = parse(
        "openai-chat",
        [
            chunk(tool(0, None, "pay")),
            chunk(tool(0, "a")),
            chunk(tool(0, args='{"amount":1}')),
            chunk({}, "tool_calls"),
        ],
    ).events
    assert [(o.call, o.tool) for o in of(CallOpened, name_first)] == [("a", "pay")]
    assert executed(name_first) == {"a": {"amount": 1}}
    id_first = parse(
        "openai-chat", [chunk(tool(0, "a")), chunk(tool(0, None, "pay", "{}")), chunk({}, "tool_calls")]
    ).events
    assert executed(id_first) == {"a": {}}
    never = parse("openai-chat", [chunk(tool(0, None, "pay")), chunk(tool(0, args="{}")), chunk({}, "stop")]).events
    assert executed(never) == {"c1#0": {}}


@pytest.mark.parametrize("protocol", ["openai-responses", "anthropic-messages", "gemini-interactions"])
def test_a_call_stopped_early_in_a_response_that_ends_completed_is_not_representable(protocol: str) -> None:
    """The wire can only stop a call with its response's reason; drawn anyway, the call
    would read back as one the response left open (no terminal reason), not as the trace's
    ``length`` stop (found by the guard's matrix row, INV-LEDGER)."""
    from callsafe.model.vocabulary import CallOpened, CallTerminal, ResponseTerminal
    from callsafe.providers.base import NotRepresentable
    from callsafe.providers.streams import render_payloads

    events = [
        CallOpened("t", "r", "0", "c", "op"),
        CallTerminal("t", "r", "0", "c", "", "length"),
        ResponseTerminal("t", "r", "completed"),
    ]
    with pytest.raises(NotRepresentable, match="must end with that reason"):
        render_payloads(protocol, events)


@pytest.mark.parametrize("fallback", ["resp", "r-other"])
def test_responses_a_call_after_the_response_completed_is_data_after_the_stop(fallback: str) -> None:
    """Only a new response.created starts another response: a whole call after
    response.completed is refused there, whatever id the reader falls back on (a guard
    whose fallback differed from the ended response's read it as a new response's call and
    ran it)."""
    first = [CREATED, added("fc", "c", 1), delta("fc", '{"a":1}', 2), done("fc", "c", 3), COMPLETED]
    late = [added("fc2", "c2", 5, index=1), delta("fc2", '{"a":5}', 6), done("fc2", "c2", 7, index=1)]
    parsed = parse_payloads("openai-responses", [*first, *late], turn="t1", response=fallback)
    assert isinstance(parsed.error, ProtocolViolation) and "no response.created" in str(parsed.error)
    assert executed(parsed.events) == {"c": {"a": 1}}
    assert not [e for e in parsed.events if isinstance(e, CallOpened) and e.call == "c2"]
