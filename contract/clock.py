"""The harness's per-trace clock, as a target sees it: a target may pause it for work that
has a bound of its own.

Why here, in the contract: an adapter (``exec:`` targets start a program, which imports its
framework first, bounded by its own start timeout) must be able to say "this is not the
trace's time" without importing the harness, which sits above it. The harness's watchdog
(:mod:`callsafe.certify.watchdog`) installs the real pause when it is imported; with no
harness (an adapter used on its own) pausing does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["install", "paused"]

_PAUSE: list[Callable[[], AbstractContextManager[None]]] = [contextlib.nullcontext]


def install(pause: Callable[[], AbstractContextManager[None]]) -> None:
    """Make :func:`paused` use ``pause`` (the harness's watchdog does, on import)."""
    _PAUSE[0] = pause


def paused() -> AbstractContextManager[None]:
    """A block in which the running trace's timeout does not run."""
    return _PAUSE[0]()
