"""PostgreSQL: the store keeps the contract, and several replicas sharing one schema run
each call exactly once. Needs a server: set ``CALLSAFE_PG_DSN`` (e.g.
``postgresql://postgres@127.0.0.1:5433/postgres``); skipped otherwise."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
import skips

from callsafe.certify.runner import run_trace
from callsafe.contract.target import TargetEnv
from callsafe.model.oracle import judge
from callsafe.model.system import business_check
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Event,
    Fragment,
    Limits,
    Observation,
    QuarantineResponse,
    Replay,
    Restart,
    StopTenant,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.reference_impl.effects import BindTurn, LedgerEntry, OpenCall
from callsafe.reference_impl.store import ClaimResult
from callsafe.targets.reference import ReferenceTarget

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not DSN,
        reason=skips.POSTGRES,
    ),
]

TOOLS = {
    "book_slot": ToolSpec(schema={"type": "object", "required": ["day"]}),
    "pay": ToolSpec(schema={"type": "object", "required": ["amount"]}, business={"max": {"amount": 50}}),
}


def call(t: str, c: str, text: str = '{"day":"Tue"}', tool: str = "book_slot", r: str = "r1") -> list[Event]:
    return [
        CallOpened(turn=t, response=r, item=f"i-{c}", call=c, tool=tool),
        Fragment(turn=t, response=r, item=f"i-{c}", call=c, position=0, text=text[:4]),
        Fragment(turn=t, response=r, item=f"i-{c}", call=c, position=1, text=text[4:]),
        CallTerminal(turn=t, response=r, item=f"i-{c}", call=c, event_id=f"ev-{t}-{r}-{c}"),
    ]


def _namespace() -> str:
    return f"callsafe_test_{uuid.uuid4().hex[:12]}"


def _drop(namespace: str) -> None:
    from callsafe.reference_impl.postgres_store import PostgresStore

    store = PostgresStore(DSN, namespace, create=True)
    store.drop()
    store.close()


TRACES = [
    Trace(
        events=(TurnStarted(turn="t1", actor="u1", tenant="acme"), *call("t1", "a"), Replay(start=0, stop=5)),
        tools=TOOLS,
        name="replay",
    ),
    Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            *call("t1", "a")[:2],
            QuarantineResponse(response="r1", reason="review"),
            Restart(),
            *call("t1", "a"),
            *call("t1", "b", r="r2"),
            *call("t1", "p", '{"amount":90}', "pay", r="r2"),
            StopTenant(tenant="acme", during_validation=False),
            TurnStarted(turn="t2", actor="u1", tenant="acme"),
            *call("t2", "a"),
            Restart(),
            Replay(start=0, stop=20),
        ),
        tools=TOOLS,
        name="quarantine, restart, stop",
    ),
    Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            *call("t1", "a"),
            *call("t1", "b"),
            *call("t1", "c"),
        ),
        tools=TOOLS,
        limits=Limits(call_bytes=100, turn_bytes=30),
        name="turn cap",
    ),
]


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_postgres_store_agrees_with_model(trace: Trace) -> None:
    run = run_trace(ReferenceTarget(store="postgres", dsn=DSN), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []


class _Spy:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executed: list[tuple[CallKey, Any]] = []

    def __call__(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        with self.lock:
            self.executed.append((key, arguments))


def _replica_env(spy: _Spy, observations: list[Observation]) -> TargetEnv:
    catalog = dict(TOOLS)

    def validate(key: CallKey, tool: str, arguments: Any) -> str | None:
        spec = catalog.get(tool)
        return business_check(spec, arguments) if spec else "unknown tool"

    return TargetEnv(
        executor=spy,
        business_validator=validate,
        tools=catalog,
        limits=Limits(),
        observe=observations.append,
        step=lambda: 0,
        clock=time.time,
        store_dir=None,
    )


@pytest.mark.parametrize("replicas", [2, 3])
def test_replicas_execute_each_call_exactly_once(replicas: int) -> None:
    rng = random.Random(replicas)
    events: list[Event] = [
        TurnStarted(turn="t1", actor="u1", tenant="acme", conversation="c1"),
        TurnStarted(turn="t2", actor="u2", tenant="acme", conversation="c2"),
    ]
    streams = [call(f"t{1 + i % 2}", f"c{i}", r=f"r{i % 3}") for i in range(24)]
    while any(streams):
        events.append(rng.choice([s for s in streams if s]).pop(0))
    events.insert(len(events) * 2 // 3, CancelTurn(turn="t2"))
    trace = Trace(events=tuple(events), tools=TOOLS, name="replicas")
    verdicts = judge(trace).verdicts
    namespace = _namespace()
    spy = _Spy()
    targets = [ReferenceTarget(store="postgres", dsn=DSN, namespace=namespace) for _ in range(replicas)]
    observations: list[list[Observation]] = [[] for _ in targets]
    errors: list[BaseException] = []
    for target, seen in zip(targets, observations, strict=True):
        target.start(_replica_env(spy, seen))
    barrier = threading.Barrier(replicas)

    def serve(target: ReferenceTarget) -> None:
        try:
            barrier.wait()
            for event in trace.delivered():
                target.receive(event)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=serve, args=(t,)) for t in targets]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for target in targets:
            target.close()
        _drop(namespace)
    assert errors == []
    counts = Counter(key for key, _ in spy.executed)
    assert counts and max(counts.values()) == 1, "a call key ran on more than one replica"
    for key, verdict in verdicts.items():
        if verdict.execute == "must_not":
            assert counts[key] == 0, f"{key.short()} must not run"
    # whichever replica saw the cancel first stopped t2's calls for everyone (the claim
    # re-checks the turn in the store); every call of t1 ran exactly once
    for key, verdict in verdicts.items():
        if verdict.execute == "must" and key.turn == "t1":
            assert counts[key] == 1
    assert all(args == {"day": "Tue"} for _, args in spy.executed)


def test_concurrent_claims_have_one_winner() -> None:
    from callsafe.reference_impl.postgres_store import PostgresStore

    namespace = _namespace()
    key = CallKey("acme", "t1", "r1", "i1", "a")
    setup = PostgresStore(DSN, namespace, create=True)
    setup.apply([BindTurn("t1", "u1", "acme", "main", None), OpenCall(key, "book_slot")], 0.0)
    stores = [PostgresStore(DSN, namespace) for _ in range(8)]
    entry = LedgerEntry(key, 1, "completed", "ok", "ok", "dispatched", None)
    results: list[ClaimResult] = []
    barrier = threading.Barrier(len(stores))

    def claim(store: PostgresStore) -> None:
        barrier.wait()
        results.append(store.claim(key, "book_slot", entry, 0.0))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert sorted(results) == sorted([ClaimResult.CLAIMED] + [ClaimResult.TAKEN] * (len(stores) - 1))
        assert [e.decision for e, _ in setup.ledger()] == ["dispatched"]
    finally:
        for store in stores:
            store.close()
        setup.drop()
        setup.close()


def test_claim_refused_once_the_turn_stopped_elsewhere() -> None:
    """Replica B never saw the cancel; replica A wrote it to the shared store: B's claim is
    blocked by the store's re-check at execution time."""
    from callsafe.reference_impl.effects import SetTurnStatus
    from callsafe.reference_impl.postgres_store import PostgresStore

    namespace = _namespace()
    key = CallKey("acme", "t1", "r1", "i1", "a")
    a, b = PostgresStore(DSN, namespace, create=True), PostgresStore(DSN, namespace)
    try:
        a.apply([BindTurn("t1", "u1", "acme", "main", None), OpenCall(key, "book_slot")], 0.0)
        a.apply([SetTurnStatus("t1", "cancelled")], 0.0)
        entry = LedgerEntry(key, 1, "completed", "ok", "ok", "dispatched", None)
        assert b.claim(key, "book_slot", entry, 0.0) is ClaimResult.BLOCKED
    finally:
        a.drop()
        a.close()
        b.close()
