"""What the reliability tests share: starting and timing out child processes, reading a
store back after a crash, and the store-level consistency that a crash must never break.

Why a module: the crash, race and tenant tests all ask the same questions of a store
file that a killed process left behind ("what is decided, what is claimed without an
outcome, is every operator action whole?"), and they must ask them the same way.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from callsafe.model.lifecycle import TERMINAL_STATES, State
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallKey, Event, Limits, ToolSpec, Trace
from callsafe.reference_impl.sqlite_store import SqliteStore

LONG = os.environ.get("CALLSAFE_LONG") == "1"

_F = TypeVar("_F", bound=Callable[..., Any])


def long_variant(test: _F) -> _F:
    """Marks a test as the long variant: ``slow``, and skipped unless CALLSAFE_LONG=1."""
    marked: _F = pytest.mark.slow(pytest.mark.skipif(not LONG, reason="long variant: set CALLSAFE_LONG=1")(test))
    return marked


# fork: the child starts in milliseconds with everything imported (a crash test starts
# about a hundred of them); spawn where fork does not exist
CTX: Any = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")

OPERATOR_WHY = {
    "tenant stopped by an operator": "stop_tenant",
    "response quarantined by an operator": "quarantine_response",
    "tool disabled by an operator": "disable_tool",
}


def launch(target: Callable[..., None], *args: Any, timeout: float = 120.0) -> int:
    """Run ``target(*args)`` in a child process; its exit code (``-9``: SIGKILL)."""
    process = CTX.Process(target=target, args=args)
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        raise AssertionError(f"child {target.__name__} hung for {timeout} s")
    assert process.exitcode is not None
    return int(process.exitcode)


KILLED = -signal.SIGKILL


@dataclass
class StoreState:
    """Everything durable, as the tests compare it."""

    states: dict[CallKey, str]  # call -> state
    why: dict[CallKey, str]
    turns: dict[str, tuple[str, str, str]]  # turn -> (actor, tenant, status)
    ledger: list[tuple[CallKey, str, str]]  # (key, decision, reason)
    audit: list[tuple[str, str, tuple[CallKey, ...]]]
    tenant_stops: list[tuple[str, str]]
    quarantined: set[str]
    outcomes: dict[CallKey, str]
    unknown: list[CallKey]

    @property
    def decided(self) -> dict[CallKey, str]:
        terminal = {s.value for s in TERMINAL_STATES}
        return {k: s for k, s in self.states.items() if s in terminal}

    @property
    def dispatched(self) -> set[CallKey]:
        return {k for k, s in self.states.items() if s == State.DISPATCHED.value}


def read_store(path: Path) -> StoreState:
    """The store at ``path`` as a crash left it (opening it runs only idempotent DDL)."""
    store = SqliteStore(path)
    try:
        states: dict[CallKey, str] = {}
        why: dict[CallKey, str] = {}
        for turn, response, item, call, tenant, _tool, state, _f, _b, reason, *_owner in store.rows("calls"):
            key = CallKey(tenant, turn, response, item, call)
            states[key] = state
            why[key] = reason
        turns = {row[0]: (row[1], row[2], row[5]) for row in store.rows("turns")}
        ledger = [(entry.key, entry.decision, reason) for entry, reason in store.ledger()]
        outcomes = {
            CallKey(tenant, turn, response, item, call): outcome
            for turn, response, item, call, tenant, outcome, _at in store.rows("outcomes")
        }
        return StoreState(
            states=states,
            why=why,
            turns=turns,
            ledger=ledger,
            audit=store.audit(),
            tenant_stops=store.tenant_stops(),
            quarantined={row[0] for row in store.rows("quarantined")},
            outcomes=outcomes,
            unknown=[key for key, _ in store.unknown_outcomes()],
        )
    finally:
        store.close()


def consistency_problems(s: StoreState) -> list[str]:
    """Every way the store breaks the atomicity of a decision or an operator action: what
    a process killed between two transactions of one action would leave behind."""
    problems: list[str] = []
    audited: dict[str, set[CallKey]] = {}
    for action, _reason, keys in s.audit:
        audited.setdefault(action, set()).update(keys)
        for key in keys:
            if s.decided.get(key) is None:
                problems.append(f"audit {action} names {key.short()}, which is not decided ({s.states.get(key)})")
    for key, why in s.why.items():
        control = OPERATOR_WHY.get(why)
        if control is not None and key not in audited.get(control, set()):
            problems.append(f"{key.short()} was stopped by an operator ({why}) but no {control} audit row names it")
        status = s.turns[key.turn][2] if key.turn in s.turns else None
        if why == "tenant stopped by an operator" and status != "stopped":
            problems.append(f"{key.short()} was stopped with its tenant, but its turn is {status}")
        if why == "cancelled by the user" and status != "cancelled":
            problems.append(f"{key.short()} was cancelled by the user, but its turn is {status}")
    actions = Counter(action for action, _, _ in s.audit)
    if actions["stop_tenant"] != len(s.tenant_stops):  # both are written every time a stop arrives
        problems.append(f"{actions['stop_tenant']} stop_tenant audit rows, {len(s.tenant_stops)} tenant stops")
    if actions["quarantine_response"] < len(s.quarantined):  # a repeated quarantine is audited again
        problems.append(f"{actions['quarantine_response']} quarantine audit rows, {len(s.quarantined)} quarantines")
    stopped_tenants = {tenant for tenant, _ in s.tenant_stops}
    for action, _reason, keys in s.audit:
        for key in keys:
            if action == "stop_tenant" and key.tenant not in stopped_tenants:
                problems.append(f"{key.short()} is audited as stopped with tenant {key.tenant}, which is not stopped")
            if action == "quarantine_response" and key.response not in s.quarantined:
                problems.append(f"{key.short()} is audited as quarantined, but {key.response} is not")
    claimed = Counter(key for key, decision, _ in s.ledger if decision == "dispatched")
    for key in s.dispatched:
        if claimed[key] != 1:
            problems.append(f"{key.short()} is dispatched with {claimed[key]} 'dispatched' ledger rows")
    for key in claimed:
        if key not in s.dispatched:
            problems.append(f"{key.short()} has a 'dispatched' ledger row but is {s.states.get(key)}")
    for key in s.outcomes:
        if key not in s.dispatched:
            problems.append(f"{key.short()} has an outcome but was never claimed")
    ledgered = {key for key, _, _ in s.ledger}
    for key in s.decided:
        if key not in ledgered:
            problems.append(f"{key.short()} is decided without a ledger row")
    return problems


def execution_counts(entries: Sequence[dict[str, Any]]) -> Counter[CallKey]:
    return Counter(CallKey.from_json(e["key"]) for e in entries)


def oracle_problems(
    events: Sequence[Event],
    tools: dict[str, ToolSpec],
    limits: Limits,
    entries: Sequence[dict[str, Any]],
    unknown: set[CallKey],
) -> list[str]:
    """How the executions (the journal's ``entries``) differ from the model's verdicts for
    ``events``, where a key in ``unknown`` (claimed, no outcome: the crash came between
    the claim and the executor's return) may have run once or not at all."""
    verdicts = judge(Trace(events=tuple(events), tools=tools, limits=limits)).verdicts
    counts = execution_counts(entries)
    problems = []
    for key, verdict in verdicts.items():
        n = counts.pop(key, 0)
        if verdict.execute == "must" and not (n == 1 or (n == 0 and key in unknown)):
            problems.append(f"{key.short()}: ran {n}x, the model says exactly once")
        elif verdict.execute == "must_not" and n:
            problems.append(f"{key.short()}: ran {n}x, the model says never ({verdict.reason})")
        elif verdict.execute == "may" and n > 1:
            problems.append(f"{key.short()}: ran {n}x, the model says at most once")
    problems += [f"{key.short()}: ran {n}x, the model knows no such call" for key, n in counts.items()]
    for e in entries:
        judged = verdicts.get(CallKey.from_json(e["key"]))
        if judged is not None and judged.arguments != e["arguments"]:
            problems.append(f"{CallKey.from_json(e['key']).short()}: ran with other arguments than the model's")
    return problems


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def report_figures(label: str, figures: dict[str, Any]) -> None:
    """Print a test's figures (shown with ``-s``), and append them as one JSON line to the
    file ``$CALLSAFE_FIGURES`` names, if any (the way to collect them under xdist)."""
    line = json.dumps({"figures": label, **figures}, sort_keys=True, default=str)
    print(f"\n{line}")
    target = os.environ.get("CALLSAFE_FIGURES")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(line + "\n")
