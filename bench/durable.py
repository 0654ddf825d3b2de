"""The durable-decisions benchmark: terminal decisions per second, the stores against raw inserts.

Issue "Benchmarks", item 5. The workload (:mod:`bench.decisions`): ``calls`` calls, each
opened, in two fragments, completed, claimed and executed through the reference core and
driver; the clock covers the calls, not opening the store (nor, for SQLite, binding the
turn: one transaction per run).

* **SQLite**, the store as shipped (WAL, ``synchronous="adaptive"``: the claim commits
  ``FULL``, everything else ``NORMAL``), and with ``synchronous="normal"`` for contrast,
  against two floors in a file configured like the store's (WAL, same busy timeout,
  ``BEGIN IMMEDIATE``), both inserting the ledger row the store writes for a decision into
  a table with the store's own DDL: **one commit per decision** (as durable as the claim:
  the least a decision that must survive a power cut can cost), and **the store's commits**
  (as many one-row transactions per decision as the store commits, each at the store's
  level, read from what SQLite ran: :func:`bench.decisions.profile_store`). The first ratio
  is the whole price of the store; the second what its statements and Python cost beyond
  its commits.
* **PostgreSQL** (``CALLSAFE_PG_DSN``), the store with one replica, and with two replicas
  (two processes, two connections, each receiving every event and racing for every claim,
  as in the race tests), against one-row ``INSERT`` transactions over one connection and
  over two (the rows split between them), and against the store's commits (on each
  connection, for two). Not measured, with the reason, when no server is reachable.

Each run is checked after the clock stops: every call ran exactly once (across replicas),
every floor row is in its table. Files go to a temporary folder (its file system is
printed: an fsync on tmpfs costs nothing); every PostgreSQL run uses a fresh schema, dropped
afterwards.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Config, Prepare, Section, Timing, Work, best_of_prepared, busy_note, fmt_ratio, markdown_table
from bench.decisions import (
    Recorder,
    StoreProfile,
    decision_events,
    deliver,
    ledger_ddl,
    ledger_rows,
    open_driver,
    profile_store,
    sqlite_connect,
    sqlite_floor,
)
from callsafe.model.vocabulary import CallKey
from callsafe.reference_impl.sqlite_store import SqliteStore

__all__ = ["NAME", "TITLE", "run"]

NAME = "durable"
TITLE = "Durable decisions: terminal decisions per second, the stores against raw inserts"

SQLITE_CALLS, QUICK_SQLITE_CALLS = 300, 30
PG_CALLS, QUICK_PG_CALLS = 600, 40
PG_ID = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"  # the PostgreSQL store's identity column


@dataclass(frozen=True)
class _Row:
    """One measured variant: its name, commits per decision, and its best times."""

    name: str
    commits: str
    timing: Timing


def _filesystem(path: Path) -> str:
    """The type of the file system holding ``path`` (from ``/proc/mounts``), or unknown."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    best = ("", "unknown")
    for fields in mounts:
        point, kind = fields[1], fields[2]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, kind)
    return best[1]


def _commits(commits: Sequence[str]) -> str:
    """``5 NORMAL + 1 FULL``: a decision's commits, by level."""
    counts = Counter(commits)
    return " + ".join(f"{n} {level}" for level, n in sorted(counts.items(), key=lambda kv: kv[0] != "NORMAL"))


def _ran_once(ran: Sequence[CallKey], keys: Sequence[CallKey], who: str) -> None:
    counts = Counter(ran)
    if set(counts) != set(keys) or max(counts.values(), default=0) > 1:
        twice = sum(1 for n in counts.values() if n > 1)
        raise AssertionError(f"{who}: {len(counts)} of {len(keys)} calls ran, {twice} more than once")


# ------------------------------------------------------------------------------------
# SQLite
# ------------------------------------------------------------------------------------


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _sqlite_store(
    folder: Path, synchronous: str, events: Sequence[Any], keys: Sequence[CallKey], *, witness: bool = True
) -> Prepare:
    @contextmanager
    def prepare() -> Iterator[Work]:
        path = folder / f"store-{uuid.uuid4().hex[:8]}.sqlite3"
        store = SqliteStore(path, create=True, synchronous=synchronous, witness=witness)
        executor = Recorder()
        try:
            core, driver = open_driver(store, executor)
            deliver(core, driver, events[:1])  # the turn

            def work() -> int:
                deliver(core, driver, events[1:])
                return 0

            yield work
        finally:
            store.close()
            _remove_database(path)
            Path(f"{path}.witness").unlink(missing_ok=True)
        _ran_once(executor.ran, keys, f"SQLite store ({synchronous})")

    return prepare


def _sqlite_floor(folder: Path, rows: Sequence[tuple[Any, ...]], commits: Sequence[str]) -> Prepare:
    @contextmanager
    def prepare() -> Iterator[Work]:
        path = folder / f"floor-{uuid.uuid4().hex[:8]}.sqlite3"
        conn = sqlite_connect(path)
        try:
            yield sqlite_floor(conn, rows, commits)
            stored = conn.execute("SELECT count(*) FROM ledger").fetchone()[0]
        finally:
            conn.close()
            _remove_database(path)
        if stored != len(rows) * len(commits):
            raise AssertionError(f"the SQLite floor stored {stored} rows, not {len(rows) * len(commits)}")

    return prepare


def _measure_sqlite(config: Config, folder: Path) -> tuple[list[_Row], StoreProfile, int]:
    calls = QUICK_SQLITE_CALLS if config.quick else SQLITE_CALLS
    events, keys = decision_events(calls)
    shipped, normal = profile_store(folder, "adaptive"), profile_store(folder, "normal")
    rows = ledger_rows(keys, shipped)
    plan: list[tuple[str, tuple[str, ...], Prepare]] = [
        ("store, as shipped (adaptive)", shipped.commits, _sqlite_store(folder, "adaptive", events, keys)),
        ("store, synchronous=normal", normal.commits, _sqlite_store(folder, "normal", events, keys)),
        (
            "store, as shipped, no witness",
            shipped.commits,
            _sqlite_store(folder, "adaptive", events, keys, witness=False),
        ),
        ("floor: 1 FULL commit per decision", ("FULL",), _sqlite_floor(folder, rows, ("FULL",))),
        ("floor: 1 NORMAL commit per decision", ("NORMAL",), _sqlite_floor(folder, rows, ("NORMAL",))),
        ("floor: the shipped store's commits", shipped.commits, _sqlite_floor(folder, rows, shipped.commits)),
        ("floor: the normal store's commits", normal.commits, _sqlite_floor(folder, rows, normal.commits)),
    ]
    best = best_of_prepared([(name, prepare) for name, _, prepare in plan], 2 if config.quick else config.repeat)
    return [_Row(name, _commits(commits), best[name]) for name, commits, _ in plan], shipped, calls


# ------------------------------------------------------------------------------------
# PostgreSQL
# ------------------------------------------------------------------------------------


def _server(dsn: str) -> tuple[str | None, dict[str, str]]:
    """Why PostgreSQL cannot be measured (None when it can), and the server's settings
    that decide what a commit costs."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'callsafe[postgres]')", {}
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            settings = {}
            for name in ("server_version", "fsync", "synchronous_commit"):
                row = conn.execute(f"SHOW {name}").fetchone()
                settings[name] = str(row[0]) if row else "unknown"
    except psycopg.Error as exc:
        return f"cannot connect to the server in CALLSAFE_PG_DSN ({type(exc).__name__})", {}
    return None, settings


def _pg_execute(dsn: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def _measure_pg(config: Config, dsn: str, profile: StoreProfile) -> tuple[list[_Row], dict[str, Any]]:
    from bench.pg_replicas import FloorJob, Replicas, StoreJob, StoreReport

    calls = QUICK_PG_CALLS if config.quick else PG_CALLS
    events, keys = decision_events(calls)
    rows = ledger_rows(keys, profile)
    k = len(profile.commits)
    facts: dict[str, Any] = {"calls": calls}

    def check_store(who: str) -> Callable[[list[Any]], None]:
        def check(reports: list[Any]) -> None:
            ran = [key for r in reports for key in r.ran]
            _ran_once(ran, keys, who)
            assert all(isinstance(r, StoreReport) for r in reports)
            facts[who] = {
                "ran": [len(r.ran) for r in reports],
                "transactions": sum(r.transactions for r in reports),
            }

        return check

    def check_floor(expected: int) -> Callable[[list[Any]], None]:
        def check(inserted: list[Any]) -> None:
            if sum(inserted) != expected:
                raise AssertionError(f"the PostgreSQL floor inserted {sum(inserted)} rows, not {expected}")

        return check

    replicas = Replicas(2, dsn, events, rows)

    def store(count: int, who: str) -> Prepare:
        @contextmanager
        def prepare() -> Iterator[Work]:
            namespace = f"callsafe_bench_{uuid.uuid4().hex[:12]}"
            try:
                with replicas.run([StoreJob(namespace)] * count, check_store(who)) as work:
                    yield work
            finally:
                _pg_execute(dsn, f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')

        return prepare

    def floor(jobs: Callable[[str], list[FloorJob]], expected: int) -> Prepare:
        @contextmanager
        def prepare() -> Iterator[Work]:
            namespace = f"callsafe_bench_{uuid.uuid4().hex[:12]}"
            _pg_execute(dsn, f'CREATE SCHEMA "{namespace}"', f'SET search_path TO "{namespace}"', ledger_ddl(PG_ID))
            try:
                with replicas.run(jobs(namespace), check_floor(expected)) as work:
                    yield work
            finally:
                _pg_execute(dsn, f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')

        return prepare

    plan: list[tuple[str, str, Prepare]] = [
        ("store, 1 replica", f"{k}", store(1, "1 replica")),
        ("store, 2 replicas racing", f"{k} on each", store(2, "2 replicas")),
        ("floor: 1 commit per decision, 1 connection", "1", floor(lambda ns: [FloorJob(ns, 0, 1, 1)], calls)),
        (
            "floor: 1 commit per decision, 2 connections",
            "1 (rows split)",
            floor(lambda ns: [FloorJob(ns, 0, 2, 1), FloorJob(ns, 1, 2, 1)], calls),
        ),
        (
            "floor: the store's commits, 1 connection",
            f"{k}",
            floor(lambda ns: [FloorJob(ns, 0, 1, k)], calls * k),
        ),
        (
            "floor: the store's commits, 2 connections",
            f"{k} on each",
            floor(lambda ns: [FloorJob(ns, 0, 1, k), FloorJob(ns, 0, 1, k)], 2 * calls * k),
        ),
    ]
    try:
        best = best_of_prepared([(name, prepare) for name, _, prepare in plan], 2 if config.quick else config.repeat)
    finally:
        replicas.close()
    return [_Row(name, commits, best[name]) for name, commits, _ in plan], facts


# ------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------


def _table(rows: Sequence[_Row], calls: int) -> str:
    header = ["variant", "commits per decision", "decisions/s (wall)", "wall ms/decision", "CPU us/decision"]
    out = []
    for row in rows:
        t = row.timing
        out.append(
            [
                row.name,
                row.commits,
                f"{calls / (t.wall / 1e9):.0f}",
                f"{t.wall / calls / 1e6:.2f}",
                f"{t.cpu / calls / 1e3:.0f}",
            ]
        )
    return markdown_table(header, out)


def _compare(
    rows: Sequence[_Row], pairs: Sequence[tuple[str, str, str, str]], ratios: dict[str, float]
) -> list[list[str]]:
    """Ratio rows ``store / floor`` (time per decision: 2.0x = half the floor's rate)."""
    by_name = {r.name: r.timing for r in rows}
    out = []
    for key, what, store, floor in pairs:
        s, f = by_name[store], by_name[floor]
        ratios[key] = s.wall / f.wall
        ratios[f"{key}@cpu"] = s.cpu / f.cpu
        out.append([what, fmt_ratio(s.wall / f.wall), fmt_ratio(s.cpu / f.cpu)])
    return out


def run(config: Config) -> Section:
    """SQLite always; PostgreSQL when ``CALLSAFE_PG_DSN`` reaches a server. Headline
    ratios (time per decision, store over floor, wall; ``@cpu`` by CPU time):
    ``sqlite/shipped`` (against one FULL commit per decision), ``sqlite/shipped-vs-commits``
    (against the store's own commits as raw inserts), ``sqlite/normal``,
    ``sqlite/normal-vs-commits``; ``pg/1-replica``, ``pg/2-replicas`` (against one commit per
    decision on as many connections), ``pg/1-replica-vs-commits``,
    ``pg/2-replicas-vs-commits``, and ``pg/2-replicas-over-1`` (time per decision of two
    racing replicas over one)."""
    ratios: dict[str, float] = {}
    lines = [f"## {TITLE}", ""]
    note = busy_note()
    if note:
        lines += [f"> {note}", ""]
    with tempfile.TemporaryDirectory(prefix="callsafe-bench-durable-") as tmp:
        folder = Path(tmp)
        fs = _filesystem(folder)
        sqlite_rows, shipped, calls = _measure_sqlite(config, folder)
    lines += [
        f"### SQLite {sqlite3.sqlite_version}: {calls} decisions",
        "",
        "Each decision: a call opened, its arguments in 2 fragments, completed, validated, claimed, executed.",
        "",
        f"The store commits {len(shipped.commits)} transactions per decision (open, each fragment, the terminal",
        "event id, the claim, the outcome; read from the statements SQLite ran). As shipped",
        f"(`adaptive`) they are {_commits(shipped.commits)}: only the claim waits for the disk, and then the",
        "witness (its mark raised: one write in place and an fdatasync; `normal`: the write only). The floor inserts",
        "the decision's ledger row into the store's ledger table, one `BEGIN IMMEDIATE` ... `COMMIT` per row, in a",
        f"WAL file like the store's. Files in a temporary folder on {fs}.",
        "",
        _table(sqlite_rows, calls),
        "",
        "Ratios, store over floor (time per decision; 1.00x = as fast as the floor):",
        "",
        markdown_table(
            ["comparison", "wall", "CPU"],
            _compare(
                sqlite_rows,
                [
                    (
                        "sqlite/shipped",
                        "store as shipped / 1 FULL commit per decision",
                        "store, as shipped (adaptive)",
                        "floor: 1 FULL commit per decision",
                    ),
                    (
                        "sqlite/shipped-vs-commits",
                        "store as shipped / its own commits as raw inserts",
                        "store, as shipped (adaptive)",
                        "floor: the shipped store's commits",
                    ),
                    (
                        "sqlite/witness",
                        "store as shipped / the same without its witness (the witness's cost)",
                        "store, as shipped (adaptive)",
                        "store, as shipped, no witness",
                    ),
                    (
                        "sqlite/normal",
                        "store normal / 1 NORMAL commit per decision",
                        "store, synchronous=normal",
                        "floor: 1 NORMAL commit per decision",
                    ),
                    (
                        "sqlite/normal-vs-commits",
                        "store normal / its own commits as raw inserts",
                        "store, synchronous=normal",
                        "floor: the normal store's commits",
                    ),
                ],
                ratios,
            ),
        ),
        "",
    ]
    lines += _pg_section(config, shipped, ratios)
    return Section(NAME, TITLE, "\n".join(lines), ratios)


def _pg_section(config: Config, profile: StoreProfile, ratios: dict[str, float]) -> list[str]:
    lines = ["### PostgreSQL: one replica and two racing replicas", ""]
    dsn = os.environ.get("CALLSAFE_PG_DSN", "")
    reason, settings = _server(dsn) if dsn else ("CALLSAFE_PG_DSN is not set (tools/postgres.sh start)", {})
    if reason is not None:
        return [*lines, f"Not measured: {reason}.", ""]
    pg_rows, facts = _measure_pg(config, dsn, profile)
    calls = facts["calls"]
    two = facts["2 replicas"]
    one = facts["1 replica"]
    lines += [
        f"PostgreSQL {settings['server_version']} on loopback, `fsync={settings['fsync']}`, "
        f"`synchronous_commit={settings['synchronous_commit']}`"
        + (
            " (a throwaway test server: commits do not wait for the disk, so this measures round trips,"
            " statements and locks, not the disk)."
            if settings["fsync"] == "off"
            else "."
        ),
        f"{calls} decisions. Each replica is a process with its own connection; with two, both receive every",
        f"event and race for every claim: they ran {two['ran'][0]} and {two['ran'][1]} calls, each exactly once,",
        f"in {two['transactions'] / calls:.1f} store transactions per decision together "
        f"({one['transactions'] / calls:.1f} with one replica). The floor inserts the",
        "decision's ledger row (`BEGIN` ... `COMMIT` per row, as the store frames its transactions) into the",
        "store's ledger table. CPU is the clients' (this machine's replica processes), not the server's.",
        "",
        _table(pg_rows, calls),
        "",
        "Ratios, store over floor (time per decision):",
        "",
        markdown_table(
            ["comparison", "wall", "CPU"],
            _compare(
                pg_rows,
                [
                    (
                        "pg/1-replica",
                        "1 replica / 1 commit per decision, 1 connection",
                        "store, 1 replica",
                        "floor: 1 commit per decision, 1 connection",
                    ),
                    (
                        "pg/2-replicas",
                        "2 replicas / 1 commit per decision, 2 connections",
                        "store, 2 replicas racing",
                        "floor: 1 commit per decision, 2 connections",
                    ),
                    (
                        "pg/1-replica-vs-commits",
                        "1 replica / its commits as raw inserts, 1 connection",
                        "store, 1 replica",
                        "floor: the store's commits, 1 connection",
                    ),
                    (
                        "pg/2-replicas-vs-commits",
                        "2 replicas / their commits as raw inserts, 2 connections",
                        "store, 2 replicas racing",
                        "floor: the store's commits, 2 connections",
                    ),
                    (
                        "pg/2-replicas-over-1",
                        "2 racing replicas / 1 replica",
                        "store, 2 replicas racing",
                        "store, 1 replica",
                    ),
                ],
                ratios,
            ),
        ),
        "",
    ]
    return lines
