"""Replica processes for the PostgreSQL part of the durable-decisions benchmark.

Why processes, and why they live across repetitions: replicas of a deployment are separate
processes with their own connections, racing for the same calls through the store's
claim; threads of one interpreter would share one GIL and measure it instead. Starting a
process (an interpreter, imports, a connection) takes far longer than the work measured, so
the processes start once, and each repetition only tells them what to do next: open a
store (or a floor connection) in a fresh schema, wait, and on ``go`` run. The clock covers
``go`` to the last ``done``; each process reports the CPU time it spent in between.

A job is either :class:`StoreJob` (the reference core and driver over a
:class:`~callsafe.reference_impl.postgres_store.PostgresStore`; every replica receives
every event, as replicas behind a load balancer that all see a replayed stream would) or
:class:`FloorJob` (one-row ``INSERT`` transactions on a plain connection).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench.decisions import Recorder, deliver, ledger_insert, open_driver
from callsafe.model.vocabulary import CallKey, Event

__all__ = ["FloorJob", "Replicas", "StoreJob", "StoreReport"]


@dataclass(frozen=True)
class StoreJob:
    """Decide every call of the stream in the store's schema ``namespace``."""

    namespace: str


@dataclass(frozen=True)
class FloorJob:
    """Insert rows ``start``, ``start + step``, ... of the ledger rows into ``namespace``'s
    ledger table, ``commits`` one-row transactions per row."""

    namespace: str
    start: int
    step: int
    commits: int


@dataclass(frozen=True)
class StoreReport:
    """What one replica did: the calls it ran, and its store transactions."""

    ran: tuple[CallKey, ...]
    transactions: int


Job = StoreJob | FloorJob


def _counting(store: Any) -> list[int]:
    """Count the store's transactions (each ``apply`` and each ``claim`` is one)."""
    count = [0]
    apply, claim = store.apply, store.claim

    def counted_apply(*args: Any) -> Any:
        count[0] += 1
        return apply(*args)

    def counted_claim(*args: Any) -> Any:
        count[0] += 1
        return claim(*args)

    store.apply, store.claim = counted_apply, counted_claim
    return count


def _prepare(job: Job, dsn: str, events: Sequence[Event], rows: Sequence[tuple[Any, ...]]) -> tuple[Any, Any]:
    """The job's timed work and its cleanup, built in the replica process."""
    if isinstance(job, StoreJob):
        from callsafe.reference_impl.postgres_store import PostgresStore

        store = PostgresStore(dsn, job.namespace, create=True)
        count = _counting(store)
        executor = Recorder()
        core, driver = open_driver(store, executor)
        count[0] = 0

        def run_store() -> StoreReport:
            # the turn's binding too (one transaction per run). Binding it before ``go``
            # raced the other replica's load, which then restored a current turn without
            # its row: the store bug this benchmark found (load now reads one snapshot)
            deliver(core, driver, events)
            return StoreReport(tuple(executor.ran), count[0])

        return run_store, store.close
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f'SET search_path TO "{job.namespace}"')
    insert = ledger_insert("%s")
    mine = rows[job.start :: job.step]

    def run_floor() -> int:
        for row in mine:
            for _ in range(job.commits):
                with conn.transaction():
                    conn.execute(insert, row)
        return len(mine) * job.commits

    return run_floor, conn.close


def serve(conn: Connection, dsn: str, events: Sequence[Event], rows: Sequence[tuple[Any, ...]]) -> None:
    """A replica process: take jobs until told to stop (``None``)."""
    try:
        while (job := conn.recv()) is not None:
            work, close = _prepare(job, dsn, events, rows)
            conn.send(("ready", None))
            conn.recv()  # go
            c0 = time.process_time_ns()
            result = work()
            conn.send(("done", (time.process_time_ns() - c0, result)))
            close()
            conn.send(("closed", None))
    except BaseException as exc:  # the parent raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Replicas:
    """``count`` replica processes, started once (spawned: nothing of this process leaks in)."""

    def __init__(self, count: int, dsn: str, events: Sequence[Event], rows: Sequence[tuple[Any, ...]]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._processes: list[Any] = []
        for _ in range(count):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=serve, args=(child, dsn, list(events), list(rows)), daemon=True)
            process.start()
            child.close()
            self._conns.append(parent)
            self._processes.append(process)

    def _expect(self, conn: Connection, what: str) -> Any:
        kind, payload = conn.recv()
        if kind != what:
            raise RuntimeError(f"a replica process failed: {payload}" if kind == "error" else f"{kind}: {payload}")
        return payload

    @contextmanager
    def run(self, jobs: Sequence[Job], check: Callable[[list[Any]], None]) -> Iterator[Callable[[], int]]:
        """Give job ``i`` to process ``i``, wait until each is ready, and yield the timed
        work (``go`` to all, then every ``done``; returns their CPU ns). Afterwards: wait
        until each closed its connection, then ``check`` the results (one per job)."""
        used = self._conns[: len(jobs)]
        for conn, job in zip(used, jobs, strict=True):
            conn.send(job)
        for conn in used:
            self._expect(conn, "ready")
        results: list[Any] = []

        def work() -> int:
            for conn in used:
                conn.send("go")
            done = [self._expect(conn, "done") for conn in used]
            results.extend(result for _, result in done)
            return sum(cpu for cpu, _ in done)

        yield work
        for conn in used:
            self._expect(conn, "closed")
        check(results)

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError):  # already gone
                conn.send(None)
        for process in self._processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
