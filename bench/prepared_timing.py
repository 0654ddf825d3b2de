"""Best-of-N timing for work that needs fresh state every run, or runs in other processes.

Why not :func:`bench.common.best_of`: that times a thunk that can run again as it is. A
durable store cannot: deciding the same calls twice in one database is a replay (every
claim is refused), not a measurement; and a certification with ``workers=2`` spends most of
its CPU in worker processes that ``process_time`` of this process never sees. So here each
variant is a *preparation*: a context manager that builds fresh state (a new database file,
a new schema, replica processes told what to do) outside the clock and yields the work to
time; its exit (also outside the clock) checks what the work did and cleans up. The rules of
:mod:`bench.common` hold otherwise: repetitions interleaved across variants, the garbage
collector collected before each timed run, the minimum of wall and of CPU time kept.

The collector is disabled during a run unless ``keep_gc``: a short run must not pay for a
collection that the previous variant's garbage triggered; a run of many seconds that
allocates all along (a whole certification) keeps it, because its memory would otherwise
grow without bound, and collecting is part of what such a run costs.

CPU time counts every process that worked: this one (``process_time``), the child
processes it started and waited for during the run (``RUSAGE_CHILDREN``: a pool of workers
that ``certify`` joins before it returns), and processes that outlive the run and report
their own CPU time (the work returns it: long-lived replica processes).
"""

from __future__ import annotations

import gc
import resource
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from bench.common import Timing

__all__ = ["Prepare", "Work", "best_of_prepared", "children_cpu_ns"]

# The timed work: returns the CPU ns spent in processes that report their own (0 if none).
Work = Callable[[], int]
# Builds fresh state, yields the work, then checks and cleans up (all outside the clock).
Prepare = Callable[[], AbstractContextManager[Work]]


def children_cpu_ns() -> int:
    """User and system CPU of every child process this process has waited for, in ns."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((usage.ru_utime + usage.ru_stime) * 1e9)


def best_of_prepared(
    variants: Sequence[tuple[str, Prepare]], repeat: int, *, keep_gc: bool = False
) -> dict[str, Timing]:
    """Best wall and CPU time of each ``(name, prepare)``, ``repeat`` times, interleaved."""
    wall: dict[str, int] = {name: sys.maxsize for name, _ in variants}
    cpu: dict[str, int] = dict(wall)
    enabled = gc.isenabled()
    try:
        for _ in range(repeat):
            for name, prepare in variants:
                with prepare() as work:
                    gc.collect()
                    if not keep_gc:
                        gc.disable()
                    k0, c0, t0 = children_cpu_ns(), time.process_time_ns(), time.perf_counter_ns()
                    elsewhere = work()
                    t1, c1, k1 = time.perf_counter_ns(), time.process_time_ns(), children_cpu_ns()
                    if enabled:
                        gc.enable()
                wall[name] = min(wall[name], t1 - t0)
                cpu[name] = min(cpu[name], (c1 - c0) + (k1 - k0) + elsewhere)
    finally:
        if enabled:
            gc.enable()
        else:  # pragma: no cover - only when a caller disabled it
            gc.disable()
    return {name: Timing(wall[name], max(cpu[name], 1)) for name, _ in variants}
