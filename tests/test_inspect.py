"""``callsafe inspect``: a recorded stream through the reference implementation and every
library adapter of its protocol, side by side.

The captures are read in place from ``<repo>/../shared/captures/vercel-ai`` (never copied);
the expectations are ``tests/test_captures.py``'s own table (:data:`test_captures.EXPECTED`),
so the reference's executions under ``inspect`` are held to exactly what the capture tests
hold the parsers and the reference to. The command is invoked as the click command object,
in process (the lead registers it on the ``callsafe`` group).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result
from test_captures import CAPTURES, EXPECTED, LASAGNA, SF, protocol_of, sse_bytes
from test_targets_libraries import CAPTURE_PROTOCOL, CAPTURE_RECORD

from callsafe.cli.inspect import inspect_cmd
from callsafe.cli.main import main
from callsafe.inspection.inspect import JSON_SCHEMA, SCHEMA_VERSION, inspect_recording, load_tools, to_trace
from callsafe.inspection.recording import RULES, RecordingError, detect_protocol, read_recording
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import Trace
from callsafe.providers import registry
from callsafe.providers.sse import cut
from callsafe.providers.streams import parse_sse

ROOT = Path(__file__).resolve().parents[1]
needs_captures = pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"the shared captures are not at {CAPTURES}")
VALIDATOR = jsonschema.Draft202012Validator(JSON_SCHEMA)


# Library adapters cost their library's import (litellm alone takes seconds): the tests that
# are about the reference run with ``--library none``; the library comparison is checked on
# every covered capture once, with the adapters whose libraries import quickly.
QUICK_LIBRARIES = ("--library", "openai", "--library", "anthropic", "--library", "langchain-core")


def run(*args: str | Path) -> Result:
    """The command object, in process, on a wide terminal (tables do not wrap)."""
    return CliRunner().invoke(inspect_cmd, [str(a) for a in args], prog_name="callsafe inspect", env={"COLUMNS": "240"})


def report(result: Result) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(result.stdout)
    VALIDATOR.validate(doc)
    return doc


def executed(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["tool"], c["arguments"]) for c in doc["reference"]["calls"] if c["outcome"] == "executed"]


def one_error_line(result: Result) -> str:
    """Standard error holds exactly one line, the error, and nothing anywhere is a traceback."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("callsafe inspect: error: "), lines[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return lines[0]


# --------------------------------------------------------------------------------------
# Every capture, through the command
# --------------------------------------------------------------------------------------


@needs_captures
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_inspect_every_capture(name: str) -> None:
    """The command on each capture as recorded (JSON lines): the detected protocol is the
    capture's, the reference executes exactly the expected calls, the stream stops with the
    expected error, every refusal has the ledger's reason, and the report validates
    against the schema."""
    calls, error = EXPECTED[name]
    result = run(CAPTURES / name, "--json", "--library", "none")
    doc = report(result)
    assert doc["protocol"] == {
        "name": protocol_of(name),
        "source": "detected",
        "rule": doc["protocol"]["rule"],
        "where": doc["protocol"]["where"],
        "note": None,
    }
    assert doc["tools"]["source"] == "open"
    assert executed(doc) == calls
    assert doc["reference"]["agrees_with_oracle"], doc["reference"]["oracle_findings"]
    assert doc["reference"]["errors"] == []
    assert all(c["reason"] for c in doc["reference"]["calls"])
    stream_error = doc["stream"]["error"]
    if error is None:
        assert stream_error is None and result.exit_code == 0, result.output
    else:
        assert stream_error["kind"] == error.__name__
        # a non-JSON line is damage to the file (exit 1, one line); a protocol violation is a finding (exit 0)
        assert result.exit_code == (1 if stream_error["damaged"] else 0)
        if stream_error["damaged"]:
            assert "damaged recording" in one_error_line(result)


@needs_captures
def test_library_differences_on_every_capture_are_the_recorded_findings() -> None:
    """Every capture a library adapter covers, through the adapters: ``inspect`` marks a
    difference from the reference exactly where ``tests/test_targets_libraries.py`` recorded
    a finding for that adapter and capture (one test, so each library is imported once)."""
    checked = 0
    for name in sorted(CAPTURE_PROTOCOL):
        doc = report(run(CAPTURES / name, "--json", *QUICK_LIBRARIES))
        assert doc["libraries"], name
        for lib in doc["libraries"]:
            assert lib["status"] in ("ran", "unavailable"), lib
            if lib["status"] == "ran":
                checked += 1
                recorded = (lib["name"], name) in CAPTURE_RECORD
                assert (not lib["agrees"]) == recorded, (lib["name"], name, lib["differences"])
                assert bool(lib["differences"]) == recorded
    if not checked:
        pytest.skip("none of openai, anthropic, langchain-core is installed")


@needs_captures
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_capture_as_raw_sse_in_small_chunks(name: str) -> None:
    """The same captures as raw SSE bytes, fed 97 bytes at a time (cutting lines, and
    characters, anywhere): the same abstract events as the wire path
    (:func:`~callsafe.providers.streams.parse_sse`) and the same executions."""
    calls, error = EXPECTED[name]
    data = sse_bytes(CAPTURES / name)
    inspection = inspect_recording(read_recording(data, chunk_size=97), libraries=())
    assert inspection.recording.format == "sse"
    assert inspection.protocol == protocol_of(name)
    wire = parse_sse(protocol_of(name), cut(data, range(97, len(data), 97)), turn="t1", response="r1")
    assert inspection.events == wire.events
    assert [(c.tool, c.arguments) for c in inspection.executed] == calls
    assert (inspection.stream_error is None) == (error is None)


# --------------------------------------------------------------------------------------
# Raw SSE with a multi-byte character split across chunks
# --------------------------------------------------------------------------------------


@needs_captures
def test_raw_sse_with_a_multibyte_character_split_across_chunks(tmp_path: Path) -> None:
    """Vertex streams the lasagna recipe's "375°F" raw; the chunk boundary falls between the
    two bytes of "°". The decoder joins them: the executed arguments carry the character,
    never a replacement character."""
    name = "google/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt"
    data = sse_bytes(CAPTURES / name)
    degree = "°".encode()
    at = data.index(degree) + 1  # inside the character
    assert len(degree) == 2 and data[: at + 1].endswith(degree)
    path = tmp_path / "vertex.sse"
    path.write_bytes(data)

    result = run(path, "--json", "--chunk-size", str(at))  # the first chunk ends inside "°"
    doc = report(result)
    assert result.exit_code == 0, result.output
    assert doc["format"] == "sse" and doc["protocol"]["name"] == "gemini"
    assert executed(doc) == [("cookRecipe", LASAGNA)]
    assert "375°F" in json.dumps(doc["reference"]["calls"][0]["arguments"], ensure_ascii=False)

    # the same through the API with one cut exactly there, and with every byte its own chunk
    for chunk_size in (at, 1):
        inspection = inspect_recording(read_recording(data, chunk_size=chunk_size), libraries=())
        assert [(c.tool, c.arguments) for c in inspection.executed] == [("cookRecipe", LASAGNA)]


def test_raw_sse_with_event_fields_crlf_comments_and_done(tmp_path: Path) -> None:
    """Wire bytes as a server sends them: a comment, ``event:`` names, CRLF line ends, a
    multi-byte character in the arguments, the ``[DONE]`` sentinel."""
    chunks = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [_chat_call(0, "call_1", "weather", "")]}}]},
        {
            "id": "c1",
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"location":'}}]}}
            ],
        },
        {
            "id": "c1",
            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Zürich"}'}}]}}],
        },
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = ": keep-alive\r\n\r\n" + "".join(
        f"event: chunk\r\ndata: {json.dumps(c, ensure_ascii=False)}\r\n\r\n" for c in chunks
    )
    path = tmp_path / "chat.sse"
    path.write_bytes((body + "data: [DONE]\r\n\r\n").encode())
    result = run(path, "--json", "--chunk-size", "5", "--library", "none")
    doc = report(result)
    assert result.exit_code == 0, result.output
    assert doc["format"] == "sse" and doc["stream"]["done_sentinel"] and doc["stream"]["clean"]
    assert executed(doc) == [("weather", {"location": "Zürich"})]


def _chat_call(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --------------------------------------------------------------------------------------
# Bad files: one clear line, a non-zero exit, never a traceback
# --------------------------------------------------------------------------------------

_ANTHROPIC_LINE = '{"type":"message_start","message":{"id":"m1","content":[]}}'
_CHAT_LINE = '{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}'

UNINSPECTABLE: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "empty file"),
    "blank lines": (b"\n \n\r\n", "empty file"),
    "binary garbage": (bytes(range(256)) * 4, "binary data"),
    "NUL bytes": (b'{"type":\x00"x"}\n', "binary data"),
    "invalid UTF-8 first line": (b"\xff\xfe{}\n", "binary data"),
    "plain text": (b"hello world\n", "not a recording"),
    "mixed protocols": (f"{_ANTHROPIC_LINE}\n{_CHAT_LINE}\n".encode(), "mixed protocols: line 1 is anthropic-messages"),
    "unknown protocol": (b'{"hello": "world"}\n{"foo": 1}\n', "unknown protocol"),
    "ambiguous event": (b'{"choices": [], "candidates": []}\n', "ambiguous: line 1 matches"),
    "JSON array": (b'[{"type": "ping"}]\n', "a JSON array, not JSON lines"),
    "a callsafe trace": (b'{\n "events": []\n}\n', "this is a callsafe trace"),
    "pretty-printed event": (b'{\n "type": "ping"\n}\n', "one JSON document over several lines"),
    "only [DONE]": (b"[DONE]\n", "no events"),
    "only a truncated line": (b'{"type":"message_start","mess\n', "nothing readable: line 1: not JSON"),
    "SSE cut inside its first event": (b'data: {"type":"message_start"', "no complete event"),
    "SSE comments only": (b": ping\n\n: ping\n\n", "no events"),
}


@pytest.mark.parametrize("case", sorted(UNINSPECTABLE))
def test_a_file_that_is_not_a_recording_gets_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    data, message = UNINSPECTABLE[case]
    path = tmp_path / "recording"
    path.write_bytes(data)
    for extra in ((), ("--json",)):
        result = run(path, *extra)
        assert result.exit_code == 2, result.output
        assert message in one_error_line(result)
        assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--protocol", "bogus"), "unknown protocol 'bogus'"),
        (("--library", "nosuchlib"), "unknown library adapter 'nosuchlib'"),
        (("--tools", "TOOLS:not json"), "--tools: not JSON"),
        (("--tools", 'TOOLS:{"weather": {"schema": {"type": 12}}}'), "--tools: tool 'weather': a tool's schema is not"),
        (("--tools", 'TOOLS:[{"nameless": true}]'), "--tools: tool 0 has no name"),
        (("--tools", "MISSING"), "--tools: cannot read"),
        (("--chunk-size", "0"), "--chunk-size must be at least 1"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(args: tuple[str, str], message: str, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(_CHAT_LINE + "\n", encoding="utf-8")
    option, value = args
    if value.startswith("TOOLS:"):
        (tmp_path / "tools.json").write_text(value.removeprefix("TOOLS:"), encoding="utf-8")
        value = str(tmp_path / "tools.json")
    elif value == "MISSING":
        value = str(tmp_path / "missing.json")
    result = run(path, option, value)
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def test_missing_file_and_directory_get_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "nope.jsonl", tmp_path):
        result = run(path)
        assert result.exit_code == 2
        assert "cannot read" in one_error_line(result)


@needs_captures
def test_a_truncated_last_line_is_reported_up_to_the_damage_and_exits_1(tmp_path: Path) -> None:
    """The recording broke off in the middle of its last line, the chunk that carries
    ``finish_reason``: the report covers what came before (the stream ends as a dropped
    connection, so the call, complete as its JSON may look, is refused), one line says where
    the damage is, and the exit status is 1."""
    lines = (CAPTURES / "deepseek" / "chat" / "deepseek-tool-call.chunks.txt").read_text(encoding="utf-8").splitlines()
    assert '"finish_reason":"tool_calls"' in lines[-1]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join([*lines[:-1], lines[-1][:40]]), encoding="utf-8")
    result = run(path, "--json", "--library", "langchain-core:openai-chat:final")
    assert result.exit_code == 1
    line = one_error_line(result)
    assert f"damaged recording: line {len(lines)}: not JSON" in line
    doc = report(result)
    assert doc["stream"]["error"]["kind"] == "MalformedEvent" and doc["stream"]["error"]["damaged"]
    assert executed(doc) == []
    (call,) = doc["reference"]["calls"]
    assert call["outcome"] == "refused" and call["reason"] == "connection lost"
    # the adapter saw the connection drop too: it presents nothing, as the reference executes nothing
    assert all(lib["agrees"] in (True, None) and not lib["presented"] for lib in doc["libraries"])
    # and the terminal form says the same, with the error line apart
    table = run(path, "--library", "none")
    assert table.exit_code == 1 and "refused" in table.stdout and "connection lost" in table.stdout
    assert "damaged recording" in one_error_line(table)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (f"data: {_CHAT_LINE}\n\ndata: \xff\n\n".encode("latin-1"), "invalid UTF-8 at byte"),
        (f"data: {_CHAT_LINE}\n\ndata: not json\n\n".encode(), "event 2: SSE: event data is not JSON"),
        (f"data: {_CHAT_LINE}\n\ndata: {_CHAT_LINE}".encode(), "the last event is cut off"),
        (f"{_CHAT_LINE}\n[1, 2]\n".encode(), "line 2: a JSON list, not an event object"),
    ],
)
def test_damage_inside_a_recording_exits_1_with_one_line(data: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "damaged"
    path.write_bytes(data)
    result = run(path, "--json", "--library", "none")
    assert result.exit_code == 1, result.output
    assert message in one_error_line(result)
    assert report(result)["stream"]["payloads"] == 1


def test_data_after_done_is_a_finding_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "after-done.sse"
    path.write_bytes(f"data: {_CHAT_LINE}\n\ndata: [DONE]\n\ndata: {_CHAT_LINE}\n\n".encode())
    result = run(path, "--json", "--library", "none")
    assert result.exit_code == 0, result.output
    error = report(result)["stream"]["error"]
    assert error["kind"] == "ProtocolViolation" and not error["damaged"] and "data after [DONE]" in error["message"]


def test_an_internal_error_is_one_line_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import callsafe.inspection.inspect as inspect_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(inspect_module, "inspect_recording", broken)
    path = tmp_path / "rec.jsonl"
    path.write_text(_CHAT_LINE + "\n", encoding="utf-8")
    result = run(path)
    assert result.exit_code == 3
    assert "internal error (ZeroDivisionError: boom)" in one_error_line(result)


# --------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------

SAMPLES: dict[str, dict[str, Any]] = {
    "openai-responses": {"type": "response.output_item.added", "output_index": 0, "item": {}},
    "openai-realtime": {"type": "response.output_item.added", "event_id": "e", "response_id": "r", "item": {}},
    "anthropic-messages": {"type": "content_block_start", "index": 0, "content_block": {}},
    "cohere-v2": {"type": "tool-call-delta", "index": 0},
    "gemini-interactions": {"event_type": "step.delta", "index": 0, "delta": {}},
    "bedrock-converse": {"contentBlockStart": {"contentBlockIndex": 0, "start": {}}},
    "gemini": {"candidates": [{"content": {"parts": []}}], "responseId": "r"},
    "gemini-live": {"toolCall": {"functionCalls": [{"id": "c", "name": "t", "args": {}}]}},
    "openai-chat": {"id": "c", "choices": [{"index": 0, "delta": {}}]},
}


def test_every_protocol_has_one_detection_rule_and_a_sample() -> None:
    assert sorted(r.protocol for r in RULES) == sorted(registry.names()) == sorted(SAMPLES)


@pytest.mark.parametrize("protocol", sorted(SAMPLES))
def test_each_protocol_is_detected_by_its_own_rule_only(protocol: str) -> None:
    line = json.dumps(SAMPLES[protocol]).encode()
    noise = b'{"type": "error", "error": {}}\n{"error": {"message": "x"}}\n'  # shared shapes do not vote
    detection = detect_protocol(read_recording(noise + line + b"\n"))
    assert detection.protocol == protocol and detection.where == "line 3"
    assert [r.protocol for r in RULES if r.matches(SAMPLES[protocol])] == [protocol]


def test_the_documented_detection_table_is_the_rules() -> None:
    doc = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8").split("## Protocol detection")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+) \|$", doc, flags=re.MULTILINE)
    assert rows == [(r.protocol, r.signature) for r in RULES]


@needs_captures
def test_protocol_option_overrides_detection_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(f"{_ANTHROPIC_LINE}\n{_CHAT_LINE}\n", encoding="utf-8")
    result = run(path, "--json", "--protocol", "anthropic-messages", "--library", "none")
    doc = report(result)
    assert doc["protocol"]["source"] == "option"
    assert "mixed protocols" in doc["protocol"]["note"]
    capture = CAPTURES / "alibaba" / "alibaba-tool-call.chunks.txt"
    doc = report(run(capture, "--json", "--protocol", "openai-chat", "--library", "none"))
    assert doc["protocol"]["note"] is None and executed(doc) == [("weather", SF)]


# --------------------------------------------------------------------------------------
# The JSON report's schema
# --------------------------------------------------------------------------------------


def test_json_schema_is_versioned_valid_and_documented() -> None:
    jsonschema.Draft202012Validator.check_schema(JSON_SCHEMA)
    assert SCHEMA_VERSION == "callsafe.inspect/1"
    assert JSON_SCHEMA["properties"]["schema"] == {"const": SCHEMA_VERSION}
    committed = json.loads((ROOT / "docs" / "inspect.schema.json").read_text(encoding="utf-8"))
    assert committed == JSON_SCHEMA, "docs/inspect.schema.json is stale: write json.dumps(JSON_SCHEMA, indent=1)"
    json_option = next(p for p in inspect_cmd.params if p.name == "as_json")
    assert SCHEMA_VERSION in (getattr(json_option, "help", None) or "")  # --json's help names the version


@needs_captures
def test_json_report_fields(tmp_path: Path) -> None:
    """The fields a machine reads, on a capture where a library differs: the reference's
    execution with its ledger row (no argument values in it), the library's presented
    call with the difference marked, and the summary."""
    capture = CAPTURES / "alibaba" / "alibaba-tool-call.chunks.txt"
    result = run(capture, "--json", "--library", "langchain-core:openai-chat:preview")
    doc = report(result)
    assert doc["schema"] == SCHEMA_VERSION and doc["format"] == "jsonl"
    (call,) = doc["reference"]["calls"]
    assert call["outcome"] == "executed" and call["executions"] == 1 and call["arguments"] == SF
    assert call["ledger"] == {
        "fragments": 2,
        "terminal_reason": "completed",
        "parse": "ok",
        "validation": "ok",
        "decision": "dispatched",
    }
    (lib,) = doc["libraries"]
    if lib["status"] == "unavailable":
        pytest.skip(lib["reason"])
    assert lib["agrees"] is False and lib["presented"][0]["arguments"] == {}
    assert lib["presented"][0]["where"] == "line 1"  # a preview, long before the call ended
    assert lib["differences"] == [
        {"kind": "arguments", "call": call["call"], "message": 'the reference executed {"location": "San Francisco"}'}
    ]
    assert doc["summary"]["libraries_differing"] == [lib["name"]]


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


@needs_captures
def test_declared_tools_are_checked_and_confirmation_awaited(tmp_path: Path) -> None:
    """With --tools, a call whose arguments break the schema is refused with the ledger's
    reason, and a library that presents it anyway is marked; a tool that needs
    confirmation is put up for it, never executed by an inspection."""
    capture = CAPTURES / "alibaba" / "alibaba-tool-call.chunks.txt"
    strict = tmp_path / "strict.json"
    strict.write_text(
        json.dumps([{"type": "function", "name": "weather", "parameters": {"type": "object", "required": ["city"]}}]),
        encoding="utf-8",
    )
    doc = report(run(capture, "--json", "--tools", strict, "--library", "langchain-core:openai-chat:final"))
    assert doc["tools"]["source"] == "file"
    (call,) = doc["reference"]["calls"]
    assert call["outcome"] == "refused" and call["reason"] == "arguments do not match the tool's schema"
    assert call["ledger"]["validation"].startswith("schema")
    ran = [lib for lib in doc["libraries"] if lib["status"] == "ran"]
    assert ran and all(d["kind"] == "extra" for lib in ran for d in lib["differences"])

    confirm = tmp_path / "confirm.json"
    confirm.write_text(json.dumps({"tools": {"weather": {"confirm": True}}}), encoding="utf-8")
    doc = report(run(capture, "--json", "--tools", confirm, "--library", "none"))
    assert doc["reference"]["calls"][0]["outcome"] == "awaiting_confirmation"
    assert doc["summary"]["awaiting_confirmation"] == 1 and executed(doc) == []


def test_tool_file_shapes() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    forms = [
        {"t": {"schema": schema}},
        {"tools": {"t": {"schema": schema}}},
        [{"type": "function", "function": {"name": "t", "parameters": schema}}],
        [{"type": "function", "name": "t", "parameters": schema}],
        [{"name": "t", "input_schema": schema}],
    ]
    for form in forms:
        tools = load_tools(json.dumps(form))
        assert list(tools) == ["t"] and dict(tools["t"].schema) == schema
    assert load_tools(json.dumps([{"name": "t", "input_schema": schema, "confirm": True}]))["t"].confirm
    with pytest.raises(RecordingError, match="expected an object"):
        load_tools("42")


# --------------------------------------------------------------------------------------
# --to-trace, then replay
# --------------------------------------------------------------------------------------


@needs_captures
@pytest.mark.parametrize(
    "name",
    [
        "alibaba/alibaba-tool-call.chunks.txt",
        "anthropic/spliced-message-start.chunks.txt",
        "google/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt",
    ],
)
def test_to_trace_then_replay(name: str, tmp_path: Path) -> None:
    """The recording becomes a trace that ``callsafe replay`` runs, judges and passes, with
    the oracle's verdicts pinned as the author's expectations."""
    out = tmp_path / "scenario" / "incident.json"
    result = run(CAPTURES / name, "--to-trace", out, "--library", "none")
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.stderr
    trace = Trace.loads(out.read_text(encoding="utf-8"))
    assert trace.events[0].kind == "turn_started" and trace.tools
    oracle = judge(trace).by_short_name()
    assert set(trace.verdicts) == set(oracle)
    assert all(oracle[k].matches_author(v) for k, v in trace.verdicts.items())
    must = [(v["arguments"]) for v in trace.verdicts.values() if v.get("execute")]
    assert must == [args for _, args in EXPECTED[name][0]]

    replayed = CliRunner().invoke(main, ["replay", str(out), "--target", "reference:memory"])
    assert replayed.exit_code == 0, replayed.output
    assert "no invariant violated" in replayed.output
    as_json = CliRunner().invoke(main, ["replay", str(out), "--target", "reference:memory", "--json"])
    assert json.loads(as_json.stdout)["findings"] == []


@needs_captures
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_capture_becomes_a_trace_the_reference_passes(name: str) -> None:
    from callsafe.certify.harness import check_trace

    inspection = inspect_recording(read_recording((CAPTURES / name).read_bytes()), libraries=(), file=name)
    trace = Trace.loads(to_trace(inspection).dumps())
    checked = check_trace("reference:memory", trace)
    assert not checked.violated and not checked.missing, checked.judgement.explain()


# --------------------------------------------------------------------------------------
# Terminal and HTML
# --------------------------------------------------------------------------------------


@needs_captures
def test_terminal_table_marks_library_differences() -> None:
    capture = CAPTURES / "alibaba" / "alibaba-tool-call.chunks.txt"
    result = run(capture, "--library", "langchain-core")
    assert result.exit_code == 0, result.output
    out = result.stdout
    if "skipped" in out:
        pytest.skip("langchain-core is not installed")
    assert "openai-chat (detected" in out and "open schema" in out
    assert "executed" in out and "call_eee11723464a4b9eb8cee71d" in out
    assert "langchain-core:openai-chat:final" in out and "same as the reference" in out
    assert "langchain-core:openai-chat:preview" in out and "differs" in out and "≠ arguments" in out
    assert "1 differ from the reference: langchain-core:openai-chat:preview" in " ".join(out.split())


@needs_captures
def test_html_page_has_the_tables_and_a_sequence_diagram(tmp_path: Path) -> None:
    out = tmp_path / "inspect.html"
    result = run(CAPTURES / "anthropic" / "spliced-message-start.chunks.txt", "--html", out, "--library", "none")
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and "toolu_first" in page and "connection lost" in page
    assert "ProtocolViolation" in page and "no library adapter selected" in page
    result = run(
        CAPTURES / "alibaba" / "alibaba-tool-call.chunks.txt", "--html", out, "--json", "--library", "langchain-core"
    )
    if all(lib["status"] == "ran" for lib in report(result)["libraries"]):
        page = out.read_text(encoding="utf-8")
        assert "≠ arguments" in page and "same as the reference" in page and "<svg" in page


def test_html_escapes_what_the_stream_carries(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    line = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"tool_calls": [_chat_call(0, "id1", evil, '{"a":"' + evil + '"}')]}}],
    }
    end = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(end) + "\n", encoding="utf-8")
    out = tmp_path / "evil.html"
    result = run(path, "--html", out, "--library", "none")
    assert result.exit_code == 0, result.output
    assert "<script>" not in out.read_text(encoding="utf-8")


def test_inspect_lists_what_a_finish_reason_policy_refuses() -> None:
    """Issue 18: a truncated Anthropic stream (max_tokens inside a number): the final message
    hands out ``amount: 1``; the careful final surface refuses it for its stop reason, and
    inspect lists it anyway, with ``would_execute: false`` and why; the surface that runs
    every block of the final message would run it."""
    lines = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_a", "name": "pay", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"amount":1'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip
    data = "\n".join(json.dumps(line) for line in lines).encode()
    surfaces = ("anthropic:anthropic-messages:final", "anthropic:anthropic-messages:final+every-block")
    inspection = inspect_recording(read_recording(data), libraries=surfaces)
    assert not [c for c in inspection.reference if c.outcome == "executed"]
    shown = {lib.name: lib for lib in inspection.libraries}
    careful = shown["anthropic:anthropic-messages:final"]
    if careful.status == "unavailable":
        pytest.skip(careful.reason or "anthropic is not installed")
    (call,) = careful.presented
    assert call.arguments == {"amount": 1} and not call.would_execute and "max_tokens" in call.note
    (every,) = shown["anthropic:anthropic-messages:final+every-block"].presented
    assert every.arguments == {"amount": 1} and every.would_execute


def test_a_stopped_call_says_which_rule_on_the_wire_stopped_it() -> None:
    """Issue 18: the ledger's "stopped: error" alone does not say why; inspect adds the rule:
    no finish reason, late data after it, an error payload, a refused stream."""

    def chunk(tool: dict[str, Any] | None = None, finish: str | None = None, cid: str = "c1") -> dict[str, Any]:
        delta = {"tool_calls": [tool]} if tool else {}
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    first = {"index": 0, "id": "a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":1'}}
    rest = {"index": 0, "function": {"arguments": "00}"}}
    cases = {
        "the stream ended without a finish_reason": [chunk(first), chunk(rest)],
        "tool-call data after the finish_reason (late data)": [chunk(first, "tool_calls"), chunk(rest, "tool_calls")],
        "an error payload from the server": [chunk(first), {"id": "c1", "error": {"message": "overloaded"}}],
        "the stream was refused: ProtocolViolation at line 2": [chunk(first), chunk(finish="tool_calls", cid="c2")],
    }  # fmt: skip
    for cause, lines in cases.items():
        data = "\n".join(json.dumps(line) for line in lines).encode()
        (call,) = inspect_recording(read_recording(data), libraries=()).reference
        assert call.outcome == "refused" and call.reason.endswith(f"({cause})"), (cause, call.reason)
