"""Store URLs, as applications write database URLs, to the reference implementation's stores.

* ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` (the SQLAlchemy form):
  :class:`~callsafe.reference_impl.sqlite_store.SqliteStore`, the default for one process;
* ``postgresql://user@host/db`` (or ``postgres://``): a schema (``namespace``, default
  ``callsafe``) of that database, for replicas that share one ledger and one claim;
* ``memory:``: an in-process store for tests (lost with the process);
* a :class:`~callsafe.reference_impl.store.Store` object, used as it is.

Opening never creates a durable store unless ``create=True``: a store that should hold
decisions and is missing (a wrong path, a lost volume) would otherwise start empty and run
every call again. ``create=True`` makes it on a first start and opens it afterwards.
"""

from __future__ import annotations

from pathlib import Path

from callsafe.guard.errors import ConfigError, GuardStoreError
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.store import Store

__all__ = ["DEFAULT_NAMESPACE", "describe_store", "open_store"]

DEFAULT_NAMESPACE = "callsafe"


def _sqlite_path(url: str) -> Path:
    rest = url[len("sqlite:///") :]
    if not rest:
        raise ConfigError("a sqlite URL names a file: sqlite:///path/to/guard.db")
    return Path(rest)


def open_store(
    store: str | Store, *, create: bool, namespace: str | None, operation_timeout: float | None = None
) -> Store:
    """The open store for ``store`` (see the module docstring). ``operation_timeout``
    bounds each PostgreSQL operation on the client (None: the store's default,
    :data:`~callsafe.reference_impl.postgres_store.OPERATION_TIMEOUT`). Raises
    :class:`~callsafe.guard.errors.ConfigError` for a URL it does not know and
    :class:`~callsafe.guard.errors.GuardStoreError` (with the fault) when opening fails."""
    if operation_timeout is not None and not (
        isinstance(operation_timeout, (int, float))
        and not isinstance(operation_timeout, bool)
        and 0 < operation_timeout < float("inf")
    ):
        raise ConfigError("store_timeout is a positive number of seconds, or None")
    if not isinstance(store, str):
        if not all(hasattr(store, m) for m in ("load", "apply", "claim", "ledger", "unknown_outcomes")):
            raise ConfigError(f"store is a URL or a Store, got {type(store).__name__}")
        return store
    try:
        if store in ("memory:", "memory://"):
            return MemoryStore()
        if store.startswith("sqlite:///"):
            from callsafe.reference_impl.sqlite_store import SqliteStore

            path = _sqlite_path(store)
            if create and not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
            return SqliteStore(path, create=create)
        if store.startswith(("postgresql://", "postgres://")):
            from callsafe.reference_impl.postgres_store import PostgresStore

            if operation_timeout is None:
                return PostgresStore(store, namespace or DEFAULT_NAMESPACE, create=create)
            return PostgresStore(
                store, namespace or DEFAULT_NAMESPACE, create=create, operation_timeout=float(operation_timeout)
            )
    except StoreError as exc:
        hint = "" if create else " (a first start passes create=True, or run `callsafe store init`)"
        raise GuardStoreError(f"cannot open the store: {exc}{hint}", exc.fault) from exc
    raise ConfigError(f"unknown store URL {store!r}: use sqlite:///PATH, postgresql://..., or memory:")


def describe_store(store: str | Store) -> str:
    """The store's kind for logs and spans (never a password: only the scheme)."""
    if not isinstance(store, str):
        return type(store).__name__
    return store.split(":", 1)[0]
