"""The reference implementation as a certification target.

``callsafe certify callsafe.targets.reference:factory`` (or ``ReferenceTarget(store=...)``
in Python) runs the sans-IO core (:mod:`callsafe.reference_impl.core`) behind its driver,
over one of three stores:

* ``"sqlite"`` (default): a file in the harness's store folder; survives ``restart()``;
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
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
import tempfile
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

__all__ = ["STORES", "ReferenceTarget", "factory"]

STORES = ("sqlite", "memory", "postgres")


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


class ReferenceTarget:
    """The reference implementation behind the Target contract."""

    name = "reference"
    protocol = "abstract"
    capabilities: frozenset[str] = CAPABILITIES

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
        self._drop_schema = False
        self._create = False  # True only while start() opens the store: creating is explicit
        self.core: Core | None = None
        self.driver: Driver | None = None
        # receive() is on the per-fragment path: it calls these two, bound at boot
        self._decide: Callable[[Event], Sequence[Effect]] = _not_started
        self._run: Callable[[Sequence[Effect]], None] = _ignore

    # -- Target ------------------------------------------------------------------------

    def start(self, env: TargetEnv) -> None:
        self._env = env
        if self.store_kind == "memory":
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
        self._run(self._decide(event))

    def restart(self) -> None:
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
        if store is not None:
            from callsafe.reference_impl.postgres_store import PostgresStore

            if self._drop_schema and isinstance(store, PostgresStore):
                store.drop()
            store.close()
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
        core = self.core = Core(env.tools, env.limits, store.load(), scan_every=self._scan_every)
        self.driver = Driver(
            core,
            store,
            executor=env.executor,
            business_validator=env.business_validator,
            observe=env.observe,
            step=env.step,
            clock=env.clock,
        )
        self._decide = core.receive
        self._run = self.driver.run
        self.driver.run(core.start())


def factory(**options: Any) -> ReferenceTarget:
    """``callsafe.targets.reference:factory``: a reference target (SQLite unless
    ``store=`` says otherwise)."""
    return ReferenceTarget(**options)
