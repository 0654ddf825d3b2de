"""A library adapter that takes too long on a recording is stopped and reported, and the
others still run (``callsafe inspect --library-budget``)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest

import callsafe.targets._common as common
from callsafe.inspection.budget import OutOfTime, time_budget
from callsafe.inspection.inspect import adapters_for, inspect_recording
from callsafe.inspection.recording import read_recording

LINES = [
    {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}}
    ]}}]},
    {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
]  # fmt: skip


def test_the_budget_interrupts_code_that_swallows_exceptions() -> None:
    with pytest.raises(OutOfTime), time_budget(0.3):  # the loop never ends by itself: only the budget ends it
        while True:
            with contextlib.suppress(Exception):  # a library's blanket handler must not keep it alive
                sum(range(1000))


def test_a_slow_adapter_is_stopped_and_the_others_run(monkeypatch: pytest.MonkeyPatch) -> None:
    names = adapters_for("openai-chat")
    if len(names) < 2:
        pytest.skip("needs two installed openai-chat library adapters")
    real = common.run_wire
    slow = names[0]  # the first adapter run: stuck on its first (and only) stream
    calls: list[Any] = []

    def run_wire(target: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(target)
        if len(calls) == 1:
            while True:  # a library stuck on the stream
                time.sleep(0.01)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(common, "run_wire", run_wire)
    recording = read_recording("".join(json.dumps(line) + "\n" for line in LINES).encode())
    # the stuck adapter never returns by itself: that the call returns at all, with it
    # "stopped" and the others run, is the budget working (no wall-clock bound: CI is loaded)
    inspection = inspect_recording(
        recording, libraries=names, library_budget=10.0
    )  # sized for a loaded machine: the others must finish within it
    by_name = {lib.name: lib for lib in inspection.libraries}
    assert by_name[slow].status == "stopped" and "10 s" in (by_name[slow].reason or "")
    assert [lib.status for name, lib in by_name.items() if name != slow] == ["ran"] * (len(names) - 1)
    assert inspection.to_json()["libraries"][0]["status"] in {"stopped", "ran"}
