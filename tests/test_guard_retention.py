"""Retention of finished turns, their calls and terminal event ids
(:mod:`callsafe.reference_impl.retention`), on SQLite and PostgreSQL.

What must hold: a pass deletes the rows of turns over for longer than the replay window
(and terminal ids and ledger rows older than it), and nothing younger; a replay within the
window is still refused, also after a restart; a restart after pruning runs nothing twice
and fails no live replica's call; what a restart needs (open calls, calls claimed without
an outcome, live turns, leases) is never deleted. The guard's clock is injected: no test
reads the wall clock.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skips
from replica_worker import SCHEMA, turn_events

from callsafe.guard import ConfigError, Guard, Retention, ToolCall
from callsafe.providers.streams import render_payloads

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
WINDOW = 100.0
T0 = 1_000_000.0
POLICY = Retention(window=WINDOW, keep=0, records=WINDOW, every=3_600.0)


class Clock:
    """An injected clock: time moves only when the test says so."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Runs:
    def __init__(self) -> None:
        self.keys: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, call: ToolCall) -> str:
        with self.lock:
            self.keys[str(call.key)] += 1
        return "ok"


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.skipif(not DSN, reason=skips.POSTGRES)]),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A store several guards share: its URL and the Guard keywords it needs."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'guard.db'}", {"create": True}
    else:
        from callsafe.reference_impl.postgres_store import PostgresStore

        namespace = f"retention_{uuid.uuid4().hex[:12]}"
        yield DSN, {"create": True, "namespace": namespace}
        store = PostgresStore(DSN, namespace)
        store.drop()
        store.close()


def guard(store: Any, runs: Runs, clock: Clock, **kw: Any) -> Guard:
    kw.setdefault("heartbeat", False)
    kw.setdefault("retention", POLICY)
    return Guard({"count": SCHEMA}, executor=runs, store=store, clock=clock, **kw)


def payloads(turn_id: str, calls: int = 2) -> list[dict[str, Any]]:
    return render_payloads("openai-chat", turn_events(turn_id, calls))


def done_turn(g: Guard, turn_id: str, conversation: str) -> list[ToolCall]:
    """A whole turn streamed: its two calls run."""
    reader = g.turn(turn_id, "alice", "acme", conversation=conversation).open_stream("openai-chat")
    ran = [c for p in payloads(turn_id) for c in reader.feed(p)] + reader.end(clean=True)
    assert len(ran) == 2
    return ran


def replay(g: Guard, turn_id: str) -> list[ToolCall]:
    """The turn's whole stream again (a provider's retry, a client resending it)."""
    reader = g.resume_turn(turn_id).open_stream("openai-chat")
    return [c for p in payloads(turn_id) for c in reader.feed(p)] + reader.end(clean=True)


def rows(g: Guard, table: str) -> list[tuple[Any, ...]]:
    return list(g.store.rows(table))  # type: ignore[attr-defined]


def turns_of(g: Guard, table: str) -> set[str]:
    """The turn ids a table's rows name (turns, calls, outcomes, ended responses)."""
    return {str(row[0]) for row in rows(g, table)}


def test_a_pass_deletes_what_is_past_the_window_and_nothing_younger(backend: tuple[Any, dict[str, Any]]) -> None:
    store, kw = backend
    clock, runs = Clock(), Runs()
    g = guard(store, runs, clock, **kw)
    done_turn(g, "t1", "c")
    clock.now = T0 + 10
    done_turn(g, "t2", "c")  # t1 is over from T0 + 10
    clock.now = T0 + 20
    done_turn(g, "t3", "c")  # t2 is over from T0 + 20; t3 stays live (its conversation's last turn)
    clock.now = T0 + 10 + WINDOW  # t1 exactly at the window: younger than it is never dropped
    gone = g.prune()
    assert gone["turns"] == 0 and turns_of(g, "turns") == {"t1", "t2", "t3"}
    # terminal ids and ledger rows go by their own age: t1's, stamped at T0, are past it
    assert gone["terminal_ids"] == 2 and gone["ledger"] == 2 and len(rows(g, "terminal_ids")) == 4
    clock.now = T0 + 10 + WINDOW + 1  # past t1's window, within t2's
    gone = g.prune()
    assert (gone["turns"], gone["calls"], gone["outcomes"], gone["ended_responses"]) == (1, 2, 2, 1)
    assert turns_of(g, "turns") == {"t2", "t3"}
    assert turns_of(g, "calls") == turns_of(g, "outcomes") == {"t2", "t3"}
    assert turns_of(g, "ended_responses") == {"t2", "t3"}
    assert gone["terminal_ids"] == 2 and len(rows(g, "terminal_ids")) == 2  # t2's, stamped at T0 + 10
    assert gone["ledger"] == 2 and {e.key.turn for e, _ in g.store.ledger()} == {"t3"}
    clock.now = T0 + 10_000  # long after: every over turn goes, the live one stays
    g.prune()
    assert turns_of(g, "turns") == turns_of(g, "calls") == {"t3"}
    assert len(g.store.ledger()) == 1  # the newest ledger row, the store's high-water mark, always stays
    g.close()
    again = guard(store, runs, clock, **{k: v for k, v in kw.items() if k != "create"})  # a restart
    assert replay(again, "t3") == []  # the live turn's calls are still decided
    assert sorted(runs.keys.values()) == [1] * 6
    again.close()


def test_a_replay_within_the_window_is_refused_also_after_a_restart(backend: tuple[Any, dict[str, Any]]) -> None:
    store, kw = backend
    clock, runs = Clock(), Runs()
    g = guard(store, runs, clock, **kw)
    done_turn(g, "t1", "c")
    clock.now = T0 + 1
    done_turn(g, "t2", "c")  # t1 over from T0 + 1
    clock.now = T0 + WINDOW  # within t1's window
    g.prune()
    assert "t1" in turns_of(g, "turns") and "t1" in turns_of(g, "calls")
    assert replay(g, "t1") == []  # the guard still holds t1
    g.close()
    again = guard(store, runs, clock, **{k: v for k, v in kw.items() if k != "create"})  # a restart: the store's word
    again.prune()
    assert replay(again, "t1") == [] and replay(again, "t2") == []
    assert sorted(runs.keys.values()) == [1] * 4  # nothing ran twice
    again.close()


def test_a_restart_after_pruning_runs_nothing_twice_and_fails_nothing_live(
    backend: tuple[Any, dict[str, Any]],
) -> None:
    store, kw = backend
    opened = {k: v for k, v in kw.items() if k != "create"}
    clock, runs = Clock(), Runs()
    a = guard(store, runs, clock, instance="a", **kw)
    b = guard(store, runs, clock, instance="b", **opened)  # a live replica
    # b: a stream in flight in a live turn, and one whose conversation a's next turn took over
    live = b.turn("tb", "alice", "acme", conversation="cb").open_stream("openai-chat")
    tb = payloads("tb")
    for p in tb[:-1]:
        assert live.feed(p) == []
    taken = b.turn("tc", "alice", "acme", conversation="cc").open_stream("openai-chat")
    for p in payloads("tc")[:-1]:
        assert taken.feed(p) == []
    done_turn(a, "td", "cc")  # tc is no longer current: over, with b's calls still open
    # a: finished turns, one of them claimed with no outcome recorded (a crash in between)
    done_turn(a, "t1", "c")
    done_turn(a, "t3", "u")
    with a.store._transaction(()):  # type: ignore[attr-defined]
        a.store._execute("DELETE FROM outcomes WHERE turn_id = ?", ("t3",))  # type: ignore[attr-defined]
    clock.now = T0 + 1
    done_turn(a, "t2", "c")  # t1 over
    done_turn(a, "t4", "u")  # t3 over
    clock.now = T0 + 10 * WINDOW
    b.heartbeat()  # b is alive: its lease is renewed at the new time
    a.prune()
    kept = turns_of(a, "turns")
    assert "t1" not in kept and "t1" not in turns_of(a, "calls")
    assert {"t3", "tc", "tb"} <= kept  # an unknown outcome, calls still open, a live turn
    assert {"t3", "tc", "tb"} <= turns_of(a, "calls")
    assert {str(k.turn) for k, _ in a.unknown_outcomes()} == {"t3"}
    assert {row[0] for row in a.leases()} == {"a", "b"}
    a.close()
    restarted = guard(store, runs, clock, instance="a", **opened)
    assert {str(k.turn) for k, _ in restarted.unknown_outcomes()} == {"t3"}  # still for an operator
    assert replay(restarted, "t2") == []
    ran = [c for p in tb[-1:] for c in live.feed(p)] + live.end(clean=True)  # b's live calls run, once
    assert sorted(c.id for c in ran) == ["call_0", "call_1"] and b.status("tb") == "done"
    assert max(runs.keys.values()) == 1 and len(runs.keys) == 2 * 7 - 2  # tc's calls never ran
    restarted.close()
    b.close()


def test_the_retention_thread_prunes_online(tmp_path: Path) -> None:
    from loaded import TRACE_TIMEOUT

    clock, runs = Clock(), Runs()
    policy = Retention(window=WINDOW, keep=0, records=None, every=0.05)
    g = guard(f"sqlite:///{tmp_path / 'guard.db'}", runs, clock, create=True, retention=policy)
    done_turn(g, "t1", "c")
    clock.now = T0 + 1
    done_turn(g, "t2", "c")
    clock.now = T0 + 2 * WINDOW
    waited = threading.Event()
    for _ in range(int(TRACE_TIMEOUT / 0.05)):  # a bound that only ends a real hang
        if "t1" not in turns_of(g, "turns"):
            break
        waited.wait(0.05)
    assert "t1" not in turns_of(g, "turns"), "the retention thread never pruned the over turn"
    assert turns_of(g, "turns") == {"t2"} and len(g.store.ledger()) == 4  # records=None: the ledger stays
    g.close()


def test_a_store_written_before_the_stamps_starts_its_window_at_the_first_pass(tmp_path: Path) -> None:
    path = tmp_path / "guard.db"
    clock, runs = Clock(), Runs()
    g = guard(f"sqlite:///{path}", runs, clock, create=True, retention=None)
    done_turn(g, "t1", "c")
    done_turn(g, "t2", "c")
    g.close()
    with sqlite3.connect(path) as conn:  # as a store written before over_at and terminal_ids.at
        conn.execute("UPDATE turns SET over_at = NULL")
        conn.execute("UPDATE terminal_ids SET at = NULL")
    conn.close()
    clock.now = T0 + 10 * WINDOW
    again = guard(f"sqlite:///{path}", runs, clock)
    assert again.prune()["turns"] == 0  # t1 is stamped now: its window starts here, not earlier
    assert {row[-1] for row in rows(again, "terminal_ids")} == {T0 + 10 * WINDOW}
    clock.now += WINDOW + 1
    gone = again.prune()
    assert gone["turns"] == 1 and gone["terminal_ids"] == 4 and turns_of(again, "turns") == {"t2"}
    again.close()


def test_store_prune_with_a_window_deletes_finished_turns(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from callsafe.cli.store import store_cmd

    path = tmp_path / "guard.db"
    clock, runs = Clock(1_000.0), Runs()  # long ago: older than any window below
    g = guard(f"sqlite:///{path}", runs, clock, create=True, retention=None)
    done_turn(g, "t1", "c")
    done_turn(g, "t2", "c")
    g.close()
    result = CliRunner().invoke(store_cmd, ["prune", str(path), "--older-than", "30d", "--window", "1d", "--keep", "0"])
    assert result.exit_code == 0, result.output
    assert "1 finished turn(s) with 2 call(s), 4 terminal id(s)" in result.output
    again = guard(f"sqlite:///{path}", runs, clock, retention=None)
    assert turns_of(again, "turns") == {"t2"} and replay(again, "t2") == []
    assert sorted(runs.keys.values()) == [1] * 4
    again.close()


@pytest.mark.parametrize(
    "bad",
    [
        {"window": -1.0},
        {"window": float("nan")},
        {"every": 0.0},
        {"keep": -1},
        {"batch": 0},
        {"records": -5.0},
        {"keep": True},
    ],
)
def test_a_bad_policy_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Retention(**bad)


def test_retention_needs_a_store_that_keeps_it() -> None:
    with pytest.raises(ConfigError):
        Guard({"count": SCHEMA}, store="memory:", retention=Retention())
    with pytest.raises(ConfigError):
        Guard({"count": SCHEMA}, store="memory:", retention={"window": 1})  # type: ignore[arg-type]
