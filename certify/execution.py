"""How partitions get run: the interface every executor implements, what it hands back,
and the account of the run that goes into the report's ``execution`` object.

Why an interface: the harness (:func:`callsafe.certify.harness.certify`) plans partitions
(:mod:`callsafe.certify.partitions`) and absorbs their results in partition order; where
they run is the executor's business: in this process, in local worker processes
(``--workers N``), or on a Dask cluster (``--scheduler``, :mod:`callsafe.certify.distributed`).
An executor may run partitions in any order and on any worker, and run one again when a
worker is lost, but it hands results back exactly once per partition, in the order the
partitions were given: that is what makes the report the same whichever executor ran it.

How a run was executed (which executor, how many workers, partitions, partitions re-run
after a worker was lost) is kept apart from what was found, in :class:`Execution`: the
report's ``execution`` object, together with ``timings``, ``started_at`` and the
per-generator ``seconds`` and ``wall_seconds``, is all that may differ between two runs
with the same target, options and seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from callsafe.certify.judge import Judgement
from callsafe.certify.partitions import Partition
from callsafe.generators.coverage import Pair, Transition
from callsafe.model.vocabulary import Trace

__all__ = ["Execution", "ExecutionError", "Executor", "PartitionResult", "TraceResult"]


@dataclass
class TraceResult:
    """One trace's outcome, as a worker returns it (small, picklable): the trace itself
    only when it violated something (it may become a counterexample)."""

    generator: str
    index: int
    name: str
    missing: tuple[str, ...]  # capabilities the trace needs and the target lacks
    judgement: Judgement | None  # None when not applicable
    seconds: float = 0.0
    transitions: frozenset[Transition] = frozenset()
    pairs: frozenset[Pair] = frozenset()
    trace: Trace | None = None
    features: frozenset[str] = frozenset()  # the parts of the concrete domain it holds

    @property
    def applicable(self) -> bool:
        return not self.missing


class ExecutionError(RuntimeError):
    """The run could not be completed where it was sent (a partition that keeps killing
    workers, a cluster with no worker left, a worker that cannot build the target); the
    message says which partition and why."""


@dataclass
class PartitionResult:
    """The results of a partition's traces, in index order, or of a consecutive piece of
    them (the in-process executor hands results back one trace at a time).

    ``skipped`` counts the equivalent traces the exhaustive enumeration skipped in this
    piece; ``complete`` is False when the budget stopped the partition (then nothing after
    it counts); ``worker`` names the process that ran it."""

    partition: Partition
    results: list[TraceResult]
    skipped: int = 0
    complete: bool = True
    worker: str = ""


@dataclass
class Execution:
    """How a run was executed (never what it found)."""

    executor: str = "in-process"  # "in-process" | "processes" | "dask"
    workers: int = 1
    scheduler: str | None = None
    partition_size: int | None = None  # traces per partition; None: one per generator
    partitions: int = 0
    rerun_partitions: list[str] = field(default_factory=list)  # re-run after a worker was lost
    lost_workers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "workers": self.workers,
            "scheduler": self.scheduler,
            "partition_size": self.partition_size,
            "partitions": self.partitions,
            "rerun_partitions": list(self.rerun_partitions),
            "lost_workers": list(self.lost_workers),
        }

    def summary(self) -> str:
        """One line for the console and the HTML page."""
        where = {"in-process": "in this process", "processes": f"in {self.workers} local worker processes"}.get(
            self.executor, f"on the Dask cluster at {self.scheduler} ({self.workers} workers)"
        )
        text = f"ran {where}, {self.partitions} partitions"
        if self.rerun_partitions:
            text += (
                f"; re-run after a worker was lost ({', '.join(self.lost_workers) or 'unknown'}): "
                f"partitions {', '.join(self.rerun_partitions)}"
            )
        return text


class Executor(Protocol):
    """Runs partitions and hands their results back once each, in the order given."""

    def run(self, partitions: Iterator[Partition], deadline: float | None) -> Iterator[PartitionResult]:
        """Results of ``partitions``, in order. ``deadline`` (a :func:`time.time` value)
        stops the run: the partition it stopped ends with ``complete=False``, and no
        result comes after it."""
        ...

    def close(self, abort: bool = False) -> None:
        """Release the workers; ``abort`` (an error or Ctrl-C) stops them now."""
        ...

    def execution(self) -> Execution:
        """The account of the run so far."""
        ...
