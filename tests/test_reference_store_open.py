"""Opening a store (issue 23, items 1 and 2): creating is explicit, a store that lost what
it decided is refused, the witness survives a torn write, and every failure is a typed
``StoreError`` carrying its cause. The end-to-end cases (a child process, a journal of
executions) are in ``tests/test_reliability_lost_store.py``; these are the rules, one by one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import skips
from click.testing import CliRunner

from callsafe.cli.main import main
from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import CallKey
from callsafe.reference_impl.effects import BindTurn, LedgerEntry, OpenCall, RecordDecision
from callsafe.reference_impl.errors import StoreError, StoreFault, StoreLost
from callsafe.reference_impl.sqlite_store import SqliteStore, sqlite_fault
from callsafe.reference_impl.store import ClaimResult
from callsafe.reference_impl.witness import Witness, WitnessRecord

KEY = CallKey("acme", "t1", "r1", "i1", "a")
ENTRY = LedgerEntry(KEY, 1, "completed", "ok", "ok", "dispatched", None)


def _claimed(path: Path, **options: object) -> SqliteStore:
    store = SqliteStore(path, create=True, **options)  # type: ignore[arg-type]
    store.apply([BindTurn("t1", "u1", "acme", "main", None), OpenCall(KEY, "book")], 0.0)
    assert store.claim(KEY, "book", ENTRY, 0.0) is ClaimResult.CLAIMED
    return store


def test_opening_never_creates_a_store(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with pytest.raises(StoreLost) as refused:
        SqliteStore(path)
    assert refused.value.fault is StoreFault.MISSING and "callsafe store init" in str(refused.value)
    assert not path.exists()
    path.touch()  # an empty file is no store either
    with pytest.raises(StoreLost):
        SqliteStore(path)
    assert path.stat().st_size == 0


def test_a_created_store_reopens_and_its_witness_follows_each_claim(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = _claimed(path)
    mark = store.high_water
    witness = Witness(f"{path}.witness").read()
    assert witness == WitnessRecord(store.store_id, mark) and mark >= 1
    store.close()
    again = SqliteStore(path)
    assert again.store_id == witness.store_id
    again.close()


def test_a_decision_raises_the_mark_too(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = _claimed(path)
    other = CallKey("acme", "t1", "r1", "i2", "b")
    store.apply([OpenCall(other, "book")], 0.0)
    before = Witness(f"{path}.witness").read()
    entry = LedgerEntry(other, 0, None, "not parsed", "not validated", "cancelled", None)
    store.apply([RecordDecision(other, "book", State.CANCELLED, "stop", entry)], 0.0)
    after = Witness(f"{path}.witness").read()
    assert before is not None and after is not None and after.high_water > before.high_water
    store.close()


def test_a_database_behind_its_witness_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    _claimed(path).close()
    with sqlite3.connect(path) as conn:  # the last decisions lost (what a dropped -wal does)
        conn.execute("DELETE FROM ledger")
    with pytest.raises(StoreLost) as refused:
        SqliteStore(path)
    assert refused.value.fault is StoreFault.BEHIND and "-wal" in str(refused.value)


def test_another_stores_database_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    SqliteStore(a, create=True).close()
    SqliteStore(b, create=True).close()
    Path(f"{b}.witness").replace(f"{a}.witness")
    with pytest.raises(StoreLost) as refused:
        SqliteStore(a)
    assert refused.value.fault is StoreFault.MISMATCH


def test_a_missing_witness_is_refused_until_an_operator_writes_one(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    _claimed(path).close()
    Path(f"{path}.witness").unlink()
    with pytest.raises(StoreLost) as refused:
        SqliteStore(path)
    assert refused.value.fault is StoreFault.NO_WITNESS
    SqliteStore(path, create=True).close()  # `callsafe store init`: adopts the database as it is
    SqliteStore(path).close()


def test_create_is_refused_where_a_witness_says_a_store_was(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    _claimed(path).close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreLost) as refused:
        SqliteStore(path, create=True)
    assert refused.value.fault is StoreFault.MISSING and not path.exists()


def test_a_store_from_before_identities_is_adopted(tmp_path: Path) -> None:
    """A file written by an older version (tables, rows, no identity, no witness) opens."""
    path = tmp_path / "s.sqlite3"
    _claimed(path, witness=False).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM store_meta")
    store = SqliteStore(path)
    assert store.store_id and Witness(f"{path}.witness").read() is not None
    store.close()


def test_a_witness_kept_apart(tmp_path: Path) -> None:
    path, apart = tmp_path / "db" / "s.sqlite3", tmp_path / "elsewhere" / "w"
    path.parent.mkdir()
    apart.parent.mkdir()
    _claimed(path, witness=apart).close()
    assert not Path(f"{path}.witness").exists() and apart.exists()
    path.unlink()
    with pytest.raises(StoreLost) as refused:
        SqliteStore(path, witness=apart)
    assert refused.value.fault is StoreFault.MISSING


def test_a_torn_witness_slot_leaves_the_one_before(tmp_path: Path) -> None:
    witness = Witness(tmp_path / "w")
    witness.create(WitnessRecord("s1", 1))
    witness.advance("s1", 5)
    witness.advance("s1", 9)
    assert Witness(tmp_path / "w").read() == WitnessRecord("s1", 9)
    witness.advance("s1", 3)  # never lowered
    assert Witness(tmp_path / "w").read() == WitnessRecord("s1", 9)
    raw = bytearray((tmp_path / "w").read_bytes())
    newest = 0 if raw[:128].split()[3] == b"3" else 128  # the slot with sequence 3 holds mark 9
    raw[newest + 30] ^= 0xFF
    (tmp_path / "w").write_bytes(bytes(raw))
    assert Witness(tmp_path / "w").read() == WitnessRecord("s1", 5)
    (tmp_path / "w").write_bytes(b"garbage" * 40)
    with pytest.raises(StoreError) as damaged:
        Witness(tmp_path / "w").read()
    assert damaged.value.fault is StoreFault.CORRUPT


def test_a_corrupt_file_is_refused_typed(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    path.write_bytes(b"this is not a database" * 300)
    with pytest.raises(StoreError) as refused:
        SqliteStore(path)
    assert refused.value.fault is StoreFault.CORRUPT


def test_sqlite_error_codes_name_their_cause() -> None:
    def error(code: int) -> sqlite3.Error:
        exc = sqlite3.OperationalError("x")
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    assert sqlite_fault(error(13)) is StoreFault.DISK_FULL
    assert sqlite_fault(error(5)) is StoreFault.LOCKED
    assert sqlite_fault(error(261)) is StoreFault.LOCKED  # SQLITE_BUSY_RECOVERY: the primary code counts
    assert sqlite_fault(error(8)) is StoreFault.PERMISSION
    assert sqlite_fault(error(11)) is StoreFault.CORRUPT
    assert sqlite_fault(error(26)) is StoreFault.CORRUPT
    assert sqlite_fault(error(1)) is StoreFault.OTHER
    assert sqlite_fault(ValueError()) is StoreFault.OTHER


def test_a_failed_commit_reports_its_cause_not_the_rollback(tmp_path: Path) -> None:
    """SQLite rolls a transaction back itself when COMMIT fails on a full disk; the store's
    own ROLLBACK then used to raise "no transaction is active" over the real cause."""
    store = SqliteStore(tmp_path / "s.sqlite3", create=True)

    class FailingCommit:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: object) -> object:
            if sql == "COMMIT":
                self.conn.execute("ROLLBACK")
                exc = sqlite3.OperationalError("database or disk is full")
                exc.sqlite_errorcode = 13  # type: ignore[attr-defined]
                raise exc
            return self.conn.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.conn, name)

    real = store._conn
    store._conn = FailingCommit(real)  # type: ignore[assignment]
    with pytest.raises(StoreError) as failed:
        store.apply([BindTurn("t1", "u1", "acme", "main", None)], 0.0)
    assert failed.value.fault is StoreFault.DISK_FULL and "disk is full" in str(failed.value)
    store._conn = real
    assert list(store.rows("turns")) == []
    store.close()


def test_the_snapshot_reads_error_is_not_masked(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = _claimed(path)
    store._execute("UPDATE calls SET state = 'bogus'")
    with pytest.raises(StoreError) as refused:
        store.load()
    assert refused.value.fault is StoreFault.CORRUPT and "bogus" in str(refused.value)
    assert not store._conn.in_transaction
    store.close()


def test_store_init_and_check_commands(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    runner = CliRunner()
    missing = runner.invoke(main, ["store", "check", str(path)])
    assert missing.exit_code == 1 and "refused (missing)" in missing.output
    made = runner.invoke(main, ["store", "init", str(path)])
    assert made.exit_code == 0 and "ledger up to row 0" in made.output
    assert runner.invoke(main, ["store", "check", str(path)]).exit_code == 0
    path.unlink()
    again = runner.invoke(main, ["store", "init", str(path)])
    assert again.exit_code == 1 and "witness" in again.output and not path.exists()


def test_store_commands_print_a_paths_escape_sequences_escaped(tmp_path: Path) -> None:
    """A path is an input too: its control characters never reach the terminal raw."""
    path = tmp_path / "s\x1b[2J\x1b]52;c;aGk=\x07.sqlite3"
    out = CliRunner().invoke(main, ["store", "check", str(path)])
    assert out.exit_code == 1 and "\x1b" not in out.output and "\x07" not in out.output
    made = CliRunner().invoke(main, ["store", "init", str(path)])
    assert made.exit_code == 0 and "\x1b" not in made.output


def test_postgres_errors_name_their_cause_and_the_dsn_keeps_its_own_timeouts() -> None:
    psycopg = pytest.importorskip("psycopg", reason=skips.missing("psycopg", "pip install -e '.[postgres]'"))
    from psycopg import errors as pg_errors

    from callsafe.reference_impl.postgres_store import pg_fault, with_timeouts

    assert pg_fault(pg_errors.DiskFull()) is StoreFault.DISK_FULL
    assert pg_fault(pg_errors.InsufficientPrivilege()) is StoreFault.PERMISSION
    assert pg_fault(pg_errors.InvalidPassword()) is StoreFault.PERMISSION
    assert pg_fault(pg_errors.LockNotAvailable()) is StoreFault.LOCKED
    assert pg_fault(pg_errors.DeadlockDetected()) is StoreFault.LOCKED
    assert pg_fault(pg_errors.QueryCanceled()) is StoreFault.TIMEOUT
    assert pg_fault(pg_errors.DataCorrupted()) is StoreFault.CORRUPT
    assert pg_fault(pg_errors.AdminShutdown()) is StoreFault.CONNECTION_LOST
    assert pg_fault(pg_errors.ConnectionFailure()) is StoreFault.CONNECTION_LOST
    assert pg_fault(psycopg.OperationalError("server closed the connection")) is StoreFault.CONNECTION_LOST
    assert pg_fault(psycopg.DataError("NUL")) is StoreFault.VALUE
    assert pg_fault(pg_errors.UniqueViolation()) is StoreFault.OTHER

    plain = with_timeouts("postgresql://u@127.0.0.1:5432/db")
    assert plain["options"] == "-c lock_timeout=5s -c statement_timeout=30s" and plain["connect_timeout"] == "5"
    own = with_timeouts("postgresql://u@h/db?options=-c%20lock_timeout%3D1s&connect_timeout=2")
    assert own["options"] == "-c lock_timeout=1s -c statement_timeout=30s" and own["connect_timeout"] == "2"
    both = with_timeouts("host=h options='-c lock_timeout=1s -c statement_timeout=2s'")
    assert both["options"] == "-c lock_timeout=1s -c statement_timeout=2s"
