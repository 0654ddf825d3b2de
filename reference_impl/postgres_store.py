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

Why it reconnects: a server restart or a dropped connection used to leave the store dead
until the process restarted. A broken connection is now replaced on the next use, with a
bounded exponential backoff (``reconnect_attempts`` tries, from ``reconnect_delay`` s,
doubling, at most 2 s apart); meanwhile every call raises a typed
:class:`~callsafe.reference_impl.errors.StoreError` whose fault is ``connection lost``.
Why the timeouts: without ``lock_timeout`` a row lock held by another session (an
operator's open transaction, a stuck replica) blocks the driver for as long as it is
held. Unless the DSN sets them (``options=-c lock_timeout=..``), each connection gets
``lock_timeout`` 5 s, ``statement_timeout`` 30 s and ``connect_timeout`` 5 s.

Why client-side bounds too: a connection whose peer vanished without a FIN or a RST (a
partition, a dead host) never answers, and ``statement_timeout`` runs on the server that
no longer hears us. So every connection also gets TCP keepalives (idle 10 s, every 5 s,
3 probes: a dead idle connection is found in about 25 s) and ``tcp_user_timeout`` (sent
data unacknowledged for ``operation_timeout``: the kernel drops the connection), unless
the DSN sets them; and every store operation (one transaction, one read, a reconnect
included) is bounded by ``operation_timeout`` (default :data:`OPERATION_TIMEOUT`, 40 s,
above ``statement_timeout`` so the server's own bound fires first when the server is
there), enforced by the client: a :class:`~callsafe.reference_impl.deadline.Watchdog`
shuts the connection's socket down at the deadline, which ends the blocked read at once;
the operation raises :class:`~callsafe.reference_impl.errors.StoreError` with the fault
``timed out`` (transient: the next operation reconnects, within the same bound). A
reconnect's attempts stop at the operation's deadline (each ``connect_timeout`` is cut to
what remains, and libpq and psycopg wait at least 2 s), so one operation takes at most
``operation_timeout`` plus 2 s. Whether a transaction cut off at its ``COMMIT`` committed
is unknown to the client; every fact is idempotent, and a claim whose answer was lost is
never run here (the driver lists it as an unknown outcome), so exactly-once holds.

Creating is explicit as for SQLite: a named ``namespace`` whose schema does not exist is
refused unless ``create=True`` (first start); without a namespace the store is a fresh
throwaway schema.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from callsafe.reference_impl.deadline import Watchdog
from callsafe.reference_impl.effects import Fact, LedgerEntry
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.sql_store import COLUMNS_ADDED, INDEXES, TABLES, SqlStore
from callsafe.reference_impl.store import ClaimResult
from callsafe.reference_impl.witness import Witness

try:  # psycopg is an optional dependency (the "postgres" extra)
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    pg_errors = None  # type: ignore[assignment]

__all__ = ["CLIENT_DEFAULTS", "DEFAULT_TIMEOUTS", "OPERATION_TIMEOUT", "PostgresStore", "pg_fault", "with_timeouts"]

_ID = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_RETRIES = 8
# Server settings every connection gets unless its DSN's ``options`` names them.
DEFAULT_TIMEOUTS = {"lock_timeout": "5s", "statement_timeout": "30s"}
# Client settings (libpq parameters) every connection gets unless its DSN names them; and
# ``tcp_user_timeout``, the operation bound in milliseconds.
CLIENT_DEFAULTS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}
# The client-side bound of one store operation (s): above ``statement_timeout``.
OPERATION_TIMEOUT = 40.0
_MIN_CONNECT = 2  # libpq and psycopg treat a connect_timeout under 2 s as 2 s
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")  # connection exception, shutdowns


def _pg(sql: str) -> str:
    """The shared statements use ``?``; psycopg wants ``%s``."""
    return sql.replace("?", "%s")


def with_timeouts(dsn: str, operation_timeout: float = OPERATION_TIMEOUT) -> dict[str, Any]:
    """The connection parameters of ``dsn``, with the default timeouts it does not set:
    the server's (:data:`DEFAULT_TIMEOUTS`), the client's (:data:`CLIENT_DEFAULTS`) and
    ``tcp_user_timeout`` (the operation bound)."""
    params: dict[str, Any] = conninfo_to_dict(dsn)
    options = str(params.get("options") or "")
    extra = [f"-c {name}={value}" for name, value in DEFAULT_TIMEOUTS.items() if name not in options]
    if extra:
        params["options"] = " ".join([options, *extra]).strip()
    for name, value in CLIENT_DEFAULTS.items():
        params.setdefault(name, value)
    params.setdefault("tcp_user_timeout", str(max(1, round(operation_timeout * 1000))))
    return params


def pg_fault(exc: BaseException) -> StoreFault:
    """What a psycopg error means to an operator (its SQLSTATE, or its class)."""
    state = str(getattr(exc, "sqlstate", None) or "")
    if state == "53100":
        return StoreFault.DISK_FULL
    if state == "42501" or state.startswith("28"):
        return StoreFault.PERMISSION
    if state in ("55P03", "40P01", "40001"):
        return StoreFault.LOCKED
    if state == "57014":
        return StoreFault.TIMEOUT
    if state in ("XX001", "XX002"):
        return StoreFault.CORRUPT
    if state.startswith(_CONNECTION_STATES) or (not state and isinstance(exc, psycopg.OperationalError)):
        return StoreFault.CONNECTION_LOST
    if isinstance(exc, psycopg.DataError):
        return StoreFault.VALUE
    return StoreFault.OTHER


class PostgresStore(SqlStore):
    """The store in one schema of a PostgreSQL database."""

    def __init__(
        self,
        dsn: str,
        namespace: str | None = None,
        *,
        create: bool = False,
        witness: str | Path | None = None,
        reconnect_attempts: int = 6,
        reconnect_delay: float = 0.1,
        operation_timeout: float = OPERATION_TIMEOUT,
    ) -> None:
        if psycopg is None:
            raise StoreError("PostgresStore needs psycopg 3: pip install 'psycopg[binary]'")
        if not (isinstance(operation_timeout, (int, float)) and math.isfinite(operation_timeout)):
            raise StoreError("operation_timeout is a positive number of seconds")
        if operation_timeout <= 0:
            raise StoreError("operation_timeout is a positive number of seconds")
        throwaway = namespace is None
        self.namespace = namespace or f"callsafe_{uuid.uuid4().hex[:16]}"
        if not _NAMESPACE.match(self.namespace):
            raise StoreError("a namespace is a lower-case SQL identifier")
        self.dsn = dsn
        self._lock = threading.RLock()
        self._sql: dict[str, str] = {}
        self._closed = False
        self._depth = 0  # open transactions (the connection is never replaced inside one)
        self._attempts = max(1, reconnect_attempts)
        self._delay = reconnect_delay
        self.operation_timeout = float(operation_timeout)
        self._watchdog = Watchdog(f"callsafe-pg-{self.namespace}")
        self._deadline = math.inf  # of the operation under way
        self._expired = False  # the watchdog ended the operation under way
        try:
            self._params = with_timeouts(dsn, self.operation_timeout)
        except psycopg.Error as exc:
            raise StoreError(f"not a PostgreSQL DSN: {exc}", StoreFault.OTHER) from exc
        self._connect_timeout = float(self._params.get("connect_timeout") or 0) or math.inf
        guard = Witness(witness) if witness is not None else None
        remembered = guard.read() if guard is not None else None  # a store was here: never create one
        self._deadline = time.monotonic() + self.operation_timeout
        try:  # one attempt: a store that cannot be reached at open is refused at once
            self._conn: Any = self._connect()
        finally:
            self._deadline = math.inf
        where = f"schema {self.namespace}"
        try:
            with self._operation(), self._nested(), self._conn.transaction():
                # replicas may create the schema at the same moment: serialise on a lock
                self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.namespace,))
                found = self._conn.execute(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'turns'",
                    (self.namespace,),
                ).fetchone()
                fresh = found is None
                making = (create or throwaway) and remembered is None
                if not fresh or making:
                    self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.namespace}"')
                    self._conn.execute(f'SET LOCAL search_path TO "{self.namespace}"')
                    for ddl in TABLES:
                        self._conn.execute(ddl.format(id=_ID))
                    for table, column, kind in COLUMNS_ADDED:  # a schema written before the column
                        # looked up first: ALTER TABLE locks the table even when it changes nothing
                        if not self._conn.execute(
                            "SELECT 1 FROM information_schema.columns "
                            "WHERE table_schema = %s AND table_name = %s AND column_name = %s",
                            (self.namespace, table, column),
                        ).fetchone():
                            self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                    for name, table, columns in INDEXES:  # looked up first, as the columns are
                        if not self._conn.execute(
                            "SELECT 1 FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                            (self.namespace, name),
                        ).fetchone():
                            self._conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")
                    if fresh:
                        self._new_identity()
        except psycopg.Error as exc:
            self._close_connection()
            raise self._error(f"cannot prepare {where}", exc) from exc
        except BaseException:
            self._close_connection()
            raise
        try:
            if fresh and not making:
                self._check_history(guard, fresh=True, create=False, where=where)
            self._check_history(guard, fresh=False, create=create or throwaway, where=where)
        except BaseException:
            self._close_connection()
            raise

    def _close_connection(self) -> None:
        self._watchdog.close()
        if self._conn is not None:
            self._conn.close()

    # -- the connection ------------------------------------------------------------

    @contextmanager
    def _operation(self) -> Iterator[None]:
        """One store operation under the lock, bounded by ``operation_timeout`` (module
        docstring): a broken connection is replaced first (within the same bound), and the
        watchdog shuts the socket down at the deadline. Nested operations (a query inside a
        transaction) share the outer one's bound."""
        with self._lock:
            if self._depth:
                yield
                return
            self._deadline = time.monotonic() + self.operation_timeout
            self._expired = False
            self._watchdog.arm(self.operation_timeout, self._expire)
            try:
                self._ensure()
                yield
            finally:
                self._watchdog.disarm()
                self._deadline = math.inf

    @contextmanager
    def _nested(self) -> Iterator[None]:
        """Inside an operation: queries share its bound and its connection."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def _expire(self) -> None:
        """The operation outlived its bound: end its blocked read (watchdog's thread)."""
        self._expired = True
        conn = self._conn
        fd = -1
        with contextlib.suppress(Exception):
            fd = conn.pgconn.socket if conn is not None and not conn.closed else -1
        if fd < 0:
            return
        # shutting the socket down (a duplicate of its descriptor, so the connection still
        # owns and closes its own) wakes the read blocked on it with an end of stream
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    def _connect(self) -> Any:
        """A connection with this store's search path, or the typed error; its
        ``connect_timeout`` cut to what remains of the operation's bound."""
        params = self._params
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise self._timed_out("cannot connect to PostgreSQL")
        if remaining < self._connect_timeout:
            params = {**params, "connect_timeout": str(max(_MIN_CONNECT, math.ceil(remaining)))}
        try:
            conn = psycopg.connect(**params, autocommit=True)
        except psycopg.Error as exc:
            raise self._error("cannot connect to PostgreSQL", exc) from exc
        try:
            conn.execute(f'SET search_path TO "{self.namespace}"')
        except psycopg.Error as exc:
            conn.close()
            raise self._error("cannot connect to PostgreSQL", exc) from exc
        return conn

    def _ensure(self) -> None:
        """Replace a broken connection (the server restarted, or dropped it), retrying
        with a bounded backoff until the operation's deadline; the last failure is raised,
        typed."""
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            return
        if self._closed:
            raise StoreError(f"the store of schema {self.namespace} is closed", StoreFault.OTHER)
        delay = self._delay
        for attempt in range(self._attempts):
            try:
                self._conn = self._connect()
                return
            except StoreError:
                remaining = self._deadline - time.monotonic()
                if attempt == self._attempts - 1 or remaining <= delay:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _timed_out(self, what: str) -> StoreError:
        return StoreError(
            f"{what}: {StoreFault.TIMEOUT.value}: no answer from PostgreSQL within {self.operation_timeout:g} s "
            "(the connection was abandoned; the next operation reconnects)",
            StoreFault.TIMEOUT,
        )

    def _error(self, what: str, exc: BaseException) -> StoreError:
        if self._expired:
            return self._timed_out(what)
        fault = pg_fault(exc)
        return StoreError(f"{what}: {fault.value}: {type(exc).__name__}: {exc}", fault)

    def _statement(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = _pg(sql)
        return out

    @contextmanager
    def _transaction(self, facts: Sequence[Fact] | None = None) -> Iterator[None]:
        with self._operation():
            self._depth += 1
            try:
                with self._conn.transaction():
                    yield
            except psycopg.Error as exc:
                raise self._error("transaction failed", exc) from exc
            except (UnicodeError, OverflowError) as exc:
                # an identifier PostgreSQL cannot store (a lone surrogate from a hostile
                # stream): rolled back, and the store's typed error, without the value
                raise StoreError(
                    f"transaction failed: a value cannot be stored ({type(exc).__name__})", StoreFault.VALUE
                ) from None
            finally:
                self._depth -= 1

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """REPEATABLE READ, read only: every query sees the snapshot of the first one (a
        read-only transaction never fails to serialise, so there is nothing to retry)."""
        with self._operation():
            self._depth += 1
            try:
                with self._conn.transaction():
                    self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield
            except psycopg.Error as exc:
                raise self._error("read transaction failed", exc) from exc
            finally:
                self._depth -= 1

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
        with self._operation():  # inside a transaction: its bound (never a new connection under it)
            try:
                cur = self._conn.execute(self._statement(sql), tuple(params))
                return list(cur.fetchall())
            except psycopg.Error as exc:
                raise self._error("query failed", exc) from exc
            except (UnicodeError, OverflowError) as exc:
                raise StoreError(
                    f"query failed: a value cannot be read or written ({type(exc).__name__})", StoreFault.VALUE
                ) from None

    def drop(self) -> None:
        """Remove this store's schema and everything in it."""
        with self._operation():
            try:
                self._conn.execute(f'DROP SCHEMA IF EXISTS "{self.namespace}" CASCADE')
            except psycopg.Error as exc:
                raise self._error(f"cannot drop schema {self.namespace}", exc) from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True  # closed on purpose: never reconnected
            self._close_connection()
