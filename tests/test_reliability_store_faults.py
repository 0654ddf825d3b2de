"""Store failures while the reference implementation runs (issue 23, items 2-4): a full
disk, a permission the process lacks, a write lock another process holds, a PostgreSQL
server that stops and comes back.

Each runs the crash tests' scenario (2 tenants, 11 calls, 6 of which run) through Core +
Driver + store in this process, counting executions in an fsync'd journal on another
filesystem, and checks what the issue asks:

* every failure is a typed ``StoreError`` whose ``fault`` names the cause (nothing else
  escapes: an untyped error fails the test where it is raised);
* after every failure the core and the store agree: each call the core holds is in the
  store in the same state, and each call the store holds is in the core (nothing is left
  undecided in memory that the store does not have); once the stream has ended, no call
  is left in flight in either;
* no call runs twice: not during the faults, and not when a fresh core on the same
  store is given the whole scenario again afterwards.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import skips
from reliability_child import LIMITS, SCENARIO, TOOLS, append_line, journal_entries
from reliability_support import CTX, execution_counts, report_figures

from callsafe.model.lifecycle import TERMINAL_STATES
from callsafe.model.system import business_check
from callsafe.model.vocabulary import CallKey, Event, Observation
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Store

ROOT = Path(__file__).resolve().parent.parent
RUN = 6  # calls the scenario runs


class Pipeline:
    """One 'process': a core on ``store``, its driver, and the typed errors it raised."""

    def __init__(self, store: Store, journal: Path, **driver_options: Any) -> None:
        self.store = store
        self.journal = journal
        self.errors: list[StoreError] = []
        self.seen: list[Observation] = []
        self.core = Core(TOOLS, LIMITS, store.load())
        self.driver = Driver(
            self.core,
            store,
            executor=self._execute,
            business_validator=self._validate,
            observe=self.seen.append,
            step=lambda: 0,
            clock=time.time,
            **driver_options,
        )
        self.driver.run(self.core.start())

    def _execute(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        append_line(self.journal, json.dumps({"key": key.to_json(), "arguments": arguments}, sort_keys=True))

    def _validate(self, key: CallKey, tool: str, arguments: Any) -> str | None:
        spec = TOOLS.get(tool)
        return business_check(spec, arguments) if spec is not None else "unknown tool"

    def deliver(self, events: Sequence[Event], *, check: bool = True) -> None:
        for event in events:
            try:
                self.driver.receive(event)
            except StoreError as exc:
                self.errors.append(exc)
                if check and not self.driver.stale:
                    assert disagreements(self.core, self.store) == [], exc

    @property
    def faults(self) -> Counter[str]:
        return Counter(e.fault.value for e in self.errors)


def disagreements(core: Core, store: Store) -> list[str]:
    """Where the core's memory and the store differ, call by call."""
    snapshot = store.load()
    problems = []
    memory = {ident: call.state for ident, call in core._active.items()}
    memory.update(core._decided)
    for ident, row in snapshot.calls.items():
        if memory.get(ident) is not row.state:
            problems.append(f"{'/'.join(ident)}: store {row.state}, core {memory.get(ident)}")
    problems += [f"{'/'.join(i)}: core {s}, not in the store" for i, s in memory.items() if i not in snapshot.calls]
    return problems


def undecided(core: Core, store: Store) -> list[str]:
    """Calls still in flight (the scenario ends every call it opens)."""
    in_store = [f"store: {'/'.join(i)}" for i, r in store.load().calls.items() if r.state not in TERMINAL_STATES]
    return in_store + [f"core: {'/'.join(i)}" for i in core._active]


def counts(journal: Path) -> Counter[CallKey]:
    return execution_counts(journal_entries(journal))


def _rerun_changes_nothing(store: Store, journal: Path) -> None:
    """A fresh core on the store, the whole scenario again: nothing runs a second time (a
    call whose turn never reached the store may run now, for the first time)."""
    again = Pipeline(store, journal)
    again.deliver(SCENARIO)
    assert again.errors == []
    after = counts(journal)
    assert set(after.values()) <= {1}, after
    assert undecided(again.core, store) == []


# -- a full disk ----------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs, mounted for this test and unmounted after it."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and mount): {exc}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _fill(folder: Path, leave: int) -> Path:
    """Fill the filesystem of ``folder`` until ``leave`` bytes are free."""
    filler = folder / "filler"
    stat = os.statvfs(folder)
    size = max(0, stat.f_bavail * stat.f_frsize - leave)
    with filler.open("wb") as out:
        chunk = b"\0" * 65536
        while size > 0:
            try:
                size -= out.write(chunk[: min(size, len(chunk))])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return filler


def test_a_full_disk_is_a_typed_fault_and_leaves_nothing_undecided(small_fs: Path, tmp_path: Path) -> None:
    """The store (and its witness) on a 2 MB tmpfs, filled until 0 .. 96 KB are free; the
    scenario runs into the full disk, then the space comes back and the stream goes on;
    a fresh core then gets the whole scenario again."""
    seen: Counter[str] = Counter()
    for trial, leave in enumerate(range(0, 100 * 1024, 8 * 1024)):
        folder = small_fs / f"t{trial}"
        folder.mkdir()
        journal = tmp_path / f"journal-{trial}"
        store = SqliteStore(folder / "s.sqlite3", create=True)
        filler = _fill(small_fs, leave)
        run = Pipeline(store, journal)
        run.deliver(SCENARIO)
        seen.update(run.faults)
        seen["trials with a fault"] += bool(run.errors)
        assert set(run.faults) <= {StoreFault.DISK_FULL.value}, run.faults
        assert all("disk full" in str(e) for e in run.errors)
        filler.unlink()
        run.deliver(SCENARIO[-1:])  # the space is back: the next input takes the store's word back
        assert disagreements(run.core, store) == [] and undecided(run.core, store) == []
        _rerun_changes_nothing(store, journal)
        store.close()
        seen["executions"] += sum(counts(journal).values())
        shutil.rmtree(folder)
    report_figures("store faults: disk full", dict(seen))
    assert seen["trials with a fault"] >= 3


# -- permission denied --------------------------------------------------------------------------

NOBODY = 65534


def _as_nobody(work: Any, *args: Any) -> dict[str, Any]:
    """Run ``work(*args)`` in a child that gave up root (root passes every permission
    check); what it returns, as JSON."""
    result = args[-1]

    def body() -> None:
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        try:
            out = work(*args)
        except BaseException as exc:  # untyped: reported, and the test fails on it
            out = {"untyped": f"{type(exc).__name__}: {exc}"}
        Path(result).write_text(json.dumps(out))

    process = CTX.Process(target=body)
    process.start()
    process.join(60)
    assert process.exitcode == 0
    data: dict[str, Any] = json.loads(Path(result).read_text())
    return data


def _open_refused(db: str, result: str) -> dict[str, Any]:
    try:
        SqliteStore(db)
    except StoreError as exc:
        return {"fault": exc.fault.value, "text": str(exc)}
    return {"fault": None}


def _witness_goes_read_only(db: str, witness: str, journal: str, result: str) -> dict[str, Any]:
    store = SqliteStore(db, witness=witness)
    run = Pipeline(store, Path(journal))
    run.deliver(SCENARIO[:6])  # call a runs
    os.chmod(witness, 0o444)  # the witness can no longer be written
    run.deliver(SCENARIO[6:])
    os.chmod(witness, 0o644)
    run.deliver(SCENARIO[-1:])
    return {
        "faults": dict(run.faults),
        "disagree": disagreements(run.core, store),
        "undecided": undecided(run.core, store),
        "unknown": [k.short() for k, _ in store.unknown_outcomes()],
    }


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder that a child which gave up root can reach (pytest's tmp_path is under a
    folder private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="callsafe-permission-"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_permission_denied_is_a_typed_fault(shared_folder: Path) -> None:
    """Root passes every permission check, so the store runs in a child that became
    ``nobody``: a root-owned store is refused at open with ``permission denied``; and a
    witness that turns read-only mid-run fails the decisions after it, typed,
    with the claim it could not witness never handed to the executor."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give up root in a child")
    base = shared_folder
    owned = base / "root-owned"
    owned.mkdir()
    SqliteStore(owned / "s.sqlite3", create=True).close()
    mine = base / "nobody"
    for folder in (mine, mine / "db", mine / "witness"):
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
    refused = _as_nobody(_open_refused, str(owned / "s.sqlite3"), str(mine / "r1.json"))
    assert refused["fault"] == StoreFault.PERMISSION.value, refused

    db, witness = mine / "db" / "s.sqlite3", mine / "witness" / "w"
    SqliteStore(db, create=True, witness=witness).close()
    journal = base / "journal"
    journal.touch()
    for path in (db, witness, journal):
        os.chown(path, NOBODY, NOBODY)
    out = _as_nobody(_witness_goes_read_only, str(db), str(witness), str(journal), str(mine / "r2.json"))
    assert "untyped" not in out, out
    assert set(out["faults"]) == {StoreFault.PERMISSION.value}, out
    assert out["disagree"] == [] and out["undecided"] == [], out
    ran = counts(journal)
    assert set(ran.values()) == {1}
    # a claim committed whose witness could not be written never reached the executor:
    # it is listed as a claim without an outcome, and it did not run
    assert out["unknown"] and not set(out["unknown"]) & {k.short() for k in ran}
    report_figures("store faults: permission", {"faults": out["faults"], "ran": len(ran), "unknown": out["unknown"]})
    store = SqliteStore(db, witness=witness)
    _rerun_changes_nothing(store, journal)
    store.close()


# -- a write lock held by another process -----------------------------------------------------------


def _hold_lock(db: Path, seconds: float, held: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def _with_lock_at(tmp_path: Path, index: int, seconds: float) -> tuple[Pipeline, SqliteStore, Path]:
    db = tmp_path / f"lock-{index}-{seconds}" / "s.sqlite3"
    db.parent.mkdir()
    journal = db.parent / "journal"
    store = SqliteStore(db, create=True, busy_timeout_ms=100)
    run = Pipeline(store, journal, retries=3, retry_delay=0.05)
    run.deliver(SCENARIO[:index])
    held = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(db, seconds, held))
    holder.start()
    held.wait(10)
    run.deliver(SCENARIO[index : index + 3], check=False)
    holder.join()
    run.deliver(SCENARIO[index + 3 :])
    return run, store, journal


@pytest.mark.parametrize("index", [4, 5, 16, 22, 30])
def test_a_held_write_lock_is_retried_within_a_bound_then_typed(tmp_path: Path, index: int) -> None:
    """Held for 0.3 s: the retries (3, from 50 ms, doubling, each after a 100 ms busy
    timeout) outlast it and nothing is lost. Held for 1.5 s: a typed ``locked`` fault
    after about 0.75 s; the core takes the store's word back, so what was in flight fails
    (and is written once the lock is gone) instead of staying undecided in memory."""
    short, store, journal = _with_lock_at(tmp_path, index, 0.3)
    assert short.errors == []
    assert sum(counts(journal).values()) == RUN
    store.close()

    long, store, journal = _with_lock_at(tmp_path, index, 1.5)  # the retries give up: it returns with the fault
    assert long.errors and set(long.faults) == {StoreFault.LOCKED.value}, long.faults
    assert disagreements(long.core, store) == [] and undecided(long.core, store) == []
    assert set(counts(journal).values()) <= {1}
    report_figures(
        "store faults: held lock", {"index": index, "faults": dict(long.faults), "ran": sum(counts(journal).values())}
    )
    _rerun_changes_nothing(store, journal)
    store.close()


# -- PostgreSQL stops and comes back -----------------------------------------------------------------


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A PostgreSQL server of this test's own (its port, its data folder), so stopping it
    stops nobody else's; (DSN, a function that runs ``tools/postgres.sh CMD``)."""
    pytest.importorskip("psycopg", reason=skips.missing("psycopg", "pip install -e '.[postgres]'"))
    if not list(Path("/usr/lib/postgresql").glob("*/bin")):
        pytest.skip("postgresql is not installed (apt-get install postgresql)")
    port = str(_free_port())
    # not under pytest's tmp_path: its parent is private to root, and the server runs as postgres
    data = Path(tempfile.mkdtemp(prefix="callsafe-pg-test-"))
    os.chmod(data, 0o755)
    env = {**os.environ, "CALLSAFE_PG_DATA": str(data / "pgdata")}

    def ctl(cmd: str) -> str:
        done = subprocess.run(
            ["bash", str(ROOT / "tools" / "postgres.sh"), cmd, port],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        dsn = ctl("start")
        yield dsn, ctl
    finally:
        ctl("stop")
        shutil.rmtree(data, ignore_errors=True)


def test_postgres_resumes_after_a_server_restart_without_a_new_store(
    own_postgres: tuple[str, Any], tmp_path: Path
) -> None:
    from callsafe.reference_impl.postgres_store import PostgresStore

    dsn, ctl = own_postgres
    journal = tmp_path / "journal"
    store = PostgresStore(dsn, "callsafe_restart", create=True, reconnect_attempts=3, reconnect_delay=0.05)
    run = Pipeline(store, journal, retries=2, retry_delay=0.05)
    cut = 16  # after the stop of acme: a, g1/a, c and x have run
    run.deliver(SCENARIO[:cut])
    ran_before = sum(counts(journal).values())
    ctl("stop")
    run.deliver(SCENARIO[cut : cut + 4], check=False)  # the server is down
    assert run.errors and set(run.faults) == {StoreFault.CONNECTION_LOST.value}, run.faults
    ctl("start")
    run.deliver(SCENARIO[cut + 4 :])  # the same PostgresStore: it reconnects
    ran = counts(journal)
    assert set(ran.values()) == {1}
    assert sum(ran.values()) > ran_before, "nothing ran after the server came back"
    assert disagreements(run.core, store) == [] and undecided(run.core, store) == []
    report_figures(
        "store faults: postgres restart",
        {"faults": dict(run.faults), "ran before": ran_before, "ran in all": sum(ran.values())},
    )
    _rerun_changes_nothing(store, journal)
    store.close()


def test_postgres_timeouts_are_set_by_default_and_a_held_lock_is_typed(own_postgres: tuple[str, Any]) -> None:
    import psycopg

    from callsafe.reference_impl.postgres_store import PostgresStore

    dsn, _ = own_postgres
    store = PostgresStore(dsn, "callsafe_timeouts", create=True)
    assert [store._query(f"SHOW {name}")[0][0] for name in ("lock_timeout", "statement_timeout")] == ["5s", "30s"]
    store.close()
    short = PostgresStore(f"{dsn}?options=-c%20lock_timeout%3D200ms", "callsafe_timeouts")
    assert short._query("SHOW lock_timeout")[0][0] == "200ms"
    with psycopg.connect(dsn) as holder:
        holder.execute('LOCK TABLE "callsafe_timeouts".calls IN ACCESS EXCLUSIVE MODE')
        t0 = time.monotonic()
        with pytest.raises(StoreError) as refused:
            short.load()
        waited = time.monotonic() - t0
    assert refused.value.fault is StoreFault.LOCKED and waited < 5
    short.drop()
    short.close()


def test_a_dropped_postgres_schema_is_refused_not_recreated(tmp_path: Path) -> None:
    """A named namespace is created only with ``create=True``; once its schema is gone,
    opening it is refused, and with a witness the refusal names what was lost."""
    dsn = os.environ.get("CALLSAFE_PG_DSN", "")
    if not dsn:
        pytest.skip(skips.POSTGRES)
    from callsafe.reference_impl.errors import StoreLost
    from callsafe.reference_impl.postgres_store import PostgresStore

    namespace = f"callsafe_lost_{os.getpid()}"
    witness = tmp_path / "pg.witness"
    with pytest.raises(StoreLost) as never_made:
        PostgresStore(dsn, namespace)
    assert never_made.value.fault is StoreFault.MISSING
    journal = tmp_path / "journal"
    store = PostgresStore(dsn, namespace, create=True, witness=witness)
    run = Pipeline(store, journal)
    run.deliver(SCENARIO)
    assert sum(counts(journal).values()) == RUN
    store.drop()
    store.close()
    with pytest.raises(StoreLost) as refused:
        PostgresStore(dsn, namespace, witness=witness)
    assert refused.value.fault is StoreFault.MISSING and "witness" in str(refused.value)
    with pytest.raises(StoreLost) as not_made:
        PostgresStore(dsn, namespace, create=True, witness=witness)  # the witness says it existed
    assert not_made.value.fault is StoreFault.MISSING
    with pytest.raises(StoreLost):  # and nothing was created in its place
        PostgresStore(dsn, namespace)
    assert sum(counts(journal).values()) == RUN
