"""The oracle's verdicts for the fixtures the spec names, each derived by hand from the
spec's sentences (quoted), not from the oracle's output."""

from __future__ import annotations

from typing import Any

import pytest

from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import Verdict, judge
from callsafe.model.vocabulary import Limits, Trace

BOOK = {"type": "object", "required": ["day", "time"], "properties": {"day": {"type": "string"}}}
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}


def verdict(trace: Trace, short: str) -> Verdict:
    return judge(trace).by_short_name()[short]


def must(trace: Trace, short: str, arguments: dict[str, Any]) -> None:
    v = verdict(trace, short)
    assert v.execute == "must", (short, v.reason, judge(trace).explain(v.key))
    assert v.arguments == arguments


def must_not(trace: Trace, short: str, reason_part: str) -> None:
    v = verdict(trace, short)
    assert v.execute == "must_not", (short, v)
    assert reason_part in v.reason, (short, v.reason)


def builder() -> TraceBuilder:
    return TraceBuilder(tools={"book_slot": BOOK, "pay": PAY, "lookup": {"type": "object"}})


def test_book_slot_cancelled_before_terminal() -> None:
    # "a user says stop, then a delayed final delta completes a payment call ... must not"
    t = (
        builder()
        .turn("t8")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue"')
        .cancel()
        .fragment("a", ',"time":"10:00"}')
        .terminal("a")
        .build()
    )
    must_not(t, "t8/a", "cancelled")


def test_book_slot_completes() -> None:
    # "Only the completed, validated proposal" runs: all fragments, own terminal, valid.
    t = builder().turn("t8").call("a", "book_slot", '{"day":"Tue"', ',"time":"10:00"}').build()
    must(t, "t8/a", {"day": "Tue", "time": "10:00"})


def test_two_calls_interleaved() -> None:
    # "Never concatenate all argument deltas into a single response-wide string."
    t = (
        builder()
        .turn("t1")
        .open("a", "book_slot")
        .open("b", "pay")
        .fragment("a", '{"day":')
        .fragment("b", '{"amount":')
        .fragment("a", '"Tue","time":"9"}')
        .fragment("b", "100}")
        .terminal("b")
        .terminal("a")
        .build()
    )
    must(t, "t1/a", {"day": "Tue", "time": "9"})
    must(t, "t1/b", {"amount": 100})


def test_duplicate_delta_is_dropped() -> None:
    # "A repeated delta is a delivery condition, not evidence that the user requested the
    # action twice": amount 100 must not become 1000.
    t = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":10')
        .fragment("a", "0")
        .fragment("a", "0", position=1)
        .fragment("a", "}")
        .terminal("a")
        .build()
    )
    # ... and "reject or reassemble by its documented position": dropping the repeat
    # (100, never 1000) or failing the call are both allowed; running it twice never.
    v = verdict(t, "t1/a")
    assert v.execute == "may" and v.arguments == {"amount": 100}
    assert "repeated position fails the call" in v.reason
    oracle = judge(t)
    (fails,) = oracle.alternatives
    assert fails.semantics.reading.reject_repeats
    assert fails.verdicts[v.key].execute == "must_not"
    assert "repeated fragment" in fails.verdicts[v.key].reason


def test_conflicting_repeat_fails() -> None:
    t = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":1')
        .fragment("a", '{"amount":9', position=0)
        .fragment("a", "0}")
        .terminal("a")
        .build()
    )
    must_not(t, "t1/a", "conflicting")


def test_terminal_before_missing_fragment() -> None:
    # "terminal before a missing fragment": the buffer is not complete at its terminal.
    t = (
        builder()
        .turn("t1")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue",')
        .terminal("a")
        .fragment("a", '"time":"10:00"}', position=1)
        .build()
    )
    must_not(t, "t1/a", "malformed")


def test_gap_in_positions_fails() -> None:
    t = (
        builder()
        .turn("t1")
        .open("a", "lookup")
        .fragment("a", "{", position=0)
        .fragment("a", "}", position=2)
        .terminal("a")
        .build()
    )
    must_not(t, "t1/a", "missing fragment")


@pytest.mark.parametrize("text", ['{"day":"Tue",', '{"day":"Tue"}{"day":"Wed"}', "[1]", '{"a":NaN}', '{"a":1,"a":2}'])
def test_malformed_json(text: str) -> None:
    # "Parse the assembled arguments once": truncation, }{, non-objects, NaN, duplicate keys.
    t = builder().turn("t1").call("a", "lookup", text).build()
    must_not(t, "t1/a", "malformed")


def test_lone_surrogate_is_refused_or_taken_as_its_code_point() -> None:
    # The model refuses it as malformed; the spec is silent, so the oracle allows the
    # reading that takes the escape as the code point it names (RFC 8259 section 8.2).
    t = builder().turn("t1").call("a", "lookup", '{"q":"\\ud83d"}').build()
    v = verdict(t, "t1/a")
    assert v.execute == "may" and v.arguments == {"q": "\ud83d"}
    assert v.state.value == "failed"  # the model's own reading


def test_reconnection_replay_executes_once() -> None:
    # "Persist the terminal event ID so reconnect delivery cannot dispatch it twice."
    b = builder().turn("t1").call("a", "pay", '{"amount":5}')
    t = b.replay().build()
    oracle = judge(t)
    assert [e.what for e in oracle.semantics.expected].count("execute") == 1
    must(t, "t1/a", {"amount": 5})


def test_tool_renamed_mid_release() -> None:
    # "Validate each call against its own tool declaration": the declaration as it stands
    # at validation time no longer has the old name.
    t = (
        builder()
        .turn("t1")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue","time":"1"}')
        .rename_tool("book_slot", "reserve_slot")
        .terminal("a")
        .open("b", "book_slot")
        .fragment("b", '{"day":"Tue","time":"1"}')
        .terminal("b")
        .build()
    )
    must_not(t, "t1/a", "changed")
    must_not(t, "t1/b", "unknown")


def test_new_turn_while_old_fragments_arrive() -> None:
    # "a new user turn while old fragments arrive": "an old tuple cannot affect a newer turn".
    t = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .turn("t2")
        .open("a", "pay")
        .fragment("a", '{"amount":2}')
        .build()
    )
    t = Trace(
        events=(
            *t.events,
            *TraceBuilder().at("a", turn="t1", response="r-t1").fragment("a", "1}", position=1).terminal("a").events,
            *TraceBuilder().at("a", turn="t2", response="r-t2").terminal("a").events,
        ),
        tools=t.tools,
    )
    must_not(t, "t1/a", "superseded")
    must(t, "t2/a", {"amount": 2})


def test_emergency_stop_during_collecting_then_fresh_turn() -> None:
    # "a subsequent new turn starts with a fresh call identity rather than inheriting
    # partial arguments"
    t = (
        builder()
        .turn("t8")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .stop_tenant()
        .fragment("a", "100}")
        .terminal("a")
        .turn("t9")
        .open("a", "pay")
        .fragment("a", '{"amount":7}')
        .terminal("a")
        .build()
    )
    must_not(t, "t8/a", "tenant stopped")
    must(t, "t9/a", {"amount": 7})


def test_emergency_stop_during_validation() -> None:
    t = (
        builder()
        .turn("t8")
        .open("a", "pay")
        .fragment("a", '{"amount":100}')
        .terminal("a")
        .stop_tenant(during_validation=True)
        .build()
    )
    must_not(t, "t8/a", "tenant stopped")


def test_stop_after_execution_is_too_late_but_harmless() -> None:
    t = builder().turn("t8").call("a", "pay", '{"amount":1}').stop_tenant().build()
    must(t, "t8/a", {"amount": 1})


def test_quarantine_across_restart() -> None:
    # "buffers must stay terminal, never become candidates because an adapter reconnects"
    b = builder().turn("t1").open("a", "pay").fragment("a", '{"amount":3}').quarantine()
    b.restart().replay(0, 3).terminal("a").open("b", "pay").fragment("b", "{}").terminal("b")
    t = b.build()
    must_not(t, "t1/a", "quarantined")
    must_not(t, "t1/b", "stopped")


def test_restart_fails_an_unfinished_call() -> None:
    t = builder().turn("t1").open("a", "pay").fragment("a", '{"amount":3}').restart().terminal("a").build()
    must_not(t, "t1/a", "restart")


def test_restart_after_execution_then_replay_runs_nothing_more() -> None:
    b = builder().turn("t1").call("a", "pay", '{"amount":3}')
    t = b.restart().replay(0, 4).build()
    oracle = judge(t)
    assert [e.what for e in oracle.semantics.expected].count("execute") == 1


def test_length_stop_truncated_number() -> None:
    # A call cut at max_tokens "comes back as clean JSON" in weak clients: {"amount":10}
    # parses, but the stop reason says the call did not finish.
    t = builder().turn("t1").call("a", "pay", '{"amount":10}', reason="length").build()
    must_not(t, "t1/a", "length")


def test_response_ends_without_call_terminal() -> None:
    t = builder().turn("t1").open("a", "pay").fragment("a", '{"amount":1}').response_end().build()
    must_not(t, "t1/a", "response ended")


def test_no_terminal_no_execution() -> None:
    t = builder().turn("t1").open("a", "pay").fragment("a", '{"amount":1}').build()
    must_not(t, "t1/a", "never ended")


def test_index_collision_keeps_calls_apart() -> None:
    # Two parallel calls that share an item (index) but have their own call ids.
    t = (
        builder()
        .turn("t1")
        .open("a", "pay", item="0")
        .open("b", "pay", item="0")
        .fragment("a", '{"amount":1}')
        .fragment("b", '{"amount":2}')
        .terminal("a")
        .terminal("b")
        .build()
    )
    must(t, "t1/a", {"amount": 1})
    must(t, "t1/b", {"amount": 2})


def test_schema_and_business_validation() -> None:
    tools = {"pay": PAY}
    t = (
        TraceBuilder(tools=tools)
        .tool("pay", PAY, business={"max": {"amount": 500}})
        .turn("t1")
        .call("a", "pay", '{"amount":"x"}')
        .call("b", "pay", '{"amount":900}')
        .call("c", "pay", '{"amount":50}')
        .call("d", "nope", "{}")
        .build()
    )
    must_not(t, "t1/a", "schema")
    must_not(t, "t1/b", "business")
    must(t, "t1/c", {"amount": 50})
    must_not(t, "t1/d", "unknown")


def test_confirmation_flow() -> None:
    b = TraceBuilder().tool("pay", PAY, confirm=True).turn("t1").call("a", "pay", '{"amount":1}')
    waiting = b.build()
    v = verdict(waiting, "t1/a")
    assert v.execute == "must_not" and v.reason == "awaiting confirmation" and v.confirmation
    must(b.confirm("a").build(), "t1/a", {"amount": 1})
    denied = TraceBuilder().tool("pay", PAY, confirm=True).turn("t1").call("a", "pay", '{"amount":1}').deny("a")
    must_not(denied.build(), "t1/a", "denied")
    cancelled_first = (
        TraceBuilder().tool("pay", PAY, confirm=True).turn("t1").call("a", "pay", '{"amount":1}').cancel().confirm("a")
    )
    must_not(cancelled_first.build(), "t1/a", "cancelled")


def test_permission_boundary() -> None:
    t = (
        TraceBuilder()
        .tool("pay", PAY, actors=("admin",))
        .turn("t1", actor="u1")
        .call("a", "pay", '{"amount":1}')
        .build()
    )
    must_not(t, "t1/a", "permission")


def test_byte_cap_per_call_and_per_turn() -> None:
    limits = Limits(call_bytes=20, turn_bytes=40)
    big = '{"q":"' + "x" * 30 + '"}'
    t = TraceBuilder(tools={"lookup": {"type": "object"}}, limits=limits).turn("t1").call("a", "lookup", big).build()
    must_not(t, "t1/a", "byte limit")
    # A flood of parallel calls, each under the per-call cap, cannot bypass the turn cap.
    b = TraceBuilder(tools={"lookup": {"type": "object"}}, limits=limits).turn("t1")
    for name in "abc":
        b.call(name, "lookup", '{"q":"123456789"}')  # 17 bytes each
    t = b.build()
    must(t, "t1/a", {"q": "123456789"})
    must(t, "t1/b", {"q": "123456789"})
    must_not(t, "t1/c", "byte limit")


def test_out_of_order_positions_allow_a_choice() -> None:
    # "If ordering is not guaranteed by a protocol, reject or reassemble by its documented
    # position rather than guessing from arrival time."
    t = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", "100}", position=1)
        .fragment("a", '{"amount":', position=0)
        .terminal("a")
        .build()
    )
    v = verdict(t, "t1/a")
    assert v.execute == "may" and v.arguments == {"amount": 100}


def test_late_terminal_for_cancelled_turn_rejected_even_if_json_parses() -> None:
    t = builder().turn("t1").open("a", "pay").fragment("a", '{"amount":1}').cancel().terminal("a").build()
    must_not(t, "t1/a", "cancelled")


def test_fragment_for_unopened_call_fails() -> None:
    t = builder().turn("t1").at("a").fragment("a", "{}").open("a", "pay").terminal("a").build()
    must_not(t, "t1/a", "never opened")


def test_text_is_kept_apart_from_arguments() -> None:
    t = (
        builder()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .text("Paying now")
        .fragment("a", "1}")
        .terminal("a")
        .build()
    )
    must(t, "t1/a", {"amount": 1})


def test_replayed_turn_start_does_not_supersede_the_newer_turn() -> None:
    b = builder().turn("t1").turn("t2").open("a", "pay").fragment("a", '{"amount":1}')
    b.replay(0, 1).terminal("a")
    must(b.build(), "t2/a", {"amount": 1})


def test_another_tenants_turn_does_not_supersede() -> None:
    # Supersession is "a new user turn" in the same conversation; conversations are named
    # within a tenant.
    b = builder().turn("t1", tenant="acme").open("a", "pay").fragment("a", '{"amount":1}')
    b.turn("g1", tenant="globex", actor="u9")
    b.at("a", turn="t1", response="r-t1").terminal("a")
    must(b.build(), "t1/a", {"amount": 1})


def test_schema_change_keeps_the_permission_list() -> None:
    t = (
        TraceBuilder()
        .tool("reset", {"type": "object"}, actors=("root",))
        .turn("t1", actor="u1")
        .change_schema("reset", {"type": "object", "properties": {}})
        .call("x", "reset", "{}")
        .build()
    )
    must_not(t, "t1/x", "permission")
