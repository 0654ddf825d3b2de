"""Program rows see the trace's order over HTTP by design, whatever the load (issue 30).

A program served by the shipped adapter libraries acknowledges the body bytes its SDK has
pulled without writing a line for it: Python's ``serve(wire="http")`` hooks the process's
``httpx``/``httpx2`` transports (``adapters/http_reads.py``), the Node helper wraps
``globalThis.fetch`` (``adapters/node/src/callsafe-target.ts``), and both declare
``"acks": "bytes"``. So a matrix row's program (an agent framework that builds its own
client, a TypeScript SDK) gets a control event (a cancel, a new turn, a catalog change) only
after it has read the stream bytes before it. These tests run such traces against a Python
framework row and a Node row, unloaded and under injected latency and CPU load, and require
the same verdicts, and the same executions at the same steps, in every run.
"""

from __future__ import annotations

import asyncio
import http.server
import shutil
import socketserver
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from loaded import EXEC_ENV, injected_latency_and_load

from callsafe.adapters import http_reads
from callsafe.certify.harness import exhaustive_bound, run_traces
from callsafe.certify.targets import describe, resolve_target
from callsafe.generators.exhaustive import exhaustive_traces
from callsafe.model.vocabulary import CancelTurn, Event, ResponseTerminal, ToolChanged, Trace, TurnStarted
from callsafe.targets.exec_target import ORDER_BEST_EFFORT, ORDER_EXACT, order_note
from callsafe.targets.framework_rows import FRAMEWORK_ROWS
from callsafe.targets.node_rows import NODE_ROWS
from callsafe.targets.programs import NODE_DIR

# the cheapest rows of each kind: a framework in the main environment, and a Node stream helper
# that presents a call mid-stream (at its arguments' done event, before the response ends), so
# a control right after those bytes finds the call run or not depending on what the program
# had read: with the harness's acknowledgements switched off, its executions moved or vanished
# under this file's load (a settle window loses that race)
FRAMEWORK = next(r for r in FRAMEWORK_ROWS if r.library == "openai-agents")
NODE = next(r for r in NODE_ROWS if r.name == "node/openai:openai-responses:responses.stream")
# a call opened and partly streamed, its arguments whole, and the call finished
BASES = (
    "exhaustive: open(c0) fragment0(c0)",
    "exhaustive: open(c0) fragment0(c0) fragment1(c0)",
    "exhaustive: open(c0) fragment0(c0) fragment1(c0) terminal(c0)",
)
CONTROLS: dict[str, Event] = {
    "cancel": CancelTurn("t1"),
    "tool_changed:remove": ToolChanged("op", "remove"),
    "turn(t2)": TurnStarted("t2", "u1", "acme"),
}


@pytest.fixture(autouse=True)
def _loaded_machine_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def _traces() -> list[Trace]:
    """Each base, then a control right after its bytes, with and without the response's end
    between them (the control then follows the bytes that end the response)."""
    bound = exhaustive_bound(4, frozenset({"cancellation"}), "openai-chat")
    bases = {t.name: t for t in exhaustive_traces(bound) if t.name in BASES}
    assert set(bases) == set(BASES)
    out: list[Trace] = []
    for base in bases.values():
        for word, control in CONTROLS.items():
            for ended in (False, True):
                tail: tuple[Event, ...] = ((ResponseTerminal("t1", "r-t1"),) if ended else ()) + (control,)
                name = f"{base.name}{' response_end' if ended else ''} {word}"
                out.append(Trace(name=name, tools=base.tools, limits=base.limits, events=base.events + tail))
    return out


Verdicts = dict[str, tuple[tuple[str, ...], bool, tuple[tuple[int, str], ...]]]


def _verdicts(spec: str, traces: list[Trace]) -> Verdicts:
    """Per trace: the violated invariants, whether it ran (not applicable: no), and what was
    executed at which step."""
    out: Verdicts = {}
    for checked in run_traces(spec, traces):
        run = checked.run
        assert run is None or not run.errors, (checked.trace.name, run.errors)
        executed = tuple((o.step, o.tool) for o in (run.observations if run else []) if o.kind == "executed")
        out[checked.trace.name] = (tuple(sorted(checked.violated)), not checked.note, executed)
    return out


def _same_under_load(spec: str, monkeypatch: pytest.MonkeyPatch) -> Verdicts:
    info = describe(resolve_target(spec), spec)
    assert info.run["order"] == ORDER_EXACT, info.run  # acknowledged by default, nothing opted in
    assert order_note(info.run) is None
    traces = _traces()
    unloaded = _verdicts(spec, traces)
    with injected_latency_and_load(monkeypatch):
        loaded = _verdicts(spec, traces)
    assert loaded == unloaded
    assert any(applicable for _, applicable, _ in unloaded.values()), "no trace ran: nothing was compared"
    assert any(executed for _, _, executed in unloaded.values()), "no trace ran a tool: the order never mattered"
    return unloaded


def test_a_framework_row_gets_the_same_verdicts_under_latency_and_load(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = FRAMEWORK.unavailable()
    if reason is not None:
        pytest.skip(reason)
    _same_under_load(f"library:{FRAMEWORK.name}", monkeypatch)


@pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "dist" / "rows").is_dir() or NODE.unavailable() is not None,
    reason="node, or adapters/node's packages and build (npm ci && npm run build in adapters/node), not installed",
)
def test_a_node_row_gets_the_same_verdicts_under_latency_and_load(monkeypatch: pytest.MonkeyPatch) -> None:
    _same_under_load(f"library:{NODE.name}", monkeypatch)


def test_a_program_that_acknowledges_nothing_is_reported_as_best_effort() -> None:
    """A program that opts out (``serve(wire="http", acks=False)``) still runs; the report
    and the console say its order was best effort."""
    spec = f"exec:{sys.executable} {__file__.rsplit('/', 1)[0]}/exec_programs/gemini_http.py --no-acks"
    info = describe(resolve_target(spec), spec)
    assert info.run["order"] == ORDER_BEST_EFFORT and info.run["acks"] is False
    note = order_note(info.run)
    assert note is not None and "settle window" in note
    default = f"exec:{sys.executable} {__file__.rsplit('/', 1)[0]}/exec_programs/gemini_http.py"
    assert describe(resolve_target(default), default).run["order"] == ORDER_EXACT


# -- the Python hook: only the model stream reports ---------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        kind = "application/json" if self.path.endswith("/json") else "text/event-stream"
        body = b"data: 1\n\n" * 3
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()
            thread.join(timeout=30)


def test_the_hook_reports_the_model_streams_reads_and_nothing_else(server: str) -> None:
    """Sync and async clients built after or before the hook, of httpx and httpx2, report a
    streamed body of the stream's base URL; an MCP path, another channel and a JSON answer
    report nothing."""
    reports: list[tuple[str, int, bool]] = []
    base = f"{server}/c/p7"

    def sink(url: str) -> http_reads.Report | None:
        if not url.startswith(base + "/"):
            return None
        return lambda read, closed: reports.append((url.rsplit("/", 1)[-1], read, closed))

    early = httpx.Client()  # built before the hook: its transport is hooked all the same
    http_reads.install(sink)
    try:
        for client in (early, httpx.Client()):
            with client:
                for path in (f"{base}/v1/sync", f"{base}/v1/json", f"{server}/mcp", f"{server}/c/p8/v1/other"):
                    client.get(path).read()

        async def fetch() -> None:
            async with httpx.AsyncClient() as client:
                await client.get(f"{base}/v1/async")

        asyncio.run(fetch())
        httpx2 = pytest.importorskip("httpx2")
        with httpx2.Client() as client2:
            client2.get(f"{base}/v1/two").read()
    finally:
        http_reads.uninstall()
    size = len(b"data: 1\n\n" * 3)
    by_path: dict[str, list[tuple[int, bool]]] = {}
    for path, read, closed in reports:
        by_path.setdefault(path, []).append((read, closed))
    assert set(by_path) == {"sync", "async", "two"}, by_path
    for path, seen in by_path.items():
        assert seen[0] == (0, False) and seen[-1] == (size, True), (path, seen)
    assert len(by_path["sync"]) >= 4  # twice: the early client and the late one
