"""A time budget for one library adapter's run over a recording.

Why: an adapter runs third-party code on a stream someone brought in, and some libraries
are slow on large or odd input (langchain-core took 77 s on a 1 MB stream); one of them
must not hold up the comparison of all the others. A budget that stops the work from
outside is the only one that works for code we do not own: an interval timer's signal
raises :class:`OutOfTime` in the main thread at the next bytecode. It derives from
``BaseException`` on purpose, so that a library's ``except Exception`` cannot swallow it.
Where no timer can be set (not the main thread, no ``SIGALRM``) the run has no budget, and
the caller is told so by :func:`available`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

__all__ = ["LIBRARY_BUDGET", "OutOfTime", "available", "time_budget"]

# Seconds each library adapter may spend on one recording (``callsafe inspect --library-budget``).
LIBRARY_BUDGET: Final = 30.0


class OutOfTime(BaseException):
    """The budget ran out; raised inside the code under the budget."""


def available() -> bool:
    """Whether a budget can be enforced here (main thread, a platform with SIGALRM)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Run the body for at most ``seconds`` (None or 0: no limit; also where unavailable)."""
    if not seconds or not available():
        yield
        return

    def _expired(signum: int, frame: FrameType | None) -> None:
        raise OutOfTime(f"stopped after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
