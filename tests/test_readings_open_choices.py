"""Where the spec leaves a choice open, every defensible reading is allowed: the false
alarms of issue 29, each as an oracle reading (``may``) or a check that reads records by
meaning, with the spec sentence that leaves the choice open."""

from __future__ import annotations

from callsafe.model.builder import TraceBuilder
from callsafe.model.invariants import check_all
from callsafe.model.oracle import ideal_observations, judge
from callsafe.model.vocabulary import (
    BusinessValidated,
    CallKey,
    Executed,
    LedgerRow,
    Observation,
    StatusShown,
    Trace,
)

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}
KEY = CallKey("acme", "t1", "r1", "0", "a")


def builder() -> TraceBuilder:
    return TraceBuilder(tools={"pay": PAY})


def violated(trace: Trace, observations: list[Observation]) -> dict[str, list[str]]:
    return {k: [x.message for x in v] for k, v in check_all(trace, observations).items() if v}


def _redeclared(schema: dict[str, object]) -> Trace:
    return (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .change_schema("pay", schema)
        .fragment("a", "5}")
        .terminal("a")
        .build()
    )


def test_a_byte_identical_redeclaration_may_keep_the_call() -> None:
    # "Validate each call against its own tool declaration": the spec never says a catalog
    # update cancels a call in flight, and docs/adapters.md says to validate against the
    # catalog as it stands. Cancelling at the change (the model) or validating then are both
    # allowed; the call that ran has the arguments of its own fragments.
    trace = _redeclared(dict(PAY))
    oracle = judge(trace)
    (v,) = oracle.verdicts.values()
    assert v.execute == "may" and v.arguments == {"amount": 5}
    assert "catalog" in v.reason
    ran: list[Observation] = [
        StatusShown(1, "t1", "preparing"),
        BusinessValidated(5, v.key, "pay"),
        Executed(5, v.key, "u1", "pay", {"amount": 5}),
        LedgerRow(5, v.key, 2, "completed", "ok", "ok", "dispatched"),
        StatusShown(5, "t1", "done"),
    ]
    assert violated(trace, ran) == {}
    # ... and the model's own reading passes too
    assert violated(trace, ideal_observations(oracle)) == {}
    # but not other arguments than the call's own
    wrong = [*ran[:2], Executed(5, v.key, "u1", "pay", {"amount": 50}), *ran[3:]]
    assert "INV-EXACT-ARGS" in violated(trace, wrong)


def test_a_real_schema_change_is_validated_against_the_new_schema_in_the_keeping_reading() -> None:
    # The new schema refuses the arguments: every reading refuses the call.
    strict = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "string"}}}
    trace = _redeclared(strict)
    (v,) = judge(trace).verdicts.values()
    assert v.execute == "must_not"
    # ... and a rename: the call's tool is gone in every reading.
    renamed = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":5}')
        .rename_tool("pay", "pay2")
        .terminal("a")
        .build()
    )
    (v,) = judge(renamed).verdicts.values()
    assert v.execute == "must_not"


def test_a_change_after_validation_is_refused_by_the_dispatch_recheck_in_every_reading() -> None:
    strict = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "string"}}}
    trace = (
        builder()
        .tool("pay", PAY, confirm=True)
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":5}')
        .terminal("a")
        .change_schema("pay", strict)
        .confirm("a")
        .build()
    )
    (v,) = judge(trace).verdicts.values()
    assert v.execute == "must_not"


def test_a_call_for_a_disabled_tool_may_end_at_its_opening() -> None:
    # "unknown tool name ... move the buffer to a non-dispatching terminal state": at
    # validation (the model: failed) or at the opening (cancelled); both inert.
    trace = (
        builder().turn("t1").disable_tool("pay").open("a", "pay").fragment("a", '{"amount":5}').terminal("a").build()
    )
    oracle = judge(trace)
    (v,) = oracle.verdicts.values()
    assert v.execute == "must_not"
    assert any(alt.semantics.reading.refuse_unknown_at_open for alt in oracle.alternatives)
    at_open: list[Observation] = [
        o for o in ideal_observations(oracle) if not isinstance(o, LedgerRow) and not isinstance(o, StatusShown)
    ]
    # cancelled at the open, in the spec's word; the fragments and terminal reach a call
    # that is over (no count, no reason, nothing parsed)
    at_open.append(LedgerRow(2, v.key, 0, None, "not parsed", "not validated", "reject"))
    assert violated(trace, at_open) == {}
    # still judged: a row that says it ran is untrue
    lying = [*at_open[:-1], LedgerRow(2, v.key, 0, None, "not parsed", "not validated", "dispatched")]
    assert "INV-LEDGER" in violated(trace, lying)


def test_a_new_call_preparing_after_a_retry_offer_is_truthful() -> None:
    # "The user sees a truthful retry or handoff route": the offer came after the stop;
    # a new call of the same turn shown as preparing later does not take it back.
    trace = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .disconnect()
        .response("r2")
        .open("b", "pay")
        .fragment("b", '{"amount":')
        .build()
    )
    key_a = next(k for k in judge(trace).verdicts if k.call == "a")
    obs: list[Observation] = [
        StatusShown(1, "t1", "preparing"),
        StatusShown(3, "t1", "retry"),
        StatusShown(4, "t1", "preparing"),
        LedgerRow(3, key_a, 1, None, "not parsed", "not validated", "cancelled"),
    ]
    assert violated(trace, obs) == {}
    # no offer after the stop: judged untruthful
    late = [StatusShown(1, "t1", "preparing"), StatusShown(4, "t1", "preparing"), obs[-1]]
    assert any("retry or hand-off" in m for m in violated(trace, late)["INV-STATUS"])


def test_a_may_lets_the_target_take_one_reading_not_a_mix() -> None:
    """Failing a call on a repeated position is allowed; validating it as reassembled
    (so not failing it at the repeat) and then not running it is not."""
    trace = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .fragment("a", '{"amount":', position=0)
        .fragment("a", "5}")
        .terminal("a")
        .build()
    )
    (v,) = judge(trace).verdicts.values()
    assert v.execute == "may"
    failed: list[Observation] = [LedgerRow(3, v.key, 1, None, "not parsed", "not validated", "failed")]
    assert "LIVE-DISPATCH" not in violated(trace, failed)
    validated_only: list[Observation] = [BusinessValidated(5, v.key, "pay")]
    assert any("business-validated" in m for m in violated(trace, validated_only)["LIVE-DISPATCH"])
