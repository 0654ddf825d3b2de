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
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from callsafe.reference_impl.effects import (
    EndResponse,
    Fact,
    RecordDecision,
    RecordDisabledTool,
    RecordQuarantine,
    RecordTenantStop,
    SetTurnStatus,
)
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.sql_store import TABLES, SqlStore

__all__ = ["SqliteStore"]

_ID = "id INTEGER PRIMARY KEY"
# Facts that stop something: they must survive a power cut before anyone acts on them.
_STOPPING_FACTS = (SetTurnStatus, EndResponse, RecordQuarantine, RecordDisabledTool, RecordTenantStop)
_SYNC_MODES = ("adaptive", "full", "normal")


def _must_sync(facts: Sequence[Fact]) -> bool:
    for fact in facts:
        if isinstance(fact, _STOPPING_FACTS):
            return True
        if isinstance(fact, RecordDecision) and fact.state.value != "dispatched":
            return True
    return False


class SqliteStore(SqlStore):
    """The store in one SQLite file (``path``); ``":memory:"`` for a throwaway one."""

    def __init__(self, path: str | Path, *, synchronous: str = "adaptive", busy_timeout_ms: int = 10_000) -> None:
        if synchronous not in _SYNC_MODES:
            raise StoreError(f"synchronous must be one of {_SYNC_MODES}")
        self.path = str(path)
        self._policy = synchronous
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._sync = ""
            self._set_sync("FULL")
            with self._transaction():
                for ddl in TABLES:
                    self._conn.execute(ddl.format(id=_ID))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite store: {exc}") from exc

    def _set_sync(self, mode: str) -> None:
        if mode != self._sync:
            self._conn.execute(f"PRAGMA synchronous = {mode}")
            self._sync = mode

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
                raise StoreError(f"cannot begin a transaction: {exc}") from exc
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise StoreError(f"commit failed: {exc}") from exc

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """A deferred transaction: in WAL mode its first read fixes the snapshot every later
        read sees, and writers on other connections go on meanwhile."""
        with self._lock:
            try:
                self._conn.execute("BEGIN DEFERRED")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot begin a read transaction: {exc}") from exc
            try:
                yield
            finally:
                self._conn.execute("COMMIT")

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        try:
            return self._conn.execute(sql, tuple(params)).rowcount
        except sqlite3.Error as exc:
            raise StoreError(f"statement failed: {exc}") from exc
        except (UnicodeError, OverflowError) as exc:
            # an identifier SQLite cannot store (a lone surrogate from a hostile stream):
            # the transaction rolls back, and the caller gets the store's typed error,
            # naming the kind of problem but not the value
            raise StoreError(f"statement failed: a value cannot be stored ({type(exc).__name__})") from None

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, tuple(params)).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"query failed: {exc}") from exc
            except (UnicodeError, OverflowError) as exc:
                raise StoreError(f"query failed: a value cannot be read or written ({type(exc).__name__})") from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
