"""The reference implementation against hand-written traces from the spec and from public
bug reports: every invariant holds and every execution matches the oracle's verdict, on
the memory and the SQLite store."""

from __future__ import annotations

from typing import Any

import pytest

from callsafe.certify.runner import run_trace
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    Executed,
    Fragment,
    Limits,
    QuarantineResponse,
    Replay,
    ResponseTerminal,
    Restart,
    StopTenant,
    TextFragment,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.targets.reference import ReferenceTarget

TOOLS = {
    "book_slot": ToolSpec(
        schema={
            "type": "object",
            "required": ["day", "time"],
            "properties": {"day": {"type": "string"}, "time": {"type": "string"}},
            "additionalProperties": False,
        }
    ),
    "pay": ToolSpec(
        schema={"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}},
        confirm=True,
        business={"max": {"amount": 500}},
    ),
    "admin_reset": ToolSpec(schema={"type": "object"}, actors=("root",)),
}

BOOK = '{"day":"Tue","time":"10:00"}'
BOOK2 = '{"day":"Wed","time":"11:30"}'


def turn(t: str, actor: str = "u1", tenant: str = "acme", conversation: str = "main", **kw: Any) -> TurnStarted:
    return TurnStarted(turn=t, actor=actor, tenant=tenant, conversation=conversation, **kw)


def split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def opened(t: str, c: str, tool: str = "book_slot", r: str = "r1", item: str | None = None) -> CallOpened:
    return CallOpened(turn=t, response=r, item=item or f"i-{c}", call=c, tool=tool)


def frags(t: str, c: str, text: str, parts: int = 2, r: str = "r1", item: str | None = None) -> list[Fragment]:
    return [
        Fragment(turn=t, response=r, item=item or f"i-{c}", call=c, position=i, text=p)
        for i, p in enumerate(split(text, parts))
    ]


def frag(t: str, c: str, position: int, text: str, r: str = "r1", item: str | None = None) -> Fragment:
    return Fragment(turn=t, response=r, item=item or f"i-{c}", call=c, position=position, text=text)


def term(t: str, c: str, reason: str = "completed", r: str = "r1", event_id: str | None = None) -> CallTerminal:
    return CallTerminal(
        turn=t,
        response=r,
        item=f"i-{c}",
        call=c,
        event_id=event_id or f"ev-{t}-{r}-{c}",
        reason=reason,  # type: ignore[arg-type]
    )


def whole(t: str, c: str, text: str = BOOK, tool: str = "book_slot", r: str = "r1", parts: int = 2) -> list[Event]:
    return [opened(t, c, tool, r), *frags(t, c, text, parts, r), term(t, c, r=r)]


def confirm(t: str, c: str, approved: bool = True, r: str = "r1") -> Confirm:
    return Confirm(turn=t, response=r, item=f"i-{c}", call=c, approved=approved)


def trace(name: str, events: list[Event], limits: Limits | None = None) -> Trace:
    return Trace(events=tuple(events), tools=TOOLS, limits=limits or Limits(), name=name)


def _interleave(*streams: list[Event]) -> list[Event]:
    out: list[Event] = []
    longest = max(len(s) for s in streams)
    for i in range(longest):
        out.extend(s[i] for s in streams if i < len(s))
    return out


# Each case: (trace, the verdicts we expect from the oracle by "turn/call": True = must execute,
# False = must not, None = may). The oracle is the judge; the expectations only make sure each
# case tests what its name says.
CASES: list[tuple[Trace, dict[str, bool | None]]] = [
    (
        trace(
            "gap after a complete object",
            [turn("t1"), opened("t1", "a"), frag("t1", "a", 0, BOOK), frag("t1", "a", 2, "  "), term("t1", "a")],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "terminal event id reused after a restart",
            [
                turn("t1"),
                *whole("t1", "a"),
                Restart(),
                opened("t1", "b"),
                *frags("t1", "b", BOOK2),
                term("t1", "b", event_id="ev-t1-r1-a"),
            ],
        ),
        {"t1/a": True, "t1/b": False},
    ),
    (
        trace(
            "a stop, then another call of the turn opens",
            [
                turn("t1"),
                *whole("t1", "a")[:-1],
                term("t1", "a", reason="length"),
                opened("t1", "b"),
                frag("t1", "b", 0, "{"),
            ],
        ),
        {"t1/a": False, "t1/b": False},
    ),
    (trace("happy path", [turn("t1"), *whole("t1", "a")]), {"t1/a": True}),
    (
        trace(
            "two calls interleaved",
            [turn("t1"), *_interleave(whole("t1", "a", BOOK, parts=3), whole("t1", "b", BOOK2, parts=4))],
        ),
        {"t1/a": True, "t1/b": True},
    ),
    (
        trace(
            "text interleaved with arguments",
            [
                turn("t1"),
                opened("t1", "a"),
                TextFragment(turn="t1", response="r1", item="i-text", text='{"day":"Mon"}'),
                *frags("t1", "a", BOOK),
                TextFragment(turn="t1", response="r1", item="i-text", text="}{"),
                term("t1", "a"),
            ],
        ),
        {"t1/a": True},
    ),
    (
        trace(
            "duplicate deltas",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                frag("t1", "a", 0, BOOK[:9]),
                frag("t1", "a", 1, BOOK[9:]),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
            ],
        ),
        {"t1/a": None},  # de-duplicated it runs (the reference); refusing the repeat is allowed
    ),
    (
        trace(
            "conflicting duplicate",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                frag("t1", "a", 0, BOOK2[:9]),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
            ],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "terminal before a missing fragment",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:5]),
                frag("t1", "a", 2, BOOK[12:]),
                term("t1", "a"),
                frag("t1", "a", 1, BOOK[5:12]),
            ],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "out of order, reassembled by position",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 1, BOOK[9:]),
                frag("t1", "a", 0, BOOK[:9]),
                term("t1", "a"),
            ],
        ),
        {"t1/a": None},
    ),
    (trace("malformed JSON", [turn("t1"), *whole("t1", "a", '{"day":"Tue","time":')]), {"t1/a": False}),
    (trace("trailing comma", [turn("t1"), *whole("t1", "a", '{"day":"Tue","time":"10:00",}')]), {"t1/a": False}),
    (trace("not an object", [turn("t1"), *whole("t1", "a", '["Tue","10:00"]')]), {"t1/a": False}),
    (
        trace("}{ glued calls", [turn("t1"), *whole("t1", "a", BOOK + BOOK2, parts=3), *whole("t1", "b", BOOK2)]),
        {"t1/a": False, "t1/b": True},
    ),
    (trace("duplicate keys", [turn("t1"), *whole("t1", "a", '{"day":"Tue","day":"Wed","time":"1"}')]), {"t1/a": False}),
    (
        trace(
            "multi-byte characters and escapes split across fragments",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, '{"day":"T\u00e9'),
                frag("t1", "a", 1, "\U0001f600\\"),
                frag("t1", "a", 2, '"x","time":"1"}'),
                term("t1", "a"),
            ],
        ),
        {"t1/a": True},
    ),
    (
        trace(
            "cancellation before terminal",
            [
                turn("t8"),
                opened("t8", "a"),
                frag("t8", "a", 0, '{"day":"Tue"'),
                CancelTurn(turn="t8"),
                frag("t8", "a", 1, ',"time":"10:00"}'),
                term("t8", "a"),
            ],
        ),
        {"t8/a": False},
    ),
    (
        trace("reconnection replay", [turn("t1"), *whole("t1", "a"), Replay(start=0, stop=5), Replay(start=1, stop=5)]),
        {"t1/a": True},
    ),
    (
        trace(
            "replay while collecting",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                Replay(start=1, stop=3),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                Replay(start=0, stop=6),
            ],
        ),
        {"t1/a": None},  # de-duplicated it runs (the reference); refusing the repeat is allowed
    ),
    (
        trace(
            "tool renamed mid-release",
            [
                turn("t1"),
                opened("t1", "a"),
                *frags("t1", "a", BOOK),
                ToolChanged(tool="book_slot", change="rename", new_name="book_slot_v2"),
                term("t1", "a"),
                *whole("t1", "b", tool="book_slot_v2"),
                *whole("t1", "c"),
            ],
        ),
        {"t1/a": False, "t1/b": True, "t1/c": False},
    ),
    (
        trace(
            "tool removed",
            [
                turn("t1"),
                opened("t1", "a"),
                ToolChanged(tool="book_slot", change="remove"),
                *frags("t1", "a", BOOK),
                term("t1", "a"),
            ],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "schema changed mid-release",
            [
                turn("t1"),
                opened("t1", "a"),
                *frags("t1", "a", BOOK),
                ToolChanged(tool="book_slot", change="schema", schema={"type": "object", "required": ["room"]}),
                term("t1", "a"),
                *whole("t1", "b", '{"room":"7"}'),
            ],
        ),
        {"t1/a": False, "t1/b": True},
    ),
    (
        trace(
            "new turn while old fragments arrive",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                turn("t2"),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                *whole("t2", "a", BOOK2),
            ],
        ),
        {"t1/a": False, "t2/a": True},
    ),
    (
        trace("unknown tool", [turn("t1"), *whole("t1", "a", tool="nope")]),
        {"t1/a": False},
    ),
    (
        trace("fragment before open", [turn("t1"), frag("t1", "a", 0, BOOK), opened("t1", "a"), term("t1", "a")]),
        {"t1/a": False},
    ),
    (
        trace(
            "call re-announced with another tool",
            [turn("t1"), opened("t1", "a"), opened("t1", "a", "pay"), *frags("t1", "a", BOOK), term("t1", "a")],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "terminal event id reused by another call",
            [
                turn("t1"),
                *whole("t1", "a"),
                opened("t1", "b"),
                *frags("t1", "b", BOOK2),
                term("t1", "b", event_id="ev-t1-r1-a"),
            ],
        ),
        {"t1/a": True, "t1/b": False},
    ),
    (
        trace(
            "emergency stop during collecting",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                StopTenant(tenant="acme", reason="incident 7"),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                turn("t2"),
                *whole("t2", "a", BOOK2),
            ],
        ),
        {"t1/a": False, "t2/a": True},
    ),
    (
        trace(
            "emergency stop during validation",
            [
                turn("t1"),
                *whole("t1", "a"),
                StopTenant(tenant="acme", reason="incident 8", during_validation=True),
                turn("t2"),
                *whole("t2", "a", BOOK2),
            ],
        ),
        {"t1/a": False, "t2/a": True},
    ),
    (
        trace(
            "cancel during validation", [turn("t1"), *whole("t1", "a"), CancelTurn(turn="t1", during_validation=True)]
        ),
        {"t1/a": False},
    ),
    (
        trace("new turn during validation", [turn("t1"), *whole("t1", "a"), turn("t2", during_validation=True)]),
        {"t1/a": False},
    ),
    (
        trace(
            "quarantine during validation",
            [
                turn("t1"),
                *whole("t1", "a"),
                QuarantineResponse(response="r1", reason="review", during_validation=True),
                *whole("t1", "b", r="r2"),
            ],
        ),
        {"t1/a": False, "t1/b": True},
    ),
    (
        trace(
            "disable tool during collecting",
            [
                turn("t1"),
                opened("t1", "a"),
                DisableTool(tool="book_slot", reason="bug 12"),
                *frags("t1", "a", BOOK),
                term("t1", "a"),
                *whole("t1", "b"),
            ],
        ),
        {"t1/a": False, "t1/b": False},
    ),
    (
        trace(
            "disable tool during validation",
            [turn("t1"), *whole("t1", "a"), DisableTool(tool="book_slot", during_validation=True)],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "disconnect during validation",
            [turn("t1"), *whole("t1", "a"), Disconnect(turn="t1", response="r1", during_validation=True)],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "tool change during validation of another tool",
            [turn("t1"), *whole("t1", "a"), ToolChanged(tool="pay", change="remove", during_validation=True)],
        ),
        {"t1/a": True},
    ),
    (
        trace(
            "quarantine across restart",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                QuarantineResponse(response="r1", reason="abuse"),
                Restart(),
                Replay(start=1, stop=3),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                opened("t1", "b"),
                *whole("t1", "c", r="r2"),
            ],
        ),
        {"t1/a": False, "t1/b": False, "t1/c": True},
    ),
    (
        trace(
            "restart while collecting, then replay",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                Restart(),
                Replay(start=1, stop=3),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                *whole("t1", "b"),
            ],
        ),
        {"t1/a": False, "t1/b": True},
    ),
    (
        trace(
            "restart after dispatch, full replay", [turn("t1"), *whole("t1", "a"), Restart(), Replay(start=0, stop=5)]
        ),
        {"t1/a": True},
    ),
    (
        trace("confirmation approved", [turn("t1"), *whole("t1", "p", '{"amount":20}', "pay"), confirm("t1", "p")]),
        {"t1/p": True},
    ),
    (
        trace(
            "confirmation denied",
            [
                turn("t1"),
                *whole("t1", "p", '{"amount":20}', "pay"),
                confirm("t1", "p", approved=False),
                confirm("t1", "p"),
            ],
        ),
        {"t1/p": False},
    ),
    (
        trace("confirmation never given", [turn("t1"), *whole("t1", "p", '{"amount":20}', "pay")]),
        {"t1/p": False},
    ),
    (
        trace(
            "cancel between confirmation request and answer",
            [turn("t1"), *whole("t1", "p", '{"amount":20}', "pay"), CancelTurn(turn="t1"), confirm("t1", "p")],
        ),
        {"t1/p": False},
    ),
    (
        trace(
            "confirmation before validation",
            [
                turn("t1"),
                opened("t1", "p", "pay"),
                confirm("t1", "p"),
                *frags("t1", "p", '{"amount":20}'),
                term("t1", "p"),
            ],
        ),
        {"t1/p": False},
    ),
    (
        trace(
            "restart while awaiting confirmation",
            [turn("t1"), *whole("t1", "p", '{"amount":20}', "pay"), Restart(), confirm("t1", "p")],
        ),
        {"t1/p": False},
    ),
    (
        trace(
            "replayed confirmation",
            [turn("t1"), *whole("t1", "p", '{"amount":20}', "pay"), confirm("t1", "p"), Replay(start=0, stop=6)],
        ),
        {"t1/p": True},
    ),
    (
        trace("business rule rejects", [turn("t1"), *whole("t1", "p", '{"amount":900}', "pay")]),
        {"t1/p": False},
    ),
    (
        trace("schema rejects", [turn("t1"), *whole("t1", "a", '{"day":"Tue"}')]),
        {"t1/a": False},
    ),
    (
        trace(
            "permission denied",
            [
                turn("t1", actor="u1"),
                *whole("t1", "x", "{}", "admin_reset"),
                turn("t2", actor="root"),
                *whole("t2", "x", "{}", "admin_reset"),
            ],
        ),
        {"t1/x": False, "t2/x": True},
    ),
    (
        trace(
            "length stop",
            [turn("t1"), *whole("t1", "a", '{"day":"Tue","time":"10')[:-1], term("t1", "a", reason="length")],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "content filter stop",
            [turn("t1"), *whole("t1", "a")[:-1], term("t1", "a", reason="content_filter"), term("t1", "a")],
        ),
        {"t1/a": False},
    ),
    (
        trace(
            "response ended without the call's terminal",
            [
                turn("t1"),
                opened("t1", "a"),
                *frags("t1", "a", BOOK),
                ResponseTerminal(turn="t1", response="r1"),
                term("t1", "a"),
                opened("t1", "b"),
            ],
        ),
        {"t1/a": False, "t1/b": False},
    ),
    (
        trace(
            "disconnect then reconnect replay",
            [
                turn("t1"),
                opened("t1", "a"),
                frag("t1", "a", 0, BOOK[:9]),
                Disconnect(turn="t1", response="r1"),
                Replay(start=1, stop=3),
                frag("t1", "a", 1, BOOK[9:]),
                term("t1", "a"),
                *whole("t1", "b", r="r2"),
            ],
        ),
        {"t1/a": False, "t1/b": True},
    ),
    (
        trace(
            "per-call byte cap",
            [turn("t1"), *whole("t1", "a", '{"day":"' + "x" * 60 + '","time":"1"}', parts=4), *whole("t1", "b")],
            Limits(call_bytes=50, turn_bytes=1000),
        ),
        {"t1/a": False, "t1/b": True},
    ),
    (
        trace(
            "per-turn byte cap with a flood of parallel calls",
            [
                turn("t1"),
                *_interleave(*[whole("t1", f"c{i}", BOOK, parts=2) for i in range(10)]),
                turn("t2"),
                *whole("t2", "z"),
            ],
            Limits(call_bytes=100, turn_bytes=200),
        ),
        {**{f"t1/c{i}": i < 4 for i in range(10)}, "t2/z": True},
    ),
    (
        trace(
            "per-turn cap survives a restart",
            [turn("t1"), *whole("t1", "a"), *whole("t1", "b"), Restart(), *whole("t1", "c")],
            Limits(call_bytes=100, turn_bytes=60),
        ),
        {"t1/a": True, "t1/b": True, "t1/c": False},
    ),
    (
        trace(
            "two tenants, one stopped",
            [
                turn("t1", tenant="acme"),
                turn("t2", tenant="globex", conversation="other"),
                opened("t1", "a"),
                opened("t2", "a"),
                *frags("t1", "a", BOOK),
                *frags("t2", "a", BOOK),
                StopTenant(tenant="acme"),
                term("t1", "a"),
                term("t2", "a"),
            ],
        ),
        {"t1/a": False, "t2/a": True},
    ),
    (
        trace("events for an unknown turn", [*whole("t0", "a"), turn("t1"), *whole("t1", "a")]),
        {"t1/a": True},
    ),
    (
        trace(
            "negative position",
            [turn("t1"), opened("t1", "a"), frag("t1", "a", -1, "{"), *frags("t1", "a", BOOK), term("t1", "a")],
        ),
        {"t1/a": False},
    ),
]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize(("case", "expected"), CASES, ids=[c.name for c, _ in CASES])
def test_reference_agrees_with_model(case: Trace, expected: dict[str, bool | None], store: str) -> None:
    verdicts = judge(case).by_short_name()
    want = {True: "must", False: "must_not", None: "may"}
    for name, execute in expected.items():
        assert verdicts[name].execute == want[execute], f"the oracle says {name}: {verdicts[name]}"
    run = run_trace(ReferenceTarget(store=store), case)
    assert conformance_problems(case, run.observations, run.errors) == []


def test_status_offers_retry_or_handoff_after_stops() -> None:
    case = trace(
        "stop", [turn("t1"), opened("t1", "a"), *frags("t1", "a", BOOK), StopTenant(tenant="acme", reason="x")]
    )
    run = run_trace(ReferenceTarget(store="memory"), case)
    shown = [o.status for o in run.observations if o.kind == "status_shown"]
    assert shown == ["preparing", "handoff"]


def test_executor_receives_traceparent_and_exact_arguments() -> None:
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    case = trace("traced", [turn("t1", traceparent=tp), *whole("t1", "a", parts=5)])
    run = run_trace(ReferenceTarget(store="memory"), case)
    (ex,) = [o for o in run.observations if isinstance(o, Executed)]
    assert ex.traceparent == tp and ex.arguments == {"day": "Tue", "time": "10:00"} and ex.actor == "u1"
    rows = [o for o in run.observations if o.kind == "ledger_row"]
    assert rows and all(getattr(r, "traceparent", None) == tp for r in rows)
