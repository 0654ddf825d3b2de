"""The per-trace timeout: a target that does not finish a trace in time is stopped, and the
trace is recorded as a hang with the stack of the thread that was stuck.

Why a timer signal in the process that runs the target, not a worker process per trace:
the fast path runs thousands of traces a second in one process, and a process boundary
per trace (or even per partition, with every result pickled across) would cost more than
the certification itself. ``SIGALRM`` (``setitimer``) costs microseconds to arm and
interrupts what a Python target can hang in: a loop, ``time.sleep``, a lock or queue
wait, a socket read. Its handler raises :class:`~callsafe.certify.target_errors.TraceTimeout`
(a ``BaseException``, so a target's ``except Exception`` does not swallow it) in the
target's frame, with that frame's stack; the runner records the hang and the harness goes
on with the next trace on a fresh target. The timer re-fires every ``GRACE`` seconds, so a
target that swallows even that is interrupted again. A target's first trace in a process
gets at least ``WARM_UP`` seconds (:func:`first_trace_allowance`): that is where a client
library is imported, and importing one can take longer than any trace.

What a signal cannot stop is native code that never returns to the interpreter (a C
extension spinning with the signal pending). For that, :class:`LastResort` watches from a
thread: when a trace is still not done ``LAST_RESORT`` seconds after its timeout, it writes
every thread's stack to stderr and ends the process with exit status 3 (target error), so
that CI never waits for ever; run such targets as subprocesses (their own per-message
timeouts) to have certification go on.

A program the target starts (an ``exec:`` target's process, which imports its framework
first) is bounded by its own start timeout, not by the trace's: the target starts it inside
:func:`paused` (through :mod:`callsafe.contract.clock`, so that it need not import the
harness), which stops the trace's clock meanwhile. Otherwise a busy machine, where an
agent framework takes longer to import than a trace may take, would turn every fresh
process into a "hang".

The timer needs the main thread of a POSIX process (``callsafe certify``, ``replay``, the
local worker processes); elsewhere (a Dask worker's thread) there is no per-trace timeout.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final

from callsafe.certify.target_errors import TraceTimeout
from callsafe.contract import clock

__all__ = [
    "DEFAULT_TRACE_TIMEOUT",
    "GRACE",
    "LAST_RESORT",
    "WARM_UP",
    "LastResort",
    "can_time_out",
    "first_trace_allowance",
    "paused",
    "trace_deadline",
]

DEFAULT_TRACE_TIMEOUT: Final = 10.0  # seconds per trace: the slowest reference trace takes milliseconds
WARM_UP: Final = 60.0  # seconds at least for a target's first trace in a process (imports, caches)
GRACE: Final = 1.0  # seconds between repeated interrupts of a target that swallowed the first
LAST_RESORT: Final = 15.0  # seconds past the timeout before the process gives up on the target


def can_time_out() -> bool:
    """Whether this thread can stop a target by a timer signal."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


class _State:
    seconds: float = 0.0
    started: float = 0.0  # time.monotonic() when the current trace began, 0 when none runs


_STATE = _State()
_WARM: set[str] = set()  # targets that have run a trace in this process


def first_trace_allowance(target: str, seconds: float | None) -> float | None:
    """The timeout for the next trace of ``target`` (a name for its factory). With the
    default timeout, at least :data:`WARM_UP` for its first trace in this process, where a
    target (or the library behind it) imports and warms its caches (an SDK that takes 15 s
    to import on a busy machine is not hanging), and ``seconds`` after that. A timeout
    the user chose is kept exactly, first trace included."""
    if seconds != DEFAULT_TRACE_TIMEOUT or target in _WARM:
        return seconds
    _WARM.add(target)
    return max(seconds, WARM_UP)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
    raise TraceTimeout(_STATE.seconds, stack)


@contextmanager
def trace_deadline(seconds: float | None) -> Iterator[None]:
    """Within this block, the calling (main) thread is interrupted by
    :class:`TraceTimeout` after ``seconds`` (and every :data:`GRACE` seconds after that).
    ``None``, or a thread that cannot take the signal: no timeout."""
    if seconds is None or seconds <= 0 or not can_time_out():
        yield
        return
    previous: Any = signal.signal(signal.SIGALRM, _on_alarm)
    _STATE.seconds = seconds
    _STATE.started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds, GRACE)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _STATE.started = 0.0
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def paused() -> Iterator[None]:
    """Within this block the running trace's timeout does not run (nor does the last
    resort's clock): for work with a bound of its own, such as a program starting. Outside
    a trace, or in a thread the timer cannot reach, it does nothing."""
    if not _STATE.started or not can_time_out():
        yield
        return
    remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    started, paused_at = _STATE.started, time.monotonic()
    _STATE.started = 0.0
    try:
        yield
    finally:
        _STATE.started = started + (time.monotonic() - paused_at)
        # an interval that had already run out fires at once on re-arming
        signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001), GRACE)


clock.install(paused)  # adapters pause the trace's clock through the contract (callsafe.contract.clock)


class LastResort:
    """A daemon thread that ends the process when a trace outlives its timeout by
    :data:`LAST_RESORT` seconds (native code the timer signal cannot interrupt)."""

    def __init__(self, seconds: float | None, extra: float = LAST_RESORT) -> None:
        self.enabled = seconds is not None
        self.extra = extra
        self.thread: threading.Thread | None = None
        self.stopped = threading.Event()

    def __enter__(self) -> LastResort:
        if self.enabled and can_time_out():
            self.thread = threading.Thread(target=self._watch, name="callsafe-last-resort", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while not self.stopped.wait(1.0):
            started, limit = _STATE.started, _STATE.seconds + self.extra  # the running trace's own timeout
            if started and time.monotonic() - started > limit:
                sys.stderr.write(
                    f"\ncallsafe: the target has not answered for {limit:g} s and does not respond to the "
                    "per-trace timeout (native code?). Stacks of every thread:\n"
                )
                faulthandler.dump_traceback(all_threads=True)
                sys.stderr.write("callsafe: giving up: target error (exit 3)\n")
                sys.stderr.flush()
                os._exit(3)
