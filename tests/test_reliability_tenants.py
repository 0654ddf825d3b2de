"""Tenants and actors: an operator stop for one tenant never touches another; a call of one
tenant or actor never runs for another, even when the protocol ids collide (the same
response, item and call ids in two tenants); the audit names the operator action, its
reason and the keys it stopped, and nothing else. Over every store, and across replicas:
a stop or a cancel delivered to a replica that never saw the turn still stops it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import skips

from callsafe.model.vocabulary import (
    AuditRow,
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    DisableTool,
    Event,
    Fragment,
    LedgerRow,
    Limits,
    LogLine,
    Observation,
    QuarantineResponse,
    StopTenant,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Store

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
TOOLS = {
    "book": ToolSpec(schema={"type": "object", "required": ["day"]}),
    "admin": ToolSpec(schema={"type": "object"}, actors=("u1",)),
}


class Replica:
    """One core and driver on a shared store, with what it observed."""

    def __init__(self, store: Store, ran: list[tuple[CallKey, str, Any]]) -> None:
        self.seen: list[Observation] = []

        def execute(key: CallKey, actor: str, tool: str, arguments: Any, tp: str | None = None) -> None:
            ran.append((key, actor, arguments))

        self.core = Core(TOOLS, Limits(), store.load())
        self.driver = Driver(
            self.core,
            store,
            executor=execute,
            business_validator=lambda key, tool, arguments: None,
            observe=self.seen.append,
            step=lambda: 0,
            clock=lambda: 0.0,
        )
        self.driver.run(self.core.start())

    def send(self, *events: Event) -> None:
        for event in events:
            self.driver.run(self.core.receive(event))

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        return [(o.action, o.reason, o.keys) for o in self.seen if isinstance(o, AuditRow)]


Opener = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another connection to one store (the memory store is shared as an object)."""
    opened: list[Store] = []
    shared = MemoryStore()

    def make() -> Store:
        if request.param == "memory":
            return shared
        if request.param == "sqlite":
            store: Store = SqliteStore(tmp_path / "s.sqlite3", create=True)
        else:
            from callsafe.reference_impl.postgres_store import PostgresStore

            store = PostgresStore(DSN, namespace, create=True)
        opened.append(store)
        return store

    if request.param == "postgres":
        if not DSN:
            pytest.skip(skips.POSTGRES)
        import uuid

        namespace = f"callsafe_tenants_{uuid.uuid4().hex[:12]}"
    yield make
    if request.param == "postgres" and opened:
        from callsafe.reference_impl.postgres_store import PostgresStore

        first = opened[0]
        assert isinstance(first, PostgresStore)
        first.drop()
    for store in opened:
        store.close()


def parts(turn: str, call: str, text: str, tool: str = "book", response: str = "r1") -> list[Event]:
    """Open, two fragments, terminal: the same response, item and call ids whatever the
    tenant (only the turn, which the application assigns, differs)."""
    item = f"i-{call}"
    return [
        CallOpened(turn=turn, response=response, item=item, call=call, tool=tool),
        Fragment(turn=turn, response=response, item=item, call=call, position=0, text=text[:3]),
        Fragment(turn=turn, response=response, item=item, call=call, position=1, text=text[3:]),
        CallTerminal(turn=turn, response=response, item=item, call=call, event_id=f"ev-{turn}-{call}"),
    ]


def interleave(*streams: list[Event]) -> list[Event]:
    out: list[Event] = []
    for group in zip(*streams, strict=True):
        out += group
    return out


ACME = TurnStarted(turn="t1", actor="u1", tenant="acme")
GLOBEX = TurnStarted(turn="g1", actor="u9", tenant="globex")


def key(turn: str, call: str, response: str = "r1") -> CallKey:
    return CallKey("globex" if turn.startswith("g") else "acme", turn, response, f"i-{call}", call)


def test_a_tenant_stop_never_touches_another_tenant_with_the_same_protocol_ids(opener: Opener) -> None:
    ran: list[tuple[CallKey, str, Any]] = []
    store = opener()
    r = Replica(store, ran)
    acme_a, acme_b = parts("t1", "a", '{"day":"Tue"}'), parts("t1", "b", '{"day":"Wed"}')
    globex_a, globex_b = parts("g1", "a", '{"day":"Thu"}'), parts("g1", "b", '{"day":"Fri"}')
    halves = interleave(acme_a, globex_a, acme_b, globex_b)
    r.send(ACME, GLOBEX, *halves[:8])  # every call open with one fragment, in both tenants
    r.send(StopTenant(tenant="acme", reason="incident 7"))
    r.send(*halves[8:])
    assert sorted((k.tenant, k.call, actor, args["day"]) for k, actor, args in ran) == [
        ("globex", "a", "u9", "Thu"),
        ("globex", "b", "u9", "Fri"),
    ]
    # the audit: the action, its reason and exactly the keys it stopped
    expected = ("stop_tenant", "incident 7", (key("t1", "a"), key("t1", "b")))
    assert r.audit() == [expected]
    assert opener().audit() == [expected]
    assert opener().tenant_stops() == [("acme", "incident 7")]  # type: ignore[attr-defined]
    snap = opener().load()
    assert {t: row.status for t, row in snap.turns.items()} == {"t1": "stopped", "g1": "live"}
    assert {c.key.short() + "@" + c.key.tenant: c.state.value for c in snap.calls.values()} == {
        "t1/a@acme": "cancelled",
        "t1/b@acme": "cancelled",
        "g1/a@globex": "dispatched",
        "g1/b@globex": "dispatched",
    }
    # after a restart, a replay changes nothing, and each tenant's next turn runs
    ran.clear()
    again = Replica(opener(), ran)
    again.send(ACME, GLOBEX, *halves)
    assert ran == []
    again.send(
        TurnStarted(turn="t2", actor="u1", tenant="acme"),
        *parts("t2", "a", '{"day":"Sat"}'),
        TurnStarted(turn="g2", actor="u9", tenant="globex"),
        *parts("g2", "a", '{"day":"Sun"}'),
    )
    assert sorted((k.tenant, k.turn, actor) for k, actor, _ in ran) == [("acme", "t2", "u1"), ("globex", "g2", "u9")]


@pytest.mark.parametrize(
    "control",
    [
        StopTenant(tenant="acme", reason="incident 7"),
        CancelTurn(turn="t1"),
        QuarantineResponse(response="r1", reason="review"),
        DisableTool(tool="book", reason="bug"),
    ],
    ids=lambda e: e.kind,
)
def test_a_control_sent_to_another_replica_still_stops_the_call(opener: Opener, control: Event) -> None:
    """Replica A serves tenant acme's stream; the operator's (or the user's) control lands
    on replica B, which never saw turn t1. The store carries it to A's claim."""
    ran: list[tuple[CallKey, str, Any]] = []
    a, b = Replica(opener(), ran), Replica(opener(), ran)
    call = parts("t1", "a", '{"day":"Tue"}')
    a.send(ACME, *call[:2])
    b.send(control)
    a.send(*call[2:])
    assert ran == [], f"{control.kind} on another replica did not stop the call"
    rows = [o for o in a.seen if isinstance(o, LedgerRow)]
    assert [(row.decision, row.validation) for row in rows] == [
        ("cancelled", "refused at dispatch: stopped in the store")
    ]
    # and the other tenant, served by B, is untouched
    b.send(GLOBEX, *parts("g1", "z", '{"day":"Wed"}', response="r9"))
    expect = [] if isinstance(control, DisableTool) else [(key("g1", "z", "r9"), "u9")]
    assert [(k, actor) for k, actor, _ in ran] == expect


def test_permission_is_per_actor_even_with_colliding_ids(opener: Opener) -> None:
    ran: list[tuple[CallKey, str, Any]] = []
    r = Replica(opener(), ran)
    r.send(ACME, GLOBEX, *interleave(parts("t1", "a", '{"x":1}', "admin"), parts("g1", "a", '{"x":1}', "admin")))
    assert [(k.tenant, actor) for k, actor, _ in ran] == [("acme", "u1")]
    refused = [o for o in r.seen if isinstance(o, LedgerRow) and o.key.tenant == "globex"]
    assert [(o.decision, o.validation) for o in refused] == [("cancelled", "refused at dispatch: permission")]


def test_a_reused_turn_id_keeps_its_first_binding_and_is_logged(opener: Opener) -> None:
    """Turn ids are the application's; one announced again for another tenant or actor
    keeps its first binding (the model's rule): every call of it runs for that binding,
    never for the second, and the reuse is logged for an operator."""
    ran: list[tuple[CallKey, str, Any]] = []
    r = Replica(opener(), ran)
    r.send(ACME, TurnStarted(turn="t1", actor="u9", tenant="globex"), *parts("t1", "a", '{"day":"Tue"}'))
    assert [(k.tenant, actor) for k, actor, _ in ran] == [("acme", "u1")]
    assert [o.text for o in r.seen if isinstance(o, LogLine)] == [
        "turn t1 announced again with another binding: the first one stands"
    ]


def test_quarantine_is_by_provider_response_id_across_tenants(opener: Opener) -> None:
    """A quarantine names a response id, which providers make globally unique. When two
    tenants' streams do carry the same response id (a test double, a proxy that renames),
    the quarantine stops both: it fails safe, and the audit names every key it stopped,
    in both tenants. (The model has no tenant on a quarantine; see the report.)"""
    ran: list[tuple[CallKey, str, Any]] = []
    r = Replica(opener(), ran)
    halves = interleave(parts("t1", "a", '{"day":"Tue"}'), parts("g1", "a", '{"day":"Wed"}'))
    r.send(ACME, GLOBEX, *halves[:4], QuarantineResponse(response="r1", reason="review"), *halves[4:])
    assert ran == []
    assert r.audit() == [("quarantine_response", "review", (key("t1", "a"), key("g1", "a")))]


def test_the_audit_names_only_calls_it_stopped(opener: Opener) -> None:
    """Calls already decided (ran, failed) and calls of other tenants, tools or responses
    are not in an operator action's audit row; each action is audited once per delivery."""
    ran: list[tuple[CallKey, str, Any]] = []
    r = Replica(opener(), ran)
    r.send(ACME, GLOBEX)
    r.send(*parts("t1", "done", '{"day":"Tue"}'))  # ran
    r.send(*parts("t1", "bad", '{"day":'))  # failed
    r.send(*parts("t1", "open", '{"day":"Wed"}')[:2])  # in flight
    r.send(*parts("t1", "other", '{"day":"Thu"}', response="r2")[:2])  # in flight, other response
    r.send(*parts("g1", "open", '{"day":"Fri"}')[:2])  # in flight, other tenant
    r.send(QuarantineResponse(response="r2", reason="q"))
    r.send(DisableTool(tool="admin", reason="d"))
    r.send(StopTenant(tenant="acme", reason="s"))
    assert r.audit() == [
        ("quarantine_response", "q", (key("t1", "other", "r2"),)),
        ("disable_tool", "d", ()),
        ("stop_tenant", "s", (key("t1", "open"),)),
    ]
    assert [k.call for k, _, _ in ran] == ["done"]
