"""Bounds for tests that must wait for something: sized for a loaded machine.

CI machines (and this project's own) are 2-CPU machines shared with other work, at load 10
and more: a step that takes 1 s on an idle machine can take 20. A test never asserts how long
something took; where it has to bound a wait (a per-trace timeout, a program's start, a
subprocess), it uses these, which are there only so that a real hang still ends the test.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Final

import pytest

# Seconds a trace of a program or library may take before the harness calls it a hang
# (the harness's own default, 10 s, is for a machine that is not shared).
TRACE_TIMEOUT: Final = 300.0
# Environment for exec: targets in tests: a program's start (imports of an agent
# framework) and each of its answers get minutes, not seconds.
EXEC_ENV: Final = {
    "CALLSAFE_EXEC_START_TIMEOUT": "300",
    "CALLSAFE_EXEC_MESSAGE_TIMEOUT": "300",
    "CALLSAFE_EXEC_TRACE_TIMEOUT": "600",
}


@contextlib.contextmanager
def injected_latency_and_load(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Injected latency (every piece of a live stream the loopback provider writes, 20 ms
    late: ``CALLSAFE_LOOPBACK_WRITE_DELAY``) and CPU load (two busy processes on this 2-CPU
    class of machine), for tests that require the same verdicts under both as without. The
    busy processes are ended by their own ids."""
    monkeypatch.setenv("CALLSAFE_LOOPBACK_WRITE_DELAY", "0.02")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()
