"""LiteLLM's own streaming path (``litellm:openai-chat:stream``): ``litellm.completion(stream=True)``
reads the trace over HTTP from the loopback provider, and nothing leaves 127.0.0.1."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Disconnect, ToolSpec, Trace
from callsafe.providers.base import WIRE_EVENTS
from callsafe.providers.streams import as_servers_send, render_payloads
from callsafe.targets._common import run_wire
from callsafe.targets.libraries import make

PAY = {"pay": ToolSpec(schema={"type": "object", "properties": {"amount": {"type": "integer"}}})}


def _payloads(trace: Trace) -> list[dict[str, Any]]:
    payloads = render_payloads("openai-chat", [e for e in trace.events if isinstance(e, WIRE_EVENTS)])
    as_servers_send("openai-chat", [payloads])
    return payloads


def _call(finish: str | None = "completed") -> Trace:
    b = TraceBuilder(tools=PAY).turn("t1", response="r1").open("call_a", "pay", item="0")
    b.fragments("call_a", '{"amount":1', "00}")
    return (b.terminal("call_a", finish).response_end(finish) if finish else b).build()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket of this process connects to while the test runs."""
    target = make("litellm:openai-chat:stream")
    if target.unavailable():
        pytest.skip(target.unavailable() or "")
    seen: list[Any] = []
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def test_completion_stream_reads_the_trace_over_loopback_http_only(connections: list[Any]) -> None:
    from callsafe.loopback.server import shared_server

    before = shared_server().requests
    run = run_wire(make("litellm:openai-chat:stream"), _payloads(_call()), PAY)
    assert [(e.key.call, e.arguments) for e in run.executed] == [("call_a", {"amount": 100})]
    assert shared_server().requests == before + 1  # one HTTP request per stream
    assert connections and all(address[0] == "127.0.0.1" for address in connections), connections
    again = run_wire(make("litellm:openai-chat:stream"), _payloads(_call()), PAY)  # the server is reused
    assert len(again.executed) == 1 and shared_server().requests == before + 2


def test_a_length_stop_is_presented_and_not_run(connections: list[Any]) -> None:
    target = make("litellm:openai-chat:stream")
    run = run_wire(target, _payloads(_call("length")), PAY)
    assert run.executed == [] and [p.tool for p in run.presented] == ["pay"]
    assert "length" in run.presented[0].note


def test_a_dropped_connection_runs_nothing(connections: list[Any]) -> None:
    payloads = _payloads(_call(None))
    target = make("litellm:openai-chat:stream")
    run = run_wire(target, [*payloads, Disconnect("t1", "")], PAY)
    assert run.executed == [] and any("Connection error" in e for e in target.errors), target.errors
    assert all(address[0] == "127.0.0.1" for address in connections)


def test_a_stream_that_ends_without_a_finish_reason_raises_and_runs_nothing(connections: list[Any]) -> None:
    """Unlike stream_chunk_builder over collected chunks (LL-NO-FINISH-REASON), the streaming
    path refuses a body that ended without a finish_reason."""
    run = run_wire(make("litellm:openai-chat:stream"), _payloads(_call(None)), PAY)
    assert run.executed == [] and any("finish_reason" in e for e in run.errors), run.errors
