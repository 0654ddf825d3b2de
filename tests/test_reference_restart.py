"""Restart over SQLite: decisions, quarantines and tenant stops survive; a replayed
terminal event after a restart executes nothing; a call in flight fails, never returns
as a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callsafe.certify.runner import run_trace
from callsafe.contract.target import TargetEnv
from callsafe.model.lifecycle import State
from callsafe.model.system import business_check
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Confirm,
    Event,
    Executed,
    Fragment,
    LedgerRow,
    Limits,
    Observation,
    QuarantineResponse,
    Replay,
    Restart,
    StatusShown,
    StopTenant,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.targets.reference import ReferenceTarget

TOOLS = {
    "book_slot": ToolSpec(schema={"type": "object", "required": ["day"]}),
    "pay": ToolSpec(schema={"type": "object", "required": ["amount"]}, confirm=True),
}
BOOK = '{"day":"Tue"}'


def call(t: str, c: str, text: str = BOOK, tool: str = "book_slot", r: str = "r1") -> list[Event]:
    return [
        CallOpened(turn=t, response=r, item=f"i-{c}", call=c, tool=tool),
        Fragment(turn=t, response=r, item=f"i-{c}", call=c, position=0, text=text[:5]),
        Fragment(turn=t, response=r, item=f"i-{c}", call=c, position=1, text=text[5:]),
        CallTerminal(turn=t, response=r, item=f"i-{c}", call=c, event_id=f"ev-{t}-{c}"),
    ]


class Harness:
    """A hand-driven harness (the runner's job, made explicit): a spy executor, a business
    validator, the live catalog and a store folder that outlives targets."""

    def __init__(self, store_dir: Path, tools: dict[str, ToolSpec] = TOOLS, limits: Limits | None = None) -> None:
        self.observations: list[Observation] = []
        self.step = 0
        self.catalog = dict(tools)
        self.env = TargetEnv(
            executor=self.execute,
            business_validator=self.validate,
            tools=self.catalog,
            limits=limits or Limits(),
            observe=self.observations.append,
            step=lambda: self.step,
            clock=lambda: float(self.step),
            store_dir=store_dir,
        )

    def execute(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        self.observations.append(Executed(self.step, key, actor, tool, arguments, traceparent))

    def validate(self, key: CallKey, tool: str, arguments: Any) -> str | None:
        spec = self.catalog.get(tool)
        return business_check(spec, arguments) if spec else "unknown tool"

    def deliver(self, target: ReferenceTarget, events: list[Event]) -> None:
        for event in events:
            self.step += 1
            target.receive(event)

    def executed(self) -> list[Executed]:
        return [o for o in self.observations if isinstance(o, Executed)]


def _states(path: Path) -> dict[str, str]:
    store = SqliteStore(path / "callsafe.sqlite3")
    try:
        return {row[3]: row[6] for row in store.rows("calls")}  # call_id -> state
    finally:
        store.close()


def test_decisions_survive_and_replay_after_restart_executes_nothing(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    target = ReferenceTarget(store="sqlite")
    target.start(h.env)
    turn = TurnStarted(turn="t1", actor="u1", tenant="acme")
    done = call("t1", "a")
    failed = call("t1", "b", '{"day":')
    collecting = call("t1", "c")[:2]
    h.deliver(target, [turn, *done, *failed, *collecting])
    assert len(h.executed()) == 1
    target.restart()
    # everything again, as a reconnecting client would send it
    h.deliver(target, [turn, *done, *failed, *call("t1", "c")])
    assert len(h.executed()) == 1, "a replayed terminal event after a restart executed"
    target.close()
    assert _states(tmp_path) == {"a": "dispatched", "b": "failed", "c": "failed"}
    # a new process on the same file (a new target object): still nothing
    h2 = Harness(tmp_path)
    again = ReferenceTarget(store="sqlite")
    again.start(h2.env)
    h2.deliver(again, [turn, *done, *failed, *call("t1", "c")])
    again.close()
    assert h2.executed() == []


def test_call_in_flight_fails_on_restart_with_ledger_and_status(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    target = ReferenceTarget(store="sqlite")
    target.start(h.env)
    h.deliver(target, [TurnStarted(turn="t1", actor="u1", tenant="acme"), *call("t1", "a")[:2]])
    target.restart()
    rows = [o for o in h.observations if isinstance(o, LedgerRow)]
    assert [(r.key.call, r.decision, r.fragments) for r in rows] == [("a", "failed", 1)]
    assert [o.status for o in h.observations if isinstance(o, StatusShown)][-1] == "retry"
    view = target.core.view(rows[0].key) if target.core else None
    assert view is not None and view.state is State.FAILED
    target.close()


def test_quarantine_and_tenant_stop_survive_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    target = ReferenceTarget(store="sqlite")
    target.start(h.env)
    h.deliver(
        target,
        [
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            TurnStarted(turn="g1", actor="u9", tenant="globex", conversation="g"),
            *call("t1", "a")[:2],
            *call("g1", "a", r="rg")[:2],
            QuarantineResponse(response="r1", reason="review 42"),
            StopTenant(tenant="globex", reason="incident 7"),
        ],
    )
    target.restart()
    h.deliver(target, [*call("t1", "a"), *call("t1", "b"), *call("g1", "a", r="rg"), *call("t1", "z", r="r2")])
    assert [e.key.call for e in h.executed()] == ["z"]
    store = target.store
    assert isinstance(store, SqliteStore)
    audit = store.audit()
    assert [(a, r) for a, r, _ in audit] == [("quarantine_response", "review 42"), ("stop_tenant", "incident 7")]
    assert [k.short() for k in audit[0][2]] == ["t1/a"] and [k.short() for k in audit[1][2]] == ["g1/a"]
    assert store.tenant_stops() == [("globex", "incident 7")]
    assert {row[0]: row[5] for row in store.rows("turns")}["g1"] == "stopped"
    assert [row[0] for row in store.rows("quarantined")] == ["r1"]
    target.close()


def test_confirmation_pending_at_restart_is_failed(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    target = ReferenceTarget(store="sqlite")
    target.start(h.env)
    turn = TurnStarted(turn="t1", actor="u1", tenant="acme")
    pay = call("t1", "p", '{"amount":5}', "pay")
    h.deliver(target, [turn, *pay])
    assert any(o.kind == "confirmation_requested" for o in h.observations)
    target.restart()
    h.deliver(target, [Confirm(turn="t1", response="r1", item="i-p", call="p")])
    assert h.executed() == []
    target.close()


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_restart_traces_agree_with_model(store: str) -> None:
    turn = TurnStarted(turn="t1", actor="u1", tenant="acme")
    events: list[Event] = [turn, *call("t1", "a"), *call("t1", "b")[:3], Restart(), Replay(start=0, stop=8)]
    events += [Restart(), *call("t1", "c"), Restart(), Replay(start=0, stop=len(events))]
    trace = Trace(events=tuple(events), tools=TOOLS, name="restarts")
    run = run_trace(ReferenceTarget(store=store), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []
    assert sorted(o.key.call for o in run.observations if isinstance(o, Executed)) == ["a", "c"]


def test_sqlite_file_is_wal_and_reopens(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.sqlite3", create=True)
    assert store.rows("turns") is not None
    mode = store._query("PRAGMA journal_mode")[0][0]
    store.close()
    assert mode == "wal"
    SqliteStore(tmp_path / "x.sqlite3").close()
