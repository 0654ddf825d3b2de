"""A reconnect that replays: over HTTP, where a trace drops a response's connection and
then re-delivers its events, the program's SDK gets a dropped body and, on its next
request, a new stream with the replayed events (certify.wire: reconnects)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import openai
import pytest

from callsafe.certify.checking import check_trace
from callsafe.certify.wire import NotRepresentable, plan_wire, prepare
from callsafe.loopback.server import LoopbackServer, StaticTrace, shared_server
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Trace
from callsafe.providers.streams import parse_payloads

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = f"exec:{sys.executable} {ROOT / 'tests' / 'exec_programs' / 'reconnecting_sdk.py'}"


def _dropped_then_replayed(whole_before_the_drop: bool) -> Trace:
    """One call; the connection drops after its opening (and, if ``whole_before_the_drop``,
    after all of its arguments); the reconnect re-delivers the response from its first
    event, and the rest of the response follows."""
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("call_1", "pay", item="0").fragment("call_1", '{"amount":1')
    if whole_before_the_drop:
        b = b.fragment("call_1", "00}")
    sent = len(b.events)  # events 1.. are the response's (event 0 is the turn, the application's)
    b = b.disconnect().replay(1, sent)
    if not whole_before_the_drop:
        b = b.fragment("call_1", "00}")
    return b.terminal("call_1").response_end().build()


@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic-messages", "openai-responses"])
def test_a_reconnect_is_a_new_stream_for_a_target_that_reconnects_and_not_representable_otherwise(
    protocol: str,
) -> None:
    trace, _ = prepare(_dropped_then_replayed(False), protocol, reconnect=True)
    events = trace.delivered()
    with pytest.raises(NotRepresentable, match="does not reopen"):
        plan_wire(protocol, events)  # a library fed payloads has no request to repeat
    plan = plan_wire(protocol, events, reconnect=True)
    assert plan.streams == 2
    cut = next(i for i, e in enumerate(events) if e.kind == "disconnect")
    assert plan.deliveries[cut].receive and not plan.deliveries[cut].payloads
    second = [p for d in plan.deliveries[cut + 1 :] for p in d.payloads]
    parsed = parse_payloads(protocol, second, turn="t1", response="r1").events
    # the new body carries the whole call again, from its opening to the response's end
    assert parsed[0].kind == "call_opened" and parsed[-1].kind == "response_terminal"
    assert "".join(getattr(e, "text", "") for e in parsed if e.kind == "fragment") == '{"amount":100}'
    assert plan.deliveries[-1].end_stream


def test_an_sdk_program_that_runs_the_call_its_reconnect_replays_revives_a_cancelled_call() -> None:
    server = shared_server()
    before = server.requests
    checked = check_trace(PROGRAM, _dropped_then_replayed(False))
    assert checked.run is not None
    assert server.requests - before == 2  # the dropped body, then the program's new request
    executed = [o for o in checked.run.observations if o.kind == "executed"]
    assert len(executed) == 1 and executed[0].arguments == {"amount": 100}
    # the drop cancelled the call (the spec): running it when the replayed stream completes revives it
    assert "INV-CANCEL" in checked.violated


def test_a_program_that_remembers_what_a_drop_cancelled_passes_the_reconnect() -> None:
    checked = check_trace(f"{PROGRAM} careful", _dropped_then_replayed(False))
    assert checked.run is not None and not checked.missing
    assert [o for o in checked.run.observations if o.kind == "executed"] == []
    assert not checked.violated


def test_an_eager_program_runs_a_call_again_when_the_reconnect_replays_it() -> None:
    checked = check_trace(f"{PROGRAM} eager", _dropped_then_replayed(True))
    assert checked.run is not None
    executed = [o for o in checked.run.observations if o.kind == "executed"]
    assert len(executed) == 2  # once when its arguments parsed, once more on the replay
    assert {"INV-ONCE", "INV-TERMINAL"} <= checked.violated


def _drop_replay_rest() -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("call_1", "pay", item="0").fragment("call_1", '{"amount":1')
    sent = len(b.events)
    return b.disconnect().replay(1, sent).fragment("call_1", "00}").terminal("call_1").response_end().build()


def test_callsafe_serve_gives_a_reconnecting_sdk_the_next_connection_with_the_replay() -> None:
    server = LoopbackServer(static=StaticTrace("openai-chat", _drop_replay_rest().events)).start()
    try:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
        request = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
        with pytest.raises(openai.APIError):  # the first body drops where the trace disconnects
            list(client.chat.completions.create(**request))
        chunks = list(client.chat.completions.create(**request))  # the reconnect: a new request
        args = "".join(
            d.function.arguments or "" for c in chunks for d in (c.choices[0].delta.tool_calls or []) if d.function
        )
        assert json.loads(args) == {"amount": 100}  # replayed from the call's opening, then the rest
        assert chunks[-1].choices[0].finish_reason == "tool_calls" and server.requests == 2
    finally:
        server.stop()


def test_callsafe_serve_resumes_a_responses_stream_after_a_sequence_number() -> None:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("call_1", "pay", item="fc_1").fragment("call_1", '{"amount":1').disconnect()
    events = b.fragment("call_1", "00}").terminal("call_1").response_end().build().events
    server = LoopbackServer(static=StaticTrace("openai-responses", events)).start()
    try:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
        seen: list[int] = []
        with pytest.raises(openai.APIError):
            for event in client.responses.create(model="m", input="go", stream=True, background=True):
                seen.append(event.sequence_number)
        assert seen and seen == list(range(len(seen)))
        resumed = list(client.responses.retrieve("r-t1", stream=True, starting_after=seen[-1]))
        assert [e.sequence_number for e in resumed] == list(range(seen[-1] + 1, seen[-1] + 1 + len(resumed)))
        assert resumed[-1].type == "response.completed"
        args = "".join(e.delta for e in resumed if e.type == "response.function_call_arguments.delta")
        assert args == "00}"  # what came after the cursor, nothing twice
        with httpx.Client() as http:
            refused = http.get(f"{server.base_url}/v1/responses/r-t1", params={"stream": "true", "starting_after": "x"})
        assert refused.status_code == 400 and "starting_after" in refused.text
    finally:
        server.stop()
