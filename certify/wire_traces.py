"""Wire-shaped traces: abstract traces in the shapes a provider's stream can carry.

Why a generator of its own for provider-protocol targets: the other generators explore
the model, whose events arrive in any order; most of their traces cannot be said on a
given wire (Chat Completions ends every call with the response, Anthropic and Chat address
items by index, no wire reopens a call), so against a client library they are "not
applicable" and the known failure classes of libraries (two calls sharing an index, a
call cut off by a stop reason, ``}{``-glued objects, a prefix that parses, a body that ends
without a finish reason, interleaved calls) would go untested. These traces are built in
the shape of one model response, so that the protocols can carry them; they are still
plain abstract traces, judged by the same oracle as every other trace, and the ones a
protocol still cannot carry are counted as not applicable as usual.

The enumeration is small and deterministic (a few hundred traces): one turn, one
response, one or two calls whose items are distinct or shared (an index collision), in
sequence or interleaved, with argument texts that are whole, ``}{``-glued, truncated,
empty, or a prefix and a suffix that only parse when glued; each call's completed
terminal event right after its data or at the end of the response; and the response
ending ``completed``, with a stop reason, not at all (the trace stops with the body still
open), or before any call's terminal event.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    ResponseTerminal,
    StopReason,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = ["DOCUMENTS", "PAY", "wire_traces"]

PAY: Final = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
TURN: Final = "t1"
RESPONSE: Final = "r1"

# Argument texts, as fragments in position order.
DOCUMENTS: Final[dict[str, tuple[str, ...]]] = {
    "whole": ('{"amount":1', "00}"),  # the first fragment alone is a prefix a repair would accept
    "glued": ('{"amount":1}', '{"amount":2}'),  # two objects: no strict parse
    "truncated": ('{"amount":10',),  # cut off inside a number
    "empty": (),  # no argument text at all
    "prefix": ('{"amount":1',),  # with "suffix": parses only when glued to another call's text
    "suffix": ("00}",),
}
_ONE_CALL: Final = ("whole", "glued", "truncated", "empty")
_TWO_CALLS: Final = (("whole", "whole"), ("truncated", "whole"), ("whole", "truncated"), ("prefix", "suffix"))
_STOPS: Final[tuple[StopReason, ...]] = ("length", "content_filter", "error")


@dataclass(frozen=True)
class _Call:
    call: str
    item: str
    document: str

    def opened(self) -> CallOpened:
        return CallOpened(TURN, RESPONSE, self.item, self.call, "pay")

    def fragments(self) -> list[Fragment]:
        return [
            Fragment(TURN, RESPONSE, self.item, self.call, position, text)
            for position, text in enumerate(DOCUMENTS[self.document])
        ]

    def terminal(self, reason: StopReason = "completed") -> CallTerminal:
        return CallTerminal(TURN, RESPONSE, self.item, self.call, f"end-{self.call}", reason)


Data = CallOpened | Fragment


def _body(calls: Sequence[_Call], interleaved: bool) -> list[list[Data]]:
    """Each call's open and fragments, as chunks in delivery order: one chunk per call in
    sequence, or (interleaved) the open with the first fragment, then one fragment at a
    time, taking turns."""
    per_call: list[list[list[Data]]] = []
    for c in calls:
        frags = c.fragments()
        chunks: list[list[Data]] = [[c.opened(), *frags[:1]]]
        chunks += [[f] for f in frags[1:]]
        per_call.append(chunks if interleaved else [[e for chunk in chunks for e in chunk]])
    out: list[list[Data]] = []
    for round_ in itertools.zip_longest(*per_call):
        out.extend(chunk for chunk in round_ if chunk is not None)
    return out


Ending = tuple[str, list[CallTerminal], list[Event]]


def _endings(calls: Sequence[_Call]) -> Iterator[Ending]:
    """(label, terminals that come right after their call's last data, events at the end)
    for every way the response can end."""
    completed = [c.terminal() for c in calls]
    end: list[Event] = [ResponseTerminal(TURN, RESPONSE)]
    yield "completed at the end", [], [*completed, *end]
    yield "completed early", completed, end
    for reason in _STOPS:
        yield f"stopped: {reason}", [], [*(c.terminal(reason) for c in calls), ResponseTerminal(TURN, RESPONSE, reason)]
    if len(calls) == 2:
        first, second = calls
        tail: list[Event] = [second.terminal("length"), ResponseTerminal(TURN, RESPONSE, "length")]
        yield "first completed early, then length", [first.terminal()], tail
        yield "first completed, then length", [], [first.terminal(), *tail]
    yield "completed, the response never ends", [], list(completed)
    yield "completed early, the response never ends", completed, []
    yield "no terminal, the response never ends", [], []
    yield "the response ends before any terminal", [], end


def _trace(calls: Sequence[_Call], interleaved: bool, ending: Ending) -> Trace:
    label, early, at_end = ending
    chunks = _body(calls, interleaved)
    events: list[Event] = [TurnStarted(TURN, "u1", "acme")]
    remaining = {c.call: sum(1 for chunk in chunks for e in chunk if e.call == c.call) for c in calls}
    after = {t.call: t for t in early}
    for chunk in chunks:
        events.extend(chunk)
        for event in chunk:
            remaining[event.call] -= 1
            if remaining[event.call] == 0 and event.call in after:
                events.append(after.pop(event.call))
    events.extend(at_end)
    shape = " + ".join(c.document for c in calls)
    items = "" if len(calls) == 1 else (" sharing item 0" if calls[0].item == calls[1].item else " on items 0 and 1")
    order = "" if len(calls) == 1 else (", interleaved" if interleaved else ", in sequence")
    return Trace(
        events=tuple(events),
        tools={"pay": ToolSpec(schema=PAY)},
        name=f"wire: {len(calls)} call{'s' if len(calls) > 1 else ''} ({shape}){items}{order}; {label}",
        source="wire-shaped traces (callsafe.certify.wire_traces): one model response as a provider streams it",
    )


def wire_traces() -> Iterator[Trace]:
    """Every wire-shaped trace, in a fixed order."""
    calls: tuple[_Call, ...]
    for document in _ONE_CALL:
        calls = (_Call("call_a", "0", document),)
        for ending in _endings(calls):
            yield _trace(calls, False, ending)
    for (doc_a, doc_b), shared, interleaved in itertools.product(_TWO_CALLS, (False, True), (False, True)):
        calls = (_Call("call_a", "0", doc_a), _Call("call_b", "0" if shared else "1", doc_b))
        for ending in _endings(calls):
            yield _trace(calls, interleaved, ending)
