"""Cases where the model (callsafe.model) once disagreed with the spec or the harness,
found while building the reference implementation and since fixed in the model (commit
"Model: conversations are per tenant; a schema change keeps the tool's permission list;
ledger words are not leaks"). Kept as regressions: the model and the reference
implementation must agree on them."""

from __future__ import annotations

from callsafe.certify.runner import run_trace
from callsafe.model.invariants import check_all
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Fragment,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.targets.reference import ReferenceTarget


def test_schema_change_keeps_the_permission_list() -> None:
    tools = {"admin_reset": ToolSpec(schema={"type": "object"}, actors=("root",))}
    trace = Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            ToolChanged(tool="admin_reset", change="schema", schema={"type": "object"}),
            CallOpened(turn="t1", response="r1", item="i1", call="x", tool="admin_reset"),
            Fragment(turn="t1", response="r1", item="i1", call="x", position=0, text="{}"),
            CallTerminal(turn="t1", response="r1", item="i1", call="x", event_id="e1"),
        ),
        tools=tools,
    )
    assert judge(trace).by_short_name()["t1/x"].execute == "must_not"
    run = run_trace(ReferenceTarget(store="memory"), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []


def test_an_argument_equal_to_a_decision_word_is_not_a_leak() -> None:
    tools = {"pay": ToolSpec(schema={"type": "object"}, confirm=True)}
    trace = Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            CallOpened(turn="t1", response="r1", item="i1", call="p", tool="pay"),
            Fragment(turn="t1", response="r1", item="i1", call="p", position=0, text='{"memo":"cancelled"}'),
            CallTerminal(turn="t1", response="r1", item="i1", call="p", event_id="e1"),
            CancelTurn(turn="t1"),
        ),
        tools=tools,
    )
    run = run_trace(ReferenceTarget(store="memory"), trace)
    assert check_all(trace, run.observations)["INV-LEDGER"] == []
    assert conformance_problems(trace, run.observations, run.errors) == []


def test_another_tenants_turn_does_not_supersede() -> None:
    tools = {"book": ToolSpec(schema={"type": "object"})}
    trace = Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            CallOpened(turn="t1", response="r1", item="i1", call="a", tool="book"),
            Fragment(turn="t1", response="r1", item="i1", call="a", position=0, text='{"x":1}'),
            TurnStarted(turn="g1", actor="u9", tenant="globex"),
            CallTerminal(turn="t1", response="r1", item="i1", call="a", event_id="e1"),
        ),
        tools=tools,
    )
    assert judge(trace).by_short_name()["t1/a"].execute == "must"
    run = run_trace(ReferenceTarget(store="memory"), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []
    assert len([o for o in run.observations if o.kind == "executed"]) == 1
