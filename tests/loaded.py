"""Bounds for tests that must wait for something: sized for a loaded machine.

CI machines (and this project's own) are 2-CPU machines shared with other work, at load 10
and more: a step that takes 1 s on an idle machine can take 20. A test never asserts how long
something took; where it has to bound a wait (a per-trace timeout, a program's start, a
subprocess), it uses these, which are there only so that a real hang still ends the test.
"""

from __future__ import annotations

from typing import Final

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
