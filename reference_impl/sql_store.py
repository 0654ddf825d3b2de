"""What the SQLite and PostgreSQL stores share: the tables' columns, every statement, the
dispatch claim and reading a snapshot back.

Why shared: the two backends must keep the same contract
(:mod:`callsafe.reference_impl.store`), so they run the same statements; each backend
only supplies its connection, its transaction, its placeholder style and its DDL for
identity columns. The statements use SQL that both speak (``INSERT .. ON CONFLICT``,
``EXISTS``; SQLite >= 3.24).

The claim is **one** ``UPDATE`` whose ``WHERE`` holds every execution-time condition the
store can see: the call is not terminal, its turn is live and its conversation's current
turn, its response is not quarantined, its tool is not disabled. The database applies it
atomically to the one row, so exactly one claimer ever sees ``rowcount == 1``: SQLite
serialises writers; PostgreSQL makes a concurrent ``UPDATE`` of the same row wait for the
first to commit and then re-evaluates the ``WHERE`` on the new row version, which is
no longer ``collecting``. The ledger row is written in the same transaction.
"""

from __future__ import annotations

import json
import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import CallKey
from callsafe.reference_impl.effects import (
    BindTurn,
    EndResponse,
    Fact,
    LedgerEntry,
    OpenCall,
    RecordAudit,
    RecordDecision,
    RecordDisabledTool,
    RecordDisplay,
    RecordLedger,
    RecordOutcome,
    RecordProgress,
    RecordQuarantine,
    RecordTenantStop,
    RecordTerminalId,
    SetTurnStatus,
)
from callsafe.reference_impl.errors import StoreError, StoreFault, StoreLost
from callsafe.reference_impl.retention import Retention
from callsafe.reference_impl.store import CallRow, ClaimResult, Snapshot, TurnRow
from callsafe.reference_impl.witness import Witness

__all__ = ["COLUMNS_ADDED", "DATA_TABLES", "INDEXES", "SqlStore"]

_TERMINAL_SQL: Final = "('dispatched', 'cancelled', 'failed')"
_KEY_WHERE: Final = "turn_id = ? AND response_id = ? AND item_id = ? AND call_id = ?"

# Table bodies; ``{id}`` is the backend's auto-increment primary key column.
TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS turns (
        turn_id TEXT PRIMARY KEY, actor TEXT NOT NULL, tenant TEXT NOT NULL, conversation TEXT NOT NULL,
        traceparent TEXT, status TEXT NOT NULL, bytes BIGINT NOT NULL DEFAULT 0,
        shown TEXT NOT NULL DEFAULT '', stopped INTEGER NOT NULL DEFAULT 0, executed INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS current_turns (
        tenant TEXT NOT NULL, conversation TEXT NOT NULL, turn_id TEXT NOT NULL, PRIMARY KEY (tenant, conversation))""",
    """CREATE TABLE IF NOT EXISTS calls (
        turn_id TEXT NOT NULL, response_id TEXT NOT NULL, item_id TEXT NOT NULL, call_id TEXT NOT NULL,
        tenant TEXT NOT NULL, tool TEXT, state TEXT NOT NULL, fragments INTEGER NOT NULL DEFAULT 0,
        bytes BIGINT NOT NULL DEFAULT 0, why TEXT NOT NULL DEFAULT '', owner TEXT,
        PRIMARY KEY (turn_id, response_id, item_id, call_id))""",
    """CREATE TABLE IF NOT EXISTS terminal_ids (event_id TEXT PRIMARY KEY)""",
    """CREATE TABLE IF NOT EXISTS ended_responses (
        turn_id TEXT NOT NULL, response_id TEXT NOT NULL, PRIMARY KEY (turn_id, response_id))""",
    """CREATE TABLE IF NOT EXISTS quarantined (
        response_id TEXT PRIMARY KEY, reason TEXT NOT NULL, at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS disabled_tools (tool TEXT PRIMARY KEY, reason TEXT NOT NULL, at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS tenant_stops (
        {id}, tenant TEXT NOT NULL, reason TEXT NOT NULL, at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS ledger (
        {id}, tenant TEXT NOT NULL, turn_id TEXT NOT NULL, response_id TEXT NOT NULL, item_id TEXT NOT NULL,
        call_id TEXT NOT NULL, fragments INTEGER NOT NULL, terminal_reason TEXT, parse TEXT NOT NULL,
        validation TEXT NOT NULL, decision TEXT NOT NULL, traceparent TEXT, reason TEXT NOT NULL,
        at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS audit ({id}, action TEXT NOT NULL, reason TEXT NOT NULL, keys TEXT NOT NULL,
        at DOUBLE PRECISION)""",
    # The completion of a claim (the claim itself is ``calls.state = 'dispatched'`` and its
    # ledger row): its own table, so a store file written before it existed still opens.
    """CREATE TABLE IF NOT EXISTS outcomes (
        turn_id TEXT NOT NULL, response_id TEXT NOT NULL, item_id TEXT NOT NULL, call_id TEXT NOT NULL,
        tenant TEXT NOT NULL, outcome TEXT NOT NULL, at DOUBLE PRECISION,
        PRIMARY KEY (turn_id, response_id, item_id, call_id))""",
    # Which store this is (``store_id``), written once when the store is created: what
    # its witness (:mod:`callsafe.reference_impl.witness`) is compared with at open.
    """CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    # One row per live instance (:mod:`callsafe.reference_impl.leases`): who may still be
    # assembling the open calls it owns. Not a data table: a store holding only leases
    # holds no decisions.
    """CREATE TABLE IF NOT EXISTS leases (
        owner TEXT PRIMARY KEY, heartbeat DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL)""",
)
# Columns added after the first stores were written: (table, column, type), added at open
# to a store that lacks them (``calls.owner``: rows written before leases have no owner,
# and are the leftovers of whichever instance starts next, as before).
# ``turns.over_at`` and ``terminal_ids.at``: when a turn stopped being live and when a
# terminal id was recorded, what retention (:mod:`~callsafe.reference_impl.retention`)
# measures its window from; rows written before them are stamped by the first pass.
COLUMNS_ADDED: Final = (
    ("calls", "owner", "TEXT"),
    ("turns", "over_at", "DOUBLE PRECISION"),
    ("terminal_ids", "at", "DOUBLE PRECISION"),
)
# Indexes (name, table, columns), made at open after the columns: what a retention pass
# reads in order (over turns, old terminal ids) and looks up (a turn's current entry).
INDEXES: Final = (
    ("turns_over_at", "turns", "over_at, turn_id"),
    ("terminal_ids_at", "terminal_ids", "at"),
    ("current_turns_turn", "current_turns", "turn_id"),
)
DATA_TABLES: Final = (
    "turns",
    "current_turns",
    "calls",
    "terminal_ids",
    "ended_responses",
    "quarantined",
    "disabled_tools",
    "tenant_stops",
    "ledger",
    "audit",
    "outcomes",
)

_INSERT_TURN: Final = (
    "INSERT INTO turns (turn_id, actor, tenant, conversation, traceparent, status) "
    "VALUES (?, ?, ?, ?, ?, 'live') ON CONFLICT DO NOTHING"
)
_SET_CURRENT: Final = (
    "INSERT INTO current_turns (tenant, conversation, turn_id) VALUES (?, ?, ?) "
    "ON CONFLICT (tenant, conversation) DO UPDATE SET turn_id = excluded.turn_id"
)
_SET_STATUS: Final = "UPDATE turns SET status = ?, over_at = ? WHERE turn_id = ? AND status = 'live'"
_TURN_BYTES: Final = "UPDATE turns SET bytes = CASE WHEN bytes > ? THEN bytes ELSE ? END WHERE turn_id = ?"
_CALL_PROGRESS: Final = f"UPDATE calls SET fragments = ?, bytes = ? WHERE {_KEY_WHERE}"
_DISPLAY: Final = "UPDATE turns SET shown = ?, stopped = ?, executed = ? WHERE turn_id = ?"
_OPEN_CALL: Final = (
    "INSERT INTO calls (turn_id, response_id, item_id, call_id, tenant, tool, state, owner) "
    "VALUES (?, ?, ?, ?, ?, ?, 'collecting', ?) ON CONFLICT DO NOTHING"
)
_DECIDE: Final = (
    "INSERT INTO calls (turn_id, response_id, item_id, call_id, tenant, tool, state, fragments, why) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (turn_id, response_id, item_id, call_id) DO UPDATE SET state = excluded.state, why = excluded.why "
    f"WHERE calls.state NOT IN {_TERMINAL_SQL}"
)
_LEDGER: Final = (
    "INSERT INTO ledger (tenant, turn_id, response_id, item_id, call_id, fragments, terminal_reason, parse, "
    "validation, decision, traceparent, reason, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_TERMINAL_ID: Final = "INSERT INTO terminal_ids (event_id, at) VALUES (?, ?) ON CONFLICT DO NOTHING"
_END_RESPONSE: Final = "INSERT INTO ended_responses (turn_id, response_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
_QUARANTINE: Final = "INSERT INTO quarantined (response_id, reason, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
_DISABLE: Final = "INSERT INTO disabled_tools (tool, reason, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
_TENANT_STOP: Final = "INSERT INTO tenant_stops (tenant, reason, at) VALUES (?, ?, ?)"
# Every live turn of the tenant, also those that another replica bound and this one never
# saw: the claim re-checks the turn, so this is what stops the other replicas.
_STOP_TENANT_TURNS: Final = "UPDATE turns SET status = 'stopped', over_at = ? WHERE tenant = ? AND status = 'live'"
_AUDIT: Final = "INSERT INTO audit (action, reason, keys, at) VALUES (?, ?, ?, ?)"
_OUTCOME: Final = (
    "INSERT INTO outcomes (turn_id, response_id, item_id, call_id, tenant, outcome, at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_UNKNOWN_OUTCOMES: Final = (
    "SELECT c.tenant, c.turn_id, c.response_id, c.item_id, c.call_id, c.tool FROM calls c "
    "WHERE c.state = 'dispatched' AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.turn_id = c.turn_id "
    "AND o.response_id = c.response_id AND o.item_id = c.item_id AND o.call_id = c.call_id) "
    "ORDER BY c.tenant, c.turn_id, c.response_id, c.item_id, c.call_id"
)

CLAIM: Final = (
    "UPDATE calls SET state = 'dispatched', why = 'dispatched' "
    f"WHERE {_KEY_WHERE} AND state NOT IN {_TERMINAL_SQL} "
    "AND EXISTS (SELECT 1 FROM turns t JOIN current_turns c "
    "ON c.tenant = t.tenant AND c.conversation = t.conversation AND c.turn_id = t.turn_id "
    "WHERE t.turn_id = calls.turn_id AND t.status = 'live') "
    "AND NOT EXISTS (SELECT 1 FROM quarantined q WHERE q.response_id = calls.response_id) "
    "AND NOT EXISTS (SELECT 1 FROM disabled_tools d WHERE d.tool = ?)"
)
_CALL_STATE: Final = f"SELECT state FROM calls WHERE {_KEY_WHERE}"
_LEASE_OF: Final = "SELECT expires FROM leases WHERE owner = ?"
_RENEW_LEASE: Final = (
    "INSERT INTO leases (owner, heartbeat, expires) VALUES (?, ?, ?) "
    "ON CONFLICT (owner) DO UPDATE SET heartbeat = excluded.heartbeat, expires = excluded.expires"
)
_RELEASE_LEASE: Final = "DELETE FROM leases WHERE owner = ?"
_LEASES: Final = "SELECT owner, heartbeat, expires FROM leases ORDER BY owner"
# An open call whose owner holds no live lease: one UPDATE, so each orphan is adopted by
# exactly one instance (SQLite serialises writers; PostgreSQL re-checks the WHERE of a row
# another transaction changed meanwhile, and the row then names a live owner).
_ORPHAN: Final = (
    "(owner IS NOT NULL AND owner <> ? AND NOT EXISTS "
    "(SELECT 1 FROM leases l WHERE l.owner = calls.owner AND l.expires > ?))"
)
_ADOPT_RETURNING: Final = (
    " RETURNING turn_id, response_id, item_id, call_id, tenant, tool, state, fragments, bytes, owner"
)
_ADOPT: Final = f"UPDATE calls SET owner = ? WHERE state NOT IN {_TERMINAL_SQL} AND {_ORPHAN}{_ADOPT_RETURNING}"
_ADOPT_AT_START: Final = (
    f"UPDATE calls SET owner = ? WHERE state NOT IN {_TERMINAL_SQL} "
    f"AND (owner IS NULL OR owner = ? OR {_ORPHAN}){_ADOPT_RETURNING}"
)
# Retention (:mod:`~callsafe.reference_impl.retention`). A turn is over when it is not
# live or not its conversation's current turn; one the store saw become over has its time,
# the others get the pass's time (their window starts later, never earlier).
_STAMP_OVER: Final = (
    "UPDATE turns SET over_at = ? WHERE turn_id IN (SELECT t.turn_id FROM turns t WHERE t.over_at IS NULL "
    "AND (t.status <> 'live' OR NOT EXISTS (SELECT 1 FROM current_turns c WHERE c.turn_id = t.turn_id)) LIMIT ?)"
)
_STAMP_TERMINAL_IDS: Final = (
    "UPDATE terminal_ids SET at = ? WHERE event_id IN (SELECT event_id FROM terminal_ids WHERE at IS NULL LIMIT ?)"
)
_PRUNE_TERMINAL_IDS: Final = (
    "DELETE FROM terminal_ids WHERE event_id IN (SELECT event_id FROM terminal_ids WHERE at < ? ORDER BY at LIMIT ?)"
)
_PRUNE_BATCH: Final = 5_000
# Over turns past the cutoff, in the order they became over, after a cursor (over_at, turn_id).
_OVER_TURNS: Final = (
    "SELECT turn_id, over_at FROM turns WHERE over_at < ? AND (over_at > ? OR (over_at = ? AND turn_id > ?)) "
    "ORDER BY over_at, turn_id LIMIT ?"
)


def _needed_call(c: str) -> str:
    """A call (the row ``c`` of ``calls``) that a restart needs: open (not terminal), or
    claimed with no outcome recorded."""
    return (
        f"({c}.state NOT IN {_TERMINAL_SQL} OR ({c}.state = 'dispatched' AND NOT EXISTS (SELECT 1 FROM outcomes o "
        f"WHERE o.turn_id = {c}.turn_id AND o.response_id = {c}.response_id AND o.item_id = {c}.item_id "
        f"AND o.call_id = {c}.call_id)))"
    )


_NO_NEEDED_CALL: Final = f"NOT EXISTS (SELECT 1 FROM calls c WHERE c.turn_id = {{turn}} AND {_needed_call('c')})"
# Of the candidates, the turns that may go: over (checked again, inside the transaction
# that deletes them), and no call of theirs needed by a restart.
_PRUNABLE: Final = (
    "SELECT t.turn_id FROM turns t WHERE t.turn_id IN ({ids}) AND t.over_at IS NOT NULL "
    "AND NOT (t.status = 'live' AND EXISTS (SELECT 1 FROM current_turns cur WHERE cur.turn_id = t.turn_id)) "
    "AND " + _NO_NEEDED_CALL.format(turn="t.turn_id")
)
# What goes with a prunable turn, re-checked (a replica that still took the turn for live
# may have opened a call meanwhile: that call and its turn stay, and a restart fails it).
_PRUNE_TURN_ROWS: Final = (
    # the calls first: a dispatched call whose outcome is gone would count as needed
    ("calls", "DELETE FROM calls WHERE turn_id IN ({ids}) AND NOT " + _needed_call("calls")),
    ("outcomes", "DELETE FROM outcomes WHERE turn_id IN ({ids})"),
    ("ended_responses", "DELETE FROM ended_responses WHERE turn_id IN ({ids})"),
    ("current_turns", "DELETE FROM current_turns WHERE turn_id IN ({ids})"),
    ("turns", "DELETE FROM turns WHERE turn_id IN ({ids}) AND " + _NO_NEEDED_CALL.format(turn="turns.turn_id")),
)
_HIGH_WATER: Final = "SELECT coalesce(max(id), 0) FROM ledger"
_STORE_ID: Final = "SELECT value FROM store_meta WHERE name = 'store_id'"
_SET_STORE_ID: Final = "INSERT INTO store_meta (name, value) VALUES ('store_id', ?) ON CONFLICT DO NOTHING"


def _key(key: CallKey) -> tuple[str, str, str, str]:
    return (key.turn, key.response, key.item, key.call)


def _lock_order(fact: Fact) -> tuple[int, tuple[str, ...]]:
    """Where a fact takes its row lock: table, then row. One transaction can hold the
    facts of a whole input (an operator stop: every call it stops, their turns' display,
    the turn statuses), and two replicas writing the same rows in different orders
    deadlock in PostgreSQL (each waits a ``deadlock_timeout``, one is rolled back and
    retried). Written in this order instead (``turns`` rows first, then the tenant-wide
    turn update of a tenant stop, then ``calls`` rows, then the keyed inserts, each by key;
    append-only rows last, in their own order), transactions take their locks in one
    global order and cannot form a cycle.

    It writes the same state: facts on one row keep their relative order (the sort is
    stable and they share a key), facts on different rows commute, and the facts that
    touch two rows are ordered by the one they depend on: ``RecordProgress`` by its call
    (it updates the row its ``OpenCall`` inserts; it also bumps its turn's byte count, but
    it is only ever written alone, on the per-fragment path), a tenant stop after every
    single turn (it must see the turns bound by the same batch)."""
    if isinstance(fact, (SetTurnStatus, RecordDisplay, BindTurn)):
        return (0, (fact.turn,))
    if isinstance(fact, RecordTenantStop):
        return (1, ())
    if isinstance(fact, (OpenCall, RecordDecision, RecordOutcome, RecordProgress)):
        return (2, _key(fact.key))
    if isinstance(fact, RecordTerminalId):
        return (3, (fact.event_id,))
    if isinstance(fact, EndResponse):
        return (4, (fact.turn, fact.response))
    if isinstance(fact, RecordQuarantine):
        return (5, (fact.response,))
    if isinstance(fact, RecordDisabledTool):
        return (6, (fact.tool,))
    return (7, ())  # ledger rows, audit rows: inserts that wait for no one


def _ledger_params(entry: LedgerEntry, why: str, at: float) -> tuple[Any, ...]:
    k = entry.key
    return (
        k.tenant,
        k.turn,
        k.response,
        k.item,
        k.call,
        entry.fragments,
        entry.terminal_reason,
        entry.parse,
        entry.validation,
        entry.decision,
        entry.traceparent,
        why,
        at,
    )


def _call_row(row: Sequence[Any]) -> CallRow:
    """A ``calls`` row ``(turn, response, item, call, tenant, tool, state, fragments,
    bytes, owner)`` as the snapshot holds it."""
    turn, response, item, call, tenant, tool, state, fragments, nbytes, owner = row
    try:
        parsed = State(state)
    except ValueError:
        raise StoreError(f"unknown call state {state!r} in the store", StoreFault.CORRUPT) from None
    return CallRow(CallKey(tenant, turn, response, item, call), tool, parsed, int(fragments), int(nbytes), owner)


class SqlStore(ABC):
    """The store contract over a DB-API connection; subclasses supply the connection."""

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement in the current transaction; its rowcount."""

    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query; all its rows."""

    @abstractmethod
    def _transaction(self, facts: Sequence[Fact] | None = None) -> AbstractContextManager[None]:
        """One transaction (committed on success, rolled back on error) writing ``facts``;
        None for the dispatch claim."""

    @abstractmethod
    def _read_snapshot(self) -> AbstractContextManager[None]:
        """One read-only transaction in which every query sees the same committed state.

        Why: :meth:`load` reads nine tables; read one by one, a replica that binds a turn
        between two of the reads gives a snapshot whose current turn has no row in
        ``turns`` (found by the durable-decisions benchmark with two PostgreSQL replicas:
        the loading core then failed on the next ``TurnStarted``)."""

    # -- writing -----------------------------------------------------------------

    # The witness and this store's identity; a subclass sets them when it opens the store
    # (:meth:`_check_history`). No witness: loss is detected only as far as the database
    # itself shows it (missing, empty, another store's identity).
    _witness: Witness | None = None
    store_id: str = ""

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        mark = 0
        with self._transaction(facts):
            for fact in facts if len(facts) < 2 else sorted(facts, key=_lock_order):
                self._apply_one(fact, at)
            if self._witness is not None and any(isinstance(f, RecordDecision) for f in facts):
                mark = self._high_water()
        if mark:
            self._witness_advance(mark)

    def progress(self, fact: RecordProgress) -> None:
        # An ``apply`` (the store protocol's reading): one transaction, and whatever a
        # subclass adds to ``apply`` (crash points, retries) applies to progress too.
        self.apply((fact,), 0.0)

    def _check_history(self, witness: Witness | None, *, fresh: bool, create: bool, where: str) -> None:
        """Refuse a store that lost what it decided; create one only when asked to.

        ``fresh``: the database holds no tables (a missing, 0-byte or never-written file, a
        schema that does not exist). Called with the tables in place (the subclass ran
        its DDL); writes the identity on creation and the witness whenever it is behind."""
        record = witness.read() if witness is not None else None
        named = f" (witness {witness.path})" if witness is not None else ""
        if fresh and record is not None:
            raise StoreLost(
                f"{where} holds no store, but its witness {witness.path if witness else ''} says store "
                f"{record.store_id} committed decisions up to ledger row {record.high_water}: the database was "
                "deleted, truncated or replaced, or this is the wrong path. Restore the database (with its -wal "
                "file, if any) from a backup, or point to the right one; a new store would run every call again",
                StoreFault.MISSING,
            )
        if fresh and not create:
            raise StoreLost(
                f"no store at {where} (missing or empty): check the path (a store that existed must never be "
                "recreated), or create "
                f"one explicitly with `callsafe store init {where}`",
                StoreFault.MISSING,
            )
        ident = None if fresh else self._stored_id()
        if ident is None and not fresh:
            if record is not None:
                raise StoreLost(
                    f"{where} has no store identity but its witness{named} names store {record.store_id}: the "
                    "database was replaced by another file; restore the right one",
                    StoreFault.MISMATCH,
                )
            if not create and not self._holds_rows():
                raise StoreLost(
                    f"the store at {where} is empty: check the path, or create it explicitly with "
                    f"`callsafe store init {where}`",
                    StoreFault.EMPTY,
                )
        had_identity = ident is not None
        if ident is None:  # a store written before identities: adopted
            with self._transaction():
                self._new_identity()
            ident = self._stored_id()
            if ident is None:  # pragma: no cover - just written
                raise StoreError(f"cannot record the identity of the store at {where}", StoreFault.OTHER)
        high_water = self._high_water()
        if record is not None:
            if record.store_id != ident:
                raise StoreLost(
                    f"{where} is store {ident} but its witness{named} names store {record.store_id}: the database "
                    "was replaced by another store's file, or the witness belongs to another deployment",
                    StoreFault.MISMATCH,
                )
            if high_water < record.high_water:
                raise StoreLost(
                    f"the store at {where} is behind what it decided: its ledger ends at row {high_water}, its "
                    f"witness{named} saw row {record.high_water} committed. Committed decisions were lost (a "
                    "deleted, truncated or damaged -wal file, an older copy restored, a copy taken while the "
                    "process ran); restore the database with its -wal from a backup. Opening it would run "
                    "decided calls again",
                    StoreFault.BEHIND,
                )
        elif witness is not None and had_identity and not create:
            raise StoreLost(
                f"the store at {where} (store {ident}, ledger up to row {high_water}) has no witness at "
                f"{witness.path}: if the witness was moved, restore it; if the database is known to be complete, "
                f"write a new witness with `callsafe store init {where}`",
                StoreFault.NO_WITNESS,
            )
        self.store_id = ident
        self._witness = witness
        if witness is not None:
            witness.advance(ident, high_water)

    def _new_identity(self) -> None:
        """Give a store without one its identity (inside the creating transaction, so two
        processes creating one store at once end up with the first one's)."""
        self._execute(_SET_STORE_ID, (uuid.uuid4().hex,))

    @property
    def high_water(self) -> int:
        """The store's high-water mark (see :meth:`_high_water`)."""
        return self._high_water()

    def _stored_id(self) -> str | None:
        rows = self._query(_STORE_ID)
        return str(rows[0][0]) if rows else None

    def _holds_rows(self) -> bool:
        return any(self._query(f"SELECT 1 FROM {table} LIMIT 1") for table in DATA_TABLES)

    def _high_water(self) -> int:
        """The highest ledger row id: every decision and every claim writes a ledger row,
        and ledger rows are never deleted, so a database whose ledger ends lower than a
        mark it once reached has lost committed decisions."""
        return int(self._query(_HIGH_WATER)[0][0])

    def _witness_advance(self, mark: int) -> None:
        """After the commit, before anyone acts on it: the decision's mark on the witness.
        Its failure is this store's typed error; the decision itself is committed."""
        if self._witness is not None:
            self._witness.advance(self.store_id, mark)

    def _apply_one(self, fact: Fact, at: float) -> None:
        ex = self._execute
        if isinstance(fact, RecordProgress):
            ex(_TURN_BYTES, (fact.turn_bytes, fact.turn_bytes, fact.turn))
            ex(_CALL_PROGRESS, (fact.fragments, fact.call_bytes, *_key(fact.key)))
        elif isinstance(fact, BindTurn):
            if ex(_INSERT_TURN, (fact.turn, fact.actor, fact.tenant, fact.conversation, fact.traceparent)):
                ex(_SET_CURRENT, (fact.tenant, fact.conversation, fact.turn))
        elif isinstance(fact, SetTurnStatus):
            ex(_SET_STATUS, (fact.status, at, fact.turn))
        elif isinstance(fact, RecordDisplay):
            ex(_DISPLAY, (fact.shown, int(fact.stopped), int(fact.executed), fact.turn))
        elif isinstance(fact, OpenCall):
            ex(_OPEN_CALL, (*_key(fact.key), fact.key.tenant, fact.tool, fact.owner))
        elif isinstance(fact, RecordDecision):
            params = (*_key(fact.key), fact.key.tenant, fact.tool, fact.state.value, fact.entry.fragments, fact.why)
            ex(_DECIDE, params)
            ex(_LEDGER, _ledger_params(fact.entry, fact.why, at))
        elif isinstance(fact, RecordLedger):
            ex(_LEDGER, _ledger_params(fact.entry, fact.why, at))
        elif isinstance(fact, RecordTerminalId):
            ex(_TERMINAL_ID, (fact.event_id, at))
        elif isinstance(fact, EndResponse):
            ex(_END_RESPONSE, (fact.turn, fact.response))
        elif isinstance(fact, RecordQuarantine):
            ex(_QUARANTINE, (fact.response, fact.reason, at))
        elif isinstance(fact, RecordDisabledTool):
            ex(_DISABLE, (fact.tool, fact.reason, at))
        elif isinstance(fact, RecordTenantStop):
            ex(_TENANT_STOP, (fact.tenant, fact.reason, at))
            ex(_STOP_TENANT_TURNS, (at, fact.tenant))
        elif isinstance(fact, RecordAudit):
            keys = json.dumps([k.to_json() for k in fact.keys])
            ex(_AUDIT, (fact.action, fact.reason, keys, at))
        elif isinstance(fact, RecordOutcome):
            ex(_OUTCOME, (*_key(fact.key), fact.key.tenant, fact.outcome, at))
        else:  # pragma: no cover - every fact type is handled above
            raise StoreError(f"unknown fact {type(fact).__name__}")

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        rows: list[tuple[Any, ...]] = []
        mark = 0
        with self._transaction():
            claimed = self._execute(CLAIM, (*_key(key), tool)) == 1
            if claimed:
                self._execute(_LEDGER, _ledger_params(entry, "dispatched", at))
                mark = self._high_water() if self._witness is not None else 0
            else:
                rows = self._query(_CALL_STATE, _key(key))
        if claimed:
            if mark:  # durable before the executor runs: a lost claim is then seen at open
                self._witness_advance(mark)
            return ClaimResult.CLAIMED
        if rows and rows[0][0] == State.DISPATCHED.value:
            return ClaimResult.TAKEN
        return ClaimResult.BLOCKED

    # -- leases ------------------------------------------------------------------

    def renew_lease(self, owner: str, ttl: float, now: float) -> bool:
        with self._transaction():
            rows = self._query(_LEASE_OF, (owner,))
            self._execute(_RENEW_LEASE, (owner, now, now + ttl))
        return bool(rows) and float(rows[0][0]) > now

    def release_lease(self, owner: str) -> None:
        with self._transaction():
            self._execute(_RELEASE_LEASE, (owner,))

    def adopt_orphans(self, owner: str, now: float, *, own: bool) -> list[CallRow]:
        sql = _ADOPT_AT_START if own else _ADOPT
        params: tuple[Any, ...] = (owner, owner, owner, now) if own else (owner, owner, now)
        with self._transaction():
            rows = self._query(sql, params)
        return [_call_row(row) for row in rows]

    def leases(self) -> list[tuple[str, float, float]]:
        return [(str(o), float(h), float(e)) for o, h, e in self._query(_LEASES)]

    # -- retention -----------------------------------------------------------------

    def prune(self, before: float, keep: int) -> dict[str, int]:
        """Delete the ledger and audit rows written before ``before`` (a time of the
        clock the rows were stamped with), except the newest ``keep`` of each (at least
        one: the newest ledger row is the store's high-water mark, which its witness
        compares at open); how many rows of each table went.

        What this never deletes: the calls, their outcomes and the terminal event ids (the
        replay protection; :meth:`prune_retained` deletes those past a replay window),
        turns, current turns, quarantines, disabled tools and leases (what a restart reads
        back). Ledger and audit rows are the record for people: the decisions themselves
        live in ``calls``. Deleted in batches, one transaction each, until none is left."""
        keep = max(1, int(keep))
        return {table: self._prune_records(table, before, keep, _PRUNE_BATCH, None) for table in ("ledger", "audit")}

    def prune_retained(self, policy: Retention, now: float) -> dict[str, int]:
        """One pass of a retention policy at ``now`` (:mod:`~callsafe.reference_impl.retention`):
        over turns past the replay window with their calls, outcomes and ended responses,
        terminal ids past it, and (``policy.records``) old ledger and audit rows; at most
        ``policy.max_batches`` transactions of ``policy.batch`` rows for each kind. How many
        rows of each table went."""
        gone = dict.fromkeys(("turns", "calls", "outcomes", "ended_responses", "terminal_ids", "ledger", "audit"), 0)
        before = now - policy.window
        batch, batches = policy.batch, policy.max_batches
        for _ in range(batches):  # stamp what became over without the store seeing it
            with self._transaction(()):
                stamped = self._execute(_STAMP_OVER, (now, batch)) + self._execute(_STAMP_TERMINAL_IDS, (now, batch))
            if stamped < batch:
                break
        for table, count in self._prune_turns(before, policy.keep, batch, batches).items():
            gone[table] += count
        cutoff = self._cutoff("SELECT at FROM terminal_ids WHERE at IS NOT NULL ORDER BY at DESC", policy.keep, before)
        if cutoff is not None:
            for _ in range(batches):
                with self._transaction(()):
                    count = self._execute(_PRUNE_TERMINAL_IDS, (cutoff, batch))
                gone["terminal_ids"] += count
                if count < batch:
                    break
        if policy.records is not None:
            keep = max(1, policy.keep)
            for table in ("ledger", "audit"):
                gone[table] = self._prune_records(table, now - policy.records, keep, batch, batches)
        return gone

    def _cutoff(self, newest_first: str, keep: int, before: float) -> float | None:
        """The time before which rows may go: ``before``, or earlier so that the newest
        ``keep`` rows of ``newest_first`` (a query of times, newest first) stay; None when
        there are no more than ``keep`` rows."""
        if keep <= 0:
            return before
        rows = self._query(f"{newest_first} LIMIT 1 OFFSET ?", (keep - 1,))
        if not rows:
            return None
        return min(before, float(rows[0][0]))

    def _prune_turns(self, before: float, keep: int, batch: int, batches: int) -> dict[str, int]:
        """Delete over turns past ``before`` (except the newest ``keep``), batch by batch
        in the order they became over, each with its calls, outcomes and ended responses,
        and its current entry. The candidates are read in order past a cursor, so turns
        that must stay (a call open, an outcome unknown) are passed over, not read again."""
        gone = dict.fromkeys(("turns", "calls", "outcomes", "ended_responses"), 0)
        cutoff = self._cutoff("SELECT over_at FROM turns WHERE over_at IS NOT NULL ORDER BY over_at DESC", keep, before)
        if cutoff is None:
            return gone
        at, last = -math.inf, ""
        for _ in range(batches):
            rows = self._query(_OVER_TURNS, (cutoff, at, at, last, batch))
            if not rows:
                break
            at, last = float(rows[-1][1]), str(rows[-1][0])
            # every list padded to ``batch`` with NULL (which matches nothing): one statement
            # text per kind, so the driver's statement cache holds a few, not one per length
            marks = ", ".join("?" * batch)
            pad: tuple[None, ...] = (None,) * batch
            ids = (tuple(str(row[0]) for row in rows) + pad)[:batch]
            with self._transaction(()):
                doomed = tuple(str(row[0]) for row in self._query(_PRUNABLE.format(ids=marks), ids))
                if doomed:
                    for table, sql in _PRUNE_TURN_ROWS:
                        count = self._execute(sql.format(ids=marks), (doomed + pad)[:batch])
                        if table in gone:
                            gone[table] += count
            if len(rows) < batch:
                break
        return gone

    def _prune_records(self, table: str, before: float, keep: int, batch: int, batches: int | None) -> int:
        """Delete ``table``'s (ledger or audit) rows stamped before ``before``, oldest
        first, except the newest ``keep``; ``batches`` transactions at most (None: until
        none is left)."""
        rows = self._query(f"SELECT id FROM {table} ORDER BY id DESC LIMIT 1 OFFSET ?", (keep - 1,))
        if not rows:
            return 0
        newest_kept = int(rows[0][0])
        total, done = 0, 0
        while batches is None or done < batches:
            with self._transaction(()):
                count = self._execute(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE at < ? AND id < ? ORDER BY id "
                    "LIMIT ?)",
                    (before, newest_kept, batch),
                )
            total, done = total + count, done + 1
            if count < batch:
                break
        return total

    # -- reading -----------------------------------------------------------------

    def load(self) -> Snapshot:
        with self._read_snapshot():
            try:
                return self._load()
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                # a value that does not decode (a damaged page SQLite did not notice): the
                # store's corrupt fault, never the decoder's bare error
                raise StoreError(
                    f"the store holds a value it cannot read ({type(exc).__name__}): restore it from a backup",
                    StoreFault.CORRUPT,
                ) from None

    def _load(self) -> Snapshot:
        snap = Snapshot()
        q = self._query
        for turn, actor, tenant, conversation, traceparent, status, nbytes, shown, stopped, executed in q(
            "SELECT turn_id, actor, tenant, conversation, traceparent, status, bytes, shown, stopped, executed "
            "FROM turns"
        ):
            snap.turns[turn] = TurnRow(
                turn,
                actor,
                tenant,
                conversation,
                traceparent,
                status,
                int(nbytes),
                shown,
                bool(stopped),
                bool(executed),
            )
        snap.current = {
            (tenant, conv): turn for tenant, conv, turn in q("SELECT tenant, conversation, turn_id FROM current_turns")
        }
        for row in q(
            "SELECT turn_id, response_id, item_id, call_id, tenant, tool, state, fragments, bytes, owner FROM calls"
        ):
            snap.calls[(row[0], row[1], row[2], row[3])] = _call_row(row)
        snap.terminal_ids = {row[0] for row in q("SELECT event_id FROM terminal_ids")}
        snap.ended_responses = {(t, r) for t, r in q("SELECT turn_id, response_id FROM ended_responses")}
        snap.quarantined = {row[0] for row in q("SELECT response_id FROM quarantined")}
        snap.disabled_tools = {row[0] for row in q("SELECT tool FROM disabled_tools")}
        snap.unknown_outcomes = [key for key, _ in self.unknown_outcomes()]
        return snap

    def unknown_outcomes(self) -> list[tuple[CallKey, str]]:
        return [(CallKey(*row[:5]), str(row[5])) for row in self._query(_UNKNOWN_OUTCOMES)]

    def ledger(self) -> list[tuple[LedgerEntry, str]]:
        out = []
        for row in self._query(
            "SELECT tenant, turn_id, response_id, item_id, call_id, fragments, terminal_reason, parse, validation, "
            "decision, traceparent, reason FROM ledger ORDER BY id"
        ):
            key = CallKey(*row[:5])
            out.append((LedgerEntry(key, int(row[5]), row[6], row[7], row[8], row[9], row[10]), str(row[11])))
        return out

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        out = []
        for action, reason, keys in self._query("SELECT action, reason, keys FROM audit ORDER BY id"):
            out.append((str(action), str(reason), tuple(CallKey.from_json(k) for k in json.loads(keys))))
        return out

    def tenant_stops(self) -> list[tuple[str, str]]:
        return [(str(t), str(r)) for t, r in self._query("SELECT tenant, reason FROM tenant_stops ORDER BY id")]

    def rows(self, table: str) -> Iterator[tuple[Any, ...]]:
        """Every row of one of this store's tables (diagnostics and tests)."""
        if table not in DATA_TABLES and table != "leases":
            raise StoreError(f"no table {table!r}")
        yield from self._query(f"SELECT * FROM {table}")
