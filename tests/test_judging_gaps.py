"""The judging gaps of issue 16, item 2, each with the catch and the non-alarm.

* argument values of any length, parsed or never parsed, are found in ledger, audit, log
  and status lines, and the lines' own words (call keys, counts, names) are not alarms;
* a confirmation request is judged: only a completed, validated call may be put up;
* the readings the spec allows where it is silent (out-of-order fragments rejected; bytes
  after a call ended counted against the turn cap) are each accepted: the oracle says
  ``may`` where they differ, and a run that follows any of them breaks nothing.
"""

from __future__ import annotations

import dataclasses

from callsafe.certify.checking import check_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.invariants import check_all
from callsafe.model.leaks import scalar_tokens
from callsafe.model.oracle import ideal_observations, judge
from callsafe.model.vocabulary import (
    AuditRow,
    ConfirmationRequested,
    LedgerRow,
    Limits,
    LogLine,
    Observation,
    StatusShown,
    Trace,
)

NOTE = {"type": "object"}
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}


def found(trace: Trace, observations: list[Observation]) -> dict[str, list[str]]:
    return {k: [v.message for v in vs] for k, vs in check_all(trace, observations).items() if vs}


def with_line(trace: Trace, line: Observation) -> list[Observation]:
    return [*ideal_observations(judge(trace)), line]


# --------------------------------------------------------------------------------------
# Argument values in lines
# --------------------------------------------------------------------------------------

SHORT = TraceBuilder(tools={"note": NOTE, "pay": PAY}).turn("t1").call("a", "note", '{"pin":"ab","n":7}').build()


def test_a_short_string_value_in_a_log_line_is_caught() -> None:
    key = judge(SHORT).by_short_name()["t1/a"].key
    assert "INV-LEDGER" in found(SHORT, with_line(SHORT, LogLine(3, f"{key}: pin=ab")))


def test_a_short_number_value_in_a_ledger_row_is_caught() -> None:
    key = judge(SHORT).by_short_name()["t1/a"].key
    row = LedgerRow(3, key, 1, "completed", "ok", "ok n=7", "dispatched")
    assert "INV-LEDGER" in found(SHORT, with_line(SHORT, row))


def test_a_value_in_an_audit_reason_or_a_status_is_caught() -> None:
    assert "INV-LEDGER" in found(SHORT, with_line(SHORT, AuditRow(3, "quarantine", "held: ab")))
    assert "INV-LEDGER" in found(SHORT, with_line(SHORT, StatusShown(3, "t1", "done ab")))


def test_values_of_a_call_stopped_while_collecting_are_looked_for() -> None:
    """Never parsed: an operator stops the tenant while the call collects; the text the
    stream sent is still the user's data."""
    trace = (
        TraceBuilder(tools={"pay": PAY})
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":43')
        .fragment("a", '21,"memo":"lunch')
        .stop_tenant(reason="safety hold")
        .build()
    )
    key = judge(trace).by_short_name()["t1/a"].key
    assert found(trace, ideal_observations(judge(trace))) == {}
    assert "INV-LEDGER" in found(trace, with_line(trace, LogLine(4, f"{key}: cancelled, buffer 4321")))
    assert "INV-LEDGER" in found(trace, with_line(trace, LogLine(4, f"{key}: memo lunch")))


def test_a_rows_own_words_are_not_alarms() -> None:
    """Values that equal or collide with what honest lines are made of: item indexes and
    call keys, counts, tool and property names, state names, bounds, exception names."""
    b = TraceBuilder(tools={"pay": PAY}, limits=Limits(call_bytes=100, turn_bytes=300))
    b.tool("note", {"type": "object", "properties": {"tags": {"type": "array", "maxItems": 1}}})
    b.tool("cap", PAY, business={"max": {"amount": 5}})
    trace = (
        b.turn("t1")
        .open("a", "note", item="0")
        .fragment("a", '{"tags":[1,2],"x":"0","y":"pay","z":"t1","s":"cancelled","w":"a","c":100,"d":3}')
        .terminal("a")
        .call("b", "cap", '{"amount":6}')
        .build()
    )
    oracle = judge(trace)
    a, b_key = oracle.by_short_name()["t1/a"].key, oracle.by_short_name()["t1/b"].key
    lines: list[Observation] = [
        LogLine(3, f"{a}: fragment rejected: fragment for a failed call: it stays inert"),
        LogLine(3, "tool pay changed (schema): 2 call(s) in flight cancelled"),
        LogLine(3, f"{a}: executor raised ValueError"),
        LogLine(3, "turn t1 announced again with another binding: the first one stands"),
        LogLine(3, f"{a}: 3 fragments, 100 bytes, line 1 column 6 (char 5)"),
        LedgerRow(3, a, 1, "completed", "ok", "schema: maxItems at tags/1", "failed"),
        LedgerRow(4, b_key, 1, "completed", "ok", "business rule: amount over 5", "failed"),
        AuditRow(4, "disable_tool", "operator", (a,)),
    ]
    assert "INV-LEDGER" not in found(trace, [*ideal_observations(oracle), *lines])


def test_the_reference_on_short_colliding_values_is_not_blamed() -> None:
    """The real implementation's own ledger, audit and log lines, on a run where values
    are short and collide with identifiers and counts, and a call is stopped while
    collecting."""
    trace = (
        TraceBuilder(tools={"pay": PAY, "note": NOTE})
        .turn("t1")
        .call("a", "note", '{"k":"1","n":0,"t":"t1","s":"ok"}')
        .open("b", "pay", item="1")
        .fragment("b", '{"amount":1')
        .quarantine(response="r-t1", reason="hold 2")
        .turn("t2")
        .call("c", "note", '{"v":"done","w":2}')
        .change_schema("note", {"type": "object", "maxProperties": 1})
        .build()
    )
    checked = check_trace("reference:memory", trace)
    assert checked.violated == set(), checked.explain()


def test_scalar_tokens_read_partial_json_without_keys() -> None:
    assert scalar_tokens('{"memo":"lun') == ["lun"]
    assert scalar_tokens('{"mem') == []  # a key cut off is still a key
    assert scalar_tokens('{"a":[1,"x\\u00e9"],"b":-2.5e3,"c":true}') == ["1", "xé", "-2.5e3"]


# --------------------------------------------------------------------------------------
# Confirmation requests
# --------------------------------------------------------------------------------------


def _confirm_trace(amount: int) -> Trace:
    return (
        TraceBuilder(tools={"note": NOTE})
        .tool("transfer", PAY, confirm=True, business={"max": {"amount": 500}})
        .turn("t1")
        .open("a", "transfer")
        .fragment("a", '{"amount":')
        .fragment("a", f"{amount}}}")
        .terminal("a")
        .build()
    )


def test_a_confirmation_request_before_the_terminal_event_is_caught() -> None:
    trace = _confirm_trace(100)
    key = judge(trace).by_short_name()["t1/a"].key
    early = ConfirmationRequested(2, key, "transfer")  # while the call still collects
    assert "INV-CONFIRM" in found(trace, [early, *ideal_observations(judge(trace))])
    assert found(trace, ideal_observations(judge(trace))) == {}


def test_a_confirmation_request_for_a_call_that_failed_business_validation_is_caught() -> None:
    trace = _confirm_trace(900)
    key = judge(trace).by_short_name()["t1/a"].key
    assert judge(trace).by_short_name()["t1/a"].execute == "must_not"
    assert found(trace, ideal_observations(judge(trace))) == {}
    request = ConfirmationRequested(4, key, "transfer")
    assert "INV-CONFIRM" in found(trace, with_line(trace, request))


# --------------------------------------------------------------------------------------
# Readings the spec allows
# --------------------------------------------------------------------------------------


def _every_reading_passes(trace: Trace) -> None:
    oracle = judge(trace)
    assert oracle.alternatives, "the trace should admit another reading"
    for reading in oracle.readings:
        observations = ideal_observations(reading)
        assert found(trace, observations) == {}, reading.semantics.reading.describe()


def test_rejecting_out_of_order_fragments_of_a_call_that_needs_confirmation_is_allowed() -> None:
    """The false alarm of issue 16: a target that rejects out-of-order positions was
    blamed for LIVE-DISPATCH ("never put up for confirmation")."""
    trace = (
        TraceBuilder(tools={"note": NOTE})
        .tool("transfer", PAY, confirm=True)
        .turn("t1")
        .open("a", "transfer")
        .fragment("a", "100}", position=1)
        .fragment("a", '{"amount":', position=0)
        .terminal("a")
        .build()
    )
    verdict = judge(trace).by_short_name()["t1/a"]
    assert verdict.execute == "must_not" and not verdict.confirmation_due
    _every_reading_passes(trace)
    # still judged: asking to confirm needs a validated call in some reading, and after
    # confirming, the arguments must be those in position order
    confirmed = (
        TraceBuilder(tools={"note": NOTE})
        .tool("transfer", PAY, confirm=True)
        .turn("t1")
        .open("a", "transfer")
        .fragment("a", "100}", position=1)
        .fragment("a", '{"amount":', position=0)
        .terminal("a")
        .confirm("a")
        .build()
    )
    assert judge(confirmed).by_short_name()["t1/a"].execute == "may"
    _every_reading_passes(confirmed)
    wrong = [
        dataclasses.replace(o, arguments={"amount": 10}) if o.kind == "executed" else o
        for o in ideal_observations(judge(confirmed))
    ]
    assert "INV-EXACT-ARGS" in found(confirmed, wrong)


def _turn_cap_trace() -> Trace:
    """Call a fails (a conflicting fragment), 8 more bytes arrive for it, then call b
    needs 12 bytes: within the 25-byte turn cap only if the bytes after a failed are not
    counted."""
    return (
        TraceBuilder(tools={"note": NOTE}, limits=Limits(call_bytes=25, turn_bytes=25))
        .turn("t1")
        .open("a", "note")
        .fragment("a", '{"v":1', position=0)
        .fragment("a", '{"v":2', position=0)
        .fragment("a", ',"w":12}', position=1)
        .call("b", "note", '{"v":"abcd"}')
        .build()
    )


def test_bytes_after_a_call_failed_may_count_against_the_turn_cap_or_not() -> None:
    trace = _turn_cap_trace()
    oracle = judge(trace)
    verdicts = oracle.by_short_name()
    assert verdicts["t1/a"].execute == "must_not"
    assert verdicts["t1/b"].execute == "may"
    assert verdicts["t1/b"].arguments == {"v": "abcd"}
    _every_reading_passes(trace)


def test_traces_without_a_silent_point_run_one_reading() -> None:
    assert judge(SHORT).alternatives == ()
    assert judge(_confirm_trace(100)).alternatives == ()


def test_an_undeclared_key_from_the_arguments_in_a_ledger_row_is_caught() -> None:
    """A key the tool does not declare came from the stream (``additionalProperties``):
    a schema message that names it carries user data into the ledger."""
    schema = {
        "type": "object",
        "properties": {"amount": {"type": "number"}},
        "additionalProperties": {"type": "number"},
    }
    trace = TraceBuilder(tools={"pay": schema}).turn("t1").call("a", "pay", '{"amount":1,"zq7":"x"}').build()
    key = judge(trace).by_short_name()["t1/a"].key
    assert check_trace("reference:memory", trace).violated == set()  # it withholds the path
    row = LedgerRow(3, key, 1, "completed", "ok", "schema: type at zq7", "failed")
    assert "INV-LEDGER" in found(trace, [row])
    declared = LedgerRow(3, key, 1, "completed", "ok", "schema: type at amount", "failed")
    assert "INV-LEDGER" not in found(trace, [declared])


def test_a_final_ledger_row_that_contradicts_the_model_is_caught() -> None:
    """The ledger lets an operator tell a malformed stream from a permission refusal: the
    decision and the terminal reason must be true, and the count at least the positions
    the call accepted. The decision is read by meaning: "cancelled", "failed" and the
    spec's "reject" all say the call will never run."""
    trace = TraceBuilder(tools={"note": NOTE}).turn("t1").call("a", "note", '{"v":1', reason="length").build()
    rows = [o for o in ideal_observations(judge(trace)) if isinstance(o, LedgerRow)]
    assert rows and found(trace, ideal_observations(judge(trace))) == {}
    for change in (
        {"terminal_reason": None},
        {"decision": "dispatched"},  # by meaning: a refused call never ran
        {"decision": "await confirmation"},
        {"decision": "collecting"},  # no decision is no terminal state
        {"decision": "splendid"},  # a word with no meaning
        {"fragments": 0},
    ):
        untrue = [
            dataclasses.replace(o, **change) if isinstance(o, LedgerRow) else o
            for o in ideal_observations(judge(trace))
        ]
        assert "INV-LEDGER" in found(trace, untrue), change
    for word in ("cancelled", "reject", "Rejected", "inert"):
        same = [
            dataclasses.replace(o, decision=word) if isinstance(o, LedgerRow) else o
            for o in ideal_observations(judge(trace))
        ]
        assert found(trace, same) == {}, word


def test_a_row_written_when_a_doomed_call_failed_early_counts_the_positions_until_then() -> None:
    """Failing a call as soon as its text can never parse is allowed (the correct variant
    fail-doomed-early): positions that arrive after it failed reached a call that was over,
    so its final row counts the positions accepted until it was written, not those the
    model (which fails the call at its terminal event) accepted by the end. Fewer than
    that is still untrue."""
    b = TraceBuilder(tools={"note": NOTE}).turn("t1").open("a", "note")
    trace = b.fragment("a", '{"v":1').fragment("a", "}{").fragment("a", '"w":2}').terminal("a").build()
    key = judge(trace).by_short_name()["t1/a"].key
    ideal = [o for o in ideal_observations(judge(trace)) if not (isinstance(o, LedgerRow) and o.key == key)]

    def row(step: int, fragments: int, reason: str | None = None) -> LedgerRow:
        return LedgerRow(step, key, fragments, reason, "malformed", "not validated", "failed")

    assert "INV-LEDGER" not in found(trace, [*ideal, row(3, 2)])  # written at the dooming fragment
    assert "INV-LEDGER" in found(trace, [*ideal, row(3, 1)])  # fewer than it had accepted then
    assert "INV-LEDGER" not in found(trace, [*ideal, row(5, 3, "completed")])
    assert "INV-LEDGER" in found(trace, [*ideal, row(5, 2, "completed")])  # at the terminal: all three count
