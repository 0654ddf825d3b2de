"""Races: several processes (replicas) on one store receive the same stream at once, with
replays, restarts and user or operator stops delivered to one of them at a random point.

Every replica receives every call's fragments and its terminal event (so every replica
claims every call); one replica also receives, at a random position, a control: a tenant
stop, a user cancel, a quarantine, or a new turn that supersedes the trial's turn. The
others learn of it only through the store. A barrier starts each trial in all replicas at
once. Checked over every trial:

* no call key ran twice (an append-only journal written by the executor in every replica);
* what ran is exactly what the store says was claimed (each claim's winner ran once);
* **no stopped call ran**: no claim that *started* after the control was durable (the
  controlling replica notes the monotonic time once the control's transaction returned)
  was granted: the store re-checks the turn, the response and the tool at claim time.

SQLite: replicas share one file. PostgreSQL (``CALLSAFE_PG_DSN``): replicas share one
schema. Fast variants by default; ``CALLSAFE_LONG=1`` runs thousands of trials.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import reliability_child as child
import skips
from reliability_child import RaceConfig, call, journal_entries
from reliability_support import CTX, execution_counts, long_variant, report_figures

from callsafe.model.vocabulary import (
    CallKey,
    CancelTurn,
    Event,
    QuarantineResponse,
    Restart,
    StopTenant,
    TurnStarted,
)
from callsafe.reference_impl.sqlite_store import SqliteStore

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
CALLS = "abc"
CONTROLS = ("none", "stop_tenant", "cancel_turn", "quarantine_response", "supersede")


def plan(trials: int, workers: int, seed: int) -> tuple[list[list[list[Event]]], dict[int, str]]:
    """Each replica's stream per trial, and each trial's control. Every trial has its own
    tenant, turn and response; item and call ids are the same in every trial."""
    rng = random.Random(seed)
    streams: list[list[list[Event]]] = [[] for _ in range(workers)]
    controls: dict[int, str] = {}
    for i in range(trials):
        tenant, turn, response = f"ten{i}", f"t{i}", f"r{i}"
        start = TurnStarted(turn=turn, actor=f"u{i % 5}", tenant=tenant)
        calls = [call(turn, response, c, "book", '{"day":"Tue"}', parts=rng.randint(1, 3)) for c in CALLS]
        kind = rng.choice(CONTROLS)
        control: Event | None = {
            "stop_tenant": StopTenant(tenant=tenant, reason="race"),
            "cancel_turn": CancelTurn(turn=turn),
            "quarantine_response": QuarantineResponse(response=response, reason="race"),
            "supersede": TurnStarted(turn=f"{turn}-next", actor=f"u{i % 5}", tenant=tenant),
            "none": None,
        }[kind]
        controls[i] = kind
        for w in range(workers):
            pending = [list(c) for c in calls]
            body: list[Event] = []
            while any(pending):
                body.append(rng.choice([p for p in pending if p]).pop(0))
            if rng.random() < 0.5:  # a reconnect replays what was sent so far
                body += body[: rng.randrange(len(body))]
            if rng.random() < 0.5:  # a terminal event delivered twice
                body.append(next(e for e in reversed(body) if e.kind == "call_terminal"))
            stream = [start, *body]
            if control is not None and w == i % workers:
                stream.insert(rng.randint(1, len(stream)), control)
            if rng.random() < 0.05:  # this replica restarts mid-stream
                stream.insert(rng.randint(1, len(stream)), Restart())
            streams[w].append(stream)
    return streams, controls


def race(tmp_path: Path, trials: int, workers: int, seed: int, *, dsn: str | None = None) -> dict[str, Any]:
    """Run the replicas; check every trial; the figures."""
    streams, controls = plan(trials, workers, seed)
    journal = tmp_path / "journal"
    barrier = CTX.Barrier(workers)
    namespace = f"callsafe_race_{uuid.uuid4().hex[:12]}" if dsn else None
    store_path = None if dsn else tmp_path / "race.sqlite3"
    configs = [
        RaceConfig(
            worker=w,
            streams=streams[w],
            journal=journal,
            report=tmp_path / f"report-{w}.json",
            barrier=barrier,
            store=store_path,
            dsn=dsn,
            namespace=namespace,
        )
        for w in range(workers)
    ]
    processes = [CTX.Process(target=child.race_worker, args=(cfg,)) for cfg in configs]
    for p in processes:
        p.start()
    for p in processes:
        p.join(600)
    for p in processes:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in processes] == [0] * workers, "a replica failed"

    if dsn:
        from callsafe.reference_impl.postgres_store import PostgresStore

        store: Any = PostgresStore(dsn, namespace)
    else:
        store = SqliteStore(store_path)  # type: ignore[arg-type]
    try:
        calls = list(store.rows("calls"))
    finally:
        if dsn:
            store.drop()
        store.close()
    dispatched = {CallKey(r[4], r[0], r[1], r[2], r[3]) for r in calls if r[6] == "dispatched"}
    entries = journal_entries(journal)
    counts = execution_counts(entries)
    assert max(counts.values(), default=0) == 1, f"a call key ran twice: {counts.most_common(3)}"
    assert set(counts) == dispatched, "what ran is not what the store says was claimed"

    reports = [json.loads(cfg.report.read_text()) for cfg in configs]
    durable_at = {trial: t for r in reports for trial, _kind, t in r["controls"]}
    late: list[str] = []
    results: Counter[str] = Counter()
    refused_after = 0
    for r in reports:
        for trial, key, t0, _t1, result in r["claims"]:
            results[result] += 1
            if trial in durable_at and t0 > durable_at[trial]:
                if result == "claimed":
                    late.append(f"trial {trial} ({controls[trial]}): {key} claimed after the control was durable")
                else:
                    refused_after += 1
    assert late == [], late[:5]
    stopped_trials = [i for i, kind in controls.items() if kind != "none"]
    return {
        "trials": trials,
        "replicas": workers,
        "controls": len(stopped_trials),
        "calls": trials * len(CALLS),
        "executed": len(counts),
        "claims": dict(results),
        "claims_after_a_control_refused": refused_after,
        "ran_twice": 0,
        "stopped_call_ran": 0,
    }


def test_sqlite_replicas_race(tmp_path: Path) -> None:
    figures = race(tmp_path, trials=200, workers=3, seed=1)
    report_figures("sqlite races", figures)
    assert figures["claims"].get("taken", 0) > 0, "the replicas never contended for a claim"
    assert figures["claims_after_a_control_refused"] > 0, "no claim ever came after a control: the race is not one"


@contextmanager
def _database(dsn: str) -> Iterator[str]:
    """A database of its own for one race (so that its deadlock count is the race's): the
    DSN to reach it; dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"callsafe_race_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _deadlocks(dsn: str) -> int:
    """PostgreSQL's count of deadlocks in the database of ``dsn`` (statistics are flushed
    when a backend ends: read it after the replicas disconnected)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.skipif(not DSN, reason=skips.POSTGRES)
@pytest.mark.postgres
def test_postgres_replicas_race(tmp_path: Path) -> None:
    with _database(DSN) as dsn:
        figures = race(tmp_path, trials=200, workers=3, seed=2, dsn=dsn)
        figures["deadlocks"] = _deadlocks(dsn)
    report_figures("postgres races", figures)
    assert figures["claims"].get("taken", 0) > 0
    # a deadlock is retried (so it is safe), but each one stalls its replicas for a
    # deadlock_timeout: the store writes rows in one global order so that none happens
    assert figures["deadlocks"] == 0


@long_variant
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_replicas_race_long(backend: str, tmp_path: Path) -> None:
    if backend == "postgres" and not DSN:
        pytest.skip(skips.POSTGRES)
    if backend == "sqlite":
        figures = race(tmp_path, trials=5000, workers=4, seed=3)
    else:
        with _database(DSN) as dsn:
            figures = race(tmp_path, trials=3000, workers=4, seed=3, dsn=dsn)
            figures["deadlocks"] = _deadlocks(dsn)
        assert figures["deadlocks"] == 0
    report_figures(f"{backend} races (long)", figures)


# -- the lock order changes nothing -----------------------------------------------------------


def _durable(store: Any) -> dict[str, Any]:
    """Everything a store holds, in a form two stores can be compared by."""
    snap = store.load()
    return {
        "turns": {
            t: (r.actor, r.tenant, r.status, r.bytes, r.shown, r.stopped, r.executed) for t, r in snap.turns.items()
        },
        "current": snap.current,
        "calls": {i: (r.key, r.tool, r.state, r.fragments, r.bytes) for i, r in snap.calls.items()},
        "terminal_ids": snap.terminal_ids,
        "ended": snap.ended_responses,
        "quarantined": snap.quarantined,
        "disabled": snap.disabled_tools,
        "unknown": snap.unknown_outcomes,
        "ledger": sorted(map(repr, store.ledger())),
        "audit": sorted(map(repr, store.audit())),
        "tenant_stops": sorted(store.tenant_stops()),
    }


def test_sql_store_writes_what_the_memory_store_writes(tmp_path: Path) -> None:
    """The SQL stores write a batch in lock order, not in the core's order: over every
    catalog scenario and the crash scenario, the SQLite store ends holding exactly what the
    memory store (which writes in the core's order) holds."""
    from reliability_child import SCENARIO, TOOLS

    from callsafe.certify.runner import run_trace
    from callsafe.generators.catalog import CATALOG
    from callsafe.model.vocabulary import Trace
    from callsafe.reference_impl.memory_store import MemoryStore
    from callsafe.targets.reference import ReferenceTarget

    traces = [s.trace for s in CATALOG] + [Trace(events=tuple(SCENARIO), tools=TOOLS, name="crash scenario")]
    for n, trace in enumerate(traces):
        memory = MemoryStore()
        run_trace(ReferenceTarget(store="memory", memory=memory), trace)
        folder = tmp_path / f"t{n}"
        folder.mkdir()
        run_trace(ReferenceTarget(store="sqlite"), trace, store_dir=folder)
        sqlite = SqliteStore(folder / "callsafe.sqlite3")
        try:
            assert _durable(sqlite) == _durable(memory), trace.name
        finally:
            sqlite.close()
