"""``callsafe observe`` on the agent frameworks' own OpenTelemetry spans, recorded while
certify ran them (issue 35, item 4), gives certify's verdict wherever the spans can
establish one, and "not judgeable" everywhere else: never "holds" where certify found a
violation, never "violated" where it did not.

* pydantic-ai in process (``library:pydantic-ai-slim:openai-chat:agent``): its
  ``Instrumentation`` capability, recorded in memory (:mod:`callsafe.span_recording`), one
  trace's spans at a time; wire-shaped traces chosen so that certify finds each invariant the
  spans touch both holding and violated.
* Strands Agents as the matrix runs it (a program over the target protocol, reading the
  loopback provider): its built-in tracer, recorded to files by ``CALLSAFE_RECORD_SPANS``.

What the spans establish: INV-ONCE (``execute_tool`` spans with ``gen_ai.tool.call.id``);
the chat spans' calls are the framework's own reading of the stream, so INV-EXACT-ARGS can
only be shown violated (``observe/judging.py``), and a run certify found executing ``{}`` for
a call with no argument bytes stays "not judgeable" rather than "holds".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe import span_recording
from callsafe.certify.checking import Checked, check_trace
from callsafe.certify.wire_traces import wire_traces
from callsafe.observe.judging import Observed, judge_records
from callsafe.observe.otlp import read_spans
from callsafe.targets.framework_rows import FRAMEWORK_ROWS

PYDANTIC_AI = "library:pydantic-ai-slim:openai-chat:agent"
TRACES = (
    "wire: 1 call (whole); completed at the end",  # runs once: INV-ONCE judged, holds
    "wire: 1 call (empty); completed at the end",  # runs {} for no bytes: INV-EXACT-ARGS violated
    "wire: 2 calls (truncated + whole) on items 0 and 1, interleaved; no terminal, the response never ends",
    "wire: 1 call (whole); stopped: length",  # pydantic-ai runs nothing: nothing to judge
)
JUDGED = {"INV-ONCE"}  # what these spans establish, both ways


def _traces(names: tuple[str, ...]) -> list[object]:
    by_name = {t.name: t for t in wire_traces()}
    missing = [n for n in names if n not in by_name]
    assert not missing, missing
    return [by_name[n] for n in names]


def _certify(checked: Checked, invariant: str) -> str:
    found = checked.judgement.results[invariant]
    return "not applicable" if found is None else "violated" if found else "holds"


def _compare(checked: Checked, observed: Observed) -> dict[str, tuple[str, str]]:
    """certify's and observe's verdict per invariant, after checking the rules: equal where
    observe judged, never a "holds" or "violated" certify did not give."""
    pairs = {}
    for invariant in checked.judgement.results:
        want, got = _certify(checked, invariant), observed.status(invariant)
        pairs[invariant] = (want, got)
        if got != "not judgeable":
            assert got == want, (checked.trace.name, invariant, checked.judgement.explain(invariant))
        if invariant in JUDGED and want != "not applicable" and observed.verdicts[invariant].missing != ("executions",):
            assert got == want, (checked.trace.name, invariant)
    return pairs


@pytest.fixture
def recording() -> Iterator[span_recording.Recording]:
    made = span_recording.record_spans(global_provider=False)
    assert made.local, "a global recording was installed before this test"
    yield made
    span_recording.stop_recording()


def test_pydantic_ai_spans_give_certifys_verdicts_where_they_can(recording: span_recording.Recording) -> None:
    seen: dict[str, set[tuple[str, str]]] = {}
    for trace in _traces(TRACES):
        checked = check_trace(PYDANTIC_AI, trace)  # type: ignore[arg-type]
        assert checked.run is not None and not checked.missing
        spans = recording.take()
        document = span_recording.otlp_json(spans)
        records = read_spans(json.dumps(document).encode())
        observed = judge_records(records)
        for invariant, pair in _compare(checked, observed).items():
            seen.setdefault(invariant, set()).add(pair)
        if any(s.name.startswith("execute_tool") for s in spans):
            # the framework's spans, bound to certify's turn by the recording
            assert records.kinds >= {"executions", "arguments", "calls"}
            assert {o.key.turn for o in observed.observations if hasattr(o, "key")} == {"t1"}
    assert ("holds", "holds") in seen["INV-ONCE"]
    assert ("violated", "not judgeable") in seen["INV-EXACT-ARGS"]  # the match the framework recorded
    assert ("violated", "not judgeable") in seen["INV-TERMINAL"]


def test_a_call_pydantic_ai_refused_before_its_tool_ran_is_no_execution(recording: span_recording.Recording) -> None:
    """The truncated call's ``execute_tool`` span says it failed validation: no execution."""
    (trace,) = _traces(TRACES[2:3])
    checked = check_trace(PYDANTIC_AI, trace)  # type: ignore[arg-type]
    assert checked.run is not None
    records = read_spans(json.dumps(span_recording.otlp_json(recording.take())).encode())
    ran = [o.key.call for o in checked.run.observations if hasattr(o, "key") and type(o).__name__ == "Executed"]
    seen = [o.observation.key.call for o in records.entries if o.observation is not None]
    assert seen == ran == ["call_b"]
    assert any("failed before its tool ran" in note for note in records.notes)


@pytest.mark.parametrize("opt_in", ["", "gen_ai_latest_experimental,gen_ai_span_attributes_only"])
def test_strands_spans_recorded_by_the_program_give_certifys_verdicts(
    opt_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strands keeps a call's arguments and the model's output in span events unless the
    latest GenAI conventions are opted in (``OTEL_SEMCONV_STABILITY_OPT_IN``); either way its
    ``execute_tool`` spans carry the call id, and INV-ONCE is certify's."""
    row = next(r for r in FRAMEWORK_ROWS if r.name.startswith("strands-agents"))
    reason = row.unavailable()
    if reason is not None:
        pytest.skip(reason)
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(span_recording.ENVIRONMENT, str(tmp_path))
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    # programs are pooled per command and keep the environment they started with: an
    # -X option no one reads makes this test's command, and so its process, its own
    target = f"exec:{sys.executable} -X callsafe_spans={tmp_path.name} -m callsafe.adapters.frameworks.strands_agent"
    for trace in _traces(TRACES[:2]):
        for old in tmp_path.iterdir():
            old.unlink()
        checked = check_trace(target, trace, TRACE_TIMEOUT)  # type: ignore[arg-type]
        assert checked.run is not None and not checked.run.errors
        files = sorted(tmp_path.iterdir())
        assert len(files) == 1  # one file per run of the program's target
        observed = judge_records(read_spans(files[0].read_bytes()))
        pairs = _compare(checked, observed)
        assert pairs["INV-ONCE"] == ("holds", "holds")
        assert observed.status("INV-EXACT-ARGS") == "not judgeable"
        assert ("calls" in observed.kinds) == ("arguments" in observed.kinds) == bool(opt_in)


def test_openai_agents_spans_through_the_bridge_establish_no_execution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openai-agents' function spans carry no tool call id: the bridge's ``execute_tool``
    spans are not executions, and every verdict is "not judgeable" (never a "holds")."""
    row = next(r for r in FRAMEWORK_ROWS if r.name.startswith("openai-agents"))
    reason = row.unavailable()
    if reason is not None:
        pytest.skip(reason)
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(span_recording.ENVIRONMENT, str(tmp_path))
    target = f"exec:{sys.executable} -X callsafe_spans={tmp_path.name} -m callsafe.adapters.frameworks.openai_agents"
    (trace,) = _traces(TRACES[:1])
    checked = check_trace(target, trace, TRACE_TIMEOUT)  # type: ignore[arg-type]
    assert checked.run is not None and not checked.run.errors
    assert _certify(checked, "INV-ONCE") == "holds"
    (spans,) = tmp_path.iterdir()
    records = read_spans(spans.read_bytes())
    observed = judge_records(records)
    _compare(checked, observed)
    assert records.kinds == {"calls"}  # the generation span's tool calls, with their ids
    assert any("without gen_ai.tool.call.id" in note for note in records.notes)
    assert {v.status for v in observed.verdicts.values()} == {"not judgeable"}


def test_a_recording_to_a_file_writes_otlp_json_lines_bound_to_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``CALLSAFE_RECORD_SPANS=FILE`` writes: a line per export that ``observe`` reads,
    each span bound to the turn; the SDK switched on for the recording only."""
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    out = tmp_path / "spans.otlp.jsonl"
    made = span_recording.record_spans(out, global_provider=False)
    try:
        assert made.local and made.path == out
        tracer = made.provider.get_tracer("test")
        span_recording.begin_run()
        span_recording.bind_turn("turn-9", "acme", "u1")
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_9", "n": 3}
        with tracer.start_as_current_span("execute_tool pay", attributes=attributes):
            pass
        made.flush()
    finally:
        span_recording.stop_recording()
    assert span_recording.recording() is None
    assert os.environ["OTEL_SDK_DISABLED"] == "true"
    lines = out.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["resourceSpans"]
    records = read_spans(out.read_bytes())
    (entry,) = [e for e in records.entries if e.observation is not None]
    key = entry.observation.key  # type: ignore[union-attr]
    assert (key.tenant, key.turn, key.call) == ("acme", "turn-9", "call_9")


def test_certify_record_spans_leaves_a_file_per_trace_run_that_observe_judges(tmp_path: Path) -> None:
    """``callsafe certify --record-spans DIR`` on the guard: its ``callsafe.guard.execute``
    spans, one file per trace run, each judged by ``callsafe observe`` as certify judged
    the run (INV-ONCE holds; nothing the spans cannot show)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for n, trace in enumerate(_traces(TRACES[:2])):
        (traces / f"t{n}.json").write_text(trace.dumps(), encoding="utf-8")  # type: ignore[attr-defined]
    spans = tmp_path / "spans"
    env = {**os.environ, **EXEC_ENV}
    env.pop(span_recording.ENVIRONMENT, None)
    command = [sys.executable, "-m", "callsafe", "certify", "guard:sqlite:openai-chat", "--traces", str(traces)]
    command += ["--no-minimize", "--record-spans", str(spans), "--report", str(tmp_path / "report")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TRACE_TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(spans.iterdir(), key=lambda p: int(p.name.split("-")[2].split(".")[0]))
    assert len(files) == 2  # the traces in order: the guard runs the first's call, refuses the second's
    for path, once in zip(files, ("holds", "not judgeable"), strict=True):
        observe = [sys.executable, "-m", "callsafe", "observe", str(path), "--json"]
        shown = subprocess.run(observe, env=env, capture_output=True, text=True, timeout=TRACE_TIMEOUT, check=False)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        verdicts = {v["invariant"]: v["status"] for v in json.loads(shown.stdout)["verdicts"]}
        assert verdicts.pop("INV-ONCE") == once, path.name
        assert set(verdicts.values()) == {"not judgeable"}
