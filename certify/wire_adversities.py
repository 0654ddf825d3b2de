"""The ``wire-adversities`` generator: every wire adversity of
:mod:`callsafe.providers.adversities`, applied to a few ordinary streams of each protocol,
as traces the harness runs.

Why these traces carry their wire: an adversity is a shape of the payloads that no renderer
writes (that is the point of it), so the harness cannot get it back by rendering the abstract
trace. A :class:`~callsafe.providers.adversities.WireTrace` is the abstract trace the
protocol's parser reads from the mutated payloads (what the oracle judges, so every
expected verdict comes from the oracle and none is written here), together with those
payloads: a target that reads that
protocol's wire is given the mutated payloads themselves (:func:`callsafe.certify.wire.prepare`
builds the plan from them), an abstract target (the reference) is given the parsed events,
and a target of another protocol finds the trace not applicable. A stream the parser refuses
part-way (a protocol violation) reads as the events before the violation and a disconnect;
a library still gets every payload and the end of the body, as an application's read loop
would; a library that reads such a stream as another defensible reading does is judged under
that reading (:mod:`callsafe.certify.wire_readings`).

The base streams are wire-shaped traces (:mod:`callsafe.certify.wire_traces`): one call that
completes, two calls in sequence on items 0 and 1, two interleaved calls, and one call cut
off by ``length``. Names say ``wire adversity <operator> (<protocol>): <variant>; base:
<base trace>`` and sources the operator's public source, so a report names each one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any, Final

from callsafe.certify.wire import prepare
from callsafe.certify.wire_traces import wire_traces
from callsafe.model.vocabulary import Trace, TurnStarted
from callsafe.providers import registry
from callsafe.providers.adversities import OPERATORS, SSE_OPERATORS, WireTrace, read_back, sse_bytes
from callsafe.providers.base import NotRepresentable
from callsafe.providers.streams import parse_sse

__all__ = ["BASES", "PROTOCOLS", "WireTrace", "adversity_sources", "adversity_traces", "base_payloads"]

PROTOCOLS: Final = ("openai-chat", "openai-responses", "anthropic-messages", "bedrock-converse", "gemini-live")
"""The protocols the generator mutates by default: those the client libraries and agent
frameworks read (Bedrock's ConverseStream: boto3, strands-agents' default model; Gemini
Live: google-genai's Live client). The tests run every operator through every protocol the
operator names."""

BASES: Final = (
    "wire: 1 call (whole); completed at the end",
    "wire: 2 calls (whole + whole) on items 0 and 1, in sequence; completed at the end",
    "wire: 2 calls (whole + whole) on items 0 and 1, interleaved; completed at the end",
    "wire: 1 call (truncated); stopped: length",
)


def _bases() -> dict[str, Trace]:
    wanted = set(BASES)
    return {t.name: t for t in wire_traces() if t.name in wanted}


def base_payloads(trace: Trace, protocol: str) -> list[dict[str, Any]]:
    """The payloads the harness would deliver for ``trace`` (rendered as servers send them).
    Raises :class:`NotRepresentable`."""
    _, plan = prepare(trace, protocol)
    return [dict(copy.deepcopy(p)) for d in plan.deliveries for p in d.payloads]


def adversity_traces(protocols: Sequence[str] = PROTOCOLS, *, sse: bool = True) -> Iterator[WireTrace]:
    """Every operator's variants of every base stream, for each protocol, in a fixed order.
    With ``sse``, also one trace per SSE operator and protocol (the byte-level reader's
    parse of the first base stream delivered that way; the test checks every delivery)."""
    bases = _bases()
    for protocol in protocols:
        registry.get(protocol)
        rendered: dict[str, list[dict[str, Any]]] = {}
        for name in BASES:
            try:
                rendered[name] = base_payloads(bases[name], protocol)
            except NotRepresentable:
                continue
        for operator in OPERATORS:
            for name, payloads in rendered.items():
                for variant in operator.variants(protocol, payloads):
                    yield read_back(bases[name], protocol, operator.name, operator.source, variant)
        if not sse or not rendered:
            continue
        name, payloads = next(iter(rendered.items()))
        base = bases[name]
        turn = next(e for e in base.events if isinstance(e, TurnStarted))
        body = sse_bytes(protocol, payloads)
        for sse_op in SSE_OPERATORS:
            chunks = next(iter(sse_op.chunks(body)))
            events = parse_sse(protocol, chunks, turn=turn.turn, response="r1").events
            yield WireTrace(
                events=(turn, *events),
                tools=base.tools,
                limits=base.limits,
                name=f"wire adversity {sse_op.name} ({protocol}): SSE bytes; base: {base.name}",
                source=f"{sse_op.source}; expected verdicts: the oracle on what the SSE reader and parser read",
                protocol=protocol,
                payloads=tuple(payloads),
                operator=sse_op.name,
            )


def adversity_sources(protocols: Sequence[str] = PROTOCOLS) -> dict[str, str]:
    """Each operator that applies to one of ``protocols``, with its public source (what a
    report lists for the generator)."""
    out = {op.name: op.source for op in OPERATORS if op.protocols & set(protocols)}
    out |= {op.name: op.source for op in SSE_OPERATORS}
    return out
