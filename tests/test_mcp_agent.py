"""``agent:COMMAND`` (issue 34): an unmodified agent program, which takes its model from
``OPENAI_BASE_URL`` and its tools from the MCP server at ``CALLSAFE_MCP_URL``, certified by
configuration alone. What reaches callsafe's MCP server is what the agent executed, under the
key of the call it was sent on the wire; a correct agent holds, and a naive one (calls keyed
by index, run whatever the finish reason) is caught on the traces that show each bug."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.certify.checking import Checked, check_trace
from callsafe.certify.targets import TargetSpecError, resolve_target
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Executed, ToolSpec, Trace

pytest.importorskip("mcp")
pytest.importorskip("openai")


AGENT = Path(__file__).parent / "exec_programs" / "mcp_chat_agent.py"
CORRECT = f"agent:{sys.executable} {AGENT}"
NAIVE = f"agent:{sys.executable} {AGENT} --naive"
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


def _builder() -> TraceBuilder:
    return TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")


def _shared_index() -> Trace:
    """Two parallel calls that share one index (as some gateways stream them): two calls."""
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":', "1}")
    b.open("call_b", "pay", item="0").fragments("call_b", '{"amount":', "2}")
    return b.terminal("call_a").terminal("call_b").response_end("completed").build()


def _cut_at_length() -> Trace:
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1')
    return b.terminal("call_a", reason="length").response_end("length").build()


@pytest.fixture(autouse=True)
def _loaded_machine_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent process starts per model stream (two with a stdio MCP server): each gets
    minutes on a loaded machine (:mod:`loaded`); the bounds catch a hang, not a speed."""
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def _check(spec: str, trace: Trace) -> tuple[Checked, list[Executed]]:
    checked = check_trace(spec, trace, TRACE_TIMEOUT)
    assert not checked.missing, checked.note
    assert checked.run is not None and not checked.run.errors, checked.run.errors if checked.run else None
    return checked, [o for o in checked.run.observations if isinstance(o, Executed)]


def test_a_correct_agent_runs_each_parallel_call_once_under_its_own_key() -> None:
    checked, executed = _check(CORRECT, _shared_index())
    assert sorted((e.key.call, e.key.response, e.tool, e.arguments["amount"]) for e in executed) == [
        ("call_a", "r1", "pay", 1),
        ("call_b", "r1", "pay", 2),
    ]
    assert not checked.violated, checked.explain()


def test_a_correct_agent_runs_nothing_of_a_reply_cut_at_length() -> None:
    checked, executed = _check(CORRECT, _cut_at_length())
    assert executed == []
    assert not checked.violated, checked.explain()


def test_a_naive_agent_that_merges_by_index_is_caught() -> None:
    checked, executed = _check(NAIVE, _shared_index())
    assert len(executed) == 1  # one merged call instead of two
    assert checked.violated, "merging two calls into one must violate an invariant"
    assert "call_b" in checked.explain() or "call_a" in checked.explain()


def test_a_naive_agent_that_runs_a_truncated_call_is_caught() -> None:
    checked, executed = _check(NAIVE, _cut_at_length())
    assert [e.key.call for e in executed] == ["call_a"]
    assert "INV-TERMINAL" in checked.violated, checked.explain()


def test_controls_the_agent_does_not_expose_are_not_applicable() -> None:
    """No cancel hook: a trace with a cancel is not applicable (never passed)."""
    trace = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1}').cancel().build()
    checked = check_trace(CORRECT, trace, TRACE_TIMEOUT)
    assert "cancellation" in checked.missing and checked.run is None


def test_the_agent_form_needs_a_command() -> None:
    with pytest.raises(TargetSpecError):
        resolve_target("agent:")


def _sse(*payloads: object) -> bytes:
    import json

    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads)


def test_the_call_keys_are_read_off_an_anthropic_stream() -> None:
    """The key recovery needs no process: the bytes of a Messages stream, split anywhere."""
    from callsafe.adapters.mcp_agent import AgentProgram, WireCalls
    from callsafe.model.vocabulary import TurnStarted

    data = _sse(
        {"type": "message_start", "message": {"id": "msg_1"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "tu_a", "name": "pay"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"amount"'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ":5}"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "tu_b", "name": "pay"}},
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"amount":6}'},
        },
    )
    program = AgentProgram(["true"], "anthropic-messages", None)
    ids = program.ids = WireCalls("anthropic-messages")
    for i in range(0, len(data), 7):
        ids.feed(data[i : i + 7])
    turn = TurnStarted("t1", "u1", "acme")
    keys = [program._key(turn, "pay", {"amount": n}) for n in (6, 5, 6, 7)]
    assert [(k.response, k.item, k.call) for k in keys] == [
        ("msg_1", "2", "tu_b"),  # by its arguments, not its order
        ("msg_1", "1", "tu_a"),
        ("msg_1", "2", "tu_b"),  # run again: the same key (INV-ONCE judges it)
        ("msg_1", "", "mcp-call-1"),  # both ran, and no call was streamed with these: no call of the wire
    ]
    assert program._key(turn, "refund", {}).item == ""  # no such call on the wire


def _one_call() -> Trace:
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}")
    return b.terminal("call_a").response_end("completed").build()


def test_a_lost_answer_runs_the_tool_once_unless_the_agent_calls_again() -> None:
    """``--drop-answers``: the connection of each call's first ``tools/call`` drops after the
    tool ran. The ``mcp`` client reports the lost answer and does not send the call again;
    an agent that retries by calling again runs the tool twice, and INV-ONCE says so."""
    drop = f"agent:--drop-answers -- {sys.executable} {AGENT}"
    checked, executed = _check(drop, _one_call())
    assert [(e.key.call, e.arguments) for e in executed] == [("call_a", {"amount": 100})]
    assert not checked.violated, checked.explain()
    checked, executed = _check(f"{drop} --retry", _one_call())
    assert [e.key.call for e in executed] == ["call_a", "call_a"]
    assert "INV-ONCE" in checked.violated, checked.explain()


NODE_AGENT = Path(__file__).parents[1] / "adapters" / "node" / "examples" / "mcp-chat-agent.mjs"


def test_an_unmodified_node_agent_is_certified_the_same_way() -> None:
    """The same agent in Node (the official MCP client and the openai SDK): the correct one
    runs both calls that share an index; the naive one merges them and is caught."""
    import shutil

    node = shutil.which("node")
    if node is None or not (NODE_AGENT.parent.parent / "node_modules" / "@modelcontextprotocol" / "client").is_dir():
        pytest.skip("node or adapters/node/node_modules (npm ci) is missing")
    checked, executed = _check(f"agent:{node} {NODE_AGENT}", _shared_index())
    assert sorted((e.key.call, e.arguments["amount"]) for e in executed) == [("call_a", 1), ("call_b", 2)]
    assert not checked.violated, checked.explain()
    checked, executed = _check(f"agent:{node} {NODE_AGENT} --naive", _shared_index())
    assert [e.arguments for e in executed] == [{"raw": '{"amount":1}{"amount":2}'}]
    assert "INV-EXACT-ARGS" in checked.violated, checked.explain()


def test_an_agent_whose_mcp_entry_is_a_command_is_certified_over_stdio() -> None:
    """``CALLSAFE_MCP_COMMAND``: the agent starts callsafe's stdio MCP server itself; the
    call still reaches the executor spy, once, under its key."""
    checked, executed = _check(f"agent:{sys.executable} {AGENT} --stdio", _one_call())
    assert [(e.key.call, e.arguments) for e in executed] == [("call_a", {"amount": 100})]
    assert not checked.violated, checked.explain()


def test_a_call_the_host_cancels_after_it_ran_is_not_answered_and_a_retry_runs_it_twice() -> None:
    """``--withhold-answers``: the tool runs at once and its answer waits; the host's own
    timeout cancels the request. MCP says the receiver may ignore a cancellation that comes
    after it finished (the tool ran) and should not answer a cancelled request: an agent that
    gives up runs the tool once; one that sends the call again runs it twice (INV-ONCE)."""
    withhold = f"agent:--withhold-answers -- {sys.executable} {AGENT} --timeout 1"
    checked, executed = _check(withhold, _one_call())
    assert [(e.key.call, e.arguments) for e in executed] == [("call_a", {"amount": 100})]
    assert not checked.violated, checked.explain()
    checked, executed = _check(f"{withhold} --retry", _one_call())
    assert [e.key.call for e in executed] == ["call_a", "call_a"]
    assert "INV-ONCE" in checked.violated, checked.explain()


def test_the_server_sends_no_answer_to_a_request_the_host_cancelled() -> None:
    """The server side of MCP cancellation, in process: the host's timeout cancels a
    ``tools/call`` whose tool already ran; the handler is cancelled (no response is sent) and
    the tool is not run again."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from callsafe.loopback.mcp_server import AgentInterfaces

    calls: list[tuple[str, dict[str, object]]] = []

    def on_call(name: str, arguments: dict[str, object]) -> str:
        calls.append((name, arguments))
        return "ok"

    interfaces = AgentInterfaces(lambda: {"pay": PAY}, on_call, lambda _: None, withhold_answers=True).start()
    outcome: list[str] = []

    async def host() -> None:
        async with streamable_http_client(interfaces.mcp_url) as streams, ClientSession(*streams[:2]) as session:
            await session.initialize()
            try:
                await session.call_tool("pay", {"amount": 1}, read_timeout_seconds=1)
            except Exception as exc:  # the SDK's timeout error
                outcome.append(type(exc).__name__)
            with anyio.fail_after(120):  # a bound for a loaded machine, not a speed
                while interfaces.cancelled == 0:
                    await anyio.sleep(0.05)

    try:
        anyio.run(host)
    finally:
        interfaces.stop()
    assert len(outcome) == 1 and calls == [("pay", {"amount": 1})] and interfaces.cancelled == 1


def test_the_node_client_cancels_a_withheld_call_and_a_node_retry_runs_it_twice() -> None:
    """The same MCP cancellation case with the official TypeScript client (its request
    ``timeout``): the agent that gives up runs the tool once; the one that calls again, twice."""
    import shutil

    node = shutil.which("node")
    if node is None or not (NODE_AGENT.parent.parent / "node_modules" / "@modelcontextprotocol" / "client").is_dir():
        pytest.skip("node or adapters/node/node_modules (npm ci) is missing")
    withhold = f"agent:--withhold-answers -- {node} {NODE_AGENT} --timeout 1000"
    checked, executed = _check(withhold, _one_call())
    assert [(e.key.call, e.arguments) for e in executed] == [("call_a", {"amount": 100})]
    assert not checked.violated, checked.explain()
    checked, executed = _check(f"{withhold} --retry", _one_call())
    assert [e.key.call for e in executed] == ["call_a", "call_a"]
    assert "INV-ONCE" in checked.violated, checked.explain()


# -- MCP's catalog changes and long-running tools (issue 34, item 2) ---------------------


def _removed_while_streaming() -> Trace:
    """The catalog loses ``pay`` while its call streams."""
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":').remove_tool("pay")
    b.fragments("call_a", "1}")
    return b.terminal("call_a").response_end("completed").build()


def test_a_host_that_lists_again_runs_no_call_of_a_tool_removed_while_it_streamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``notifications/tools/list_changed`` reaches the host mid-stream; the host lists again,
    no longer finds ``pay`` and runs nothing. A host that keeps its first list calls it: the
    server records the attempt and answers MCP's unknown-tool error, and the oracle judges a
    call of a removed tool dispatched (under every reading of a catalog change)."""
    monkeypatch.setenv("CALLSAFE_MCP_RELIST_WAIT", "120")  # a bound for a loaded machine
    checked, executed = _check(CORRECT, _removed_while_streaming())
    assert executed == []
    assert not checked.violated, checked.explain()
    monkeypatch.setenv("CALLSAFE_MCP_RELIST_WAIT", "1")  # this host never lists again
    checked, executed = _check(f"{CORRECT} --stale", _removed_while_streaming())
    assert [(e.key.call, e.tool) for e in executed] == [("call_a", "pay")]
    assert checked.violated, checked.explain()


def test_a_tool_removed_while_its_call_streams_over_stdio(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through the stdio bridge, which passes the notification on to the host."""
    monkeypatch.setenv("CALLSAFE_MCP_RELIST_WAIT", "120")
    checked, executed = _check(f"{CORRECT} --stdio", _removed_while_streaming())
    assert executed == []
    assert not checked.violated, checked.explain()


def test_a_long_tool_cancelled_mid_run_runs_once_unless_the_host_calls_again() -> None:
    """``--long-tools``: the tool begins at once (recorded), reports progress, and the host's
    timeout cancels it mid-run. A host that gives up ran it once; one that calls again,
    twice (INV-ONCE)."""
    long = f"agent:--long-tools 60 -- {sys.executable} {AGENT} --progress --timeout 1"
    checked, executed = _check(long, _one_call())
    assert [(e.key.call, e.arguments) for e in executed] == [("call_a", {"amount": 100})]
    assert not checked.violated, checked.explain()
    checked, executed = _check(f"{long} --retry", _one_call())
    assert [e.key.call for e in executed] == ["call_a", "call_a"]
    assert "INV-ONCE" in checked.violated, checked.explain()


@contextlib.asynccontextmanager
async def _host(transport: str, url: str, on_message: Any) -> AsyncIterator[Any]:
    """A real MCP client session on callsafe's server: over Streamable HTTP, or over stdio
    through the bridge (:mod:`callsafe.loopback.mcp_stdio`) the host starts as a command."""
    import os

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if transport == "stdio":
        bridge = StdioServerParameters(
            command=sys.executable,
            args=["-m", "callsafe.loopback.mcp_stdio"],
            env={**os.environ, "CALLSAFE_MCP_URL": url},
        )
        client: Any = stdio_client(bridge)
    else:
        client = streamable_http_client(url)
    async with client as streams, ClientSession(streams[0], streams[1], message_handler=on_message) as session:
        yield session


TRANSPORTS = ["http", "stdio"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_host_is_told_of_a_catalog_change_and_a_call_of_a_tool_gone_gets_mcps_error(transport: str) -> None:
    """The server declares ``tools.listChanged``; a catalog change sends the host
    ``notifications/tools/list_changed``, its next ``tools/list`` has the new catalog, and a
    ``tools/call`` of the tool gone is recorded (the host dispatched it) and answered with
    JSON-RPC's ``-32602``, MCP's error for an unknown tool."""
    import anyio
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from callsafe.loopback.mcp_server import AgentInterfaces

    catalog = {"pay": PAY, "refund": PAY}
    calls: list[tuple[str, dict[str, object]]] = []

    def on_call(name: str, arguments: dict[str, object]) -> str:
        calls.append((name, arguments))
        return "ok"

    interfaces = AgentInterfaces(lambda: dict(catalog), on_call, lambda _: None).start()
    seen: list[list[str]] = []
    relisted: list[bool] = []
    errors: list[int] = []

    async def host() -> None:
        told = anyio.Event()

        async def on_message(message: object) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                told.set()

        async with _host(transport, interfaces.mcp_url, on_message) as session:
            init = await session.initialize()
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
            seen.append(sorted(t.name for t in (await session.list_tools()).tools))
            del catalog["refund"]

            async def change() -> None:  # the harness's side: tell, then wait for a re-listing
                relisted.append(await anyio.to_thread.run_sync(interfaces.tools_changed, 120.0))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(change)
                with anyio.fail_after(120):  # a bound for a loaded machine, not a speed
                    await told.wait()
                seen.append(sorted(t.name for t in (await session.list_tools()).tools))
            try:
                await session.call_tool("refund", {"amount": 1})
            except MCPError as exc:
                errors.append(exc.error.code)

    try:
        anyio.run(host)
    finally:
        interfaces.stop()
    assert seen == [["pay", "refund"], ["pay"]] and relisted == [True]
    assert errors == [-32602] and calls == [("refund", {"amount": 1})] and interfaces.unlisted_calls == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_long_tool_reports_progress_and_a_cancel_mid_run_ends_it_unanswered(transport: str) -> None:
    """A host that asks for progress (a ``progressToken``) gets increasing
    ``notifications/progress`` while the tool runs; it cancels the call mid-run
    (``notifications/cancelled``): the tool ran once, no answer comes, and no progress is
    sent for the cancelled request afterwards."""
    import anyio

    from callsafe.loopback.mcp_server import AgentInterfaces

    calls: list[str] = []
    interfaces = AgentInterfaces(
        lambda: {"pay": PAY},
        lambda name, _: calls.append(name) or "ok",
        lambda _: None,
        long_seconds=600.0,
        progress_every=0.05,
    ).start()
    progress: list[float] = []
    answers: list[object] = []
    after: list[int] = []

    async def host() -> None:
        async with _host(transport, interfaces.mcp_url, None) as session:
            await session.initialize()
            with anyio.CancelScope() as scope:

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append(value)
                    if len(progress) == 3:
                        scope.cancel()  # the host gives up mid-run

                answers.append(await session.call_tool("pay", {"amount": 1}, progress_callback=on_progress))
            with anyio.fail_after(120):  # a bound for a loaded machine, not a speed
                while interfaces.cancelled == 0:
                    await anyio.sleep(0.05)
            sent = interfaces.progress_sent
            await anyio.sleep(0.5)  # ten of the tool's progress intervals, had it gone on
            after.append(interfaces.progress_sent - sent)

    try:
        anyio.run(host)
    finally:
        interfaces.stop()
    assert calls == ["pay"] and answers == [] and interfaces.cancelled == 1
    assert len(progress) >= 3 and progress == sorted(set(progress)) and after == [0]
