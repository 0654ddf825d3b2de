"""The OpenAI Realtime provider: what its server events mean, barge-in included, and that
what callsafe renders is what the official ``openai`` SDK's types say the API sends."""

from __future__ import annotations

from typing import Any

import pytest

from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal, TextFragment
from callsafe.providers import registry
from callsafe.providers.base import MalformedEvent, ProtocolViolation, terminal_event_id
from callsafe.providers.streams import parse_payloads

P = "openai-realtime"


def created(rid: str = "resp_1") -> dict[str, Any]:
    return {"type": "response.created", "event_id": "e0", "response": {"id": rid, "status": "in_progress"}}


def added(item: str = "fc_1", call: str = "call_1", rid: str = "resp_1", index: int = 0) -> dict[str, Any]:
    body = {"id": item, "type": "function_call", "call_id": call, "name": "refund", "arguments": ""}
    return {"type": "response.output_item.added", "response_id": rid, "output_index": index, "item": body}


def delta(text: str, item: str = "fc_1", call: str = "call_1", rid: str = "resp_1") -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "response_id": rid,
        "item_id": item,
        "call_id": call,
        "output_index": 0,
        "delta": text,
    }


def args_done(arguments: str, item: str = "fc_1", rid: str = "resp_1") -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.done",
        "response_id": rid,
        "item_id": item,
        "call_id": "call_1",
        "name": "refund",
        "output_index": 0,
        "arguments": arguments,
    }


def item_done(status: str, arguments: str = "", item: str = "fc_1", rid: str = "resp_1") -> dict[str, Any]:
    body = {"id": item, "type": "function_call", "call_id": "call_1", "name": "refund", "arguments": arguments}
    return {
        "type": "response.output_item.done",
        "response_id": rid,
        "output_index": 0,
        "item": {**body, "status": status},
    }


def done(status: str, reason: str | None = None, rid: str = "resp_1") -> dict[str, Any]:
    body: dict[str, Any] = {"id": rid, "status": status}
    if reason is not None:
        body["status_details"] = {"type": status, "reason": reason}
    return {"type": "response.done", "response": body}


def terminals(events: list[Event]) -> list[tuple[str, str]]:
    return [(type(e).__name__, e.reason) for e in events if isinstance(e, (CallTerminal, ResponseTerminal))]


def test_a_completed_call_ends_at_its_item_done() -> None:
    payloads = [created(), added(), delta('{"amount":'), delta("10}"), args_done('{"amount":10}')]
    before = parse_payloads(P, payloads, turn="t", response="fallback").events
    assert terminals(before) == []  # arguments.done is no terminal: the item may still end incomplete
    events = parse_payloads(P, [*payloads, item_done("completed"), done("completed")], turn="t", response="f").events
    assert [e.text for e in events if isinstance(e, Fragment)] == ['{"amount":', "10}"]
    assert terminals(events) == [("CallTerminal", "completed"), ("ResponseTerminal", "completed")]


@pytest.mark.parametrize(
    ("reason", "cause"),
    [("turn_detected", "the user's speech"), ("client_cancelled", "response.cancel")],
)
def test_barge_in_stops_the_interrupted_call_even_after_its_arguments_done(reason: str, cause: str) -> None:
    """The API sends ``function_call_arguments.done`` and an ``incomplete`` item for a call the
    response was interrupted in (the SDK's own docstring says so): neither ends the call;
    the cancelled response stops it with ``error``, and the stop cause names the cancel."""
    parser = registry.get(P).new_parser("t", "fallback")
    events: list[Event] = []
    for payload in [
        created(),
        added(),
        delta('{"amount":10}'),
        {"type": "input_audio_buffer.speech_started", "event_id": "e9", "audio_start_ms": 5, "item_id": "u1"},
        args_done('{"amount":10}'),
        item_done("incomplete", '{"amount":10}'),
        done("cancelled", reason),
    ]:
        events += parser.feed(payload)
    events += parser.finish()
    assert terminals(events) == [("CallTerminal", "error"), ("ResponseTerminal", "error")]
    assert cause in parser.stop_causes[("resp_1", "fc_1", "call_1")]
    assert parser.speech_started == 1


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("completed", None, "completed"),
        ("incomplete", "max_output_tokens", "length"),
        ("incomplete", "content_filter", "content_filter"),
        ("incomplete", None, "error"),
        ("failed", None, "error"),
        ("cancelled", None, "error"),
    ],
)
def test_response_done_statuses(status: str, reason: str | None, expected: str) -> None:
    events = parse_payloads(P, [created(), added(), delta("{}"), done(status, reason)], turn="t", response="f").events
    assert terminals(events)[-1] == ("ResponseTerminal", expected)


def test_an_error_event_ends_nothing_and_a_closed_socket_disconnects() -> None:
    error = {"type": "error", "event_id": "e", "error": {"type": "invalid_request_error", "message": "x"}}
    parsed = parse_payloads(P, [created(), added(), delta("{}"), error], turn="t", response="f", clean=False)
    assert parsed.error is None
    assert [type(e).__name__ for e in parsed.events][-1] == "Disconnect"
    assert not any(isinstance(e, CallTerminal) for e in parsed.events)


def test_overlapping_responses_are_kept_apart_by_response_id() -> None:
    events = parse_payloads(
        P,
        [
            created("a"),
            created("b"),
            added(rid="a"),
            added(rid="b"),
            delta('{"x":1}', rid="b"),
            delta('{"x":2}', rid="a"),
            item_done("completed", rid="a"),
            done("completed", rid="a"),
            done("cancelled", "turn_detected", rid="b"),
        ],
        turn="t",
        response="f",
    ).events
    by_response = {(e.response, e.text) for e in events if isinstance(e, Fragment)}
    assert by_response == {("a", '{"x":2}'), ("b", '{"x":1}')}
    ends = {(e.response, e.reason) for e in events if isinstance(e, CallTerminal)}
    assert ends == {("a", "completed"), ("b", "error")}


@pytest.mark.parametrize(
    ("payloads", "error"),
    [
        ([added()], ProtocolViolation),  # a response never created
        ([created(), added(call="")], MalformedEvent),  # an empty call id: nobody can answer it
        ([created(), added(), delta("{}", call="other")], ProtocolViolation),
        ([created(), added(), added(item="fc_2")], ProtocolViolation),  # one output_index, two items
        ([created(), added(), done("completed"), delta("{}")], ProtocolViolation),  # after the end
        ([created(), done("in_progress")], MalformedEvent),
        ([created(), created()], ProtocolViolation),
    ],
)
def test_bad_streams_are_typed_errors_and_nothing_runs(payloads: list[dict[str, Any]], error: type) -> None:
    parsed = parse_payloads(P, payloads, turn="t", response="f")
    assert isinstance(parsed.error, error)
    assert not any(isinstance(e, CallTerminal) and e.reason == "completed" for e in parsed.events)


def test_done_arguments_that_disagree_with_the_deltas_fail_the_call() -> None:
    events = parse_payloads(
        P,
        [created(), added(), delta('{"amount":10}'), args_done('{"amount":9999}'), item_done("completed")],
        turn="t",
        response="f",
    ).events
    assert terminals(events)[0] == ("CallTerminal", "error")


def sample(reason: str) -> list[Event]:
    key = {"turn": "t", "response": "resp_1", "item": "fc_1", "call": "call_1"}
    end: list[Event] = (
        [CallTerminal(**key, event_id=terminal_event_id("resp_1", "fc_1", "call_1"))]
        if reason == "completed"
        else [CallTerminal(**key, event_id=terminal_event_id("resp_1", "fc_1", "call_1"), reason=reason)]  # type: ignore[arg-type]
    )
    return [
        TextFragment(turn="t", response="resp_1", item="msg_1", text="Sure."),
        CallOpened(**key, tool="refund"),
        Fragment(**key, position=0, text='{"amount":'),
        Fragment(**key, position=1, text="10}"),
        *end,
        ResponseTerminal(turn="t", response="resp_1", reason=reason),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("reason", ["completed", "length", "content_filter", "error"])
def test_the_rendering_is_what_the_sdk_types_say_and_parses_back(reason: str) -> None:
    """Every rendered payload validates against the ``openai`` SDK's ``RealtimeServerEvent``
    union (strict pydantic validation, not the SDK's lenient construct), and reads back."""
    realtime = pytest.importorskip("openai.types.realtime")
    from pydantic import TypeAdapter

    events = sample(reason)
    payloads = registry.get(P).new_renderer().render(events)
    adapter: TypeAdapter[Any] = TypeAdapter(realtime.RealtimeServerEvent)
    kinds = [type(adapter.validate_python(p)).__name__ for p in payloads]
    assert "ResponseFunctionCallArgumentsDeltaEvent" in kinds and kinds[-1] == "ResponseDoneEvent"
    if reason == "error":  # the barge-in: the user's speech, then the interrupted call's done events
        assert "InputAudioBufferSpeechStartedEvent" in kinds
        assert payloads[-1]["response"]["status"] == "cancelled"
        assert payloads[-1]["response"]["status_details"]["reason"] == "turn_detected"
    assert parse_payloads(P, payloads, turn="t", response="f").events == events
