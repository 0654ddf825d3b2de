"""Judging a run: the checkers, and the direct comparison with the oracle's verdicts."""

from __future__ import annotations

from callsafe.certify.judge import judge_observations, oracle_findings
from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import ideal_observations, judge
from callsafe.model.vocabulary import CallKey, Executed, Limits, Observation, Trace

ALL = ("ledger", "status", "confirmation", "business_validation", "cancellation")


def trace() -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1")
    b.call("a", "pay", '{"amount":1}')  # must
    b.open("b", "pay").fragment("b", '{"amount":2}')  # must not: never ended
    b.open("c", "pay").fragment("c", "3}", position=1).fragment("c", '{"amount":', position=0)
    b.terminal("c")  # may: out of order
    return b.build()


def key(t: Trace, short: str) -> CallKey:
    return judge(t).by_short_name()[short].key


def executed(t: Trace, short: str, args: object, step: int = 9) -> Executed:
    return Executed(step, key(t, short), "u1", "pay", args)


def kinds(t: Trace, obs: list[Observation]) -> set[tuple[str, str, str]]:
    return {(f.invariant, f.kind, f.key.short() if f.key else "") for f in oracle_findings(judge(t), obs)}


def test_the_ideal_run_has_no_oracle_finding() -> None:
    t = trace()
    assert oracle_findings(judge(t), ideal_observations(judge(t))) == []
    assert judge_observations(t, ideal_observations(judge(t)), ALL).violated == set()


def test_must_never_executed_is_a_liveness_shortfall() -> None:
    t = trace()
    assert ("LIVE-DISPATCH", "liveness", "t1/a") in kinds(t, [])


def test_twice_or_with_other_arguments_is_a_safety_violation() -> None:
    t = trace()
    good = executed(t, "t1/a", {"amount": 1})
    assert ("INV-ONCE", "safety", "t1/a") in kinds(t, [good, good])
    assert ("INV-EXACT-ARGS", "safety", "t1/a") in kinds(t, [executed(t, "t1/a", {"amount": 10})])


def test_must_not_executed_names_the_models_invariant() -> None:
    t = trace()
    assert ("INV-TERMINAL", "safety", "t1/b") in kinds(t, [executed(t, "t1/b", {"amount": 2})])


def test_may_allows_none_or_one_with_the_positional_arguments() -> None:
    t = trace()
    assert not [f for f in oracle_findings(judge(t), []) if f.key and f.key.call == "c"]
    assert not kinds(t, [executed(t, "t1/a", {"amount": 1}), executed(t, "t1/c", {"amount": 3})])
    wrong = kinds(t, [executed(t, "t1/a", {"amount": 1}), executed(t, "t1/c", {"amount": 30})])
    assert wrong == {("INV-EXACT-ARGS", "safety", "t1/c")}


def test_a_key_the_trace_never_carried() -> None:
    t = trace()
    stray = Executed(3, CallKey("acme", "t1", "r-t1", "i-z", "z"), "u1", "pay", {})
    assert ("INV-EXACT-ARGS", "safety", "t1/z") in kinds(t, [stray])


def test_a_finding_under_an_inapplicable_invariant_moves_to_inv_cancel() -> None:
    # Over the byte cap: INV-BOUNDED needs a ledger; a target without one still may not run it.
    t = TraceBuilder(tools={"note": {"type": "object"}}, limits=Limits(call_bytes=8)).turn("t1")
    t = t.call("a", "note", '{"q":"123456"}').build()
    obs: list[Observation] = [Executed(3, key(t, "t1/a"), "u1", "note", {"q": "123456"})]
    without_ledger = judge_observations(t, obs, ("business_validation",))
    assert without_ledger.results["INV-BOUNDED"] is None
    moved = without_ledger.of("INV-CANCEL")
    assert moved and "INV-BOUNDED is not applicable" in moved[0].message and moved[0].source == "oracle"
    with_ledger = judge_observations(t, obs, ALL)
    assert with_ledger.of("INV-BOUNDED") and not with_ledger.of("INV-CANCEL")
