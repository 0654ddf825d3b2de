"""Executors on this machine: this process, or a pool of local worker processes.

Why apart from the harness: an executor only needs to run a partition
(:func:`~callsafe.certify.checking.run_partition`) and hand results back in order
(:class:`~callsafe.certify.execution.Executor`); the planner picks one and never the
other way round.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from callsafe.certify.checking import run_partition, run_pieces
from callsafe.certify.execution import Execution, PartitionResult
from callsafe.certify.partitions import Partition
from callsafe.certify.targets import TargetFactory, TargetInfo, resolve_target
from callsafe.certify.watchdog import DEFAULT_TRACE_TIMEOUT

__all__ = ["InProcess", "Processes"]


_WORKER: dict[str, Any] = {}


def _worker_init(
    spec: str, capabilities: frozenset[str], path: list[str], timeout: float | None, max_hangs: int = 0
) -> None:
    sys.path[:] = path
    _WORKER["factory"] = resolve_target(spec)
    _WORKER["capabilities"] = capabilities
    _WORKER["timeout"] = timeout
    _WORKER["max_hangs"] = max_hangs


def _worker_run(partition: Partition, deadline: float | None) -> PartitionResult:
    return run_partition(
        _WORKER["factory"],
        _WORKER["capabilities"],
        partition,
        deadline,
        f"pid {os.getpid()}",
        _WORKER["timeout"],
        _WORKER["max_hangs"],
    )


class InProcess:
    """Runs each partition here, handing results back one trace at a time (the progress
    bar moves per trace, and a budget stops between two traces)."""

    def __init__(
        self, factory: TargetFactory, capabilities: frozenset[str], timeout: float | None = DEFAULT_TRACE_TIMEOUT
    ) -> None:
        self.factory = factory
        self.capabilities = capabilities
        self.timeout = timeout
        self.record = Execution()

    def run(self, partitions: Iterator[Partition], deadline: float | None) -> Iterator[PartitionResult]:
        for partition in partitions:
            self.record.partitions += 1
            for piece in run_pieces(self.factory, self.capabilities, partition, deadline, timeout=self.timeout):
                yield piece
                if not piece.complete:
                    return

    def close(self, abort: bool = False) -> None:
        """Nothing to release."""

    def execution(self) -> Execution:
        return self.record


class Processes:
    """Runs partitions in a pool of local worker processes (spawned: nothing of the
    parent's state leaks in), a few partitions ahead of the one whose results are awaited."""

    def __init__(
        self,
        info: TargetInfo,
        workers: int,
        partition_size: int,
        timeout: float | None = DEFAULT_TRACE_TIMEOUT,
        max_hangs: int = 0,
    ) -> None:
        self.workers = workers
        ctx = multiprocessing.get_context("spawn")
        self.pool: Any = ctx.Pool(
            workers,
            initializer=_worker_init,
            initargs=(info.spec, info.capabilities, list(sys.path), timeout, max_hangs),
        )
        self.record = Execution("processes", workers, None, partition_size)

    def run(self, partitions: Iterator[Partition], deadline: float | None) -> Iterator[PartitionResult]:
        window: deque[Any] = deque()
        for partition in partitions:
            if deadline is not None and time.time() > deadline:
                while window:
                    yield window.popleft().get()
                yield PartitionResult(partition, [], complete=False)
                return
            self.record.partitions += 1
            window.append(self.pool.apply_async(_worker_run, (partition, deadline)))
            while len(window) > self.workers * 2:
                yield window.popleft().get()
        while window:
            yield window.popleft().get()

    def close(self, abort: bool = False) -> None:
        if abort:
            self.pool.terminate()
        else:
            self.pool.close()
        self.pool.join()

    def execution(self) -> Execution:
        return self.record
