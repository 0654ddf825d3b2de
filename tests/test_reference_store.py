"""The store contract, the same for every store: one claim winner, the claim's re-check at
execution time, first decision wins, everything durable comes back in a snapshot. And
replicas sharing one store: a stop one replica saw blocks the other's dispatch."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import skips

from callsafe.contract.target import TargetEnv
from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Event,
    Executed,
    Fragment,
    LedgerRow,
    Limits,
    Observation,
    ToolSpec,
    TurnStarted,
)
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
    RecordProgress,
    RecordQuarantine,
    RecordTenantStop,
    RecordTerminalId,
    SetTurnStatus,
)
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import ClaimResult, Store, ident_of
from callsafe.targets.reference import ReferenceTarget

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
KEY = CallKey("acme", "t1", "r1", "i1", "a")
ENTRY = LedgerEntry(KEY, 2, "completed", "ok", "ok", "dispatched", None)
BASE: list[Fact] = [BindTurn("t1", "u1", "acme", "main", "tp-1"), OpenCall(KEY, "book")]

Opener = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another connection to one store (the memory store is shared as an object)."""
    opened: list[Store] = []
    if request.param == "memory":
        shared = MemoryStore()

        def make() -> Store:
            return shared

    elif request.param == "sqlite":

        def make() -> Store:
            store = SqliteStore(tmp_path / "s.sqlite3", create=True)
            opened.append(store)
            return store

    else:
        if not DSN:
            pytest.skip(skips.POSTGRES)
        from callsafe.reference_impl.postgres_store import PostgresStore

        namespace = f"callsafe_test_{uuid.uuid4().hex[:12]}"

        def make() -> Store:
            store = PostgresStore(DSN, namespace, create=True)
            opened.append(store)
            return store

    yield make
    if opened and request.param == "postgres":
        from callsafe.reference_impl.postgres_store import PostgresStore

        first = opened[0]
        assert isinstance(first, PostgresStore)
        first.drop()
    for store in opened:
        store.close()


def test_one_claim_wins_then_taken(opener: Opener) -> None:
    store = opener()
    store.apply(BASE, 1.0)
    assert store.claim(KEY, "book", ENTRY, 2.0) is ClaimResult.CLAIMED
    assert opener().claim(KEY, "book", ENTRY, 3.0) is ClaimResult.TAKEN
    assert [(e.decision, why) for e, why in store.ledger()] == [("dispatched", "dispatched")]
    # the first terminal decision wins
    store.apply([RecordDecision(KEY, "book", State.FAILED, "late", ENTRY)], 4.0)
    assert store.load().calls[("t1", "r1", "i1", "a")].state is State.DISPATCHED


@pytest.mark.parametrize(
    "stop",
    [
        SetTurnStatus("t1", "cancelled"),
        BindTurn("t2", "u1", "acme", "main", None),  # superseded: no longer the current turn
        RecordQuarantine("r1", "review"),
        RecordDisabledTool("book", "bug"),
        RecordDecision(KEY, "book", State.CANCELLED, "cancelled by the user", ENTRY),
    ],
    ids=["cancelled", "superseded", "quarantined", "disabled", "decided"],
)
def test_claim_rechecks_at_execution_time(opener: Opener, stop: Fact) -> None:
    store = opener()
    store.apply(BASE, 1.0)
    opener().apply([stop], 2.0)  # another replica wrote it
    assert store.claim(KEY, "book", ENTRY, 3.0) is ClaimResult.BLOCKED


def test_claim_of_an_unknown_call_is_blocked(opener: Opener) -> None:
    assert opener().claim(KEY, "book", ENTRY, 1.0) is ClaimResult.BLOCKED


def test_concurrent_claims_one_winner(opener: Opener) -> None:
    opener().apply(BASE, 1.0)
    stores = [opener() for _ in range(6)]
    results: list[ClaimResult] = []
    barrier = threading.Barrier(len(stores))

    def claim(store: Store) -> None:
        barrier.wait()
        results.append(store.claim(KEY, "book", ENTRY, 2.0))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results.count(ClaimResult.CLAIMED) == 1 and results.count(ClaimResult.TAKEN) == len(stores) - 1


def test_snapshot_round_trip(opener: Opener) -> None:
    store = opener()
    other = CallKey("acme", "t1", "r1", "i2", "b")
    store.apply(
        [
            *BASE,
            OpenCall(other, "book"),
            RecordProgress("t1", 42, KEY, 3, 40, ident_of(KEY)),
            RecordDisplay("t1", "retry", True, False),
            RecordTerminalId("ev-1"),
            EndResponse("t1", "r1"),
            RecordQuarantine("r9", "review"),
            RecordDisabledTool("pay", "bug"),
            RecordTenantStop("globex", "incident"),
            RecordDecision(other, "book", State.FAILED, "malformed arguments", ENTRY),
            RecordAudit("quarantine_response", "review", (KEY, other)),
        ],
        5.0,
    )
    snap = opener().load()
    turn = snap.turns["t1"]
    assert (turn.actor, turn.tenant, turn.traceparent, turn.status, turn.bytes) == ("u1", "acme", "tp-1", "live", 42)
    assert (turn.shown, turn.stopped, turn.executed) == ("retry", True, False)
    assert snap.current == {("acme", "main"): "t1"}
    assert snap.calls[("t1", "r1", "i1", "a")].state is State.COLLECTING
    assert (snap.calls[("t1", "r1", "i1", "a")].fragments, snap.calls[("t1", "r1", "i1", "a")].bytes) == (3, 40)
    assert snap.calls[("t1", "r1", "i2", "b")].state is State.FAILED
    assert snap.terminal_ids == {"ev-1"}
    assert snap.ended_responses == {("t1", "r1")}
    assert snap.quarantined == {"r9"} and snap.disabled_tools == {"pay"}
    assert store.audit() == [("quarantine_response", "review", (KEY, other))]


def test_progress_writes_what_apply_writes(opener: Opener) -> None:
    """``progress`` (the per-fragment write, no clock) writes what an ``apply`` of the same
    fact writes, read back by another connection; a progress for a turn and call the store
    does not hold changes nothing, one for a call without a row only its turn's bytes, and
    neither writes a ledger row. The same on every store."""
    store = opener()
    other = CallKey("acme", "t1", "r1", "i2", "b")
    store.apply([*BASE, OpenCall(other, "book")], 1.0)
    store.progress(RecordProgress("t1", 17, KEY, 2, 17, ident_of(KEY)))
    snap = opener().load()
    assert snap.turns["t1"].bytes == 17
    assert (snap.calls[ident_of(KEY)].fragments, snap.calls[ident_of(KEY)].bytes) == (2, 17)
    store.apply((RecordProgress("t1", 29, other, 1, 12, ident_of(other)),), 2.0)
    stray = CallKey("acme", "t9", "r1", "i1", "z")
    store.progress(RecordProgress("t9", 5, stray, 1, 5, ident_of(stray)))
    snap = opener().load()
    assert snap.turns["t1"].bytes == 29
    assert (snap.calls[ident_of(other)].fragments, snap.calls[ident_of(other)].bytes) == (1, 12)
    assert (snap.calls[ident_of(KEY)].fragments, snap.calls[ident_of(KEY)].bytes) == (2, 17)
    assert "t9" not in snap.turns and ident_of(stray) not in snap.calls
    assert store.ledger() == []
    # progress written before its call had a row: the turn's bytes count, the call starts from nothing
    late = CallKey("acme", "t1", "r1", "i3", "c")
    store.progress(RecordProgress("t1", 31, late, 7, 70, ident_of(late)))
    assert opener().load().turns["t1"].bytes == 31
    store.apply([OpenCall(late, "book")], 3.0)
    snap = opener().load()
    assert (snap.calls[ident_of(late)].fragments, snap.calls[ident_of(late)].bytes) == (0, 0)
    assert snap.turns["t1"].bytes == 31


# -- replicas over one store ----------------------------------------------------------


def _env(executed: list[Executed], seen: list[Observation]) -> TargetEnv:
    def execute(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        executed.append(Executed(0, key, actor, tool, arguments, traceparent))

    return TargetEnv(
        executor=execute,
        business_validator=lambda key, tool, arguments: None,
        tools={"book": ToolSpec()},
        limits=Limits(),
        observe=seen.append,
        step=lambda: 0,
        clock=lambda: 0.0,
    )


def test_a_stop_seen_by_one_replica_blocks_the_other(tmp_path: Path) -> None:
    shared = MemoryStore()
    executed: list[Executed] = []
    seen_a: list[Observation] = []
    seen_b: list[Observation] = []
    a = ReferenceTarget(store="memory", memory=shared)
    b = ReferenceTarget(store="memory", memory=shared)
    a.start(_env(executed, seen_a))
    b.start(_env(executed, seen_b))
    prefix: list[Event] = [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(turn="t1", response="r1", item="i1", call="a", tool="book"),
        Fragment(turn="t1", response="r1", item="i1", call="a", position=0, text="{}"),
    ]
    for event in prefix:
        a.receive(event)
        b.receive(event)
    a.receive(CancelTurn(turn="t1"))  # only replica A hears the user say stop
    b.receive(CallTerminal(turn="t1", response="r1", item="i1", call="a", event_id="e1"))
    assert executed == []
    rows = [o for o in seen_b if isinstance(o, LedgerRow)]
    assert [(r.decision, r.validation) for r in rows] == [("cancelled", "refused at dispatch: stopped in the store")]
    # and a replica that lost the race does not run the tool again
    prefix2: list[Event] = [
        CallOpened(turn="t2", response="r1", item="i1", call="a", tool="book"),
        Fragment(turn="t2", response="r1", item="i1", call="a", position=0, text="{}"),
        CallTerminal(turn="t2", response="r1", item="i1", call="a", event_id="e2"),
    ]
    for target in (a, b):
        target.receive(TurnStarted(turn="t2", actor="u1", tenant="acme"))
        for event in prefix2:
            target.receive(event)
    assert [e.key.turn for e in executed] == ["t2"]
    assert any(o.kind == "log_line" and "another worker" in getattr(o, "text", "") for o in seen_b)
    a.close()
    b.close()
