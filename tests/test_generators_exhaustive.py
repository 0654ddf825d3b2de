"""Exhaustive traces up to a bound, with call ids treated as symmetric."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pytest

from callsafe.generators.exhaustive import Bound, ExhaustiveStats, build_trace, canonical, exhaustive_traces
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallAddressed


def run(bound: Bound) -> tuple[list[str], ExhaustiveStats]:
    stats = ExhaustiveStats()
    names = [t.name for t in exhaustive_traces(bound, stats)]
    return names, stats


def test_counted_by_hand_two_symmetric_calls() -> None:
    # Templates per call id: open, fragment0, terminal (3); two ids: 6 choices per event.
    # Length 1: 6 sequences; canonical are the 3 using c0; 3 skipped.
    # Length 2: 36 sequences; canonical: first uses c0 (3), second c0 or c1 (6): 18; 18 skipped.
    names, stats = run(Bound(calls=2, turns=1, fragments=1, length=2))
    assert (stats.produced, stats.skipped) == (21, 21)
    assert len(names) == 21


def test_counted_by_hand_with_a_second_turn() -> None:
    # A new turn is one more template, usable once (turns=2). Length 1: 7 sequences;
    # canonical: 3 (c0) + 1 (turn) = 4; skipped 3 (c1). Length 2: after a c0 event, 7
    # continuations all canonical (21); after the turn, 6 (no third turn): 3 with c0, 3
    # skipped; after a c1 event all 7 skipped (21). Produced 4 + 24 = 28; skipped 3 + 24 = 27;
    # together the 55 = 7 + 48 sequences there are.
    names, stats = run(Bound(calls=2, turns=2, fragments=1, length=2))
    assert (stats.produced, stats.skipped) == (28, 27)
    assert names[:3] == ["exhaustive: turn", "exhaustive: turn open(c0)", "exhaustive: turn fragment0(c0)"]


def test_every_class_is_produced_exactly_once() -> None:
    bound = Bound(calls=3, turns=1, fragments=1, controls=frozenset({"cancel"}), length=3)
    templates = [("cancel", -1)] + [(n, i) for i in range(3) for n in ("open", "fragment0", "terminal")]
    brute = set()
    total = 0
    for length in range(1, 4):
        for seq in itertools.product(templates, repeat=length):
            total += 1
            brute.add(tuple(canonical(list(seq))))
    names, stats = run(bound)
    assert stats.produced == len(brute) == len(set(names))
    assert stats.produced + stats.skipped == total


def test_deterministic_and_lazy() -> None:
    bound = Bound(calls=2, turns=2, fragments=2, controls=frozenset({"cancel", "replay", "restart"}), restarts=1)
    assert run(bound)[0] == run(bound)[0]
    huge = Bound(calls=4, turns=4, fragments=4, controls=frozenset({"cancel", "replay"}), length=40)
    traces = exhaustive_traces(huge)  # billions of traces: only a lazy enumeration hands out the first ones
    assert isinstance(traces, Iterator) and not isinstance(traces, Sequence)
    first = list(itertools.islice(traces, 5))
    assert len(first) == 5


def test_templates_become_events_with_per_call_data() -> None:
    bound = Bound(calls=2, turns=1, fragments=2, controls=frozenset({"replay"}), length=7)
    instances = [("open", 0), ("open", 1), ("fragment0", 0), ("fragment0", 1), ("fragment1", 1), ("terminal", 1)]
    trace = build_trace(bound, [*instances, ("replay", -1)])
    assert trace.name == ("exhaustive: open(c0) open(c1) fragment0(c0) fragment0(c1) fragment1(c1) terminal(c1) replay")
    # the same trace is in the stream (a short bound reaches it through its prefixes)
    prefix = build_trace(Bound(calls=2, fragments=2, length=2), instances[:2])
    assert prefix.name in run(Bound(calls=2, fragments=2, length=2))[0]
    texts = {e.call: e for e in trace.events if isinstance(e, CallAddressed)}
    assert set(texts) == {"c0", "c1"}
    verdicts = judge(trace).by_short_name()
    assert verdicts["t1/c1"].execute == "must" and verdicts["t1/c1"].arguments == {"v": 200}
    assert verdicts["t1/c0"].execute == "must_not"  # never ended
    assert sum(1 for e in judge(trace).semantics.expected if e.what == "execute") == 1  # the replay runs nothing


@pytest.mark.parametrize(
    "kwargs", [{"controls": frozenset({"teleport"})}, {"calls": 0}, {"fragments": 5}, {"restarts": -1}]
)
def test_bad_bounds_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Bound(**kwargs)  # type: ignore[arg-type]
