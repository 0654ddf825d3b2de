"""Store-fault traces: the edge family ``faults``, for targets with a store that can be
made to fail (the ``store_faults`` capability).

Why: every other trace runs over a store that never fails, so the code an implementation
keeps for a failed write (its retry loop, the retry of a dispatch claim whose answer was
lost, taking the store's state back after a failure that stays, refusing inputs while it
cannot read the store) never runs, and mutation testing of the reference showed each of
those paths free to break unseen. A store fault is a :class:`~callsafe.model.vocabulary.
StoreFault` event: transient (the next input's store operations fail, after the first
``after`` of them, as often in a row as the target retries), or lasting (every operation
of the next input fails; the harness delivers a refused input again).

A family, not a trace per bug: a few base conversations that between them hold every kind
of store operation (a fragment's progress, a terminal event's id, the business
validation's answer, a confirmation, a dispatch claim and its outcome, an operator control,
a new turn, a denial, a refusal at the business rules), and the fault placed before each
of their events in turn: transient after 0, 1 and 2 operations (so that the failing one
is in turn the first write, a later write, or a claim), lasting, lasting with a
restart and a new call after the base (a restart shows what the store kept: a core whose
memory ran ahead of the store after a failed write shows it there), and lasting with a
second lasting fault before the base's last event (what the first recovery left behind
shows at the second failure). Expected verdicts are
the oracle's; deterministic (no random source).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Event, Limits, Restart, StoreFault, ToolSpec, Trace, TurnStarted

__all__ = ["store_fault_traces"]

_NOTE: Final = ToolSpec(
    schema={
        "type": "object",
        "properties": {"v": {"type": "integer"}},
        "required": ["v"],
        "additionalProperties": False,
    }
)
_PAY: Final = ToolSpec(
    schema={
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    },
    confirm=True,
    business={"max": {"amount": 500}},
)
_TOOLS: Final = {"note": _NOTE, "pay": _PAY}


def _parallel(b: TraceBuilder) -> None:
    """Two calls interleaved, one needing confirmation, then a third call."""
    b.turn("t1", response="r1").open("a", "note").open("b", "pay")
    b.fragment("a", '{"v":').fragment("b", '{"amount":1').fragment("a", "100}").fragment("b", '00,"to":"bø"}')
    b.terminal("a").terminal("b").confirm("b")
    b.call("c", "note", '{"v":', "7}")


def _refusals(b: TraceBuilder) -> None:
    """A payment over the business rule, one denied, one cancelled with its turn."""
    b.turn("t1", response="r1").call("x", "pay", '{"amount":900,', '"to":"€"}')
    b.call("y", "pay", '{"amount":5,"to":"q"}').deny("y")
    b.open("z", "note").fragment("z", '{"v":3').cancel("t1").fragment("z", "}").terminal("z")
    b.turn("t2", response="r2").call("w", "note", '{"v":4}')


def _controls(b: TraceBuilder) -> None:
    """Operator controls over calls in flight and decided, then new calls."""
    b.turn("t1", response="r1").call("a", "note", '{"v":1}')
    b.open("p", "pay").fragment("p", '{"amount":2,"to":"x"}').terminal("p")
    b.quarantine("r1").confirm("p")
    b.response("r2").open("d", "note").fragment("d", '{"v":')
    b.disable_tool("pay").fragment("d", "5}").terminal("d")
    b.stop_tenant("acme").turn("t2", response="r3").call("e", "note", '{"v":6}')


def _superseded(b: TraceBuilder) -> None:
    """A new turn of the conversation supersedes a call awaiting confirmation; the old
    turn's confirmation and terminal arrive late."""
    b.turn("t1", response="r1").call("a", "pay", '{"amount":3,"to":"x"}')
    b.open("k", "note").fragment("k", '{"v":8')
    b.turn("t2", response="r2").confirm("a").fragment("k", "}").terminal("k")
    b.call("m", "note", '{"v":9}')


_BASES: Final[dict[str, Callable[[TraceBuilder], None]]] = {
    "two parallel calls and a confirmation": _parallel,
    "refusals": _refusals,
    "operator controls": _controls,
    "a superseding turn": _superseded,
}


def _base(name: str, build: Callable[[TraceBuilder], None]) -> Trace:
    b = TraceBuilder(tools=_TOOLS, limits=Limits(call_bytes=256, turn_bytes=1024), name=name)
    build(b)
    return b.build()


def _after() -> tuple[Event, ...]:
    """A restart and a new turn with a new call: what the store kept shows here."""
    tail = TraceBuilder(tools=_TOOLS).turn("t9", response="r9").call("n", "note", '{"v":10}').build()
    return (Restart(), *tail.events)


def _where(event: Event) -> str:
    return type(event).__name__ if not isinstance(event, TurnStarted) else f"TurnStarted {event.turn}"


def store_fault_traces() -> Iterator[Trace]:
    """Every base conversation with a fault before each of its events (see the module
    docstring), named ``edges/faults: <base>, <fault> before event N (<kind>)``."""
    for name, build in _BASES.items():
        base = _base(name, build)
        events = base.events
        for i, event in enumerate(events):
            head, rest = events[:i], events[i:]
            variants: list[tuple[str, StoreFault, tuple[Event, ...]]] = [
                (f"a transient fault after {after} store operations", StoreFault(after=after), ())
                for after in (0, 1, 2)
            ]
            variants.append(("a lasting fault", StoreFault(lasting=True), ()))
            variants.append(("a lasting fault, then a restart", StoreFault(lasting=True), _after()))
            for what, fault, tail in variants:
                yield Trace(
                    events=(*head, fault, *rest, *tail),
                    tools=base.tools,
                    limits=base.limits,
                    name=f"edges/faults: {name}, {what} before event {i} ({_where(event)})",
                )
            if i < len(events) - 1:  # and a second one, before the base's last event (a call's end)
                yield Trace(
                    events=(*head, StoreFault(lasting=True), *rest[:-1], StoreFault(lasting=True), rest[-1]),
                    tools=base.tools,
                    limits=base.limits,
                    name=f"edges/faults: {name}, two lasting faults, before event {i} ({_where(event)}) and the last",
                )
