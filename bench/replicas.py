"""Decisions per second with 1, 2 and 4 guard replicas on one store, SQLite and PostgreSQL
side by side, with the lease heartbeat on.

Issue 31, item 7. Replicas are processes (one guard each, its own connection), as a
deployment runs them; each reads its own streams (turns of ``CALLS_PER_TURN`` calls, one
response each) and decides every call: opened, fragments, terminal, validated, claimed,
run, outcome recorded. The guards are built before the clock starts (opening a store,
taking the lease); on ``go`` every replica runs its share, and the clock stops when the
last one is done. The heartbeat thread runs throughout, with ``lease_seconds`` short
enough (``LEASE``) that it beats several times during a run. After the run, the store is
checked: every call dispatched exactly once, none failed.

SQLite is the store as shipped (``synchronous="adaptive"``: each claim waits for the
disk), so its replicas share one file's write lock; PostgreSQL needs ``CALLSAFE_PG_DSN``
(skipped without it). ``python -m bench.replicas [--calls N]`` or ``python -m bench
--only replicas``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

from bench.common import COUNT_SCHEMA, Config, Section, guard_turn, markdown_table

__all__ = ["NAME", "TITLE", "run"]

NAME = "replicas"
TITLE = "callsafe.guard: decisions per second with 1, 2 and 4 replicas (SQLite, PostgreSQL)"

CALLS, QUICK_CALLS = 800, 80
CALLS_PER_TURN = 4
REPLICAS = (1, 2, 4)
LEASE = 1.5  # seconds: a heartbeat every 0.5 s


def _replica(conn: Connection, store: str, namespace: str, index: int, turns: int) -> None:
    """One replica process: open a guard, report ready, run its turns on ``go``."""
    from callsafe.guard import Guard, ToolCall

    ran: list[str] = []

    def execute(call: ToolCall) -> str:
        ran.append(str(call.key))
        return "ok"

    guard = Guard(
        {"count": COUNT_SCHEMA}, executor=execute, store=store, namespace=namespace or None, lease_seconds=LEASE
    )
    conn.send("ready")
    conn.recv()
    for j in range(turns):
        turn_id = f"w{index}-t{j}"
        guard_turn(guard, turn_id, CALLS_PER_TURN, conversation=turn_id)
    conn.send(ran)
    guard.close()


def _measure(store: str, namespace: str, replicas: int, calls: int) -> tuple[float, list[str]]:
    """Wall seconds from ``go`` to the last replica done, and every call run."""
    ctx = multiprocessing.get_context("spawn")
    turns = max(1, calls // CALLS_PER_TURN // replicas)
    pipes, procs = [], []
    for i in range(replicas):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_replica, args=(child, store, namespace, i, turns), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    try:
        for p in pipes:
            if p.recv() != "ready":  # pragma: no cover - a replica that failed to start
                raise RuntimeError("a replica did not start")
        started = time.perf_counter()
        for p in pipes:
            p.send("go")
        ran = [key for p in pipes for key in p.recv()]
        took = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.join(timeout=60)
    if len(ran) != len(set(ran)) or len(ran) != turns * replicas * CALLS_PER_TURN:
        raise AssertionError(f"{len(ran)} runs, {len(set(ran))} distinct, {turns * replicas * CALLS_PER_TURN} calls")
    return took, ran


def _stores(folder: Path, replicas: int) -> list[tuple[str, str, str]]:
    """(label, store URL or DSN, namespace) of each backend, each freshly created."""
    from callsafe.reference_impl.sqlite_store import SqliteStore

    path = folder / f"guard-{replicas}.db"
    SqliteStore(path, create=True).close()
    out = [("SQLite", f"sqlite:///{path}", "")]
    dsn = os.environ.get("CALLSAFE_PG_DSN", "")
    if dsn:
        from callsafe.reference_impl.postgres_store import PostgresStore

        namespace = f"bench_replicas_{uuid.uuid4().hex[:10]}"
        PostgresStore(dsn, namespace, create=True).close()
        out.append(("PostgreSQL", dsn, namespace))
    return out


def _drop(dsn: str, namespace: str) -> None:
    if namespace:
        from callsafe.reference_impl.postgres_store import PostgresStore

        store = PostgresStore(dsn, namespace)
        store.drop()
        store.close()


def run(config: Config, calls: int | None = None) -> Section:
    n = calls or (QUICK_CALLS if config.quick else CALLS)
    rates: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for replicas in REPLICAS:
            for label, store, namespace in _stores(Path(tmp), replicas):
                try:
                    took, ran = _measure(store, namespace, replicas, n)
                finally:
                    _drop(store, namespace)
                rates[(label, replicas)] = len(ran) / took
    labels = sorted({label for label, _ in rates}, key=lambda label: label != "SQLite")
    rows = [
        [str(r), *(f"{rates[(label, r)]:,.0f} ({rates[(label, r)] / rates[(label, 1)]:.2f}x)" for label in labels)]
        for r in REPLICAS
    ]
    lines = [
        f"## {TITLE}",
        "",
        f"{n:,} calls per run ({CALLS_PER_TURN} per turn), shared among the replicas; lease {LEASE} s (a heartbeat "
        "every 0.5 s). Decisions per second (every call decided and run once), and against 1 replica:",
        "",
        markdown_table(["replicas", *(f"{label}: decisions/s" for label in labels)], rows),
    ]
    if "PostgreSQL" not in labels:
        lines += ["", "PostgreSQL: not measured (set CALLSAFE_PG_DSN)."]
    ratios = {f"{label.lower()}_{r}x": rates[(label, r)] / rates[(label, 1)] for label in labels for r in REPLICAS}
    return Section(NAME, TITLE, "\n".join(lines) + "\n", ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__)
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per run (default {CALLS:,})")
    args = parser.parse_args(argv)
    print(run(Config(), args.calls).markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
