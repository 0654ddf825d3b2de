"""The default durable store: one SQLite file in WAL mode.

Why these settings:

* WAL, so readers never block the writer and a commit is one append;
* ``BEGIN IMMEDIATE`` for every transaction, so a writer takes the lock up front and two
  connections (two replicas on one file) cannot deadlock upgrading a read lock;
* ``synchronous="adaptive"`` (default): the dispatch claim, and every batch that stops
  something (a cancelled or failed decision, a turn that stopped being live, an ended
  response, an operator control), commits with ``FULL``: on disk before the executor
  runs or anyone is told, surviving power loss, and carrying every earlier commit of
  the WAL with it. Everything else (opened calls, fragment byte counts, terminal event
  ids, the status shown) commits with ``NORMAL``: it survives a process crash, which is
  what ``restart()`` models, and losing its last commits to a power cut can only make a
  call fail or be refused, never run twice or after a stop. Measured on the
  development VM: NORMAL about 20 us a commit, FULL about 4 ms (one fsync).
* ``"full"``: every commit FULL; ``"normal"``: every commit NORMAL (process crashes
  only; for benchmarks and throwaway stores).

Why a store is never created by opening it: a missing, truncated or replaced file would
otherwise start as a new, empty store and run every call again. ``create=True`` (first
start, or ``callsafe store init PATH``) creates one; otherwise the file must exist and
hold a store. At open the store runs ``PRAGMA quick_check`` (``check="full"``:
``integrity_check``) and compares its identity and ledger high-water mark with its
witness (:mod:`callsafe.reference_impl.witness`; by default ``PATH.witness`` beside the
database, or ``witness=`` elsewhere; ``witness=False`` keeps none). Every failure is a
:class:`~callsafe.reference_impl.errors.StoreError` whose ``fault`` names the cause.

``connection=``: a store over a connection its caller owns (the certification's in-memory
databases, :mod:`callsafe.targets.reference`): the same statements and transactions, and
:meth:`SqliteStore.close` rolls back what is uncommitted, as a process that dies does,
but leaves the connection, and so the committed data, to its owner.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from callsafe.reference_impl.effects import (
    EndResponse,
    Fact,
    RecordDecision,
    RecordDisabledTool,
    RecordQuarantine,
    RecordTenantStop,
    SetTurnStatus,
)
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.sql_store import COLUMNS_ADDED, INDEXES, TABLES, SqlStore
from callsafe.reference_impl.witness import Witness

__all__ = ["SqliteStore", "sqlite_fault"]

_ID = "id INTEGER PRIMARY KEY"
# Facts that stop something: they must survive a power cut before anyone acts on them.
_STOPPING_FACTS = (SetTurnStatus, EndResponse, RecordQuarantine, RecordDisabledTool, RecordTenantStop)
_SYNC_MODES = ("adaptive", "full", "normal")
_CHECKS = {"quick": "PRAGMA quick_check", "full": "PRAGMA integrity_check", "none": ""}
# SQLite's primary result codes (the low byte of ``sqlite_errorcode``) -> the fault
_FAULTS = {
    3: StoreFault.PERMISSION,  # SQLITE_PERM
    5: StoreFault.LOCKED,  # SQLITE_BUSY: another connection holds the write lock
    6: StoreFault.LOCKED,  # SQLITE_LOCKED
    8: StoreFault.PERMISSION,  # SQLITE_READONLY: a file or folder it may not write
    11: StoreFault.CORRUPT,  # SQLITE_CORRUPT
    13: StoreFault.DISK_FULL,  # SQLITE_FULL (ENOSPC)
    14: StoreFault.PERMISSION,  # SQLITE_CANTOPEN: missing folder or no access
    23: StoreFault.PERMISSION,  # SQLITE_AUTH
    26: StoreFault.CORRUPT,  # SQLITE_NOTADB
}


def sqlite_fault(exc: BaseException) -> StoreFault:
    """What a ``sqlite3`` error means to an operator."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _FAULTS.get(code & 0xFF, StoreFault.OTHER)
    return StoreFault.OTHER


def _error(what: str, exc: sqlite3.Error) -> StoreError:
    fault = sqlite_fault(exc)
    return StoreError(f"{what}: {fault.value}: {exc}", fault)


def _must_sync(facts: Sequence[Fact]) -> bool:
    for fact in facts:
        if isinstance(fact, _STOPPING_FACTS):
            return True
        if isinstance(fact, RecordDecision) and fact.state.value != "dispatched":
            return True
    return False


class SqliteStore(SqlStore):
    """The store in one SQLite file (``path``); ``":memory:"`` for a throwaway one.

    ``create``: make the store if ``path`` holds none (first start); otherwise a missing
    or empty file is refused. ``witness``: True for ``PATH.witness``, a path for one kept
    apart (another folder or volume detects the loss of the database's whole folder),
    False for none. ``check``: the integrity check at open (``quick``, ``full``, ``none``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        witness: bool | str | Path = True,
        check: str = "quick",
        synchronous: str = "adaptive",
        busy_timeout_ms: int = 10_000,
        connection: sqlite3.Connection | None = None,
    ) -> None:
        if synchronous not in _SYNC_MODES:
            raise StoreError(f"synchronous must be one of {_SYNC_MODES}")
        if connection is not None and connection.isolation_level is not None:
            raise StoreError("a borrowed connection must be in autocommit mode (isolation_level=None)")
        self._owned = connection is None
        if check not in _CHECKS:
            raise StoreError(f"check must be one of {tuple(_CHECKS)}")
        self.path = str(path)
        self._policy = synchronous
        self._lock = threading.RLock()
        memory = self.path == ":memory:"
        guard: Witness | None = None
        if not memory and witness is not False:
            where = self.path + ".witness" if witness is True else Path(witness)
            guard = Witness(where, sync=synchronous != "normal")  # as durable as the claims it covers
        if not memory and not os.path.exists(self.path) and (not create or (guard and guard.read())):
            # nothing there, and no creating it: the witness's word on what was lost, or "no store"
            self._check_history(guard, fresh=True, create=False, where=self.path)
        try:
            # mode=rw never creates the file: only ``create`` makes a store where there is none
            target = self.path if memory else f"file:{quote(os.path.abspath(self.path))}?mode=rw{'c' if create else ''}"
            self._conn = connection or sqlite3.connect(
                target, uri=not memory, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _error(f"cannot open the SQLite store {self.path}", exc) from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            fresh = not self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if not fresh and _CHECKS[check]:
                problems = [str(r[0]) for r in self._conn.execute(_CHECKS[check]).fetchall()]
                if problems != ["ok"]:
                    raise StoreError(
                        f"the SQLite store {self.path} is corrupt ({'; '.join(problems[:3])}): restore it from a "
                        "backup; it was not opened",
                        StoreFault.CORRUPT,
                    )
            if fresh and not memory and (not create or (guard is not None and guard.read() is not None)):
                self._check_history(guard, fresh=True, create=create, where=self.path)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._sync = ""
            self._set_sync("FULL")
            with self._transaction():
                # again, under the write lock: another process may have created it meanwhile
                fresh = not self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                for ddl in TABLES:
                    self._conn.execute(ddl.format(id=_ID))
                for table, column, kind in COLUMNS_ADDED:  # a store written before the column
                    have = {str(r[1]) for r in self._conn.execute(f"PRAGMA table_info({table})").fetchall()}
                    if column not in have:
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                for name, table, columns in INDEXES:
                    self._conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")
                if fresh:
                    self._new_identity()
            self._check_history(guard, fresh=False, create=create or memory, where=self.path)
        except sqlite3.Error as exc:
            self.close()
            raise _error(f"cannot open the SQLite store {self.path}", exc) from exc
        except BaseException:
            self.close()
            raise

    def _set_sync(self, mode: str) -> None:
        if mode != self._sync:
            self._conn.execute(f"PRAGMA synchronous = {mode}")
            self._sync = mode

    def _rollback(self) -> None:
        """Roll back whatever is open. A failed COMMIT may already have rolled back (SQLite
        does on a full disk); the "no transaction is active" that a second ROLLBACK raises
        must not hide the cause the caller is about to raise."""
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    @contextmanager
    def _transaction(self, facts: Sequence[Fact] | None = None) -> Iterator[None]:
        """One transaction; ``facts`` None means the dispatch claim (or DDL)."""
        with self._lock:
            adaptive = self._policy == "adaptive"
            full = (facts is None or _must_sync(facts)) if adaptive else self._policy == "full"
            try:
                self._set_sync("FULL" if full else "NORMAL")
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _error("cannot begin a transaction", exc) from exc
            try:
                yield
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise _error("commit failed", exc) from exc

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """A deferred transaction: in WAL mode its first read fixes the snapshot every later
        read sees, and writers on other connections go on meanwhile."""
        with self._lock:
            try:
                self._conn.execute("BEGIN DEFERRED")
            except sqlite3.Error as exc:
                raise _error("cannot begin a read transaction", exc) from exc
            try:
                yield
            except BaseException:
                self._rollback()  # the read's own error is the one to raise
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise _error("cannot end a read transaction", exc) from exc

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        try:
            return self._conn.execute(sql, tuple(params)).rowcount
        except sqlite3.Error as exc:
            raise _error("statement failed", exc) from exc
        except (UnicodeError, OverflowError) as exc:
            # an identifier SQLite cannot store (a lone surrogate from a hostile stream):
            # the transaction rolls back, and the caller gets the store's typed error,
            # naming the kind of problem but not the value
            raise StoreError(
                f"statement failed: a value cannot be stored ({type(exc).__name__})", StoreFault.VALUE
            ) from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, tuple(params)).fetchall())
            except sqlite3.Error as exc:
                raise _error("query failed", exc) from exc
            except (UnicodeError, OverflowError) as exc:
                raise StoreError(
                    f"query failed: a value cannot be read or written ({type(exc).__name__})", StoreFault.VALUE
                ) from None

    def close(self) -> None:
        with self._lock:
            if self._owned:
                self._conn.close()
            else:
                self._rollback()
