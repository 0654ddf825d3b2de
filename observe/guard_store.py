"""The guard's own store as records: its turns, ledger, audit and operator controls.

Why read-only and without the store class: :class:`~callsafe.reference_impl.sqlite_store.SqliteStore`
(what ``callsafe store prune`` opens) checks the store's witness and may write (a new
column, a witness); observing a production store must change nothing, so a SQLite file is
opened with ``mode=ro`` and a PostgreSQL DSN (``postgresql://...``) in a read-only
transaction, and only the tables of :mod:`callsafe.reference_impl.sql_store` are read.

What the store establishes: the calls handed to the executor (a ledger row whose decision
means *dispatched* is the claim the guard writes before it runs a call), each ledger and
audit row, the turn bindings, and when each operator control happened (the ``at`` of
``quarantined``, ``disabled_tools``, ``tenant_stops``). So INV-ONCE is judged (two claims
of one key). Not the stream (no fragments, no terminal events), not the arguments, and not
enough of the turns for INV-TURN or INV-CANCEL: a turn has no start time (a newer turn's
start, which ends an older one, can only be placed at its first ledger row, too late), a
user's cancel is kept only as the turn's status, and restarts and tool changes are not
kept at all; judging those two invariants from the store would say "holds" of runs that
broke them (measured: certification runs of the zoo written as stores).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from callsafe.model.record_words import DEFAULT_WORDS, Dispatch
from callsafe.model.vocabulary import (
    AuditRow,
    CallKey,
    DisableTool,
    Event,
    Executed,
    LedgerRow,
    Observation,
    QuarantineResponse,
    StopTenant,
    TraceFormatError,
    TurnStarted,
)
from callsafe.observe.records import RecordError, Records, shown

__all__ = ["read_store"]

Query = Callable[[str], Sequence[Sequence[Any]]]


# The guard's schema when it is given none (callsafe.guard.stores.DEFAULT_NAMESPACE).
DEFAULT_NAMESPACE: Final = "callsafe"
_IDENTIFIER: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def read_store(location: str, namespace: str = DEFAULT_NAMESPACE) -> Records:
    """The records of the store at ``location``: a SQLite file, or a PostgreSQL DSN whose
    schema ``namespace`` holds the store (as the guard and the reference name it)."""
    if location.startswith(("postgresql://", "postgres://")):
        return _read_postgres(location, namespace)
    path = Path(location)
    if not path.is_file():
        raise RecordError(f"{location}: no such store file")
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise RecordError(f"{location}: cannot open the store: {exc}") from None
    try:
        return _records(f"store {path.name}", lambda sql: connection.execute(sql).fetchall())
    except sqlite3.DatabaseError as exc:
        raise RecordError(f"{location}: not a guard store ({exc})") from None
    except (TraceFormatError, TypeError, ValueError) as exc:
        raise RecordError(f"{location}: a row of the wrong shape: {exc}") from None
    finally:
        connection.close()


def _read_postgres(dsn: str, namespace: str) -> Records:
    if not _IDENTIFIER.match(namespace):
        raise RecordError(f"{shown(namespace, 70)!r}: a namespace is a lower-case SQL identifier")
    try:
        import psycopg
    except ImportError:
        raise RecordError("reading a PostgreSQL store needs psycopg (the 'postgres' extra)") from None
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as connection:
            connection.read_only = True
            found = connection.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (namespace,)
            ).fetchone()
            if found is None:
                raise RecordError(f"the PostgreSQL store: no schema {namespace!r} (the guard's namespace)")
            connection.execute(f"SET search_path TO {namespace}")
            return _records(f"store postgresql {namespace}", lambda sql: connection.execute(sql).fetchall())
    except psycopg.Error as exc:
        raise RecordError(f"the PostgreSQL store: {shown(exc, 300)}") from None
    except (TraceFormatError, TypeError, ValueError) as exc:
        raise RecordError(f"the PostgreSQL store: a row of the wrong shape: {exc}") from None


def _records(source: str, q: Query) -> Records:
    records = Records(source)
    turns = {row[0]: row for row in q("SELECT turn_id, actor, tenant, conversation, traceparent, status FROM turns")}
    tools = {
        (r[0], r[1], r[2], r[3]): r[4] for r in q("SELECT turn_id, response_id, item_id, call_id, tool FROM calls")
    }
    # (at, order, id, what, row): one timeline over the tables that carry a time
    timeline: list[tuple[float, int, int, str, Sequence[Any]]] = []
    for row in q(
        "SELECT id, tenant, turn_id, response_id, item_id, call_id, fragments, terminal_reason, parse, validation, "
        "decision, traceparent, at FROM ledger"
    ):
        timeline.append((_at(row[-1]), 1, int(row[0]), "ledger", row))
    for row in q("SELECT id, action, reason, keys, at FROM audit"):
        timeline.append((_at(row[-1]), 2, int(row[0]), "audit", row))
    for n, row in enumerate(q("SELECT response_id, reason, at FROM quarantined")):
        timeline.append((_at(row[-1]), 0, n, "quarantined", row))
    for n, row in enumerate(q("SELECT tool, reason, at FROM disabled_tools")):
        timeline.append((_at(row[-1]), 0, n, "disabled_tools", row))
    for row in q("SELECT id, tenant, reason, at FROM tenant_stops"):
        timeline.append((_at(row[-1]), 0, int(row[0]), "tenant_stops", row))
    timeline.sort(key=lambda t: (t[0], t[1], t[2]))
    started: set[str] = set()
    records.kinds.update({"executions", "ledger"})
    for _, _, ident, table, row in timeline:
        where = (
            f"{table} row {ident}" if table in ("ledger", "audit", "tenant_stops") else f"{table} {shown(row[0], 60)}"
        )
        if table == "ledger":
            _ledger(records, row, where, turns, tools, started)
        elif table == "audit":
            keys = tuple(CallKey.from_json(k) for k in _keys(row[3], where))
            records.add_observation(AuditRow(0, str(row[1]), str(row[2]), keys), where)
        else:
            event: Event = (
                QuarantineResponse(str(row[0]), str(row[1]))
                if table == "quarantined"
                else DisableTool(str(row[0]), str(row[1]))
                if table == "disabled_tools"
                else StopTenant(str(row[1]), str(row[2]))
            )
            records.add_event(event, where)
    records.notes.append(
        "the store keeps no turn start times, cancels, restarts or tool changes: INV-TURN and INV-CANCEL are not "
        "judged from it"
    )
    unplaced = sorted(set(turns) - started)
    if unplaced:
        records.notes.append(f"{len(unplaced)} turn(s) with no ledger row: their start has no place in the records")
    return records


def _ledger(
    records: Records,
    row: Sequence[Any],
    where: str,
    turns: dict[str, Sequence[Any]],
    tools: dict[tuple[str, str, str, str], Any],
    started: set[str],
) -> None:
    _, tenant, turn, response, item, call, fragments, reason, parse, validation, decision, traceparent, _ = row
    turn = str(turn)
    binding = turns.get(turn)
    if turn not in started and binding is not None:
        started.add(turn)
        _, actor, bound_tenant, conversation, turn_traceparent, _ = binding
        records.add_event(
            TurnStarted(turn, str(actor), str(bound_tenant), str(conversation), turn_traceparent),
            f"turns {shown(turn, 60)}",
        )
    key = CallKey(str(tenant), turn, str(response), str(item), str(call))
    ledger: Observation = LedgerRow(
        0, key, int(fragments), reason, str(parse), str(validation), str(decision), traceparent
    )
    records.add_observation(ledger, where)
    if DEFAULT_WORDS.decision_of(str(decision)) is Dispatch.DISPATCHED:
        actor = str(binding[1]) if binding is not None else ""
        tool = tools.get((turn, str(response), str(item), str(call))) or ""
        records.add_observation(Executed(0, key, actor, str(tool), {}, traceparent), f"{where} (the claim: dispatched)")


def _at(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _keys(text: Any, where: str) -> list[Any]:
    try:
        keys = json.loads(str(text))
    except json.JSONDecodeError:
        raise RecordError(f"{where}: its keys are not JSON") from None
    if not isinstance(keys, list):
        raise RecordError(f"{where}: its keys are not a list")
    return keys
