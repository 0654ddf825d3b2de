"""Delta debugging over a trace's events, keeping replays valid, and the counterexample
files it writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from netguard import guarded_env

from callsafe.certify.harness import check_trace
from callsafe.certify.minimize import ddmin, minimize_trace, pytest_source, subtrace
from callsafe.generators.catalog import by_name
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Replay, Trace

TESTS = Path(__file__).parent


def test_ddmin_finds_a_one_minimal_failing_sublist() -> None:
    calls = []

    def fails(xs: list[int]) -> bool:
        calls.append(len(xs))
        return 3 in xs and 7 in xs

    assert ddmin(list(range(20)), fails) == [3, 7]
    assert len(calls) < 100
    assert ddmin([1, 2], lambda xs: True) == [1]


def test_subtrace_renumbers_and_drops_replays() -> None:
    b = TraceBuilder().turn("t1").open("a", "x").fragment("a", "{").fragment("a", "}")
    b.replay(1, 4).terminal("a").replay(2, 3)
    trace = b.build()  # 0 turn, 1 open, 2 frag, 3 frag, 4 replay[1,4), 5 terminal, 6 replay[2,3)
    kept = subtrace(trace, [0, 1, 3, 4, 5, 6])
    assert kept.events[3] == Replay(1, 3)  # open and the second fragment, renumbered
    assert len(kept.events) == 5  # the last replay re-delivered only the dropped fragment
    Trace.from_json(kept.to_json())  # valid
    assert [e.kind for e in kept.delivered()] == [
        "turn_started",
        "call_opened",
        "fragment",
        "call_opened",
        "fragment",
        "call_terminal",
    ]


def test_minimising_keeps_the_same_invariant_violated_and_ends_one_minimal() -> None:
    scenario = by_name("validate-per-call").trace  # three calls, ten events
    target = "toy_targets:dispatch_on_first_parse"
    assert "INV-TERMINAL" in check_trace(target, scenario).violated

    def fails(t: Trace) -> bool:
        return "INV-TERMINAL" in check_trace(target, t).violated

    small = minimize_trace(scenario, fails)
    assert fails(small) and len(small.events) < len(scenario.events)
    for i in range(len(small.events)):  # 1-minimal: every event is needed
        assert not fails(subtrace(small, [j for j in range(len(small.events)) if j != i]))
    assert set(small.tools) == {"pay"}  # declarations no event names are dropped
    assert not small.verdicts


def test_the_pytest_file_fails_on_the_target_and_passes_on_a_correct_one(tmp_path: Path) -> None:
    trace = by_name("cancel-before-terminal").trace
    path = tmp_path / "test_counterexample.py"
    path.write_text(pytest_source(trace, "INV-CANCEL", "toy_targets:ignore_cancel", "ce.json", seed=3))
    assert "callsafe replay ce.json toy_targets:ignore_cancel" in path.read_text()
    env = guarded_env({**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)]
    failing = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert failing.returncode == 1, failing.stdout
    assert "INV-CANCEL" in failing.stdout
    passing = subprocess.run(
        cmd, env={**env, "CALLSAFE_TARGET": "toy_targets:model_target"}, capture_output=True, text=True, cwd=tmp_path
    )
    assert passing.returncode == 0, passing.stdout


def test_a_minimal_trace_keeps_the_turn_its_calls_belong_to_when_it_still_fails() -> None:
    trace = TraceBuilder().turn("t1").open("a", "x").fragment("a", "{}").terminal("a").build()

    def fragment_fails(t: Trace) -> bool:
        return any(e.kind == "fragment" for e in t.events)

    kept = minimize_trace(trace, fragment_fails)  # ddmin alone keeps only the fragment
    assert [e.kind for e in kept.events] == ["turn_started", "fragment"]

    def needs_no_turn(t: Trace) -> bool:
        return fragment_fails(t) and not any(e.kind == "turn_started" for e in t.events)

    assert [e.kind for e in minimize_trace(trace, needs_no_turn).events] == ["fragment"]
