"""Wire adversities (issue 18): every operator of ``callsafe.providers.adversities`` through
every provider parser it names and through the reference implementation reading that wire,
with the expected verdicts from the oracle on what the parser read, never set by hand."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from wire_targets import ParsedReference

from callsafe.certify.checking import run_checked
from callsafe.certify.harness import ADVERSITIES_GENERATOR, Options, certify
from callsafe.certify.wire import WireTrace, plan_recorded, prepare
from callsafe.certify.wire_adversities import BASES, adversity_sources, adversity_traces, base_payloads
from callsafe.certify.wire_traces import wire_traces
from callsafe.contract.target import CAPABILITIES
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import Trace, TurnStarted
from callsafe.providers.adversities import OPERATORS, SSE_OPERATORS, Variant, expected_events, sse_bytes
from callsafe.providers.base import NotRepresentable, ProviderError
from callsafe.providers.streams import parse_sse

EVERY_PROTOCOL = sorted({p for op in OPERATORS for p in op.protocols})
_BASES = {t.name: t for t in wire_traces() if t.name in BASES}


def _rendered(protocol: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for name in BASES:
        try:
            out[name] = base_payloads(_BASES[name], protocol)
        except NotRepresentable:
            continue
    return out


def _verdicts(trace: Trace) -> dict[str, tuple[str, Any]]:
    return {k.short(): (v.execute, v.arguments) for k, v in judge(trace).verdicts.items()}


@pytest.mark.parametrize("protocol", EVERY_PROTOCOL)
def test_every_operator_through_the_parser_and_the_reference(protocol: str) -> None:
    """No operator crashes the parser (only typed errors), and the reference reading the
    mutated wire (the parser feeding the core) breaks no invariant on any variant; the
    verdicts it is judged by are the oracle's on an independent parse of the payloads."""
    rendered = _rendered(protocol)
    assert rendered, f"{protocol}: no base stream renders"
    ran = 0
    for trace in adversity_traces((protocol,), sse=False):
        assert not trace.verdicts  # nothing hand-set: the oracle decides
        assert trace.operator in {op.name for op in OPERATORS}
        again = expected_events(protocol, Variant("again", trace.payloads, trace.clean), "t1", "r1")
        assert again.error is None or isinstance(again.error, ProviderError)
        turn = trace.events[0]
        assert isinstance(turn, TurnStarted)
        independent = Trace(events=(turn, *again.events), tools=trace.tools)
        checked = run_checked(lambda: ParsedReference(protocol), CAPABILITIES, trace)
        assert not checked.missing, (trace.name, checked.missing)
        assert {k.short(): (v.execute, v.arguments) for k, v in checked.oracle.verdicts.items()} == _verdicts(
            independent
        ), trace.name
        broken = {i: f for i, f in checked.judgement.results.items() if f}
        assert not broken, (trace.name, broken)
        ran += 1
    assert ran > 0


def test_every_operator_changes_some_stream_and_names_its_source() -> None:
    for op in OPERATORS:
        variants = [
            v for p in sorted(op.protocols) for payloads in _rendered(p).values() for v in op.variants(p, payloads)
        ]
        assert variants, f"{op.name} never applies"
    sources = adversity_sources(EVERY_PROTOCOL)
    assert set(sources) == {op.name for op in (*OPERATORS, *SSE_OPERATORS)}
    assert all(sources.values())


def test_operators_never_change_the_payloads_they_are_given() -> None:
    for protocol in EVERY_PROTOCOL:
        for payloads in _rendered(protocol).values():
            before = copy.deepcopy(payloads)
            for op in OPERATORS:
                op.variants(protocol, payloads)
            assert payloads == before


@pytest.mark.parametrize("protocol", EVERY_PROTOCOL)
def test_sse_framing_changes_nothing_the_parser_reads(protocol: str) -> None:
    """Cut at every byte boundary, with keep-alive comments, with CRLF (one byte at a time):
    the byte-level reader gives exactly the events of the payloads."""
    for payloads in _rendered(protocol).values():
        want = expected_events(protocol, Variant("plain", tuple(payloads)), "t1", "r1").events
        body = sse_bytes(protocol, payloads)
        for op in SSE_OPERATORS:
            for chunks in op.chunks(body):
                got = parse_sse(protocol, chunks, turn="t1", response="r1")
                assert got.error is None and got.events == want, (protocol, op.name)


def test_a_wire_trace_delivers_its_own_payloads_once_in_order() -> None:
    for trace in adversity_traces(sse=False):
        _, plan = prepare(trace, trace.protocol)
        delivered = [p for d in plan.deliveries for p in d.payloads]
        assert delivered == list(trace.payloads), trace.name
        assert len(plan.deliveries) == len(trace.delivered())
        assert sum(d.end_stream for d in plan.deliveries) == (1 if trace.clean else 0), trace.name
        other = next(p for p in ("openai-chat", "openai-responses") if p != trace.protocol)
        with pytest.raises(NotRepresentable):
            prepare(trace, other)


def test_a_wire_trace_whose_events_are_not_its_parse_is_refused() -> None:
    trace = next(adversity_traces(("openai-chat",), sse=False))
    wrong = WireTrace(events=trace.events[:-1], tools=trace.tools, protocol=trace.protocol, payloads=trace.payloads)
    with pytest.raises(NotRepresentable):
        plan_recorded(wrong)


def test_what_the_chat_adversities_deserve() -> None:
    """Spot checks of the oracle's verdicts, read from the parse (issue 18's cases)."""
    by_name = {t.name: t for t in adversity_traces(("openai-chat",), sse=False)}

    def verdict(operator: str, label: str, base: str = BASES[0]) -> dict[str, tuple[str, Any]]:
        return _verdicts(by_name[f"wire adversity {operator} (openai-chat): {label}; base: {base}"])

    assert verdict("finish-reason-on-every-chunk", "finish_reason 'tool_calls' on every chunk") == {
        "t1/call_a": ("must_not", None)
    }
    assert verdict("finish-reason-twice", "finish_reason 'length', then 'tool_calls'", BASES[3]) == {
        "t1/call_a": ("must_not", None)
    }
    assert verdict("repeated-legitimate-delta", "one character per delta: equal consecutive deltas are real data") == {
        "t1/call_a": ("must", {"amount": 100})
    }
    assert verdict("cumulative-snapshots", "every delta is the arguments so far (a snapshot)")["t1/call_a"][0] == (
        "must_not"
    )
    assert verdict("content-null-chunks", "content: null chunks between the tool-call chunks") == {
        "t1/call_a": ("must", {"amount": 100})
    }


def test_the_generator_runs_every_operator_against_the_reference() -> None:
    cert = certify("reference:memory", Options(generators=(ADVERSITIES_GENERATOR,), minimize=False))
    stats = cert.generators[ADVERSITIES_GENERATOR]
    assert stats.ran > 200 and not stats.not_applicable
    assert cert.ok, cert.violated
    assert set(stats.info["operators"]) == {op.name for op in (*OPERATORS, *SSE_OPERATORS)}
