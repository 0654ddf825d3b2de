"""Replicas sharing one store: leases decide whose calls in flight a starting, resyncing
or heart-beating guard may fail (:mod:`callsafe.reference_impl.leases`).

What the issue saw: a second guard opening a shared store failed every call in flight of
the live guards ("interrupted by a restart"), and their claims were then refused. Here:
a guard opening mid-stream leaves the first one's calls to run (SQLite, the memory store,
PostgreSQL); worker processes started in a chain (each opens the store while the previous
one is half way through a stream) lose nothing and run nothing twice; a killed replica's
calls are failed once its lease has expired and not before, with an injected clock (no
wall-clock assertion); a restart under the same identity still fails its own leftovers at
once, as the certification's restart expects.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replica_worker import SCHEMA, expected_keys, turn_events

from callsafe.guard import Guard, GuardStoreError, ToolCall, UnknownTurn
from callsafe.model.vocabulary import CallKey
from callsafe.providers.streams import render_payloads
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.memory_store import MemoryStore

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
WORKER = Path(__file__).with_name("replica_worker.py")
needs_pg = pytest.mark.skipif(not DSN, reason="CALLSAFE_PG_DSN is not set: needs a PostgreSQL server")


class Clock:
    """An injected clock: time moves only when the test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Runs:
    def __init__(self) -> None:
        self.keys: Counter[str] = Counter()

    def __call__(self, call: ToolCall) -> str:
        self.keys[str(call.key)] += 1
        return "ok"


def guard(store: Any, runs: Runs | None = None, **kw: Any) -> Guard:
    kw.setdefault("heartbeat", False)
    return Guard({"count": SCHEMA}, executor=runs or Runs(), store=store, **kw)


def half_streamed(g: Guard, turn_id: str, calls: int = 2) -> tuple[Any, list[dict[str, Any]]]:
    """A stream of ``calls`` calls read up to its last chunk (every call opened and its
    arguments complete, none ended): the reader and the payloads left."""
    payloads = render_payloads("openai-chat", turn_events(turn_id, calls))
    reader = g.turn(turn_id, "alice", "acme", conversation=turn_id).open_stream("openai-chat")
    for p in payloads[:-1]:
        assert reader.feed(p) == []
    return reader, payloads[-1:]


def finish(reader: Any, rest: list[dict[str, Any]]) -> list[ToolCall]:
    ran = [c for p in rest for c in reader.feed(p)]
    return ran + reader.end(clean=True)


def decisions(store: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for entry, _why in store.ledger():
        out.setdefault(str(entry.key), []).append(entry.decision)
    return out


@pytest.fixture(params=["sqlite", "memory", pytest.param("postgres", marks=[pytest.mark.postgres, needs_pg])])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A store two guards share: its URL (or object) and the Guard keywords it needs."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'guard.db'}", {"create": True}
    elif request.param == "memory":
        yield MemoryStore(), {}
    else:
        from callsafe.reference_impl.postgres_store import PostgresStore

        namespace = f"replicas_{uuid.uuid4().hex[:12]}"
        yield DSN, {"create": True, "namespace": namespace}
        store = PostgresStore(DSN, namespace)
        store.drop()
        store.close()


def test_a_guard_opening_mid_stream_leaves_the_first_ones_calls_to_run(shared: tuple[Any, dict[str, Any]]) -> None:
    store, kw = shared
    runs = Runs()
    first = guard(store, runs, **kw)
    reader, rest = half_streamed(first, "t1")
    second = guard(store, **kw)  # a worker starting, a rolling deploy
    assert second.unknown_outcomes() == []
    ran = finish(reader, rest)
    assert sorted(c.id for c in ran) == ["call_0", "call_1"]
    assert all(c.ran and c.error is None for c in ran)
    assert sorted(runs.keys.values()) == [1, 1]
    assert {k: v for k, v in decisions(first.store).items()} == {k: ["dispatched"] for k in runs.keys}
    assert first.status("t1") == "done"
    # and the second one's own calls run beside the first one's
    reader2, rest2 = half_streamed(second, "t2")
    reader1, rest1 = half_streamed(first, "t3")
    assert len(finish(reader2, rest2)) == 2 and len(finish(reader1, rest1)) == 2
    second.close()
    first.close()


def test_a_resync_after_a_store_fault_fails_only_its_own_calls(tmp_path: Path) -> None:
    """The driver's resync after a lasting store fault rebuilds the core from the store:
    its own calls in flight fail (as before), another live replica's are not touched."""
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    runs = Runs()
    first = guard(url, runs, create=True)
    reader, rest = half_streamed(first, "t1")
    second = guard(url)
    own, own_rest = half_streamed(second, "t2")
    store = second.store
    apply = store.apply

    def failing(*args: Any) -> None:
        store.apply = apply  # type: ignore[method-assign]
        raise StoreError("disk full", StoreFault.DISK_FULL)

    store.apply = failing  # type: ignore[method-assign]
    with pytest.raises(GuardStoreError):
        finish(own, own_rest)
    assert second.status("t2") == "retry"
    ran = finish(reader, rest)
    assert sorted(c.id for c in ran) == ["call_0", "call_1"]
    assert sorted(runs.keys.values()) == [1, 1]
    second.close()
    first.close()


def test_a_killed_replicas_calls_fail_once_its_lease_expires_and_not_before(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    clock = Clock()
    lease = 30.0
    runs = Runs()
    killed = guard(url, runs, create=True, clock=clock, lease_seconds=lease)
    reader, rest = half_streamed(killed, "t1")  # then the process dies: no close, no release
    survivor = guard(url, clock=clock, lease_seconds=lease)
    assert survivor.heartbeat() == 0
    clock.now += lease - 0.001  # just before expiry
    assert survivor.heartbeat() == 0
    assert decisions(survivor.store) == {}
    (key_row,) = [r for r in survivor.leases() if r[0] == killed.instance]
    assert key_row[2] == clock.now + 0.001
    clock.now += 0.001  # expired: a lease holds while now < expires
    assert survivor.heartbeat() == 2  # the two calls in flight of the killed replica
    assert survivor.heartbeat() == 0  # taken over once
    failed = decisions(survivor.store)
    assert sorted(failed) == sorted(str(CallKey("acme", "t1", "t1-r", str(c), f"call_{c}")) for c in range(2))
    assert all(v == ["failed"] for v in failed.values())
    # a process that was only paused (not dead) and comes back cannot run them any more
    assert finish(reader, rest) == []
    assert not runs.keys
    survivor.close()


def test_a_restart_under_its_own_identity_fails_its_leftovers_at_once(tmp_path: Path) -> None:
    """The single-instance restart: the same identity's calls in flight are the crash's
    leftovers, failed at start without waiting for the lease (the certification's
    restart); a live replica's calls beside them are left to run."""
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    clock = Clock()
    crashed = guard(url, create=True, clock=clock, instance="worker-1")
    half_streamed(crashed, "t1")
    runs = Runs()
    other = guard(url, runs, clock=clock, instance="worker-2")
    reader, rest = half_streamed(other, "t2")
    restarted = guard(url, clock=clock, instance="worker-1")
    assert restarted.status("t1") == "retry"
    assert all(v == ["failed"] for k, v in decisions(restarted.store).items() if "t1" in k)
    assert len(decisions(restarted.store)) == 2
    assert len(finish(reader, rest)) == 2 and sorted(runs.keys.values()) == [1, 1]
    for g in (restarted, other):
        g.close()


def test_a_closed_guard_releases_its_lease_and_its_calls_fail_at_the_next_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    clock = Clock()
    first = guard(url, create=True, clock=clock)
    half_streamed(first, "t1")
    assert [r[0] for r in first.leases()] == [first.instance]
    first.close()
    second = guard(url, clock=clock)  # no waiting: a released lease is no lease
    assert second.status("t1") == "retry"
    assert [r[0] for r in second.leases()] == [second.instance]
    second.close()


def test_two_replicas_adopting_the_same_orphans_fail_each_once(tmp_path: Path) -> None:
    """The adoption is one atomic UPDATE: two survivors beating at the same moment split
    the orphans, and each orphan gets one failed decision."""
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    clock = Clock()
    dead = guard(url, create=True, clock=clock, lease_seconds=5)
    half_streamed(dead, "t1", calls=4)
    a, b = guard(url, clock=clock, lease_seconds=5), guard(url, clock=clock, lease_seconds=5)
    clock.now += 10
    assert a.heartbeat() + b.heartbeat() == 4
    assert sorted(len(v) for v in decisions(a.store).values()) == [1, 1, 1, 1]
    for g in (a, b):
        g.close()


def test_the_heartbeat_thread_keeps_the_lease_and_stops_at_close(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    g = Guard({"count": SCHEMA}, store=url, create=True, lease_seconds=0.3)
    beat = g._heartbeat
    assert beat is not None and beat._thread.is_alive()
    g.close()
    assert not beat._thread.is_alive()
    assert g._heartbeat is None


@pytest.mark.parametrize("bad", [{"lease_seconds": 0}, {"lease_seconds": True}, {"instance": 7}, {"instance": "a\nb"}])
def test_bad_lease_settings_are_config_errors(bad: dict[str, Any]) -> None:
    from callsafe.guard import ConfigError

    with pytest.raises(ConfigError):
        Guard({"count": SCHEMA}, store="memory:", **bad)


# -- worker processes ----------------------------------------------------------------


def _run_workers(store: str, namespace: str, workers: int, turns: int, calls: int, tmp: Path) -> Counter[str]:
    gate = tmp / "gate"
    gate.mkdir()
    procs = []
    for i in range(workers):
        out = tmp / f"ran-{i}.txt"
        args = [store, namespace, str(i), str(workers), str(turns), str(calls), str(gate), str(out)]
        procs.append((subprocess.Popen([sys.executable, str(WORKER), *args]), out))
    ran: Counter[str] = Counter()
    for proc, out in procs:
        assert proc.wait(timeout=300) == 0
        ran.update(out.read_text().split())
    return ran


def _check_every_call_ran_once(ran: Counter[str], store: Any, workers: int, turns: int, calls: int) -> None:
    expected = expected_keys(workers, turns, calls)
    assert set(ran) == expected  # nothing lost
    assert max(ran.values()) == 1  # nothing twice
    ledger = decisions(store)
    assert {k: v for k, v in ledger.items()} == {k: ["dispatched"] for k in expected}
    assert store.unknown_outcomes() == []


def test_three_worker_processes_on_one_sqlite_file_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    from callsafe.reference_impl.sqlite_store import SqliteStore

    path = tmp_path / "guard.db"
    SqliteStore(path, create=True).close()
    ran = _run_workers(f"sqlite:///{path}", "", 3, 3, 3, tmp_path)
    store = SqliteStore(path)
    _check_every_call_ran_once(ran, store, 3, 3, 3)
    assert store.leases() == []  # each closed cleanly: released
    store.close()


@pytest.mark.postgres
@needs_pg
def test_two_worker_processes_on_postgres_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    from callsafe.reference_impl.postgres_store import PostgresStore

    namespace = f"workers_{uuid.uuid4().hex[:12]}"
    PostgresStore(DSN, namespace, create=True).close()
    ran = _run_workers(DSN, namespace, 2, 3, 3, tmp_path)
    store = PostgresStore(DSN, namespace)
    try:
        _check_every_call_ran_once(ran, store, 2, 3, 3)
    finally:
        store.drop()
        store.close()


def test_a_sigkilled_worker_process_calls_fail_only_after_its_lease(tmp_path: Path) -> None:
    """A real process, killed with SIGKILL half way through a stream (no close, no lease
    release). The survivor's clock is injected: set before the dead lease's expiry it
    fails nothing; set past it, it fails the dead worker's calls, once."""
    from callsafe.reference_impl.sqlite_store import SqliteStore

    path = tmp_path / "guard.db"
    SqliteStore(path, create=True).close()
    gate = tmp_path / "gate"
    gate.mkdir()
    args = [f"sqlite:///{path}", "", "0", "1", "1", "3", str(gate), str(tmp_path / "ran.txt"), "hang"]
    proc = subprocess.Popen([sys.executable, str(WORKER), *args])
    try:
        mid = gate / "mid-0"
        for _ in range(12000):  # a generous bound on a loaded machine; no time is asserted
            if mid.exists() or proc.poll() is not None:
                break
            time.sleep(0.01)
        assert mid.exists(), "the worker never got half way"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    probe = SqliteStore(path)
    ((dead, _beat, expires),) = probe.leases()
    in_flight = [row for row in probe.rows("calls") if row[6] == "collecting"]
    probe.close()
    assert in_flight and all(row[-1] == dead for row in in_flight)
    clock = Clock(expires - 1.0)
    survivor = guard(f"sqlite:///{path}", clock=clock)
    assert survivor.status("w0-t0") == "preparing"  # not failed
    assert survivor.heartbeat() == 0
    clock.now = expires + 1.0
    assert survivor.heartbeat() == len(in_flight)
    ledger = decisions(survivor.store)
    assert len(ledger) == len(in_flight) and all(v == ["failed"] for v in ledger.values())
    assert {r[0] for r in survivor.leases()} == {dead, survivor.instance}  # an expired lease stays, harmless
    survivor.close()


# -- bounded state ---------------------------------------------------------------------


def test_finished_turns_leave_the_guards_memory_and_late_events_stay_rejected(tmp_path: Path) -> None:
    """Memory does not grow with finished calls: past the replay window every map of the
    core and the guard holds only the live turns; a late event of a forgotten turn runs
    nothing and changes no decision (the store holds them)."""
    runs = Runs()
    g = guard(f"sqlite:///{tmp_path / 'guard.db'}", runs, create=True)
    g._core._keep_over = 2  # a small window, so the test stays small
    core = g._core
    for i in range(12):  # three conversations: each new turn supersedes its conversation's previous one
        turn_id = f"t{i}"
        reader = g.turn(turn_id, "alice", "acme", conversation=f"c{i % 3}").open_stream("openai-chat")
        assert len(finish(reader, render_payloads("openai-chat", turn_events(turn_id, 2)))) == 2
    live = {f"t{i}" for i in range(9, 12)}
    assert set(core.turns) == live | set(core._over) and len(core._over) == 2
    assert len(core._decided) == 2 * len(core.turns)
    assert len(core._terminal_ids) <= 2 * len(core.turns) and len(core._ended) <= len(core.turns)
    assert not core._active and not g._turns and not g._confirmations
    before = decisions(g.store)
    with pytest.raises(UnknownTurn):  # forgotten: past the window, the turn is unknown here
        g.resume_turn("t0")
    for turn_id in ("t7", "t11"):  # over but in the window, and live: replays run nothing twice
        reader = g.resume_turn(turn_id).open_stream("openai-chat")
        assert finish(reader, render_payloads("openai-chat", turn_events(turn_id, 2))) == []
    assert sum(runs.keys.values()) == 24 and max(runs.keys.values()) == 1
    assert {k: v[0] for k, v in decisions(g.store).items()} == {k: v[0] for k, v in before.items()}
    g.close()


def test_a_flood_of_call_ids_stops_at_the_cap_and_runs_nothing() -> None:
    from callsafe.guard import LimitExceeded

    runs = Runs()
    g = guard("memory:", runs, limits={"response_calls": 3, "turn_calls": 5})
    payloads = render_payloads("openai-chat", turn_events("t", 6))
    reader = g.turn("t", "alice", "acme").open_stream("openai-chat")
    with pytest.raises(LimitExceeded):
        for p in payloads:
            reader.feed(p)
    assert not runs.keys  # the response ended as dropped: its calls in flight failed
    assert len(g.store.ledger()) == 3 and {e.decision for e, _ in g.store.ledger()} == {"failed"}
    assert not g._core._active
    # the turn cap: a second response of the same turn may open only what is left of it
    reader = g.turn("t2", "alice", "acme", conversation="other").open_stream("openai-chat")
    assert len(finish(reader, render_payloads("openai-chat", turn_events("t2", 3)))) == 3


@pytest.mark.parametrize("bad", [{"turn_calls": 0}, {"response_calls": True}, {"calls": 3}])
def test_bad_call_caps_are_config_errors(bad: dict[str, Any]) -> None:
    from callsafe.guard import ConfigError

    with pytest.raises(ConfigError):
        Guard({"count": SCHEMA}, store="memory:", limits=bad)


# -- retention -----------------------------------------------------------------------


def test_prune_drops_old_ledger_and_audit_rows_and_keeps_what_a_restart_and_replays_need(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from callsafe.cli.store import store_cmd
    from callsafe.reference_impl.sqlite_store import SqliteStore

    path = tmp_path / "guard.db"
    url = f"sqlite:///{path}"
    clock = Clock(1_000.0)  # long ago: every row is older than any --older-than below
    runs = Runs()
    g = guard(url, runs, create=True, clock=clock)
    done = render_payloads("openai-chat", turn_events("t1", 3))
    assert len(finish(g.turn("t1", "alice", "acme").open_stream("openai-chat"), done)) == 3
    g.quarantine("nothing", "drill")
    half_streamed(g, "t2")  # in flight: what a restart needs
    g.close()
    store = SqliteStore(path)
    high_water, calls_before = store.high_water, sorted(store.rows("calls"))
    store.close()
    result = CliRunner().invoke(store_cmd, ["prune", str(path), "--older-than", "1d", "--keep", "1"])
    assert result.exit_code == 0, result.output
    assert "2 ledger row(s), 0 audit row(s)" in result.output  # 3 rows: the newest stays; the one audit row stays
    store = SqliteStore(path)  # the witness still agrees: the high-water row stayed
    assert store.high_water == high_water and sorted(store.rows("calls")) == calls_before
    assert len(store.ledger()) == 1 and len(store.audit()) == 1
    store.close()
    again = guard(url, runs, clock=clock)  # a restart: its own calls in flight fail, the done ones stay done
    assert again.status("t2") == "retry"
    replay = again.resume_turn("t1").open_stream("openai-chat")
    assert finish(replay, done) == [] and max(runs.keys.values()) == 1  # replay protection held
    again.close()
    bad = CliRunner().invoke(store_cmd, ["prune", str(path), "--older-than", "soon"])
    assert bad.exit_code != 0
