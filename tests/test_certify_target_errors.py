"""Target errors are verdicts (issue 17): a target that raises in its factory, ``start``,
``receive`` or ``restart``, or hangs in ``receive``, is certified to the end with exit
status 3; its traces say "target error" or "hang", and no invariant "holds" on them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import skips
from click.testing import CliRunner

from callsafe.certify.harness import Options, certify
from callsafe.certify.target_errors import TargetError
from callsafe.cli.main import main
from callsafe.reporting.report import REPORT_SCHEMA

RAISING = {
    "factory": "toy_targets:raises_in_factory",
    "start": "toy_targets:raises_in_start",
    "receive": "toy_targets:raises_in_receive",
    "restart": "toy_targets:raises_in_restart",
}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _report(folder: Path) -> dict[str, object]:
    doc = json.loads((folder / "report.json").read_text())
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("where", sorted(RAISING))
def test_an_adapter_that_raises_is_certified_with_exit_3(where: str, tmp_path: Path) -> None:
    code, out = invoke("certify", RAISING[where], "--generators", "catalog", "--report", str(tmp_path))
    assert code == 3, out
    assert "target error" in out and f"error in {where}" in out and "Traceback" in out
    assert "replay it: callsafe replay" in out or where == "factory"
    doc = _report(tmp_path)
    assert doc["verdict"] == "target_errors" and doc["summary"]["violated"] == []
    statuses = {i["id"]: i["status"] for i in doc["invariants"]}  # type: ignore[index]
    assert "holds" not in statuses.values() and "violated" not in statuses.values()
    assert "not_established" in statuses.values()
    broken = doc["broken_traces"]
    assert isinstance(broken, dict) and broken["count"]["error"] > 0
    first = broken["traces"][0]
    assert first["kind"] == "error" and first["errors"][0]["where"] == where
    assert f"broke in {where}" in first["errors"][0]["traceback"] or where == "factory"
    assert TargetError.from_json(first["errors"][0]).where == where
    html = (tmp_path / "report.html").read_text()
    assert "<h2>Target errors</h2>" in html and f"error in {where}" in html and "not established" in html
    junit = (tmp_path / "junit.xml").read_text()
    assert "<error " in junit or where == "factory"
    if where != "factory":  # each broken scenario is named, and the trace to replay is written
        outcomes = {r["outcome"] for r in doc["scenarios"]}  # type: ignore[attr-defined]
        assert "target_error" in outcomes
        assert "passed" not in outcomes or where == "restart"  # traces without a restart run clean
        assert (tmp_path / first["files"]["trace"]).exists()


def test_a_hang_is_stopped_reported_with_its_stack_and_the_run_goes_on(tmp_path: Path) -> None:
    timeout = 0.5
    options = Options(generators=("catalog",), scenarios=("two-calls-*", "duplicate-*", "cancel-*"), minimize=False)
    cert = certify(
        "toy_targets:hangs_in_receive", Options(**{**options.__dict__, "trace_timeout": timeout, "max_hangs": 0})
    )
    hung = cert.broken_count.get("hang", 0)
    ran = cert.generators["catalog"].ran
    assert hung == ran >= 3, cert.broken_count  # every selected scenario has a fragment: each one hung
    # each was stopped by the timer at the timeout (the hang never ends by itself), and the run went on
    assert all(b.errors[0].message == f"no answer within {timeout:g} s" for b in cert.broken)
    assert cert.exit_code == 3 and cert.verdict == "target_errors"
    assert "holds" not in {s.status for s in cert.invariants.values()}
    first = cert.broken[0]
    error = first.errors[0]
    assert error.kind == "hang" and error.where == "receive" and error.step is not None
    assert "time.sleep" in error.traceback and "_break" in error.traceback  # where it was stuck
    assert len(first.trace.events) == error.step + 1 and first.trace.name.startswith("hang at step")
    assert all(r.outcome == "hang" for r in cert.scenarios)


def test_the_cli_says_hang_and_exits_3(tmp_path: Path) -> None:
    code, out = invoke(
        "certify",
        "toy_targets:hangs_in_receive",
        "--scenario",
        "two-calls-interleaved",
        "--trace-timeout",
        "0.3",
        "--report",
        str(tmp_path),
    )
    assert code == 3, out
    assert "1 hang" in out and "stack of the hung thread" in out
    doc = _report(tmp_path)
    assert doc["scenarios"] == [  # type: ignore[comparison-overlap]
        {
            "generator": "catalog",
            "name": "two-calls-interleaved",
            "outcome": "hang",
            "violated": [],
            "detail": doc["scenarios"][0]["detail"],  # type: ignore[index]
        }
    ]
    assert "hang in receive" in doc["scenarios"][0]["detail"]  # type: ignore[index]


def test_fail_fast_stops_at_the_first_target_error(tmp_path: Path) -> None:
    cert = certify("toy_targets:raises_in_receive", Options(generators=("catalog", "walks"), fail_fast=True))
    assert cert.stopped == "fail-fast" and cert.traces_run == 1 and cert.exit_code == 3
    assert not cert.generators["walks"].complete


def test_a_violation_on_a_clean_run_outranks_target_errors() -> None:
    cert = certify("toy_targets:dispatch_on_first_parse", Options(generators=("catalog",), minimize=False))
    assert cert.exit_code == 1 and cert.verdict == "fail"


def test_a_library_raising_on_its_stream_is_recorded_but_still_judged() -> None:
    wire = TargetError("error", "receive_wire", "StreamErrorPayload: overloaded", 3)
    assert not wire.breaks_run and not TargetError("error", "close", "x").breaks_run
    assert TargetError("error", "receive", "x", 3).breaks_run and TargetError("hang", "receive_wire", "x", 3).breaks_run
    pytest.importorskip("openai", reason=skips.missing("openai"))
    cert = certify("library:openai:openai-chat:final", Options(generators=("wire",), minimize=False))
    assert sum(g.errors for g in cert.generators.values()) > 0  # the SDK raised on some streams
    assert cert.broken_traces == 0 and "LIVE-DISPATCH" in cert.violated  # and those runs still count


def test_a_factory_that_never_returns_is_a_hang(tmp_path: Path) -> None:
    code, out = invoke("certify", "toy_targets:hangs_in_factory", "--trace-timeout", "0.5", "--report", str(tmp_path))
    assert code == 3 and "hang in factory: no answer within 0.5 s" in out, out  # stopped by the timer
    doc = _report(tmp_path)
    assert doc["broken_traces"]["count"] == {"hang": 1}  # type: ignore[index]


def test_a_target_no_signal_reaches_ends_the_run_with_exit_3_and_the_stacks(tmp_path: Path) -> None:
    """The last resort: past the timeout and its grace, the process gives up with every
    thread's stack rather than wait for ever (here the grace is cut to 1 s)."""
    script = (
        "import functools, sys\n"
        "from callsafe.certify import harness, watchdog\n"
        "harness.LastResort = functools.partial(watchdog.LastResort, extra=1.0)\n"
        "harness.certify('toy_targets:deaf_to_signals', harness.Options(generators=('catalog',), trace_timeout=0.5))\n"
        "sys.exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=600,  # only so that a broken last resort ends the test; it gives up after about 2 s
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "does not respond to the per-trace timeout" in done.stderr and "deaf_to_signals" not in done.stdout
    assert "toy_targets.py" in done.stderr  # the stuck thread's stack, with the target's frame


def test_a_budget_bounds_a_hanging_first_trace_to_the_timeout() -> None:
    """The first trace's warm-up allowance (60 s) never outlasts what is left of a budget,
    and the budget never cuts a trace below the timeout (10 s by default)."""
    cert = certify("toy_targets:hangs_in_receive", Options(budget=1.0, generators=("catalog",), minimize=False))
    assert cert.broken_count == {"hang": 1} and cert.budget_exhausted and cert.exit_code == 3
    # the timer that stopped it was armed at the timeout, not at the 60 s warm-up nor at the budget's 1 s
    assert cert.broken[0].errors[0].message == "no answer within 10 s"
