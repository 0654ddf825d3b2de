"""The durable-decisions workload: calls to decide, the reference core that decides them over
a store, and the raw inserts that are its floor.

Why this shape: a *terminal decision* is what a durable store exists for: the call is
claimed (the one ``UPDATE`` that makes it run at most once, with its ledger row) before the
executor runs, and its outcome is recorded after. Each call here is the shortest path to
one: opened, two argument fragments, a ``completed`` terminal event, validated, claimed,
executed. Everything a decision writes goes through the real
:class:`~callsafe.reference_impl.driver.Driver`, which commits one transaction per input
event, one for the claim and one for the outcome (:func:`profile_store` measures this,
it is not assumed).

The floor is the cheapest durable record of the same decision: the ledger row the store
writes for it, inserted into a table of the same shape (the store's own DDL) in a database
configured like the store's, one transaction per row. Mirroring the commit granularity
means the floor can also commit the way the store does (as many transactions per decision,
each as durable as the store's): then the ratio shows what the store's statements and
Python cost beyond its commits.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    Limits,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import LedgerEntry
from callsafe.reference_impl.sql_store import TABLES
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Store

__all__ = [
    "LEDGER_COLUMNS",
    "LIMITS",
    "TOOLS",
    "Recorder",
    "StoreProfile",
    "decision_events",
    "deliver",
    "ledger_ddl",
    "ledger_insert",
    "ledger_rows",
    "open_driver",
    "profile_store",
    "sqlite_connect",
    "sqlite_floor",
]

TOOLS: Final = {
    "book_slot": ToolSpec(
        schema={
            "type": "object",
            "required": ["day", "time"],
            "properties": {"day": {"type": "string"}, "time": {"type": "string"}, "seq": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
}
LIMITS: Final = Limits(call_bytes=64 * 1024, turn_bytes=1 << 30)  # one turn holds every call
TENANT: Final = "acme"
_SYNC_LEVELS: Final = ("OFF", "NORMAL", "FULL", "EXTRA")  # PRAGMA synchronous, by number
TURN: Final = "t1"

LEDGER_COLUMNS: Final = (
    "tenant",
    "turn_id",
    "response_id",
    "item_id",
    "call_id",
    "fragments",
    "terminal_reason",
    "parse",
    "validation",
    "decision",
    "traceparent",
    "reason",
    "at",
)


def decision_events(calls: int) -> tuple[list[Event], list[CallKey]]:
    """One turn, then ``calls`` calls one after the other, each opened, in two fragments and
    completed; and the keys that must each run once."""
    events: list[Event] = [TurnStarted(turn=TURN, actor="u1", tenant=TENANT)]
    keys: list[CallKey] = []
    for c in range(calls):
        response, item, call = f"r{c}", f"i{c}", f"call_{c}"
        text = json.dumps({"day": "Tue", "time": f"{9 + c % 8:02d}:{c % 60:02d}", "seq": c}, separators=(",", ":"))
        half = len(text) // 2
        events.append(CallOpened(turn=TURN, response=response, item=item, call=call, tool="book_slot"))
        for position, part in enumerate((text[:half], text[half:])):
            events.append(Fragment(turn=TURN, response=response, item=item, call=call, position=position, text=part))
        events.append(CallTerminal(turn=TURN, response=response, item=item, call=call, event_id=f"ev-{c}"))
        keys.append(CallKey(TENANT, TURN, response, item, call))
    return events, keys


class Recorder:
    """The executor: keeps the key of every call it ran (checked after the clock stops)."""

    def __init__(self) -> None:
        self.ran: list[CallKey] = []

    def __call__(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None) -> None:
        self.ran.append(key)


def _no_business_problem(key: CallKey, tool: str, arguments: Any) -> str | None:
    return None


def _quiet(observation: object) -> None:
    """Observations are the harness's business, not the store's: dropped."""


def open_driver(store: Store, executor: Recorder) -> tuple[Core, Driver]:
    """A core started from ``store`` (as a process starts) behind its driver."""
    core = Core(TOOLS, LIMITS, store.load())
    driver = Driver(
        core,
        store,
        executor=executor,
        business_validator=_no_business_problem,
        observe=_quiet,
        step=lambda: 0,
        clock=time.time,
    )
    driver.run(core.start())
    return core, driver


def deliver(core: Core, driver: Driver, events: Sequence[Event]) -> None:
    """The timed part: every event through the core, every effect through the driver."""
    run, receive = driver.run, core.receive
    for event in events:
        run(receive(event))


@dataclass(frozen=True)
class StoreProfile:
    """How the SQLite store writes one decision: its commits, each with its
    ``synchronous`` level (e.g. ``("NORMAL", ..., "FULL", "NORMAL")``), and the one ledger
    row it keeps for it (with its reason)."""

    commits: tuple[str, ...]
    ledger: tuple[LedgerEntry, str]


def profile_store(folder: Path, synchronous: str, calls: int = 3) -> StoreProfile:
    """Read how the SQLite store writes a decision while it decides ``calls`` calls: the
    commits from the statements SQLite actually ran (its trace callback), the ledger row
    from the store. Raises when two calls are written differently, or a decision does not
    leave exactly one ledger row (the floor could not mirror them)."""
    events, keys = decision_events(calls)
    store = SqliteStore(folder / f"profile-{synchronous}.sqlite3", create=True, synchronous=synchronous)
    try:
        executor = Recorder()
        core, driver = open_driver(store, executor)
        deliver(core, driver, events[:1])  # the turn: once per run, not per decision
        # the store's connection is private; the benchmark reads what it ran, untimed
        conn = store._conn
        level = [_SYNC_LEVELS[int(conn.execute("PRAGMA synchronous").fetchone()[0])]]
        commits: list[str] = []

        def trace(sql: str) -> None:
            words = sql.upper().split()
            if words[:2] == ["PRAGMA", "SYNCHRONOUS"]:
                level[0] = words[-1]
            elif words[:1] == ["COMMIT"]:
                commits.append(level[0])

        conn.set_trace_callback(trace)
        per_call: list[list[str]] = []
        for c in range(calls):
            before = len(commits)
            deliver(core, driver, events[1 + 4 * c : 5 + 4 * c])
            per_call.append(commits[before:])
        conn.set_trace_callback(None)
        ledger = store.ledger()
    finally:
        store.close()
    if executor.ran != keys or any(p != per_call[0] for p in per_call):
        raise AssertionError(f"the store wrote its calls differently: {per_call}, ran {len(executor.ran)}/{calls}")
    if [entry.key for entry, _ in ledger] != keys:
        raise AssertionError(f"expected one ledger row per decision, got {len(ledger)} for {calls}")
    return StoreProfile(tuple(per_call[0]), ledger[0])


def ledger_ddl(id_column: str) -> str:
    """The store's own DDL of its ledger table, with the backend's identity column."""
    ddl = next(t for t in TABLES if "EXISTS ledger" in t)
    return ddl.format(id=id_column)


def ledger_insert(placeholder: str) -> str:
    """One ledger row, as the store inserts it."""
    marks = ", ".join([placeholder] * len(LEDGER_COLUMNS))
    return f"INSERT INTO ledger ({', '.join(LEDGER_COLUMNS)}) VALUES ({marks})"


def ledger_rows(keys: Sequence[CallKey], profile: StoreProfile) -> list[tuple[Any, ...]]:
    """The ledger row of each key's decision: the row the store wrote for one decision
    (read back in :func:`profile_store`), with each key's identifiers."""
    template, reason = profile.ledger
    at = time.time()
    return [
        (
            k.tenant,
            k.turn,
            k.response,
            k.item,
            k.call,
            template.fragments,
            template.terminal_reason,
            template.parse,
            template.validation,
            template.decision,
            template.traceparent,
            reason,
            at,
        )
        for k in keys
    ]


def sqlite_connect(path: Path, busy_timeout_ms: int = 10_000) -> sqlite3.Connection:
    """A connection configured as the store configures its own: autocommit (transactions
    are explicit), the same busy timeout, WAL; and the ledger table."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(ledger_ddl("id INTEGER PRIMARY KEY"))
    return conn


def sqlite_floor(
    conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]], commits: Sequence[str]
) -> Callable[[], int]:
    """The floor's timed work: for each row, one transaction per entry of ``commits`` (its
    ``synchronous`` level, switched only when it changes, as the store switches it), each
    ``BEGIN IMMEDIATE``, one ``INSERT`` of the row, ``COMMIT``: the store's framing."""
    insert = ledger_insert("?")
    execute = conn.execute

    def work() -> int:
        level = ""
        for row in rows:
            for wanted in commits:
                if wanted != level:
                    execute(f"PRAGMA synchronous = {wanted}")
                    level = wanted
                execute("BEGIN IMMEDIATE")
                execute(insert, row)
                execute("COMMIT")
        return 0

    return work
