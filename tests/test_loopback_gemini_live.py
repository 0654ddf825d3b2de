"""The Gemini Live API served by the loopback provider over a WebSocket (TLS: the
``google-genai`` SDK speaks only ``wss``), read by the SDK's Live client
(``client.aio.live.connect``) and handed to ``callsafe.guard``, judged at the tool: the
call runs once with its exact arguments; a dropped socket runs nothing and the reconnect is
a new session; a session that does not begin with ``setup`` is closed; other WebSockets
are refused."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import skips
from click.testing import CliRunner

from callsafe.cli.main import main
from callsafe.cli.serve import servable_protocols, static_trace
from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Disconnect,
    Fragment,
    Replay,
    ResponseTerminal,
    TextFragment,
    Trace,
    TurnStarted,
)

pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
genai = pytest.importorskip("google.genai", reason=skips.missing("google-genai"))
websockets = pytest.importorskip("websockets", reason=skips.missing("websockets"))
pytest.importorskip("cryptography", reason=skips.missing("cryptography"))

from websockets.sync.client import connect as ws_connect  # noqa: E402 - after the skips

from callsafe.loopback.gemini_live import PATH  # noqa: E402
from callsafe.loopback.server import LoopbackServer  # noqa: E402

KEY = {"turn": "t1", "response": "resp_1", "item": "0", "call": "call_1"}
SCHEMA = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


def _trace(drop: bool = False) -> Trace:
    """A refund of 10 in two fragments; ``drop``: the socket drops after the model's first
    words, before the call (the Live API sends a call only whole), and the reconnect gets
    the words again, then the call."""
    call = [
        CallOpened(**KEY, tool="refund"),
        Fragment(**KEY, position=0, text='{"amount":'),
        Fragment(**KEY, position=1, text="10}"),
        CallTerminal(**KEY, event_id="e"),
        ResponseTerminal("t1", "resp_1"),
    ]
    turn = TurnStarted(turn="t1", actor="u1", tenant="acme")
    if not drop:
        return Trace(events=(turn, *call))
    words = TextFragment("t1", "resp_1", "text", "one moment")
    return Trace(events=(turn, words, Disconnect("t1", "resp_1"), Replay(1, 2), *call))


class Refunds:
    def __init__(self) -> None:
        self.runs: Counter[tuple[str, int]] = Counter()

    def __call__(self, call: ToolCall) -> str:
        self.runs[(call.id, call.arguments["amount"])] += 1
        return "refunded"


def _context(server: LoopbackServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(server.certificate().certfile))


def _session(server: LoopbackServer, tools: Refunds) -> tuple[list[dict[str, Any]], list[ToolCall], str | None]:
    """One Live session through the SDK into the guard: what the SDK yielded (as the wire's
    JSON), what the guard ran, and the error the session ended with."""
    guard = Guard({"refund": SCHEMA}, executor=tools, store="memory:")
    turn = guard.turn("t1", "u1", "acme")
    options = genai.types.HttpOptions(base_url=server.tls_base_url(), async_client_args={"ssl": _context(server)})
    client = genai.Client(api_key="loopback", http_options=options)
    seen: list[dict[str, Any]] = []
    ran: list[ToolCall] = []

    async def run() -> None:
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash", config={"response_modalities": ["TEXT"]}
        ) as s:
            await s.send_client_content(turns={"role": "user", "parts": [{"text": "refund"}]}, turn_complete=True)

            async def messages() -> Any:
                async for message in s.receive():
                    seen.append(message.model_dump(by_alias=True, exclude_none=True, mode="json"))
                    yield message

            async for call in turn.astream(messages(), protocol="gemini-live"):
                ran.append(call)

    error = None
    try:
        asyncio.run(run())
    except genai.errors.APIError as exc:  # the socket dropped: 1006, abnormal closure
        error = f"{exc.code}"
    guard.close()
    return seen, ran, error


def test_the_sdk_live_client_reads_the_loopback_and_the_guard_runs_the_call_once() -> None:
    server = LoopbackServer(static=static_trace(_trace(), "gemini-live")).start()
    try:
        tools = Refunds()
        seen, ran, error = _session(server, tools)
    finally:
        server.stop()
    assert error is None
    assert seen[0] == {"toolCall": {"functionCalls": [{"id": "call_1", "args": {"amount": 10}, "name": "refund"}]}}
    assert seen[-1] == {"serverContent": {"turnComplete": True}}
    assert [c.arguments for c in ran] == [{"amount": 10}]
    assert tools.runs == Counter({("call_1", 10): 1})


def test_a_dropped_socket_runs_nothing_and_the_reconnect_is_a_new_session() -> None:
    server = LoopbackServer(static=static_trace(_trace(drop=True), "gemini-live")).start()
    try:
        tools = Refunds()
        seen, ran, error = _session(server, tools)
        assert (len(seen), ran, error) == (1, [], "1006")  # the words, then the drop
        seen, ran, error = _session(server, tools)  # the reconnect: the trace's next connection
    finally:
        server.stop()
    assert error is None and [c.arguments for c in ran] == [{"amount": 10}]
    assert tools.runs == Counter({("call_1", 10): 1})


def test_a_session_begins_with_setup_and_other_websockets_are_refused() -> None:
    server = LoopbackServer(static=static_trace(_trace(), "gemini-live")).start()
    url = server.base_url.replace("http://", "ws://")
    try:
        with ws_connect(url + PATH) as ws:
            ws.send(json.dumps({"clientContent": {"turnComplete": True}}))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
        with ws_connect(url + PATH) as ws:  # the plain listener serves the same session
            ws.send(json.dumps({"setup": {"model": "m"}}))
            assert json.loads(ws.recv()) == {"setupComplete": {}}
            ws.send(json.dumps({"realtime_input": {"text": "go"}}))
            first = json.loads(ws.recv())
            assert "toolCall" in first
        for path in ("/v1/realtime", "/ws/other"):
            with pytest.raises(websockets.exceptions.InvalidStatus):
                ws_connect(url + path).close()
    finally:
        server.stop()


def test_serve_offers_gemini_live_and_names_its_tls_address(tmp_path: Path) -> None:
    trace = _trace()
    assert "gemini-live" in servable_protocols(trace)
    path = tmp_path / "t.json"
    path.write_text(trace.dumps(), encoding="utf-8")
    result = CliRunner().invoke(main, ["serve", str(path), "--protocol", "gemini-live", "--event-ids"])
    assert result.exit_code == 2 and "does not resume" in result.output
