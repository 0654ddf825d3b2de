"""Certification on a Dask cluster (``callsafe certify TARGET --scheduler tcp://HOST:PORT``).

Why Dask distributed rather than a scheduler of our own: it already places tasks on
workers, notices a worker that died and runs its tasks again elsewhere, and gives up on a
task that keeps killing workers (``distributed.scheduler.allowed-failures``). What is left
for callsafe is small, and it is all here:

* **Tasks are partitions** (:mod:`callsafe.certify.partitions`): described work that the
  worker turns into traces itself; the driver never ships the exhaustive space or the
  walks. Each task builds the target on its worker from the target's name (``reference``,
  ``module:factory``; the module must be importable there) and runs every trace against
  a fresh target, so each worker uses its own store: a SQLite file in the worker's
  temporary folder, a fresh PostgreSQL schema, or memory.
* **Results come back once, in partition order**, whatever order the cluster ran them in,
  so the report is the one a single process writes (:mod:`callsafe.certify.execution`).
  A few partitions per worker thread are in flight at a time: enough to keep every worker
  busy, few enough that the driver holds little.
* **A lost worker loses no result**: the scheduler runs its unfinished partitions (and
  finished ones whose results had not been collected) again on other workers. Dask does
  that silently, so each task logs a start event (``Worker.log_event``) under a topic
  unique to the run; a partition that started more than once was re-run, and the report's
  ``execution`` object lists those partitions and the workers that were lost.
* **Nothing hangs**: a partition that killed more workers than the scheduler allows ends
  the run with :class:`~callsafe.certify.execution.ExecutionError` naming it, and so does
  a cluster left without any worker for ``no_workers_timeout`` seconds.

Dask is optional (``pip install 'callsafe[dask]'``): this module imports it only when an
executor is created, and says how to install it when it is missing.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

from callsafe.certify.checking import run_partition
from callsafe.certify.execution import Execution, ExecutionError, PartitionResult
from callsafe.certify.partitions import Partition
from callsafe.certify.targets import TargetFactory, TargetInfo, resolve_target

__all__ = ["DaskExecutor", "dask_available"]

_INSTALL = "running on a Dask cluster needs Dask distributed: pip install 'callsafe[dask]'"


def _distributed() -> Any:
    """The ``distributed`` module (typed as Any: it ships no complete annotations, and
    callsafe type-checks without it installed)."""
    return importlib.import_module("distributed")


def dask_available() -> bool:
    """Whether ``dask.distributed`` can be imported here."""
    try:
        _distributed()
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------
# On the worker
# --------------------------------------------------------------------------------------

_FACTORIES: dict[str, TargetFactory] = {}  # target name -> factory, per worker process


def _run_task(
    spec: str, capabilities: frozenset[str], partition: Partition, deadline: float | None, topic: str
) -> PartitionResult:
    """One partition on a Dask worker: say it started (so that a re-run shows), build the
    target's factory once per worker process, run the traces."""
    worker = _distributed().get_worker()
    worker.log_event(topic, {"partition": partition.key, "worker": worker.address})
    factory = _FACTORIES.get(spec)
    if factory is None:
        factory = _FACTORIES[spec] = resolve_target(spec)
    return run_partition(factory, capabilities, partition, deadline, worker.address)


# --------------------------------------------------------------------------------------
# On the driver
# --------------------------------------------------------------------------------------


class DaskExecutor:
    """Runs partitions on the Dask cluster whose scheduler is at ``scheduler``."""

    POLL = 2.0  # seconds between checks that the cluster still has workers

    def __init__(
        self,
        scheduler: str,
        info: TargetInfo,
        partition_size: int,
        *,
        connect_timeout: float = 30.0,
        no_workers_timeout: float = 120.0,
    ) -> None:
        try:
            distributed = _distributed()
        except ImportError:
            raise ExecutionError(_INSTALL) from None
        self.killed_worker: type[Exception] = distributed.KilledWorker
        self.info = info
        self.scheduler = scheduler
        self.no_workers_timeout = no_workers_timeout
        try:
            self.client: Any = distributed.Client(scheduler, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ExecutionError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            self.client.wait_for_workers(1, timeout=no_workers_timeout)
        except TimeoutError:
            self.client.close()
            raise ExecutionError(f"the Dask scheduler at {scheduler} has no worker") from None
        self.run_id = uuid.uuid4().hex[:12]
        self.topic = f"callsafe-{self.run_id}"
        self.record = Execution("dask", 0, scheduler, partition_size)
        self.submitted: dict[str, str] = {}  # partition key -> description, in submission order
        self.window: deque[tuple[Partition, Any]] = deque()
        self.workers_seen: set[str] = set()
        self._no_workers_since: float | None = None
        self._closed = False

    def _ahead(self) -> int:
        """Partitions in flight: two per worker thread, and a couple more."""
        threads: int = sum(self.client.nthreads().values())
        return 2 * max(threads, 1) + 2

    def run(self, partitions: Iterator[Partition], deadline: float | None) -> Iterator[PartitionResult]:
        ahead = self._ahead()
        for partition in partitions:
            if deadline is not None and time.time() > deadline:
                while self.window:
                    yield self._collect(*self.window.popleft())
                yield PartitionResult(partition, [], complete=False)
                return
            future = self.client.submit(
                _run_task,
                self.info.spec,
                self.info.capabilities,
                partition,
                deadline,
                self.topic,
                key=f"callsafe-{self.run_id}-{partition.key}",
                pure=False,
            )
            self.submitted[partition.key] = partition.describe()
            self.record.partitions += 1
            self.window.append((partition, future))
            while len(self.window) > ahead:
                yield self._collect(*self.window.popleft())
        while self.window:
            yield self._collect(*self.window.popleft())

    def _collect(self, partition: Partition, future: Any) -> PartitionResult:
        while True:
            try:
                result: PartitionResult = future.result(timeout=self.POLL)
            except TimeoutError:
                self._check_workers()
                continue
            except self.killed_worker:
                raise ExecutionError(
                    f"partition {partition.describe()} was running when Dask workers died, more times than the "
                    "scheduler allows (distributed.scheduler.allowed-failures): one of its traces probably crashes "
                    "the target's process; run them without --scheduler to find which"
                ) from None
            except Exception as exc:
                raise ExecutionError(
                    f"partition {partition.describe()} failed on a Dask worker: {type(exc).__name__}: {exc}"
                ) from exc
            self.workers_seen.add(result.worker)
            return result

    def _check_workers(self) -> None:
        if self.client.nthreads():
            self._no_workers_since = None
            return
        now = time.monotonic()
        if self._no_workers_since is None:
            self._no_workers_since = now
        elif now - self._no_workers_since > self.no_workers_timeout:
            raise ExecutionError(
                f"the Dask cluster at {self.scheduler} has had no worker for {self.no_workers_timeout:.0f} s"
            )

    def _account(self) -> None:
        """Which partitions started on more than one worker, and which workers are gone."""
        started: dict[str, list[str]] = {}
        for _, msg in self.client.get_events(self.topic):
            started.setdefault(msg["partition"], []).append(msg["worker"])
        alive = set(self.client.nthreads())
        every = {w for workers in started.values() for w in workers} | self.workers_seen
        self.record.workers = len(every)
        self.record.rerun_partitions = [
            description for key, description in self.submitted.items() if len(started.get(key, ())) > 1
        ]
        self.record.lost_workers = sorted(every - alive)

    def close(self, abort: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if abort and self.window:
                self.client.cancel([future for _, future in self.window])
            self._account()
        except Exception:  # an unreachable scheduler: the account stays as far as it got
            if not abort:
                raise
        finally:
            self.window.clear()
            self.client.close()

    def execution(self) -> Execution:
        return self.record
