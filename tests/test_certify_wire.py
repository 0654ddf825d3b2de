"""The runner's wire path: abstract traces rendered for provider-protocol targets
(``callsafe.certify.wire``), the wire-shaped traces, and certification of such targets."""

from __future__ import annotations

import pytest
import wire_targets

from callsafe.certify.harness import GENERATORS, WIRE_GENERATOR, Options, certify, check_trace, exhaustive_bound
from callsafe.certify.runner import Session, run_trace
from callsafe.certify.targets import TargetSpecError, check_target, resolve_target
from callsafe.certify.wire import NotRepresentable, plan_wire, prepare, relabel
from callsafe.certify.wire_traces import wire_traces
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Executed, Limits, StopReason, ToolSpec, Trace
from callsafe.providers.streams import parse_payloads, render_payloads

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")


def _b() -> TraceBuilder:
    return TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")


def _call(stop: StopReason = "completed", end: StopReason | None = "completed", item: str = "0") -> Trace:
    b = _b().open("call_a", "pay", item=item).fragments("call_a", '{"amount":1', "00}").terminal("call_a", stop)
    return (b.response_end(end) if end else b).build()


# --------------------------------------------------------------------------------------
# Relabelling
# --------------------------------------------------------------------------------------


def test_relabel_numbers_items_for_index_protocols_and_keeps_valid_ones() -> None:
    trace = _b().open("a", "pay", item="i-a").open("b", "pay", item="i-b").text("hi", item="msg").build()
    chat = relabel(trace, "openai-chat")
    assert [getattr(e, "item", None) for e in chat.events[1:]] == ["0", "1", "text"]
    anthropic = relabel(trace, "anthropic-messages")
    assert [getattr(e, "item", None) for e in anthropic.events[1:]] == ["0", "1", "2"]
    assert relabel(trace, "openai-responses") is trace
    indexed = _call(item="3")
    assert relabel(indexed, "openai-chat") is indexed  # already an index: left alone


# --------------------------------------------------------------------------------------
# The plan: payloads per abstract event, and their steps
# --------------------------------------------------------------------------------------


def test_responses_arguments_done_is_delivered_before_the_terminal_step() -> None:
    """The strict terminal point: output_item.done (which carries the item status) is the
    call's terminal event; arguments.done, rendered from the same abstract event, comes at
    the step before."""
    trace, plan = prepare(_call(), "openai-responses")
    terminal = plan.deliveries[4]
    kinds = [p["type"] for p in terminal.payloads]
    assert kinds == ["response.function_call_arguments.done", "response.output_item.done"]
    assert terminal.early == 1 and not terminal.end_stream
    end = plan.deliveries[5]
    assert end.end_stream and end.payloads[-1]["type"] == "response.completed"
    assert end.payloads[-1]["response"]["output"][0]["call_id"] == "call_a"  # as servers send it
    assert plan.deliveries[0].receive and not plan.deliveries[0].payloads
    assert sum(len(d.payloads) for d in plan.deliveries) == len(render_payloads("openai-responses", trace.events[1:]))


def test_chat_final_chunk_is_at_the_response_end_step_and_the_body_ends_there() -> None:
    _, plan = prepare(_call(), "openai-chat")
    assert [len(d.payloads) for d in plan.deliveries] == [0, 1, 1, 1, 0, 1]  # the terminal rides on the end
    end = plan.deliveries[5]
    assert end.early == 0 and end.end_stream and end.payloads[0]["choices"][0]["finish_reason"] == "tool_calls"


def test_anthropic_message_delta_carries_usage_as_servers_send_it() -> None:
    _, plan = prepare(_call(), "anthropic-messages")
    delta = next(p for d in plan.deliveries for p in d.payloads if p["type"] == "message_delta")
    assert delta["usage"] == {"output_tokens": 0}
    assert plan.deliveries[1].early == 1  # message_start comes before the call is said to open


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fields_added_as_servers_send_them_change_nothing_the_parser_reads(protocol: str) -> None:
    for trace in list(wire_traces())[::7]:
        try:
            relabelled, plan = prepare(trace, protocol)
        except NotRepresentable:
            continue
        wire = [e for e in relabelled.delivered() if e.kind != "turn_started"]
        raw = render_payloads(protocol, wire)
        sent = [p for d in plan.deliveries for p in d.payloads]
        assert parse_payloads(protocol, sent, turn="t1", response="r").events == (
            parse_payloads(protocol, raw, turn="t1", response="r").events
        ), trace.name


def test_what_a_target_reading_one_stream_cannot_take_is_not_representable() -> None:
    b = _b().open("a", "pay", item="0").response("r2").open("b", "pay", item="0").build()
    with pytest.raises(NotRepresentable, match="one stream at a time"):
        plan_wire("openai-responses", b.delivered())
    reopened = _call().events + _call().events[1:2]
    with pytest.raises(NotRepresentable, match="does not reopen"):
        plan_wire("openai-responses", list(reopened))
    restarted = _b().open("a", "pay", item="0").restart().fragment("a", "{}").build()
    with pytest.raises(NotRepresentable, match="does not reopen"):
        plan_wire("openai-responses", restarted.delivered())
    old_turn = _b().turn("t2", response="r9").open("a", "pay", turn="t1", response="r1", item="0").build()
    with pytest.raises(NotRepresentable, match="turn in force"):
        plan_wire("openai-responses", old_turn.delivered())
    with pytest.raises(NotRepresentable, match="needs its response's end"):
        prepare(_call(end=None), "openai-chat")  # Chat ends calls only with the response


# --------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------


def test_runner_delivers_payloads_application_events_and_the_end_of_the_body() -> None:
    target = wire_targets.Recorder("openai-responses", run_at="response.function_call_arguments.done")
    run = run_trace(target, _call())
    assert run.trace.events == _call().events
    log = target.log
    assert log[0] == ("event", 0, "turn_started")
    assert ("wire", 3, "response.function_call_arguments.done") in log  # the step before its terminal
    assert ("wire", 4, "response.output_item.done") in log
    assert log[-2:] == [("end_stream", 5, None), ("close", 5, None)]
    (executed,) = [o for o in run.observations if isinstance(o, Executed)]
    assert executed.step == 3


def test_a_disconnect_reaches_receive_and_ends_the_stream_without_end_stream() -> None:
    target = wire_targets.Recorder("openai-chat")
    trace = _b().open("a", "pay", item="0").fragment("a", "{").disconnect().build()
    run_trace(target, trace)
    assert ("event", 3, "disconnect") in target.log
    assert not any(kind == "end_stream" for kind, _, _ in target.log)


def test_sessions_for_a_wire_target_need_a_plan() -> None:
    with pytest.raises(ValueError, match="wire plan"):
        Session(wire_targets.Recorder(), {}, Limits())


def test_targets_reading_a_protocol_are_checked() -> None:
    class NoWire(wire_targets.Recorder):
        receive_wire = None  # type: ignore[assignment]

    with pytest.raises(TargetSpecError, match="unknown-proto"):
        check_target(wire_targets.Recorder("unknown-proto"))
    with pytest.raises(TargetSpecError, match="receive_wire"):
        check_target(NoWire())
    with pytest.raises(TargetSpecError, match="unknown library target"):
        resolve_target("library:nope")


# --------------------------------------------------------------------------------------
# Certification
# --------------------------------------------------------------------------------------


def test_protocol_targets_get_the_wire_generator_and_a_response_end_instead_of_replays() -> None:
    assert "replay" in exhaustive_bound(3, frozenset()).controls
    bound = exhaustive_bound(3, frozenset(), "openai-chat")
    assert "response_end" in bound.controls and "replay" not in bound.controls
    traces = list(wire_traces())
    assert len(traces) == len({t.name for t in traces}) > 100
    assert GENERATORS == ("catalog", "coverage", "synthesis", "walks", "exhaustive", "edges")  # no wire generator


def test_unrepresentable_and_cap_dependent_traces_are_not_applicable_never_passed() -> None:
    checked = check_trace("wire_targets:parsed_chat", _call(end=None))
    assert checked.missing == ("openai-chat rendering",) and "response's end" in checked.note
    assert not checked.violated
    capped = _b().open("a", "pay", item="0").fragment("a", '{"amount":1000000}').terminal("a").response_end().build()
    capped = Trace(events=capped.events, tools=capped.tools, limits=Limits(call_bytes=8, turn_bytes=100))
    assert check_trace("wire_targets:parsed_chat", capped).missing == ("byte caps",)


@pytest.mark.parametrize("factory", ["parsed_chat", "parsed_responses", "parsed_anthropic"])
def test_a_correct_implementation_behind_the_wire_passes_everything(factory: str) -> None:
    """The reference implementation reading payloads through callsafe's parser: no
    invariant may be charged, so the wire path (rendering, steps, liveness rule) is fair."""
    options = Options(depth=2, walks=40, generators=(WIRE_GENERATOR, *GENERATORS), minimize=False)
    cert = certify(f"wire_targets:{factory}", options)
    assert cert.violated == [], cert.errors
    assert cert.traces_run > 150
    assert cert.generators[WIRE_GENERATOR].ran > 60
    protocol = cert.target.protocol
    assert cert.not_applicable[f"{protocol} rendering"] > 0


def test_a_library_target_runs_the_wire_traces_first() -> None:
    from callsafe.targets.anthropic_messages import available

    if available() is not None:
        pytest.skip(available() or "")
    options = Options(generators=GENERATORS, depth=0, walks=0)
    cert = certify("library:anthropic:anthropic-messages:block_stop", options)
    assert next(iter(cert.generators)) == WIRE_GENERATOR
    assert "INV-TERMINAL" in cert.violated  # glued objects, repaired truncation
    ce = cert.counterexamples["INV-TERMINAL"][0]
    assert {getattr(e, "item", "0") for e in ce.minimal.events} == {"0"}  # the relabelled trace is what is shown
