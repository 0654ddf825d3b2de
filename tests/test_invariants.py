"""Each invariant checker catches a violating observation and passes a correct one.

The correct run is the model's own (``ideal_observations``); each violating run changes it
in the one way the invariant is about."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.model.builder import TraceBuilder
from callsafe.model.invariants import INVARIANTS, check_all
from callsafe.model.oracle import ideal_observations, judge
from callsafe.model.vocabulary import (
    BusinessValidated,
    ConfirmationRequested,
    Executed,
    LedgerRow,
    Limits,
    LogLine,
    Observation,
    StatusShown,
    Trace,
)

PAY = {"type": "object", "required": ["amount"]}


def base() -> TraceBuilder:
    return TraceBuilder(tools={"pay": PAY, "note": {"type": "object"}}).tool("transfer", PAY, confirm=True)


def violations(trace: Trace, observations: list[Observation]) -> dict[str, list[str]]:
    found = check_all(trace, observations)
    return {k: [v.message for v in vs] for k, vs in found.items() if vs}


def ideal(trace: Trace) -> list[Observation]:
    return ideal_observations(judge(trace))


def assert_caught(trace: Trace, observations: list[Observation], invariant: str) -> None:
    found = violations(trace, observations)
    assert invariant in found, f"{invariant} not caught; found {found}"


HAPPY = (
    base()
    .turn("t1", traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    .call("a", "pay", '{"amount":', "100}")
    .call("b", "transfer", '{"amount":5}')
    .confirm("b")
    .build()
)


def test_invariants_have_ids_and_spec_sentences() -> None:
    ids = [inv.id for inv in INVARIANTS]
    assert ids == [
        "INV-TERMINAL",
        "INV-EXACT-ARGS",
        "INV-ONCE",
        "INV-TURN",
        "INV-CANCEL",
        "INV-CONFIRM",
        "INV-VALIDATE-ONCE",
        "INV-BOUNDED",
        "INV-LEDGER",
        "INV-STATUS",
        "LIVE-DISPATCH",
    ]
    assert all(inv.spec and inv.title for inv in INVARIANTS)


def test_correct_run_passes_every_invariant() -> None:
    obs = ideal(HAPPY)
    assert [o.arguments for o in obs if isinstance(o, Executed)] == [{"amount": 100}, {"amount": 5}]
    assert violations(HAPPY, obs) == {}


def _replace(obs: list[Observation], pick: Callable[[Observation], bool], **changes: object) -> list[Observation]:
    out = list(obs)
    i = next(i for i, o in enumerate(out) if pick(o))
    out[i] = dataclasses.replace(out[i], **changes)  # type: ignore[type-var]
    return out


def _first_exec(o: Observation) -> bool:
    return isinstance(o, Executed)


def test_terminal_catches_execution_before_terminal() -> None:
    obs = _replace(ideal(HAPPY), _first_exec, step=2)  # while call a was still collecting
    assert_caught(HAPPY, obs, "INV-TERMINAL")


def test_terminal_catches_execution_of_malformed_call() -> None:
    t = base().turn("t1").call("a", "pay", '{"amount":1}{"amount":2}').build()
    key = next(iter(judge(t).verdicts))
    obs = [*ideal(t), Executed(3, key, "u1", "pay", {"amount": 1})]
    assert_caught(t, obs, "INV-TERMINAL")


def test_exact_args_catches_other_arguments_and_unknown_keys() -> None:
    assert_caught(HAPPY, _replace(ideal(HAPPY), _first_exec, arguments={"amount": 1000}), "INV-EXACT-ARGS")
    first = next(o for o in ideal(HAPPY) if isinstance(o, Executed))
    glued = dataclasses.replace(first.key, call="a+b")
    assert_caught(HAPPY, _replace(ideal(HAPPY), _first_exec, key=glued), "INV-EXACT-ARGS")


def test_once_catches_a_second_execution() -> None:
    obs = ideal(HAPPY)
    first = next(o for o in obs if isinstance(o, Executed))
    assert_caught(HAPPY, [*obs, first], "INV-ONCE")


def test_turn_catches_wrong_actor_and_stale_turn() -> None:
    assert_caught(HAPPY, _replace(ideal(HAPPY), _first_exec, actor="mallory"), "INV-TURN")
    t = base().turn("t1").call("a", "note", "{}").turn("t2").build()
    obs = _replace(ideal(t), _first_exec, step=4)  # executed after t2 superseded t1
    assert_caught(t, obs, "INV-TURN")


def test_cancel_catches_execution_after_cancel() -> None:
    t = base().turn("t1").open("a", "pay").fragment("a", '{"amount":1}').cancel().terminal("a").build()
    key = next(iter(judge(t).verdicts))
    assert violations(t, ideal(t)) == {}
    assert_caught(t, [*ideal(t), Executed(4, key, "u1", "pay", {"amount": 1})], "INV-CANCEL")


def test_cancel_catches_execution_after_length_stop() -> None:
    t = base().turn("t1").call("a", "pay", '{"amount":1}', reason="length").build()
    key = next(iter(judge(t).verdicts))
    assert_caught(t, [*ideal(t), Executed(3, key, "u1", "pay", {"amount": 1})], "INV-CANCEL")


def test_confirm_catches_unconfirmed_execution() -> None:
    obs = [o for o in ideal(HAPPY) if not isinstance(o, ConfirmationRequested)]
    assert_caught(HAPPY, obs, "INV-CONFIRM")
    t = base().turn("t1").call("b", "transfer", '{"amount":5}').build()
    key = next(iter(judge(t).verdicts))
    assert_caught(t, [*ideal(t), Executed(3, key, "u1", "transfer", {"amount": 5})], "INV-CONFIRM")


def test_validate_once_catches_double_and_missing_validation() -> None:
    obs = ideal(HAPPY)
    first = next(o for o in obs if isinstance(o, BusinessValidated))
    assert_caught(HAPPY, [*obs, first], "INV-VALIDATE-ONCE")
    assert_caught(HAPPY, [o for o in obs if not isinstance(o, BusinessValidated)], "INV-VALIDATE-ONCE")


def test_bounded_catches_over_limit_execution_and_open_buffer() -> None:
    t = (
        TraceBuilder(tools={"note": {"type": "object"}}, limits=Limits(call_bytes=8))
        .turn("t1")
        .call("a", "note", '{"q":"123456"}')
        .build()
    )
    key = next(iter(judge(t).verdicts))
    assert violations(t, ideal(t)) == {}
    assert_caught(t, [*ideal(t), Executed(3, key, "u1", "note", {"q": "123456"})], "INV-BOUNDED")
    no_final = [o for o in ideal(t) if not isinstance(o, LedgerRow)]
    assert_caught(t, no_final, "INV-BOUNDED")


def test_ledger_catches_leaked_secret_and_missing_row() -> None:
    t = base().turn("t1").call("a", "pay", '{"amount":1,"card":"4111-1111-1111-1111"}').build()
    obs = ideal(t)
    assert violations(t, obs) == {}
    assert_caught(t, [*obs, LogLine(2, "parsing card 4111-1111-1111-1111")], "INV-LEDGER")
    leaky = _replace(obs, lambda o: isinstance(o, LedgerRow), validation="bad card 4111-1111-1111-1111")
    assert_caught(t, leaky, "INV-LEDGER")
    assert_caught(t, [o for o in obs if not isinstance(o, LedgerRow)], "INV-LEDGER")


def test_status_catches_false_done_and_missing_retry() -> None:
    t = base().turn("t1").open("a", "pay").fragment("a", "{").stop_tenant().build()
    obs = ideal(t)
    assert violations(t, obs) == {}
    assert_caught(t, [o for o in obs if not (isinstance(o, StatusShown) and o.status == "retry")], "INV-STATUS")
    assert_caught(t, [*obs, StatusShown(3, "t1", "done")], "INV-STATUS")


def test_live_dispatch_catches_an_implementation_that_never_executes() -> None:
    obs = [o for o in ideal(HAPPY) if not isinstance(o, Executed)]
    found = check_all(HAPPY, obs)
    live = found["LIVE-DISPATCH"]
    assert live is not None and live and all(v.kind == "liveness" for v in live)


def test_missing_capability_is_not_applicable_never_passed() -> None:
    found = check_all(HAPPY, ideal(HAPPY), capabilities=())
    assert found["INV-LEDGER"] is None and found["INV-STATUS"] is None and found["INV-CONFIRM"] is None
    assert found["INV-ONCE"] == []


# --------------------------------------------------------------------------------------
# The model agrees with itself: on random traces, the model's own run passes every check.
# --------------------------------------------------------------------------------------

_CALLS = ("a", "b")


@st.composite
def small_traces(draw: st.DrawFn) -> Trace:
    b = base()
    b.tool("pay", PAY, business={"max": {"amount": 50}})
    b.turn("t1")
    for name in _CALLS:
        b.at(name)
    steps = draw(
        st.lists(
            st.sampled_from(
                [
                    "open",
                    "frag",
                    "frag",
                    "dup",
                    "end",
                    "end_length",
                    "cancel",
                    "turn",
                    "stop",
                    "quarantine",
                    "restart",
                    "confirm",
                    "replay",
                    "disable",
                    "during_stop",
                ]
            ),
            max_size=14,
        )
    )
    turn_no = 1
    for step in steps:
        call = draw(st.sampled_from(_CALLS))
        tool = draw(st.sampled_from(["pay", "transfer", "note"]))
        if step == "open":
            b.open(call, tool)
        elif step == "frag":
            b.fragment(call, draw(st.sampled_from(['{"amount":', "7}", "70}", "{}", '"x"'])))
        elif step == "dup":
            b.fragment(call, "7}", position=draw(st.integers(0, 2)))
        elif step == "end":
            b.terminal(call)
        elif step == "end_length":
            b.terminal(call, reason="length", event_id=f"len-{call}")
        elif step == "cancel":
            b.cancel()
        elif step == "turn":
            turn_no += 1
            b.turn(f"t{turn_no}")
        elif step == "stop":
            b.stop_tenant()
        elif step == "quarantine":
            b.quarantine()
        elif step == "restart":
            b.restart()
        elif step == "confirm":
            b.confirm(call)
        elif step == "replay" and b.events:
            b.replay(0, len(b.events))
        elif step == "disable":
            b.disable_tool(tool)
        elif step == "during_stop":
            b.stop_tenant(during_validation=True)
    return b.build()


@settings(max_examples=300, deadline=None)
@given(small_traces())
def test_model_run_satisfies_every_invariant(trace: Trace) -> None:
    assert violations(trace, ideal(trace)) == {}


@settings(max_examples=100, deadline=None)
@given(small_traces())
def test_traces_round_trip_through_json(trace: Trace) -> None:
    assert Trace.loads(trace.dumps()) == trace


def test_an_argument_equal_to_a_ledger_word_is_not_a_leak() -> None:
    # A memo that says "cancelled" cannot be told from the decision word "cancelled".
    t = base().turn("t1").call("b", "transfer", '{"amount":1,"memo":"cancelled"}').cancel().build()
    obs = ideal(t)
    assert any(isinstance(o, LedgerRow) and o.decision == "cancelled" for o in obs)
    assert violations(t, obs) == {}
    t2 = base().turn("t1").call("b", "transfer", '{"amount":1,"memo":"cancelled-4111"}').cancel().build()
    assert_caught(t2, [*ideal(t2), LogLine(3, "memo was cancelled-4111")], "INV-LEDGER")
