"""Wire mode over HTTP: the loopback provider serves real SSE to a program's own SDK; an
unmodified openai SDK program and a naive node assembler are certified through it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
import skips

from callsafe.certify.checking import check_trace
from callsafe.certify.harness import Options, certify
from callsafe.loopback.server import LoopbackServer, StaticTrace
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Trace
from callsafe.providers.sse import SSEDecoder
from callsafe.reporting.report import report_json, write_reports

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "adapters" / "node"
WIRE = Options(generators=("wire",), minimize=True, minimize_budget=10)


def _trace(disconnect: bool) -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("call_1", "pay", item="0").fragment("call_1", '{"note":"h\u00e9').fragment("call_1", 'llo"}')
    if disconnect:
        return b.disconnect().build()
    return b.terminal("call_1").response_end().build()


def test_the_loopback_provider_cuts_inside_utf8_and_data_lines_and_the_stream_decodes_whole() -> None:
    server = LoopbackServer(static=StaticTrace("openai-chat", _trace(False).events)).start()
    try:
        with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json={}) as response:
            pieces = list(response.iter_raw())
        assert b": keep-alive\n\n" in pieces
        assert any(p.endswith(b"\xc3") for p in pieces), "a chunk ends inside a two-byte character"
        assert b"dat" in pieces, "a chunk ends inside a field name"
        events = SSEDecoder()
        decoded = [e for p in pieces for e in events.feed(p)] + events.close()
        args = "".join(
            tc["function"].get("arguments", "")
            for e in decoded
            if e.data != "[DONE]"
            for tc in json.loads(e.data)["choices"][0]["delta"].get("tool_calls", [])
        )
        assert json.loads(args) == {"note": "h\u00e9llo"}
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}], stream=True)
        chunks = list(stream)  # the SDK's own HTTP client and SSE decoder read the cut stream whole
        sdk_args = "".join(
            d.function.arguments or "" for c in chunks for d in (c.choices[0].delta.tool_calls or []) if d.function
        )
        assert json.loads(sdk_args) == {"note": "h\u00e9llo"} and chunks[-1].choices[0].finish_reason == "tool_calls"
    finally:
        server.stop()


def test_a_disconnect_drops_the_connection_and_a_reconnect_with_last_event_id_replays_the_rest() -> None:
    server = LoopbackServer(static=StaticTrace("openai-chat", _trace(True).events, event_ids=True)).start()
    try:
        dropped = SSEDecoder()
        got: list = []
        # the body stops without its last chunk
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json={}) as r,
        ):
            for piece in r.iter_raw():
                got += dropped.feed(piece)
        assert got and all(e.data != "[DONE]" for e in got)
        with httpx.stream(
            "POST", f"{server.base_url}/v1/chat/completions", json={}, headers={"Last-Event-ID": "0"}
        ) as r:
            rest = SSEDecoder()
            events = [e for piece in r.iter_raw() for e in rest.feed(piece)] + rest.close()
        assert events and events[-1].data == "[DONE]"  # the replayed stream ends cleanly
        assert server.requests == 2
    finally:
        server.stop()


def test_an_unmodified_openai_sdk_program_is_certified_in_wire_mode_over_http() -> None:
    cert = certify(f"exec:{sys.executable} -m callsafe.adapters.openai_sdk_example", WIRE)
    doc = report_json(cert)
    assert doc["target"]["run"]["mode"] == "exec, wire mode" and doc["target"]["run"]["wire"] == "http"
    assert doc["target_errors"] == []
    assert doc["summary"]["traces_run"] > 50
    checked = {inv["id"]: inv for inv in doc["invariants"]}
    assert checked["INV-TERMINAL"]["traces_checked"] > 50
    # Accumulating deltas by index, as the SDK's examples do, glues two calls that share an
    # index into one 'paypay' call (the finding the in-process library matrix has too).
    assert checked["INV-EXACT-ARGS"]["status"] == "violated"
    (example,) = checked["INV-EXACT-ARGS"]["counterexamples"]
    assert any(o["executed"]["tool"] == "paypay" for o in example["observations"] if "executed" in o)
    # and it did run tools: a trace whose one call completes is judged live
    trace = next(t for t in __import__("callsafe.certify.wire_traces", fromlist=["x"]).wire_traces())
    run = check_trace(f"exec:{sys.executable} -m callsafe.adapters.openai_sdk_example", trace).run
    assert run is not None and any(o.kind == "executed" for o in run.observations)


NODE_EXAMPLE = NODE_DIR / "dist" / "examples" / "naive-assembler.js"
TYPESCRIPT_SOURCES = sorted([*(NODE_DIR / "src").glob("*.ts"), *(NODE_DIR / "examples").glob("*.ts")])


def _build() -> None:
    """``npm run build`` (tsc, about two seconds), so that the test certifies the sources as
    they are, never a stale dist/ (a checkout or a rebase makes any mtime check lie)."""
    done = subprocess.run(
        ["npm", "run", "--silent", "build"], cwd=NODE_DIR, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert NODE_EXAMPLE.is_file()


@pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "typescript").is_dir(),
    reason="node, or adapters/node's packages (npm ci in adapters/node), not installed",
)
def test_the_typescript_helper_and_example_compile_under_strict() -> None:
    tsc = NODE_DIR / "node_modules" / ".bin" / "tsc"
    done = subprocess.run(
        [str(tsc), "--noEmit", "--strict", "-p", str(NODE_DIR)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = json.loads((NODE_DIR / "tsconfig.json").read_text(encoding="utf-8"))
    assert config["compilerOptions"]["strict"] is True  # `npm run build` compiles strict too
    assert {p.name for p in TYPESCRIPT_SOURCES} >= {"callsafe-target.ts", "naive-assembler.ts"}


@pytest.mark.skipif(
    shutil.which("node") is None
    or shutil.which("npm") is None
    or not (NODE_DIR / "node_modules" / "openai").is_dir()
    or not (NODE_DIR / "node_modules" / "typescript").is_dir(),
    reason="node, npm, or adapters/node's packages (npm ci in adapters/node) not installed",
)
def test_the_naive_node_assembler_is_caught_with_a_replayable_counterexample(tmp_path: Path) -> None:
    _build()
    spec = f"exec:node {NODE_EXAMPLE}"
    cert = certify(spec, WIRE)
    assert "INV-TERMINAL" in cert.violated
    reports = write_reports(cert, tmp_path)
    files = [p for p in reports.counterexamples if p.suffix == ".json" and "terminal" in p.name]
    assert files, reports.counterexamples
    replayed = check_trace(spec, Trace.loads(files[0].read_text(encoding="utf-8")))
    assert "INV-TERMINAL" in replayed.violated


def _one_call(call: str, item: str) -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    return (
        b.open(call, "pay", item=item)
        .fragment(call, '{"note":"h\u00e9')
        .fragment(call, 'llo"}')
        .terminal(call)
        .response_end()
        .build()
    )


def test_the_anthropic_and_responses_sdks_read_the_cut_streams_of_their_endpoints() -> None:
    anthropic = pytest.importorskip("anthropic", reason=skips.missing("anthropic"))
    server = LoopbackServer(static=StaticTrace("anthropic-messages", _one_call("toolu_1", "0").events)).start()
    try:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}]) as stream:
            message = stream.get_final_message()
        assert message.stop_reason == "tool_use" and message.content[0].input == {"note": "h\u00e9llo"}
    finally:
        server.stop()
    server = LoopbackServer(static=StaticTrace("openai-responses", _one_call("call_1", "fc_1").events)).start()
    try:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
        with client.responses.stream(model="m", input="go") as stream:
            response = stream.get_final_response()
        (call,) = response.output
        assert response.status == "completed" and json.loads(call.arguments) == {"note": "h\u00e9llo"}
    finally:
        server.stop()


def test_gemini_stream_generate_content_is_served_as_sse_with_alt_sse_and_refused_without() -> None:
    from callsafe.providers.streams import parse_payloads

    trace = _one_call("call_1", "0")
    server = LoopbackServer(static=StaticTrace("gemini", trace.events)).start()
    try:
        url = f"{server.base_url}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        with httpx.stream("POST", url, params={"alt": "sse"}, json={}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            pieces = list(response.iter_raw())
        assert any(p.endswith(b"\xc3") for p in pieces), "a chunk ends inside a two-byte character"
        events = SSEDecoder()
        payloads = [json.loads(e.data) for p in pieces for e in events.feed(p)] + [
            json.loads(e.data) for e in events.close()
        ]
        parsed = parse_payloads("gemini", payloads, turn="t1", response="r").events
        text = "".join(getattr(e, "text", "") for e in parsed if e.kind == "fragment")
        assert json.loads(text) == {"note": "h\u00e9llo"} and parsed[-1].kind == "response_terminal"
        refused = httpx.post(url, json={})  # without alt=sse the API streams a JSON array
        assert refused.status_code == 400 and "alt=sse" in refused.json()["error"]["message"]
    finally:
        server.stop()


def test_a_program_reading_gemini_over_http_is_certified_through_the_loopback_provider() -> None:
    from callsafe.certify.wire_traces import wire_traces

    spec = f"exec:{sys.executable} {ROOT / 'tests' / 'exec_programs' / 'gemini_http.py'}"
    trace = next(wire_traces())  # one whole call, completed at the end
    checked = check_trace(spec, trace)
    assert checked.run is not None and not checked.run.errors, checked.run and checked.run.errors
    executed = [o for o in checked.run.observations if o.kind == "executed"]
    assert [(o.tool, o.arguments) for o in executed] == [("pay", {"amount": 100})]
    assert not checked.violated
