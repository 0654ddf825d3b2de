"""The OpenAI Realtime API served by the loopback provider over a WebSocket, read by the
official ``openai`` SDK's realtime client (``client.realtime.connect``) and handed to
``callsafe.guard``, judged at the tool: the call runs once with its exact arguments; a
barge-in (the response cancelled by the user's speech) runs nothing, although the API
sends the interrupted call's ``function_call_arguments.done``; a dropped socket runs
nothing and the reconnect is a new session; other WebSockets are refused."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skips
from click.testing import CliRunner

from callsafe.cli.main import main
from callsafe.cli.serve import SAMPLE, servable_protocols, static_trace
from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Disconnect,
    Fragment,
    Replay,
    ResponseTerminal,
    Trace,
    TurnStarted,
)

pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
openai = pytest.importorskip("openai", reason=skips.missing("openai"))
websockets = pytest.importorskip("websockets", reason=skips.missing("websockets"))

from websockets.sync.client import connect as ws_connect  # noqa: E402 - after the skips

from callsafe.loopback.server import LoopbackServer  # noqa: E402

SAMPLE_TRACE = Trace.loads(SAMPLE.read_bytes())
KEY = {"turn": "t1", "response": "resp_1", "item": "fc_1", "call": "call_1"}
SCHEMA = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


def _trace(end: str) -> Trace:
    """A refund of 10 streamed in two pieces; ``end``: completed, a barge-in (``error``) or
    a dropped socket, after which the reconnect gets the whole response again."""
    head = [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(**KEY, tool="refund"),
        Fragment(**KEY, position=0, text='{"amount":'),
        Fragment(**KEY, position=1, text="10}"),
    ]
    if end == "completed":
        tail = [CallTerminal(**KEY, event_id="e"), ResponseTerminal(turn="t1", response="resp_1")]
    elif end == "error":
        tail = [CallTerminal(**KEY, event_id="e", reason="error"), ResponseTerminal("t1", "resp_1", "error")]
    else:
        tail = [Disconnect(turn="t1", response="resp_1")]
    return Trace(events=(*head, *tail), tools={})


def _serve(trace: Trace) -> LoopbackServer:
    return LoopbackServer(static=static_trace(trace, "openai-realtime")).start()


def _client(server: LoopbackServer) -> Any:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="loopback", max_retries=0)


def one_response(connection: Any, seen: list[Any]) -> Iterator[Any]:
    """A Realtime session's events up to the end of the response asked for (the session
    stays open: an application reads one response at a time)."""
    for event in connection:
        seen.append(event)
        yield event
        if event.type == "response.done":
            return


class Refunds:
    def __init__(self) -> None:
        self.runs: Counter[tuple[str, int]] = Counter()

    def __call__(self, call: ToolCall) -> str:
        self.runs[(call.id, call.arguments["amount"])] += 1
        return "refunded"


def _session(server: LoopbackServer, tools: Refunds, tool: str = "refund") -> tuple[list[Any], list[ToolCall]]:
    """One session through the SDK into the guard: what the SDK yielded, what the guard ran."""
    guard = Guard({tool: SCHEMA if tool == "refund" else {"type": "object"}}, executor=tools, store="memory:")
    turn = guard.turn("t1", "u1", "acme")
    seen: list[Any] = []
    ran: list[ToolCall] = []
    with _client(server).realtime.connect(model="gpt-realtime") as connection:
        connection.session.update(session={"type": "realtime"})
        connection.response.create()
        # a dropped socket raises out of the SDK: the guard has then ended the stream as disconnected
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            ran = list(turn.stream(one_response(connection, seen), protocol="openai-realtime"))
    guard.close()
    return seen, ran


def test_the_sdk_realtime_client_reads_the_loopback_and_the_guard_runs_the_call_once() -> None:
    server = _serve(_trace("completed"))
    try:
        tools = Refunds()
        seen, ran = _session(server, tools)
    finally:
        server.stop()
    types = [e.type for e in seen]
    assert types[0] == "session.created" and types[-1] == "response.done"
    assert types.count("response.function_call_arguments.delta") == 2
    assert [c.arguments for c in ran] == [{"amount": 10}]
    assert tools.runs == Counter({("call_1", 10): 1})


def test_a_barge_in_runs_nothing_although_the_interrupted_call_s_arguments_are_done() -> None:
    server = _serve(_trace("error"))
    try:
        tools = Refunds()
        seen, ran = _session(server, tools)
    finally:
        server.stop()
    types = [e.type for e in seen]
    # what a client that runs at function_call_arguments.done would run: the interrupted refund
    assert "input_audio_buffer.speech_started" in types
    assert types.count("response.function_call_arguments.done") == 1
    assert seen[-1].response.status == "cancelled" and seen[-1].response.status_details.reason == "turn_detected"
    assert ran == [] and tools.runs == Counter()


def test_a_dropped_socket_runs_nothing_and_the_reconnect_is_a_new_session() -> None:
    events = _trace("disconnect").events
    tail = (Replay(1, 4), CallTerminal(**KEY, event_id="e"), ResponseTerminal("t1", "resp_1"))
    trace = Trace(events=(*events, *tail))
    server = _serve(trace)
    try:
        tools = Refunds()
        seen, ran = _session(server, tools)
        assert "response.done" not in [e.type for e in seen] and ran == []
        assert tools.runs == Counter()
        _, ran = _session(server, tools)  # the reconnect: the trace's next connection
    finally:
        server.stop()
    assert [c.arguments for c in ran] == [{"amount": 10}]
    assert tools.runs == Counter({("call_1", 10): 1})


def test_bad_client_events_get_an_error_and_the_session_goes_on() -> None:
    server = _serve(SAMPLE_TRACE)
    url = server.base_url.replace("http://", "ws://") + "/v1/realtime?model=m"
    try:
        with ws_connect(url) as ws:
            assert json.loads(ws.recv())["type"] == "session.created"
            for bad in ("not json", "[1]", '{"no": "type"}'):
                ws.send(bad)
                error = json.loads(ws.recv())
                assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
            ws.send('{"type": "response.cancel"}')  # nothing in progress: the API's error
            assert json.loads(ws.recv())["type"] == "error"
            ws.send('{"type": "response.create"}')
            first = [json.loads(ws.recv())]
            while first[-1]["type"] != "response.done":
                first.append(json.loads(ws.recv()))
            ws.send('{"type": "response.create"}')  # a second request: the short reply
            reply = json.loads(ws.recv())
    finally:
        server.stop()
    assert first[0]["type"] == "response.created" and len(first) == 8
    assert reply["type"] == "response.created" and reply["response"]["id"] == "resp_callsafe_reply"


@pytest.mark.parametrize("path", ["/v1/realtime", "/v1/chat"])
def test_other_websockets_are_refused_in_the_handshake(path: str) -> None:
    chat = LoopbackServer(static=static_trace(SAMPLE_TRACE, "openai-chat")).start()
    realtime = _serve(SAMPLE_TRACE)
    server = chat if path == "/v1/realtime" else realtime  # realtime on a chat trace; chat path on realtime
    try:
        with pytest.raises(websockets.exceptions.InvalidStatus):
            ws_connect(server.base_url.replace("http://", "ws://") + path).close()
    finally:
        chat.stop()
        realtime.stop()


def test_serve_offers_realtime_and_refuses_event_ids_for_it(tmp_path: Path) -> None:
    assert "openai-realtime" in servable_protocols(SAMPLE_TRACE)
    result = CliRunner().invoke(main, ["serve", str(SAMPLE), "--protocol", "openai-realtime", "--event-ids"])
    assert result.exit_code == 2 and "does not resume" in result.output


def test_a_message_over_max_body_closes_the_session() -> None:
    server = LoopbackServer(static=static_trace(SAMPLE_TRACE, "openai-realtime"), max_body=1024).start()
    url = server.base_url.replace("http://", "ws://") + "/v1/realtime?model=m"
    try:
        with ws_connect(url) as ws:
            assert json.loads(ws.recv())["type"] == "session.created"
            ws.send(json.dumps({"type": "conversation.item.create", "pad": "x" * 2048}))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv()
    finally:
        server.stop()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
