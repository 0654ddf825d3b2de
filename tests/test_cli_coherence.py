"""A coherent command line (issue 32 item 5): `certify` without a target is a usage error,
the help lists every target form, `replay` names its target as `certify` does, errors name
their option, every command callsafe suggests runs, and `serve` has a sample trace that
works in every protocol."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from callsafe.certify.minimize import pytest_source
from callsafe.certify.targets import TARGET_FORMS, replay_command
from callsafe.cli.main import main
from callsafe.cli.serve import PROTOCOLS, SAMPLE, servable_protocols, static_trace
from callsafe.generators.catalog import CATALOG
from callsafe.loopback.server import LoopbackServer
from callsafe.model.vocabulary import CallTerminal, Fragment, Trace
from callsafe.providers.streams import parse_sse

PROGRAMS = Path(__file__).resolve().parent / "exec_programs"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def run_suggested(command: str) -> tuple[int, str]:
    """Run a command line callsafe printed, as a shell would split it."""
    argv = shlex.split(command)
    assert argv[0] == "callsafe", command
    return invoke(*argv[1:])


def test_certify_without_a_target_prints_usage_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("certify")
    assert code == 2 and "Missing argument 'TARGET'" in out and "Usage: " in out
    assert not (tmp_path / "reports").exists()


def test_the_help_lists_every_target_form() -> None:
    code, out = invoke("certify", "--help")
    assert code == 0
    for form, _ in TARGET_FORMS:
        assert form in out, form
    code, out = invoke("replay", "--help")
    assert code == 0 and "callsafe replay TRACE.json TARGET" in out and "--target" in out


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--depth", "-1"), "--depth"),
        (("--walks", "-1"), "--walks"),
        (("--workers", "0"), "--workers"),
        (("--calls", "9"), "--calls"),
        (("--trace-timeout", "0"), "--trace-timeout"),
        (("--budget", "-5"), "--budget"),
        (("--max-hangs", "-1"), "--max-hangs"),
        (("--counterexamples", "0"), "--counterexamples"),
    ],
)
def test_a_bad_value_names_its_option(args: tuple[str, str], option: str) -> None:
    code, out = invoke("certify", "reference", *args)
    assert code == 2 and f"'{option}'" in out, out


def _exported(tmp_path: Path, name: str = "two-calls-interleaved") -> tuple[Path, str]:
    trace = tmp_path / f"{name}.json"
    result = CliRunner().invoke(main, ["scenarios", "export", name, "--out", str(trace)])
    assert result.exit_code == 0, result.output
    return trace, result.output


def test_replay_takes_its_target_as_certify_does_and_keeps_the_option(tmp_path: Path) -> None:
    trace, _ = _exported(tmp_path)
    assert invoke("replay", str(trace), "reference")[0] == 0
    assert invoke("replay", str(trace), "--target", "reference")[0] == 0
    assert invoke("replay", str(trace), "reference", "--target", "reference")[0] == 0
    code, out = invoke("replay", str(trace))
    assert code == 2 and "TARGET" in out
    code, out = invoke("replay", str(trace), "reference", "--target", "reference:memory")
    assert code == 2 and "two targets" in out
    code, out = invoke("replay", str(trace), "nosuchthing")
    assert code == 2 and "TARGET" in out and "exec:COMMAND" in out  # the forms it could have been


def test_the_replay_command_a_certification_suggests_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exec: target's command has spaces: the suggested command quotes it."""
    monkeypatch.setenv("CALLSAFE_EXEC_MAX_LINE", "65536")
    spec = f"exec:{sys.executable} {PROGRAMS / 'bad_output.py'} huge-later 1"
    code, out = invoke(
        "certify", spec, "--scenario", "glued-calls-in-one-buffer", "--no-minimize", "--report", str(tmp_path)
    )
    assert code == 3, out
    (line,) = [x for x in out.splitlines() if x.startswith("replay it: ")]
    command = line.removeprefix("replay it: ")
    assert command == replay_command(tmp_path / "target-errors" / "crash-1.json", spec)
    code, replayed = run_suggested(command)
    assert code == 3 and "past the cap" in replayed, replayed  # it ran: the same target error, not a usage error


def test_what_scenarios_export_and_inspect_suggest_runs(tmp_path: Path) -> None:
    _, notes = _exported(tmp_path, "cancel-before-terminal")
    suggested = {line.split(": ", 1)[0]: line.split(": ", 1)[1].split(" (")[0] for line in notes.splitlines()[1:]}
    assert set(suggested) == {"judge it", "serve it"}
    assert run_suggested(suggested["judge it"])[0] == 0
    assert "--protocol openai-responses" in suggested["serve it"]  # the first protocol that carries it
    recording = tmp_path / "rec.jsonl"
    recording.write_text(
        json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}}]}}]}) + "\n"
        + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}) + "\n"
    )  # fmt: skip
    result = CliRunner().invoke(
        main, ["inspect", str(recording), "--library", "none", "--to-trace", str(tmp_path / "t.json")]
    )
    assert result.exit_code == 0, result.output
    (note,) = [x for x in result.output.splitlines() if "callsafe replay" in x]
    command = note.split("`")[1]
    assert run_suggested(command)[0] in (0, 1)  # judged (a verdict), never a usage error


def test_the_counterexample_file_suggests_a_replay_that_parses() -> None:
    spec = "exec:node my target.js"
    source = pytest_source(Trace(events=()), "INV-ONCE", spec, json_name="out dir/ce 1.json")
    (line,) = [x for x in source.splitlines() if x.startswith("Replay it by hand: ")]
    assert shlex.split(line.removeprefix("Replay it by hand: ")) == ["callsafe", "replay", "out dir/ce 1.json", spec]


def test_an_exported_catalog_scenario_serves_in_the_protocols_that_carry_it() -> None:
    """Before: every catalog scenario failed in the default protocol ("'i-a' is not an
    index"): the items are renamed as certification renames them now."""
    carried = {s.name: servable_protocols(s.trace) for s in CATALOG}
    assert sum(bool(p) for p in carried.values()) > len(CATALOG) // 2
    assert "openai-chat" in carried["no-terminal-no-execution"]


def test_serve_says_which_protocols_carry_a_trace_it_cannot_say(tmp_path: Path) -> None:
    trace, _ = _exported(tmp_path, "cancel-before-terminal")
    code, out = invoke("serve", str(trace), "--protocol", "openai-chat", "--port", "0")
    assert code == 2 and "Invalid value for --protocol" in out
    assert "it serves as --protocol openai-responses" in out, out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_sample_trace_serves_over_loopback_in_every_protocol(protocol: str) -> None:
    """docs/samples/serve-trace.json, served as `callsafe serve` serves it, read back over
    HTTP and parsed by the protocol's own parser: one get_weather call, {"city": "Paris"}."""
    trace = Trace.loads(SAMPLE.read_bytes())
    server = LoopbackServer(port=0, static=static_trace(trace, protocol)).start()
    path = {
        "openai-chat": "/v1/chat/completions",
        "openai-responses": "/v1/responses",
        "anthropic-messages": "/v1/messages",
        "gemini": "/v1beta/models/m:streamGenerateContent?alt=sse",
    }[protocol]
    try:
        with httpx.Client(timeout=300) as client:  # sized for a loaded machine: only a hang fails it
            body = client.post(server.base_url + path, json={"stream": True}).content
    finally:
        server.stop()
    parsed = parse_sse(protocol, [body], turn="t1", response="r1")
    assert parsed.error is None
    text = "".join(e.text for e in parsed.events if isinstance(e, Fragment))
    assert json.loads(text) == {"city": "Paris"}
    assert [e.reason for e in parsed.events if isinstance(e, CallTerminal)] == ["completed"]
