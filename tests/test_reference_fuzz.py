"""Random bytes and random JSON as fragment text: the implementation raises nothing (its
typed errors at most), never executes an invalid call, and executes a valid one with
exactly its arguments. The syntax scanner only ever dooms text that strict parsing
rejects too, and dooms ``}{`` and non-object starts while they stream."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callsafe.certify.runner import run_trace
from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Event,
    Executed,
    Fragment,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.buffer import ArgumentBuffer
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.errors import AssemblerError
from callsafe.reference_impl.scanner import SyntaxScanner
from callsafe.targets.reference import ReferenceTarget

TOOLS = {"any": ToolSpec(schema={"type": "object"})}

# Every code point, lone surrogates included.
ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
JSONISH = st.text(alphabet='{}[]":,\\ \t\nabtrue0123456789.-eEunlfs\u00e9\U0001f600\x01', max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _trace(parts: list[str], reason: str = "completed") -> Trace:
    events: list[Event] = [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(turn="t1", response="r1", item="i1", call="a", tool="any"),
        *[Fragment(turn="t1", response="r1", item="i1", call="a", position=i, text=p) for i, p in enumerate(parts)],
        CallTerminal(turn="t1", response="r1", item="i1", call="a", event_id="e1", reason=reason),  # type: ignore[arg-type]
    ]
    return Trace(events=tuple(events), tools=TOOLS, name="fuzz")


def _cut(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def noisy_parts(draw: st.DrawFn) -> list[str]:
    kind = draw(st.sampled_from(["any", "jsonish", "json", "bytes"]))
    if kind == "any":
        text = draw(ANY_TEXT)
    elif kind == "jsonish":
        text = draw(JSONISH)
    elif kind == "bytes":
        text = draw(st.binary(max_size=40)).decode("utf-8", "surrogateescape")
    else:
        text = json.dumps(draw(JSON_VALUES), ensure_ascii=draw(st.booleans()))
        if draw(st.booleans()):
            text = "{" + text[1:] if text.startswith("[") else text + draw(st.sampled_from(["", "}", "{}", " "]))
    return _cut(draw, text)


_SET = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SET
@given(noisy_parts())
def test_random_fragments_never_raise_nor_execute_invalid(parts: list[str]) -> None:
    trace = _trace(parts)
    run = run_trace(ReferenceTarget(store="memory", scan_every=0), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []
    executed = [o for o in run.observations if isinstance(o, Executed)]
    try:
        expected: Any = strict_parse("".join(parts))
    except ParseFailure:
        assert executed == []
    else:
        assert [e.arguments for e in executed] == [expected]


@_SET
@given(noisy_parts())
def test_core_raises_only_typed_errors(parts: list[str]) -> None:
    core = Core(TOOLS, _trace([]).limits)
    try:
        for event in _trace(parts).events:
            core.receive(event)
    except AssemblerError:
        pass
    assert core.active_calls <= 1


@settings(max_examples=500, deadline=None)
@given(st.one_of(JSONISH, ANY_TEXT, JSON_VALUES.map(json.dumps)), st.data())
def test_scanner_is_sound(text: str, data: st.DataObject) -> None:
    """Whatever the split: a doomed text never parses; a text that parses is never
    doomed, and the scanner saw its object close."""
    scanner = SyntaxScanner()
    for part in _split_all(text, data):
        scanner.feed(part)
    try:
        strict_parse(text)
    except ParseFailure:
        return
    assert scanner.error is None and scanner.closed


def _split_all(text: str, data: st.DataObject) -> list[str]:
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize(
    ("parts", "error"),
    [
        (['{"a":1}', '{"b":2}'], "trailing data after the object"),
        (['{"a":"}{"}', " \n", "x"], "trailing data after the object"),
        (["  [1]"], "arguments do not start with an object"),
        (['"x"'], "arguments do not start with an object"),
        (['{"a":[1}'], "mismatched brackets"),
        (['{"a":"x\\', '"}', '"}', " {"], "trailing data after the object"),  # \" keeps the string open
        (['{"a":"\x01"}'], "raw control character in a string"),
    ],
)
def test_scanner_dooms_while_streaming(parts: list[str], error: str) -> None:
    scanner = SyntaxScanner()
    for part in parts:
        scanner.feed(part)
    assert scanner.error == error


def test_scanner_follows_strings_and_escapes_across_fragments() -> None:
    scanner = SyntaxScanner()
    for part in ['{"a":"}', "{\\", '"]', '[", "b": [1, {"c": "\\\\"}]', "}  "]:
        assert scanner.feed(part) is None
    assert scanner.closed


def test_doomed_buffer_drops_bytes_but_tells_repeats_from_conflicts() -> None:
    buffer = ArgumentBuffer(scan_every=0)
    buffer.add(0, '{"a":1}')
    buffer.add(1, '{"b":2}')
    assert buffer.doomed == "trailing data after the object"
    assert buffer.assemble() is None
    assert buffer.seen(1, '{"b":2}') == (True, False)
    assert buffer.seen(1, '{"b":3}') == (False, True)
    assert buffer.seen(2, "x") == (False, False)


def test_buffer_reassembles_by_position_and_reports_gaps() -> None:
    buffer = ArgumentBuffer()
    buffer.add(2, "}")
    buffer.add(0, '{"a":')
    assert not buffer.complete and buffer.count == 2
    buffer.add(1, "1")
    assert buffer.complete and buffer.assemble() == '{"a":1}'


def test_batched_scanning_catches_a_long_garbage_stream() -> None:
    buffer = ArgumentBuffer(scan_every=64)
    buffer.add(0, '{"a":1}')
    assert buffer.doomed is None  # small: left to the one strict parse
    for i in range(1, 20):
        buffer.add(i, "garbage ")
    assert buffer.doomed == "trailing data after the object"
