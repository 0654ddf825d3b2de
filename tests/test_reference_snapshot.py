"""A replica loading the store while another writes gets one consistent snapshot.

Found by the durable-decisions benchmark (two PostgreSQL replicas): ``SqlStore.load`` read
its tables one query at a time, so a turn bound between the read of ``turns`` and the read
of ``current_turns`` came back as a current turn with no turn row, and the loading core
then failed with a bare ``KeyError`` on the next ``TurnStarted``. The tests put the other
replica's write exactly between those two reads.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import skips

from callsafe.model.vocabulary import Limits, ToolSpec, TurnStarted
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.effects import BindTurn
from callsafe.reference_impl.sql_store import SqlStore

DSN = os.environ.get("CALLSAFE_PG_DSN", "")


def _sqlite_pair(tmp_path: Path) -> Iterator[tuple[SqlStore, SqlStore]]:
    from callsafe.reference_impl.sqlite_store import SqliteStore

    path = tmp_path / "store.sqlite3"
    a, b = SqliteStore(path, create=True), SqliteStore(path)
    yield a, b
    a.close()
    b.close()


def _postgres_pair(tmp_path: Path) -> Iterator[tuple[SqlStore, SqlStore]]:
    if not DSN:
        pytest.skip(skips.POSTGRES)
    from callsafe.reference_impl.postgres_store import PostgresStore

    namespace = f"callsafe_test_{uuid.uuid4().hex[:12]}"
    a, b = PostgresStore(DSN, namespace, create=True), PostgresStore(DSN, namespace)
    yield a, b
    a.drop()
    a.close()
    b.close()


PAIRS: dict[str, Callable[[Path], Iterator[tuple[SqlStore, SqlStore]]]] = {
    "sqlite": _sqlite_pair,
    "postgres": _postgres_pair,
}


@pytest.fixture(params=sorted(PAIRS))
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SqlStore, SqlStore]]:
    yield from PAIRS[request.param](tmp_path)


def _write_between_reads(loader: SqlStore, write: Callable[[], None]) -> list[str]:
    """Make ``loader``'s queries run ``write`` right after its first read of ``turns``;
    returns the queries seen (to show the write landed mid-load)."""
    original = loader._query
    seen: list[str] = []

    def query(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows = original(sql, params)
        seen.append(sql)
        if "FROM turns" in sql and len(seen) == 1:
            write()
        return rows

    loader._query = query  # type: ignore[method-assign]
    return seen


def test_a_turn_bound_mid_load_is_wholly_in_or_wholly_out(replicas: tuple[SqlStore, SqlStore]) -> None:
    writer, loader = replicas
    seen = _write_between_reads(loader, lambda: writer.apply([BindTurn("t1", "u1", "acme", "main", None)], 0.0))
    snap = loader.load()
    assert len(seen) > 2, "the write did not land between two of the loader's reads"
    # the snapshot is taken at the first read: the turn bound after it is wholly absent
    assert snap.turns == {} and snap.current == {}
    # and a core started from it takes the next events without a bare error
    core = Core({"x": ToolSpec(schema={})}, Limits(), snap)
    core.start()
    core.receive(TurnStarted(turn="t1", actor="u1", tenant="acme"))
    # a later load sees the turn, row and pointer together
    later = loader.load()
    assert set(later.current.values()) == {"t1"} and "t1" in later.turns


def test_every_current_turn_has_its_row(replicas: tuple[SqlStore, SqlStore]) -> None:
    """Many binds, each landing mid-load: a current pointer never outruns its row."""
    writer, loader = replicas
    for n in range(5):
        turn = f"t{n}"
        _write_between_reads(loader, lambda turn=turn: writer.apply([BindTurn(turn, "u1", "acme", "main", None)], 0.0))  # type: ignore[misc]
        snap = loader.load()
        del loader._query  # back to the class's method
        assert set(snap.current.values()) <= set(snap.turns), (n, snap.current, list(snap.turns))
