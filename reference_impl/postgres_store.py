"""The store for several replicas sharing one ledger: PostgreSQL through psycopg 3.

Why PostgreSQL: replicas behind a load balancer may all receive a replayed terminal
event; the dispatch claim (:data:`callsafe.reference_impl.sql_store.CLAIM`, a single
``UPDATE``) lets exactly one of them run the tool. Under READ COMMITTED a concurrent
``UPDATE`` of the same row waits for the first to commit and then re-checks its ``WHERE``
against the committed row, which is no longer ``collecting``: the loser's rowcount is 0.

Each store works inside one schema (``namespace``): replicas of one deployment pass the
same namespace; without one, a fresh schema is created and dropped again by
:meth:`PostgresStore.drop` (what a test run wants). Transactions that die on a deadlock
or a serialization failure (two replicas writing the same rows in another order) are
retried; their facts are idempotent.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from callsafe.reference_impl.effects import Fact, LedgerEntry
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.sql_store import TABLES, SqlStore
from callsafe.reference_impl.store import ClaimResult

try:  # psycopg is an optional dependency (the "postgres" extra)
    import psycopg
    from psycopg import errors as pg_errors
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    pg_errors = None  # type: ignore[assignment]

__all__ = ["PostgresStore"]

_ID = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_RETRIES = 8


def _pg(sql: str) -> str:
    """The shared statements use ``?``; psycopg wants ``%s``."""
    return sql.replace("?", "%s")


class PostgresStore(SqlStore):
    """The store in one schema of a PostgreSQL database."""

    def __init__(self, dsn: str, namespace: str | None = None) -> None:
        if psycopg is None:
            raise StoreError("PostgresStore needs psycopg 3: pip install 'psycopg[binary]'")
        self.namespace = namespace or f"callsafe_{uuid.uuid4().hex[:16]}"
        if not _NAMESPACE.match(self.namespace):
            raise StoreError("a namespace is a lower-case SQL identifier")
        self.dsn = dsn
        self._lock = threading.RLock()
        self._sql: dict[str, str] = {}
        try:
            self._conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            with self._conn.transaction():
                # replicas may create the schema at the same moment: serialise on a lock
                self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.namespace,))
                self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.namespace}"')
                self._conn.execute(f'SET search_path TO "{self.namespace}"')
                for ddl in TABLES:
                    self._conn.execute(ddl.format(id=_ID))
            self._conn.execute(f'SET search_path TO "{self.namespace}"')
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot prepare schema {self.namespace}: {exc}") from exc

    def _statement(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = _pg(sql)
        return out

    @contextmanager
    def _transaction(self, facts: Sequence[Fact] | None = None) -> Iterator[None]:
        with self._lock:
            try:
                with self._conn.transaction():
                    yield
            except psycopg.Error as exc:
                raise StoreError(f"transaction failed: {type(exc).__name__}: {exc}") from exc
            except (UnicodeError, OverflowError) as exc:
                # an identifier PostgreSQL cannot store (a lone surrogate from a hostile
                # stream): rolled back, and the store's typed error, without the value
                raise StoreError(f"transaction failed: a value cannot be stored ({type(exc).__name__})") from None

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """REPEATABLE READ, read only: every query sees the snapshot of the first one (a
        read-only transaction never fails to serialise, so there is nothing to retry)."""
        with self._lock:
            try:
                with self._conn.transaction():
                    self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield
            except psycopg.Error as exc:
                raise StoreError(f"read transaction failed: {type(exc).__name__}: {exc}") from exc

    def _retrying(self, work: Any) -> Any:
        for attempt in range(_RETRIES):
            try:
                return work()
            except StoreError as exc:
                cause = exc.__cause__
                retryable = isinstance(cause, (pg_errors.DeadlockDetected, pg_errors.SerializationFailure))
                if not retryable or attempt == _RETRIES - 1:
                    raise
        raise StoreError("unreachable")  # pragma: no cover

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        self._retrying(lambda: SqlStore.apply(self, facts, at))

    def claim(self, key: Any, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        result: ClaimResult = self._retrying(lambda: SqlStore.claim(self, key, tool, entry, at))
        return result

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cur = self._conn.execute(self._statement(sql), tuple(params))
        return int(cur.rowcount)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                cur = self._conn.execute(self._statement(sql), tuple(params))
                return list(cur.fetchall())
            except psycopg.Error as exc:
                raise StoreError(f"query failed: {exc}") from exc
            except (UnicodeError, OverflowError) as exc:
                raise StoreError(f"query failed: a value cannot be read or written ({type(exc).__name__})") from None

    def drop(self) -> None:
        """Remove this store's schema and everything in it."""
        with self._lock:
            try:
                self._conn.execute(f'DROP SCHEMA IF EXISTS "{self.namespace}" CASCADE')
            except psycopg.Error as exc:
                raise StoreError(f"cannot drop schema {self.namespace}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()
