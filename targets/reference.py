"""The reference implementation as a certification target.

``callsafe certify callsafe.targets.reference:factory`` (or ``ReferenceTarget(store=...)``
in Python) runs the sans-IO core (:mod:`callsafe.reference_impl.core`) behind its driver,
over one of four stores:

* ``"sqlite"`` (default): a file in the harness's store folder, with its fsyncs; survives
  ``restart()``; what the crash-point and race tests run (real files, real fsync);
* ``"sqlite-ram"`` (what ``callsafe certify reference`` runs): the same SQLite store, the
  same schema, statements and transactions, over an in-memory database that this process
  keeps for one trace and empties for the next (see :class:`_RamDatabases`); survives
  ``restart()`` exactly as far as a file does after a process crash;
* ``"memory"``: an in-process store that survives ``restart()`` because the target keeps
  the store object while it throws the core away (fast; for tests and benchmarks);
* ``"postgres"``: a schema in the database at ``dsn`` (or ``$CALLSAFE_PG_DSN``);
  replicas pass the same ``namespace``; without one, each run gets a fresh schema that
  :meth:`ReferenceTarget.close` drops.

``restart()`` does what a process restart does: the core and every buffer are dropped,
the store is closed and opened again, and a new core starts from what the store holds
(calls that were in flight fail; nothing terminal becomes a candidate). Only ``start()``
creates a store; a restart that finds it missing, empty or behind its witness is refused
with :class:`~callsafe.reference_impl.errors.StoreLost`.

Why an in-memory database for certification: a run starts a fresh store for every trace
(thousands per run), and a file per trace cost a file copy, a WAL and its shared-memory
file, an fsync per dispatch claim and per stop, a checkpoint and an unlink: about a
gigabyte written per ``callsafe certify reference``, which left the run waiting on the
disk (``python -m bench --only throughput``). What a certification checks is what a
*process* crash keeps (``restart()``), and committed SQLite transactions survive a process
crash in every ``synchronous`` mode: the database's memory is that disk. Power loss, torn
writes and concurrent processes are the reliability tests' (tests/test_reliability_*.py),
over real files.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.vocabulary import Event
from callsafe.reference_impl.buffer import DEFAULT_SCAN_EVERY
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import Effect
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.store import Store
from callsafe.targets.store_faults import FaultPlan, FaultyStore

__all__ = ["STORES", "ReferenceTarget", "factory"]

STORES = ("sqlite", "sqlite-ram", "memory", "postgres")
# What each store setup is, for the report (``TargetInfo.setup``).
SETUPS = {
    "sqlite": "SQLite: a file per trace in the harness's store folder (WAL, synchronous=adaptive: an fsync "
    "per dispatch claim and per stop); a restart closes and reopens the file",
    "sqlite-ram": "SQLite in memory: one database per trace (this process's, emptied between traces), the file "
    "store's schema, statements and transactions (synchronous=adaptive, no disk); a restart rolls back what is "
    "uncommitted and reopens the store over what was committed, as after a process crash",
    "memory": "in-process store (dictionaries); a restart drops the core and keeps the store object",
    "postgres": "PostgreSQL: a fresh schema per run at the DSN; a restart reconnects",
}


def _not_started(event: Event) -> Sequence[Effect]:
    raise StoreError("receive() outside start() ... close()")


def _ignore(effects: Sequence[Effect]) -> None:
    """Nothing to perform: the target is not running."""


# This process's empty SQLite store: (pid, its file). See _empty_sqlite_file.
_TEMPLATE: tuple[int, Path] | None = None


def _remove_template(owner: int, folder: Path) -> None:
    if os.getpid() == owner:  # never a parent's, from a forked child
        shutil.rmtree(folder, ignore_errors=True)


def _empty_sqlite_file(path: Path) -> None:
    """Put an empty store at ``path`` (which does not exist yet) by copying this process's
    template, made once by the store itself.

    Why: a certification opens a fresh store for every trace, and creating the schema (the
    tables, their indexes, the WAL switch, each a write synced to disk) took about 2 of the
    3 ms a fresh store cost here, a quarter of a SQLite certification's time. Copying the
    closed (so checkpointed) template gives the same file, and the store then opens it as
    it opens any existing store: its own DDL runs, as ``IF NOT EXISTS``. The template
    belongs to the process that made it: a forked child makes its own, and only the owner
    removes it, at exit (a ``TemporaryDirectory`` inherited by a child would remove the
    parent's folder when the child drops it)."""
    global _TEMPLATE
    from callsafe.reference_impl.sqlite_store import SqliteStore

    if _TEMPLATE is None or _TEMPLATE[0] != os.getpid() or not _TEMPLATE[1].exists():
        folder = Path(tempfile.mkdtemp(prefix="callsafe-reference-template-"))
        atexit.register(_remove_template, os.getpid(), folder)
        template = folder / "empty.sqlite3"
        SqliteStore(template, create=True, witness=False).close()
        with contextlib.closing(sqlite3.connect(template)) as conn, conn:
            conn.execute("DELETE FROM store_meta")  # each copy takes an identity of its own when created
        _TEMPLATE = (os.getpid(), template)
    shutil.copyfile(_TEMPLATE[1], path)


class _RamDatabases:
    """This process's in-memory SQLite databases, one lent to each running ``sqlite-ram``
    target and emptied when it comes back.

    Why lent rather than made per trace: a new connection runs the schema's DDL for real
    and prepares every statement again, which was most of what an in-memory store cost
    per trace; a connection kept between traces has its tables and its statement cache
    (measured per trace, 620 traces: about 0.9 ms of CPU for a new in-memory database
    against 0.5 ms for a lent one, and 0.35 ms for the memory store). Emptying is a
    ``DELETE`` of every table the database holds (read from ``sqlite_master``, so a table
    added to the schema is emptied too), after the borrowing store rolled back whatever
    it left uncommitted; then the database is what a fresh one is after the store's DDL:
    the same tables, no rows, row ids from 1. A database whose emptying fails is closed,
    never lent again. The pool belongs to the process that made it: a forked child starts
    its own (an SQLite connection must not be used across ``fork``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._free: list[sqlite3.Connection] = []

    def lend(self) -> sqlite3.Connection:
        with self._lock:
            if self._owner != os.getpid():
                self._owner, self._free = os.getpid(), []
            if self._free:
                return self._free.pop()
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)

    def give_back(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            conn.execute("BEGIN IMMEDIATE")
            for table in tables:
                conn.execute(f'DELETE FROM "{table}"')
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.close()
            return
        with self._lock:
            if self._owner == os.getpid():
                self._free.append(conn)


_RAM = _RamDatabases()


class ReferenceTarget:
    """The reference implementation behind the Target contract."""

    name = "reference"
    protocol = "abstract"
    capabilities: frozenset[str] = CAPABILITIES
    # The assembler core this target boots (the mutant zoo swaps in a subclass of it with
    # one small change, and everything around it stays the shipped reference).
    core_class: type[Core] = Core
    # How often the driver retries a transient store fault (a transient StoreFault fails
    # this many operations in a row).
    store_retries = 3

    def __init__(
        self,
        store: str = "sqlite",
        *,
        dsn: str | None = None,
        namespace: str | None = None,
        memory: MemoryStore | None = None,
        scan_every: int = DEFAULT_SCAN_EVERY,
        sqlite_synchronous: str = "adaptive",
    ) -> None:
        if store not in STORES:
            raise StoreError(f"unknown store {store!r}; choose one of {STORES}")
        self.store_kind = store
        self.name = f"reference-{store}"
        self._dsn = dsn
        self._given_namespace = namespace
        self._namespace = namespace
        self._shared_memory = memory
        self._scan_every = scan_every
        self._sqlite_synchronous = sqlite_synchronous
        self._env: TargetEnv | None = None
        self._store: Store | None = None
        self._memory: MemoryStore | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._ram: sqlite3.Connection | None = None  # the in-memory database, while running
        self._drop_schema = False
        self._create = False  # True only while start() opens the store: creating is explicit
        self.core: Core | None = None
        self.driver: Driver | None = None
        # receive() is on the per-fragment path: it calls these two, bound at boot
        self._decide: Callable[[Event], Sequence[Effect]] = _not_started
        self._run: Callable[[Sequence[Effect]], None] = _ignore
        self._fault: FaultPlan | None = None  # armed by store_fault() for the next input
        self._faulting = False

    # -- Target ------------------------------------------------------------------------

    @property
    def setup(self) -> str:
        """Which store setup runs, in words (the report's ``target.setup``)."""
        return SETUPS[self.store_kind]

    def start(self, env: TargetEnv) -> None:
        self._env = env
        if self.store_kind == "sqlite-ram":
            if self._ram is not None:  # started again without a close: a fresh database
                _RAM.give_back(self._ram)
            self._ram = _RAM.lend()
        elif self.store_kind == "memory":
            self._memory = self._shared_memory or MemoryStore()
        elif self.store_kind == "postgres":
            self._dsn = self._dsn or os.environ.get("CALLSAFE_PG_DSN")
            if not self._dsn:
                raise StoreError("the postgres store needs a DSN (argument dsn or $CALLSAFE_PG_DSN)")
            self._namespace = self._given_namespace
            self._drop_schema = self._namespace is None
        self._create = True
        try:
            self._boot()
        finally:
            self._create = False

    def receive(self, event: Event) -> None:
        if self._fault is not None:
            self._receive_faulty(event)
        elif self.driver is not None and self.driver.stale:
            # the store failed and could not be read back: take its word first, then decide
            self.driver.receive(event)
        else:
            self._run(self._decide(event))

    def store_fault(self, lasting: bool, after: int) -> None:
        """The ``store_faults`` capability: the store fails while the next input is
        delivered (:class:`~callsafe.model.vocabulary.StoreFault`): a transient fault
        :attr:`store_retries` times in a row, which the driver's retries absorb, or every
        operation."""
        self._fault = FaultPlan(lasting, after, self.store_retries)

    def _receive_faulty(self, event: Event) -> None:
        plan, self._fault = self._fault, None
        driver = self.driver
        if plan is None or driver is None:
            self._run(self._decide(event))
            return
        store = driver.store
        driver.store = FaultyStore(store, plan)
        self._faulting = True
        try:
            self._run(self._decide(event))
        finally:
            self._faulting = False
            if self.driver is driver:
                driver.store = store

    def _wait(self, seconds: float) -> None:
        """The driver's delay between retries; none for a fault the harness made (its
        clock is the step, and a lock that never existed is not waited for)."""
        if not self._faulting:
            time.sleep(seconds)

    def restart(self) -> None:
        self._fault = None
        if self._store is not None:
            self._store.close()
        self._store = None
        self.core = None
        self.driver = None
        self._decide, self._run = _not_started, _ignore
        self._boot()

    def close(self) -> None:
        store, self._store = self._store, None
        self.core = None
        self.driver = None
        self._decide, self._run = _not_started, _ignore
        ram, self._ram = self._ram, None
        try:
            if store is not None:
                from callsafe.reference_impl.postgres_store import PostgresStore

                if self._drop_schema and isinstance(store, PostgresStore):
                    store.drop()
                store.close()
        finally:
            if ram is not None:
                _RAM.give_back(ram)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- inside ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The open store (for operators and tests)."""
        if self._store is None:
            raise StoreError("the store is not open")
        return self._store

    def _open_store(self) -> Store:
        env = self._env
        assert env is not None
        if self.store_kind == "memory":
            assert self._memory is not None
            return self._memory
        if self.store_kind == "sqlite-ram":
            from callsafe.reference_impl.sqlite_store import SqliteStore

            assert self._ram is not None
            # no integrity check at open: nothing but this process writes this memory
            return SqliteStore(":memory:", check="none", synchronous=self._sqlite_synchronous, connection=self._ram)
        if self.store_kind == "sqlite":
            from callsafe.reference_impl.sqlite_store import SqliteStore

            folder = env.store_dir
            if folder is None:
                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="callsafe-reference-")
                folder = Path(self._tmp.name)
            path = Path(folder) / "callsafe.sqlite3"
            if self._create and not path.exists() and not Path(f"{path}.witness").exists():
                _empty_sqlite_file(path)
            return SqliteStore(path, create=self._create, synchronous=self._sqlite_synchronous)
        from callsafe.reference_impl.postgres_store import PostgresStore

        assert self._dsn is not None
        store = PostgresStore(self._dsn, self._namespace, create=self._create)
        self._namespace = store.namespace  # a restart reopens the same schema
        return store

    def _boot(self) -> None:
        env = self._env
        assert env is not None
        store = self._store = self._open_store()
        core = self.core = self.core_class(env.tools, env.limits, store.load(), scan_every=self._scan_every)
        self.driver = Driver(
            core,
            store,
            executor=env.executor,
            business_validator=env.business_validator,
            observe=env.observe,
            step=env.step,
            clock=env.clock,
            retries=self.store_retries,
            sleep=self._wait,
        )
        self._decide = core.receive
        self._run = self.driver.run
        self.driver.run(core.start())


def factory(**options: Any) -> ReferenceTarget:
    """``callsafe.targets.reference:factory``: a reference target (SQLite unless
    ``store=`` says otherwise)."""
    return ReferenceTarget(**options)
