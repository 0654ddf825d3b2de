"""Floods and limits: many parallel calls in one turn, huge fragments, deep nesting, very
long strings and numbers, and very many tiny fragments.

What must hold, whatever is sent:

* memory stays bounded by the configured caps: the peak growth (``tracemalloc``) during
  a flood does not grow with the bytes sent beyond the caps, and stays under a stated
  multiple of the caps plus a constant per call;
* every call over a cap fails cleanly: a ledger row with the limit's reason, no
  exception, and it leaves active assembly;
* nothing bigger than the caps is ever copied (a 32 MB fragment costs no 32 MB);
* other turns and tenants are unaffected: their calls run, once, with their arguments.

Fast variants by default; ``CALLSAFE_LONG=1`` sends millions of fragments.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import long_variant, report_figures

from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import judge
from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    LedgerRow,
    Limits,
    Observation,
    TextFragment,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Store

TOOLS = {"any": ToolSpec(schema={"type": "object"})}
LIMIT_WHY = "byte limit exceeded"


class Engine:
    """A core, a driver and a store, keeping what a flood test needs and nothing that
    grows with the bytes sent: ledger rows and executions (one per call), counts of the
    rest."""

    def __init__(
        self,
        limits: Limits,
        store: Store | None = None,
        tools: dict[str, ToolSpec] = TOOLS,
        keep: Callable[[Any], Any] = lambda arguments: arguments,
    ) -> None:
        self.keep = keep  # what to keep of executed arguments (not whole ones, when measuring)
        self.store = store if store is not None else MemoryStore()
        self.executed: list[tuple[CallKey, str, Any]] = []
        self.ledger: dict[CallKey, LedgerRow] = {}
        self.kinds: Counter[str] = Counter()
        self.core = Core(tools, limits, self.store.load())
        self.driver = Driver(
            self.core,
            self.store,
            executor=self._execute,
            business_validator=lambda key, tool, arguments: None,
            observe=self._observe,
            step=lambda: 0,
            clock=lambda: 0.0,
        )

    def _execute(self, key: CallKey, actor: str, tool: str, arguments: Any, tp: str | None = None) -> None:
        self.executed.append((key, actor, self.keep(arguments)))

    def _observe(self, obs: Observation) -> None:
        self.kinds[obs.kind] += 1
        if isinstance(obs, LedgerRow):
            self.ledger[obs.key] = obs

    def deliver(self, events: Iterable[Event]) -> None:
        run, receive = self.driver.run, self.core.receive
        for event in events:
            run(receive(event))

    def reasons(self) -> dict[CallKey, str]:
        """The store's ledger: the last reason recorded per call."""
        return {entry.key: why for entry, why in self.store.ledger()}


def peak_growth(work: Callable[[], None]) -> int:
    """Bytes allocated at the worst moment of ``work``, above what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        work()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def key(turn: str, call: str, tenant: str = "acme", response: str = "r1") -> CallKey:
    return CallKey(tenant, turn, response, f"i-{call}", call)


def whole_call(turn: str, call: str, text: str, response: str = "r1", size: int = 7) -> list[Event]:
    item = f"i-{call}"
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return [
        CallOpened(turn=turn, response=response, item=item, call=call, tool="any"),
        *[
            Fragment(turn=turn, response=response, item=item, call=call, position=i, text=p)
            for i, p in enumerate(parts)
        ],
        CallTerminal(turn=turn, response=response, item=item, call=call, event_id=f"{turn}/{response}/{call}"),
    ]


BYSTANDERS: list[Event] = [
    TurnStarted(turn="g1", actor="u9", tenant="globex"),
    TurnStarted(turn="t-side", actor="u1", tenant="acme", conversation="side"),
]


def bystander_calls() -> list[Event]:
    """A call of another tenant and one of another conversation of the flooding tenant."""
    return [*whole_call("g1", "ok", '{"who":"globex"}'), *whole_call("t-side", "ok", '{"who":"side"}')]


def assert_bystanders_ran(engine: Engine) -> None:
    ran = {(k.tenant, k.turn): args for k, _actor, args in engine.executed if k.call == "ok"}
    assert ran == {("globex", "g1"): {"who": "globex"}, ("acme", "t-side"): {"who": "side"}}
    assert Counter(k for k, _, _ in engine.executed).most_common(1)[0][1] == 1


# -- many parallel calls in one turn --------------------------------------------------------


def parallel_flood(calls: int, fragments: int, size: int = 64) -> Iterator[Event]:
    """``calls`` calls open at once in one turn, their fragments delivered round-robin,
    then every terminal event; a bystander of another tenant and another conversation
    opens first and ends last."""
    yield TurnStarted(turn="t1", actor="u1", tenant="acme")
    yield from BYSTANDERS
    side = bystander_calls()
    yield from side[:2]
    for c in range(calls):
        yield CallOpened(turn="t1", response="r1", item=f"i{c}", call=f"c{c}", tool="any")
    chunk = "x" * size
    for position in range(fragments):
        text = '{"a":"' + chunk[6:] if position == 0 else chunk
        for c in range(calls):
            yield Fragment(turn="t1", response="r1", item=f"i{c}", call=f"c{c}", position=position, text=text)
    for c in range(calls):
        yield Fragment(turn="t1", response="r1", item=f"i{c}", call=f"c{c}", position=fragments, text='"}')
        yield CallTerminal(turn="t1", response="r1", item=f"i{c}", call=f"c{c}", event_id=f"e{c}")
    yield from side[2:]


def _parallel(calls: int, fragments: int, limits: Limits) -> tuple[Engine, int]:
    engine = Engine(limits)
    grown = peak_growth(lambda: engine.deliver(parallel_flood(calls, fragments)))
    return engine, grown


@pytest.mark.parametrize("calls", [300])
def test_parallel_calls_in_one_turn(calls: int) -> None:
    limits = Limits(call_bytes=4096, turn_bytes=64 * 1024)
    small, grown_small = _parallel(calls, 8, limits)  # 150 KB sent into a 64 KB turn
    large, grown_large = _parallel(calls, 64, limits)  # 1.2 MB sent
    for engine in (small, large):
        assert engine.core.active_calls == 0, "a buffer never reached a terminal state"
        reasons = engine.reasons()
        flood = [k for k in reasons if k.turn == "t1"]
        assert len(flood) == calls and not [k for k in flood if reasons[k] != LIMIT_WHY]
        assert {engine.ledger[k].decision for k in flood} == {"failed"}
        assert_bystanders_ran(engine)
    report_figures(
        f"{calls} parallel calls in one 64 KB turn",
        {"peak_growth_kb_150kb_sent": grown_small // 1024, "peak_growth_kb_1.2mb_sent": grown_large // 1024},
    )
    # what is sent beyond the caps costs nothing: 8x the bytes, about the same peak
    assert grown_large < grown_small * 1.25 + 64 * 1024, (grown_small, grown_large)
    # and the peak is the caps' worth plus a constant per call
    assert grown_large < 8 * limits.turn_bytes + calls * 6 * 1024, grown_large


def test_parallel_calls_that_fit_all_run_once() -> None:
    """The same flood under caps it fits: every call runs once with its own arguments
    (the caps are what fails the flood above, nothing else)."""
    engine = Engine(Limits(call_bytes=4096, turn_bytes=10 * 1024 * 1024))
    engine.deliver(parallel_flood(200, 8))
    ran = Counter(k for k, _, _ in engine.executed)
    assert len(ran) == 202 and max(ran.values()) == 1
    assert {json.dumps(a) for k, _, a in engine.executed if k.turn == "t1"} == {
        json.dumps({"a": "x" * 58 + "x" * 64 * 7})
    }


@long_variant
def test_parallel_calls_in_one_turn_long() -> None:
    limits = Limits(call_bytes=4096, turn_bytes=64 * 1024)
    engine, grown = _parallel(20_000, 64, limits)  # 82 MB sent
    assert engine.core.active_calls == 0
    assert grown < 8 * limits.turn_bytes + 20_000 * 6 * 1024
    assert_bystanders_ran(engine)
    report_figures("20000 parallel calls in one turn, 82 MB sent", {"peak_growth_mb": round(grown / 1e6, 2)})


def test_over_limit_calls_leave_a_ledger_row_in_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3", create=True, synchronous="normal")
    engine = Engine(Limits(call_bytes=512, turn_bytes=4096), store)
    engine.deliver(parallel_flood(40, 16, size=48))
    rows = [(entry.key.call, entry.decision, why) for entry, why in store.ledger() if entry.key.turn == "t1"]
    assert len(rows) == 40 and {(d, w) for _, d, w in rows} == {("failed", LIMIT_WHY)}
    assert_bystanders_ran(engine)
    store.close()


# -- huge fragments ---------------------------------------------------------------------------

HUGE = {
    "ascii-32MB": "x" * (32 * 1024 * 1024),
    "latin-16MB": "\u00e9" * (8 * 1024 * 1024),
    "astral-16MB": "\U0001f600" * (4 * 1024 * 1024),
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_a_huge_fragment_is_never_copied(name: str) -> None:
    """A fragment far over the caps, sent to every kind of buffer: collecting, doomed
    (where a repeat is checked by digest), never opened, and as assistant text."""
    huge = HUGE[name]
    engine = Engine(Limits())
    doomed = '{"a":1}{"b":2}' + " " * 600  # glued objects: doomed by the scanner, bytes dropped
    engine.deliver(
        [
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            *BYSTANDERS,
            CallOpened(turn="t1", response="r1", item="i-a", call="a", tool="any"),
            CallOpened(turn="t1", response="r1", item="i-d", call="d", tool="any"),
            Fragment(turn="t1", response="r1", item="i-d", call="d", position=0, text=doomed),
        ]
    )

    def flood() -> None:
        engine.deliver(
            [
                Fragment(turn="t1", response="r1", item="i-a", call="a", position=0, text=huge),
                Fragment(turn="t1", response="r1", item="i-d", call="d", position=0, text=huge),  # a conflict
                Fragment(turn="t1", response="r1", item="i-n", call="never-opened", position=0, text=huge),
                TextFragment(turn="t1", response="r1", item="i-t", text=huge),
            ]
        )

    grown = peak_growth(flood)
    report_figures(f"a {name} fragment, four times", {"peak_growth_kb": grown // 1024})
    assert grown < 1024 * 1024, f"{name}: {grown / 1e6:.1f} MB allocated for one fragment"
    engine.deliver(
        [
            CallTerminal(turn="t1", response="r1", item="i-a", call="a", event_id="ea"),
            *bystander_calls(),
        ]
    )
    assert engine.core.active_calls == 0
    reasons = engine.reasons()
    assert reasons[key("t1", "a")] == LIMIT_WHY
    assert reasons[key("t1", "d")] == "conflicting fragment at a position already received"
    assert_bystanders_ran(engine)


def test_a_huge_repeat_of_a_sealed_buffer_is_hashed_in_slices() -> None:
    """A call waiting for confirmation keeps digests, not text; a huge fragment at one of
    its positions is checked against a digest, computed in slices (no whole copy)."""
    tools = {"pay": ToolSpec(schema={"type": "object"}, confirm=True)}
    engine = Engine(Limits(), tools=tools)
    engine.deliver(
        [
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            CallOpened(turn="t1", response="r1", item="i-p", call="p", tool="pay"),
            Fragment(turn="t1", response="r1", item="i-p", call="p", position=0, text='{"n":1}'),
            CallTerminal(turn="t1", response="r1", item="i-p", call="p", event_id="ep"),
        ]
    )
    assert engine.kinds["confirmation_requested"] == 1
    huge = HUGE["latin-16MB"]
    grown = peak_growth(
        lambda: engine.deliver([Fragment(turn="t1", response="r1", item="i-p", call="p", position=0, text=huge)])
    )
    assert grown < 1024 * 1024, f"{grown / 1e6:.1f} MB for a repeat"


# -- nesting, strings, numbers -----------------------------------------------------------------


def _nested(depth: int, kind: str) -> str:
    if kind == "array":
        return '{"a":' + "[" * depth + "]" * depth + "}"
    return '{"a":' + '{"a":' * depth + "1" + "}" * depth + "}"


def _deliver_at_depth(engine: Engine, events: list[Event], depth: int) -> None:
    """Deliver from ``depth`` frames down: an application's stack is never empty, and how
    deep a parser or a validator can recurse depends on it."""
    if depth > 0:
        _deliver_at_depth(engine, events, depth - 1)
        return
    engine.deliver(events)


@pytest.mark.parametrize("stack", [0, 400, 800])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_deep_nesting_fails_cleanly_or_runs_exactly(kind: str, stack: int) -> None:
    depths = [1, 10, 50, 200, 400, 600, 900, 2_000, 20_000]
    engine = Engine(Limits())
    events: list[Event] = [TurnStarted(turn="t1", actor="u1", tenant="acme")]
    for d in depths:
        events += whole_call("t1", f"d{d}", _nested(d, kind), size=997)
    limit = sys.getrecursionlimit()
    _deliver_at_depth(engine, events, min(stack, limit - 100))
    assert engine.core.active_calls == 0, "a deeply nested call never reached a terminal state"
    ran = {k.call: args for k, _, args in engine.executed}
    for d in depths:
        row = engine.ledger[key("t1", f"d{d}")]
        if f"d{d}" in ran:
            assert ran[f"d{d}"] == json.loads(_nested(d, kind)) and row.decision == "dispatched"
        else:
            too_big = engine.reasons()[key("t1", f"d{d}")] == LIMIT_WHY
            assert row.decision == "failed" and (row.parse == "malformed" or "too deep" in row.validation or too_big)
    assert {"d1", "d10", "d50"} <= set(ran), "ordinary nesting must still run"


def test_long_strings_keys_and_numbers() -> None:
    cap = Limits().call_bytes
    long_string = "s" * (cap - 16)
    cases = {
        "string": ('{"a":"' + long_string + '"}', {"a": long_string}),
        "key": ('{"' + long_string + '":1}', {long_string: 1}),
        "keys": ("{" + ",".join(f'"k{i}":{i}' for i in range(4000)) + "}", {f"k{i}": i for i in range(4000)}),
        "int-4300": ('{"n":' + "7" * 4300 + "}", None),  # Python's own limit: still converted
        "float-long": ('{"x":1.' + "5" * 20000 + "}", {"x": 1.5555555555555556}),
        "int-5000": ('{"n":' + "7" * 5000 + "}", "fails"),  # longer than Python converts
        "int-60000": ('{"n":' + "7" * 60000 + "}", "fails"),
        "string-over-cap": ('{"a":"' + "s" * cap + '"}', "limit"),
    }
    engine = Engine(Limits(call_bytes=cap, turn_bytes=16 * cap))
    events: list[Event] = [TurnStarted(turn="t1", actor="u1", tenant="acme"), *BYSTANDERS]
    for name, (text, _) in cases.items():
        events += whole_call("t1", name, text, size=4093)
    engine.deliver([*events, *bystander_calls()])
    assert engine.core.active_calls == 0
    ran = {k.call: args for k, _, args in engine.executed}
    reasons = engine.reasons()
    for name, (_text, expected) in cases.items():
        k = key("t1", name)
        if expected == "fails":
            assert name not in ran and engine.ledger[k].parse == "malformed", name
        elif expected == "limit":
            assert name not in ran and reasons[k] == LIMIT_WHY, name
        elif expected is None:
            assert ran[name] == {"n": int("7" * 4300)}
        else:
            assert ran[name] == expected, name
    assert_bystanders_ran(engine)


# -- very many tiny fragments -------------------------------------------------------------------


def tiny_fragments(total: int, call_bytes: int, width: int) -> Iterator[Event]:
    """``total`` fragments of ``width`` characters: calls of half the cap, one after the
    other, each in its own turn of one conversation (a new turn supersedes the last)."""
    per_call = max(1, (call_bytes // 2 - 8) // width)
    sent, n = 0, 0
    while sent < total:
        turn = f"t{n}"
        yield TurnStarted(turn=turn, actor="u1", tenant="acme")
        item = f"i{n}"
        yield CallOpened(turn=turn, response="r1", item=item, call="c", tool="any")
        yield Fragment(turn=turn, response="r1", item=item, call="c", position=0, text='{"a":"')
        pattern = "xy" * (width + 1)
        for p in range(1, per_call + 1):
            # a new str object per fragment, as a JSON decoder makes them (one-character
            # strings are CPython's shared singletons either way)
            body = pattern[p % 2 : p % 2 + width]
            yield Fragment(turn=turn, response="r1", item=item, call="c", position=p, text=body)
        yield Fragment(turn=turn, response="r1", item=item, call="c", position=per_call + 1, text='"}')
        yield CallTerminal(turn=turn, response="r1", item=item, call="c", event_id=f"e{n}")
        sent += per_call + 2
        n += 1


def _tiny(total: int, width: int, cap: int) -> tuple[Engine, int]:
    limits = Limits(call_bytes=cap, turn_bytes=cap)
    engine = Engine(limits, keep=lambda arguments: {"a": len(arguments["a"])})
    grown = peak_growth(lambda: engine.deliver(tiny_fragments(total, limits.call_bytes, width)))
    return engine, grown


# A fragment costs at most ~60 bytes of memory while it is buffered (a list slot, and a
# str object when it is not one of CPython's cached one-character strings) and at least one
# byte of the cap: so a buffer is at most this many times its cap, whatever is sent.
PER_CAP_BYTE = 64


@pytest.mark.parametrize("width", [1, 2])
def test_many_tiny_fragments(width: int) -> None:
    cap = 16 * 1024
    engine, grown = _tiny(30_000, width, cap)
    calls = len(engine.executed)
    assert calls >= 3 and engine.core.active_calls == 0
    assert {a["a"] for _, _, a in engine.executed} == {(cap // 2 - 8) // width * width}
    report_figures(f"30000 fragments of {width} byte(s), 16 KB cap", {"calls": calls, "peak_growth_kb": grown // 1024})
    assert grown < PER_CAP_BYTE * cap + calls * 2048, f"{grown / 1e6:.1f} MB"


@long_variant
@pytest.mark.parametrize("width", [1, 2])
def test_millions_of_tiny_fragments(width: int) -> None:
    cap = 64 * 1024
    engine, grown = _tiny(3_000_000, width, cap)
    assert engine.core.active_calls == 0
    calls = len(engine.executed)
    assert grown < PER_CAP_BYTE * cap + calls * 2048, f"{grown / 1e6:.1f} MB"
    report_figures(
        f"3M fragments of {width} byte(s)", {"calls": calls, "cap_kb": 64, "peak_growth_mb": round(grown / 1e6, 2)}
    )


def test_empty_fragments_are_bounded_by_a_cap() -> None:
    """An empty fragment still takes a position, so it costs a byte of the caps (the
    model's ``utf8_len``): 20,000 of them grow no more than the caps allow."""
    limits = Limits(call_bytes=64, turn_bytes=256)
    engine = Engine(limits)
    engine.deliver(
        [
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            CallOpened(turn="t1", response="r1", item="i", call="c", tool="any"),
        ]
    )
    empties = (Fragment(turn="t1", response="r1", item="i", call="c", position=p, text="") for p in range(20_000))
    grown = peak_growth(lambda: engine.deliver(empties))
    assert grown < PER_CAP_BYTE * limits.turn_bytes, f"{grown / 1e3:.0f} KB for 20000 empty fragments"


@pytest.mark.parametrize(("empties", "execute"), [(7, "must"), (8, "must_not")])
def test_the_model_counts_an_empty_fragment_as_one_byte(empties: int, execute: str) -> None:
    """The oracle's side of the same rule: ``{}`` (2 bytes) and N empty fragments fit a
    9-byte call cap up to N = 7; one more is over it, and the call must not run."""
    builder = (
        TraceBuilder(tools={"any": {"type": "object"}}, limits=Limits(call_bytes=9, turn_bytes=1000))
        .turn("t1", actor="u1", tenant="acme")
        .open("a", "any")
        .fragment("a", "{")
    )
    for _ in range(empties):
        builder = builder.fragment("a", "")
    verdict = judge(builder.fragment("a", "}").terminal("a").build()).by_short_name()["t1/a"]
    assert verdict.execute == execute, verdict


def test_model_strict_parse_raises_only_parse_failure() -> None:
    for text, stack in [('{"n":' + "7" * 5000 + "}", 0), (_nested(600, "array"), 0)]:
        with contextlib.suppress(ParseFailure):
            _parse_at_depth(text, stack)


def _parse_at_depth(text: str, depth: int) -> None:
    if depth > 0:
        _parse_at_depth(text, depth - 1)
        return
    strict_parse(text)
