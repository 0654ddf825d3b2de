"""Honest endings (issue 32 item 6, issue 31 item 5): a run that keeps hanging stops with
exit 3 and says why; a run that ran no trace, or whose program failed its handshake, is
never "certified"; the exec runner reads a program's output within a line cap, whatever
it writes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from itertools import count
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from toy_targets import Misbehaves

from callsafe.certify.checking import HANG_LIMIT
from callsafe.certify.harness import HANG_SHARE_MIN, Options, certify, select_scenarios
from callsafe.certify.target_errors import TraceTimeout
from callsafe.certify.watchdog import paused, trace_deadline
from callsafe.cli.main import main
from callsafe.contract.target import Target
from callsafe.reporting.report import REPORT_SCHEMA

PROGRAMS = Path(__file__).resolve().parent / "exec_programs"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _report(folder: Path) -> dict[str, object]:
    doc = json.loads((folder / "report.json").read_text())
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert isinstance(doc, dict)
    return doc


def test_a_target_that_hangs_on_every_trace_stops_after_max_hangs_with_exit_3(tmp_path: Path) -> None:
    """Every generator, `--trace-timeout 2`: the run stops after HANG_LIMIT traces (each a
    hang), not after one timeout per planned trace; the console says why."""
    code, out = invoke("certify", "toy_targets:hangs_in_receive", "--trace-timeout", "2", "--report", str(tmp_path))
    assert code == 3, out
    assert f"stopped early: the target hung on {HANG_LIMIT} traces in a row" in out
    assert "--max-hangs 3" in out and "not certified" in out
    doc = _report(tmp_path)
    assert doc["stopped"] == "hangs" and doc["verdict"] == "target_errors"
    assert doc["summary"]["traces_run"] == HANG_LIMIT  # type: ignore[index]
    assert doc["broken_traces"]["count"] == {"hang": HANG_LIMIT}  # type: ignore[index]
    assert not all(g["complete"] for g in doc["generators"].values())  # type: ignore[attr-defined]
    assert "Stopped early" in (tmp_path / "report.html").read_text()


def test_max_hangs_0_never_stops_and_a_larger_limit_waits_longer() -> None:
    scenarios = ("two-calls-*", "duplicate-*", "cancel-*", "reconnection-*", "emergency-*")
    every = certify(
        "toy_targets:hangs_in_receive",
        Options(generators=("catalog",), scenarios=scenarios, minimize=False, trace_timeout=0.2, max_hangs=0),
    )
    assert (
        every.stopped is None
        and every.traces_run == len(select_scenarios(scenarios))
        and every.broken_count == {"hang": every.traces_run}
    )
    five = certify(
        "toy_targets:hangs_in_receive",
        Options(generators=("catalog",), scenarios=scenarios, minimize=False, trace_timeout=0.2, max_hangs=5),
    )
    assert five.stopped == "hangs" and five.traces_run == 5


def test_a_target_that_hangs_on_every_other_trace_stops_at_half_of_the_run() -> None:
    """No three hangs in a row, but half of the run: stopped at HANG_SHARE_MIN traces."""
    built = count()

    def every_other() -> Target:
        n = next(built)  # 0 is the target describe() builds; then one per trace
        return Misbehaves("start" if n % 2 else "nowhere", hang=True)

    cert = certify(every_other, Options(generators=("catalog",), minimize=False, trace_timeout=0.2))
    assert cert.stopped == "hangs" and cert.exit_code == 3
    assert cert.traces_run == HANG_SHARE_MIN and cert.broken_count == {"hang": HANG_SHARE_MIN // 2}
    assert f"{HANG_SHARE_MIN // 2} of the {HANG_SHARE_MIN} traces" in cert.stop_reason


def test_a_run_that_ran_no_trace_is_not_certified(tmp_path: Path) -> None:
    """`--scenario` that selects only traces needing a capability the target lacks."""
    code, out = invoke("certify", "toy_targets:simple", "--scenario", "*confirm*", "--report", str(tmp_path))
    assert code == 3, out
    assert "not certified: no trace ran" in out and "certified: no invariant violated" not in out
    assert "confirmation" in out  # what the traces needed
    doc = _report(tmp_path)
    assert doc["verdict"] == "nothing_ran" and doc["summary"]["traces_run"] == 0  # type: ignore[index]


HANDSHAKES = {
    "silent": ("hang", "no answer to 'init' within 1 s"),
    "non-utf8": ("crash", "handshake: a line that is not UTF-8"),
    "huge-init": ("crash", "past the cap of 4,096 bytes on one message (CALLSAFE_EXEC_MAX_LINE)"),
}


@pytest.mark.parametrize("mode", sorted(HANDSHAKES))
@pytest.mark.parametrize(
    "options",
    [(), ("--scenario", "cancel-*"), ("--generators", "walks", "--walks", "2"), ("--workers", "2")],
    ids=["defaults", "scenario-needing-a-capability", "walks", "workers"],
)
def test_a_failed_handshake_is_exit_3_under_any_options(
    mode: str, options: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLSAFE_EXEC_START_TIMEOUT", "1")
    monkeypatch.setenv("CALLSAFE_EXEC_MESSAGE_TIMEOUT", "1")
    monkeypatch.setenv("CALLSAFE_EXEC_MAX_LINE", "4096")
    kind, what = HANDSHAKES[mode]
    # a command line of its own per case: a pool (and its handshake) is per command and process
    command = f"exec:{sys.executable} {PROGRAMS / 'bad_output.py'} {mode} 1 {'-'.join(options) or 'none'}"
    code, out = invoke("certify", command, *options, "--report", str(tmp_path))
    assert code == 3, out
    assert f"{kind} in factory" in out and what in out, out
    assert "certified: no invariant violated" not in out
    doc = _report(tmp_path)
    assert doc["verdict"] == "target_errors" and doc["summary"]["traces_run"] == 0  # type: ignore[index]
    assert what in doc["target"]["run"]["handshake_error"]  # type: ignore[index]


def test_replay_of_a_program_whose_handshake_fails_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLSAFE_EXEC_MAX_LINE", "4096")
    trace = tmp_path / "t.json"
    code, _ = invoke("scenarios", "export", "two-calls-interleaved", "--out", str(trace))
    assert code == 0
    code, out = invoke(
        "replay", str(trace), "--target", f"exec:{sys.executable} {PROGRAMS / 'bad_output.py'} huge-init 1 r"
    )
    assert code == 3, out
    assert "past the cap" in out


def test_an_over_long_line_mid_trace_is_a_target_error_and_the_stderr_line_is_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CALLSAFE_EXEC_MAX_LINE", str(64 * 1024))
    cert = certify(
        f"exec:{sys.executable} {PROGRAMS / 'bad_output.py'} huge-later 2",
        Options(generators=("catalog",), scenarios=("glued-calls-in-one-buffer",), minimize=False),
    )
    assert cert.verdict == "target_errors" and cert.broken_count == {"crash": 1}
    (error,) = cert.broken[0].errors
    assert error.kind == "crash" and "a line of 2,097,1" in error.message  # the whole line was counted
    assert "past the cap of 65,536 bytes" in error.message
    assert "more bytes of this line not kept" in error.stderr
    assert len(error.stderr) < 20_000  # the tail, cut per line: never the 2 MiB line


def test_a_400_mib_line_costs_bounded_memory(tmp_path: Path) -> None:
    """The reader counts and drops what is past the cap: the peak memory of the process
    that reads a 400 MiB line stays far below the line's size (measured in a fresh
    process, so that no other test's memory counts)."""
    script = textwrap.dedent(
        f"""
        import os, resource, sys
        os.environ["CALLSAFE_EXEC_MAX_LINE"] = str(1 << 20)
        from callsafe.targets.exec_target import ExecTargetFailure, _pool
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            _pool({sys.executable!r} + " {PROGRAMS / "bad_output.py"} huge-init 400").spawn()
        except ExecTargetFailure as exc:
            print(exc.what)
        print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    what, sizes = done.stdout.strip().splitlines()
    assert "a line of 419,430,4" in what and "past the cap of 1,048,576 bytes" in what
    before_kib, peak_kib = (int(n) for n in sizes.split())
    assert peak_kib - before_kib < 64 * 1024, (before_kib, peak_kib)  # under 64 MiB more for a 400 MiB line


def test_a_paused_trace_clock_lets_a_program_start_and_runs_on_after() -> None:
    """A program's start (its own bound) does not count against the trace's timeout: the
    block that outlasts the timeout while paused is not interrupted, and the timer still
    stops what hangs after it."""
    reached = []
    with pytest.raises(TraceTimeout), trace_deadline(0.3):
        with paused():
            time.sleep(0.6)  # longer than the trace's timeout
        reached.append("after the start")
        while True:  # then a hang: the timer, re-armed, stops it
            time.sleep(0.01)
    assert reached == ["after the start"]


def test_replay_never_claims_the_reference_verdicts_when_the_target_broke_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that hangs on the first fragment: no verdict, and no "same verdicts as the
    reference" either (the run it cut short has no executions, as the reference has none on
    this trace, which is what made replay say so above "the target broke the run")."""
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(tmp_path / "hang.mark"))
    monkeypatch.setenv("CALLSAFE_EXEC_MESSAGE_TIMEOUT", "1")
    trace = tmp_path / "t.json"
    assert invoke("scenarios", "export", "cancel-during-validation", "--out", str(trace))[0] == 0
    spec = f"exec:{sys.executable} {PROGRAMS / 'misbehave.py'} hang"
    code, out = invoke("replay", str(trace), spec)
    assert code == 3, out
    assert "no verdict: the target broke the run" in out and "no answer to 'fragment'" in out
    assert "reference implementation" not in out
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(tmp_path / "hang-again.mark"))  # it hangs once per mark
    code, out = invoke("replay", str(trace), spec, "--json")
    assert code == 3 and json.loads(out)["differs_from_reference"] is None


def test_a_program_started_under_another_environment_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program reads its environment once, when it starts: the same command asked for under
    another environment gets a new process. Before, a process left idle by an earlier run (here
    one whose marker was already used, so it never hangs) answered the next run, and the hang
    this run asks for never came (the suite saw it when two test files shared the command)."""
    monkeypatch.setenv("CALLSAFE_EXEC_MESSAGE_TIMEOUT", "1")
    trace = tmp_path / "t.json"
    assert invoke("scenarios", "export", "cancel-during-validation", "--out", str(trace))[0] == 0
    spec = f"exec:{sys.executable} {PROGRAMS / 'misbehave.py'} hang"
    used = tmp_path / "used.mark"
    used.touch()
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(used))
    code, out = invoke("replay", str(trace), spec)
    assert code != 3, out  # its marker is used: the program answers and never hangs
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(tmp_path / "fresh.mark"))
    code, out = invoke("replay", str(trace), spec)
    assert code == 3, out
    assert "no answer to 'fragment'" in out
