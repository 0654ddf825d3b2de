"""Minimal counterexamples: delta debugging over a trace's events.

Why: a violating trace from the exhaustive or random generators carries events that have
nothing to do with the failure; a reviewer needs the few that do. :func:`ddmin` is
Zeller's delta debugging (split the events into chunks, keep a chunk or a complement that
still fails, refine) and ends 1-minimal: removing any single remaining event makes the
failure go away. "Fails" means the *same invariant* is still violated by a fresh target
run on the candidate, so shrinking never wanders to a different bug.

Removing events shifts indices, and a :class:`~callsafe.model.vocabulary.Replay` names
earlier events by index: :func:`subtrace` renumbers each kept replay to the kept events
of its range (and drops a replay whose range became empty), so every candidate is a valid
trace. Removing events never adds a capability the trace needs, so a candidate stays
applicable to the target.

A counterexample is written as a replayable JSON trace and as a standalone pytest file
(:func:`pytest_source`) that fails on the certified target and passes on a correct one.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from callsafe.certify.checking import Checked, Counterexample, Example, run_checked
from callsafe.certify.judge import Finding
from callsafe.certify.targets import TargetFactory, replay_command
from callsafe.certify.watchdog import DEFAULT_TRACE_TIMEOUT
from callsafe.certify.wire import WireTrace
from callsafe.model.vocabulary import Event, Replay, Trace, TurnStarted

__all__ = [
    "counterexample_name",
    "ddmin",
    "decisive_events",
    "minimize_counterexample",
    "minimize_trace",
    "pytest_source",
    "subtrace",
]

T = TypeVar("T")


class _OutOfTime(Exception):
    pass


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool], deadline: float | None = None) -> list[T]:
    """A 1-minimal sublist of ``items`` (order kept) for which ``fails`` still holds.

    ``fails(items)`` must hold on entry. Past ``deadline`` (a ``time.perf_counter()``
    value) the smallest failing list found so far is returned."""
    current = list(items)
    n = 2
    try:
        while len(current) >= 2:
            size = len(current)
            chunks = [current[size * k // n : size * (k + 1) // n] for k in range(n)]
            chunks = [c for c in chunks if c]
            reduced = False
            for chunk in chunks:
                if _check(fails, chunk, deadline):
                    current, n, reduced = chunk, 2, True
                    break
            if not reduced and n > 2:  # with two chunks, the complements are the chunks
                for k in range(len(chunks)):
                    complement = [x for j, c in enumerate(chunks) if j != k for x in c]
                    if _check(fails, complement, deadline):
                        current, n, reduced = complement, max(n - 1, 2), True
                        break
            if not reduced:
                if n >= len(current):
                    break
                n = min(len(current), 2 * n)
    except _OutOfTime:
        pass
    return current


def _check(fails: Callable[[list[T]], bool], candidate: list[T], deadline: float | None) -> bool:
    if deadline is not None and time.perf_counter() > deadline:
        raise _OutOfTime
    return fails(candidate)


def subtrace(trace: Trace, keep: Sequence[int]) -> Trace:
    """The trace of the events at ``keep`` (original indices), with every kept
    :class:`Replay` renumbered to the kept events of its range, and dropped when none of
    the events it re-delivered is left (replays inside a range re-deliver nothing)."""
    survivors: list[int] = []  # original indices, in order
    events: list[Event] = []
    for old in sorted(set(keep)):
        event = trace.events[old]
        if isinstance(event, Replay):
            inside = [
                new
                for new, orig in enumerate(survivors)
                if event.start <= orig < event.stop and not isinstance(events[new], Replay)
            ]
            if not inside:
                continue
            event = Replay(inside[0], inside[-1] + 1)
        survivors.append(old)
        events.append(event)
    return Trace(events=tuple(events), tools=trace.tools, limits=trace.limits, name=trace.name, source=trace.source)


def minimize_trace(trace: Trace, fails: Callable[[Trace], bool], deadline: float | None = None) -> Trace:
    """The smallest sub-trace of ``trace`` (by :func:`ddmin` over its events) that
    ``fails``; author verdicts are dropped (they described the whole trace). A
    :class:`~callsafe.certify.wire.WireTrace` is returned whole: its events are what its
    payloads parse to, so neither can lose a part alone."""
    if isinstance(trace, WireTrace):
        return trace
    indices = list(range(len(trace.events)))
    cache: dict[tuple[int, ...], bool] = {}

    def fails_on(keep: list[int]) -> bool:
        key = tuple(keep)
        if key not in cache:
            cache[key] = fails(subtrace(trace, keep))
        return cache[key]

    kept = ddmin(indices, fails_on, deadline)
    turns = _turn_starts(trace, kept)
    if turns and fails_on(sorted({*kept, *turns})):
        kept = sorted({*kept, *turns})  # a reader needs the turn a call belongs to, if it still fails with it
    out = subtrace(trace, kept)
    named = _tool_names(out)
    if set(out.tools) - named:  # drop declarations no event names, if it still fails without them
        pruned = Trace(
            events=out.events,
            tools={k: v for k, v in out.tools.items() if k in named},
            limits=out.limits,
            name=out.name,
            source=out.source,
        )
        if fails(pruned):
            return pruned
    return Trace(events=out.events, tools=out.tools, limits=out.limits, name=out.name, source=out.source)


def _turn_starts(trace: Trace, kept: Sequence[int]) -> list[int]:
    """The indices of the ``TurnStarted`` events of the turns the kept events name, where
    delta debugging dropped them (the target did not need them to fail, but a reader
    needs them to follow the trace: a call's tenant and actor come from its turn)."""
    named = {getattr(trace.events[i], "turn", None) for i in kept} - {None}
    present = {e.turn for e in (trace.events[i] for i in kept) if isinstance(e, TurnStarted)}
    wanted = named - present
    first: dict[str, int] = {}
    for i, event in enumerate(trace.events):
        if isinstance(event, TurnStarted) and event.turn in wanted:
            first.setdefault(event.turn, i)
    return sorted(first.values())


def _tool_names(trace: Trace) -> set[str]:
    """Every tool name an event of ``trace`` mentions."""
    names: set[str] = set()
    for event in trace.events:
        for attr in ("tool", "new_name"):
            value = getattr(event, attr, None)
            if isinstance(value, str) and value:
                names.add(value)
    return names


def minimize_counterexample(
    factory: TargetFactory,
    capabilities: frozenset[str],
    invariant: str,
    example: Example,
    deadline: float | None = None,
    timeout: float | None = DEFAULT_TRACE_TIMEOUT,
) -> Counterexample:
    """Shrink ``example`` while ``invariant`` stays violated on fresh targets, by a finding
    of the example's own cause (:attr:`Finding.cause`) when it has one: two causes of one
    invariant must not shrink into the same, simpler story and hide the other."""
    runs = 0
    last: dict[str, Checked] = {}
    cause = example.cause

    def shows(checked: Checked) -> bool:
        if checked.missing or invariant not in checked.violated:
            return False
        return not cause or any(f.cause == cause for f in checked.judgement.of(invariant))

    def fails(candidate: Trace) -> bool:
        nonlocal runs
        runs += 1
        checked = run_checked(factory, capabilities, candidate, timeout)
        if not shows(checked):
            return False
        last["checked"] = checked
        return True

    minimal = minimize_trace(example.trace, fails, deadline)
    origin = (
        f"{example.generator} trace {example.trace.name!r}" if example.trace.name else f"a {example.generator} trace"
    )
    if isinstance(minimal, WireTrace):  # whole, with the payloads the target read (not a rendering of its parse)
        minimal = dataclasses.replace(minimal, name=f"minimal {invariant}", source=f"the {origin}")
    else:
        minimal = Trace(
            events=minimal.events,
            tools=minimal.tools,
            limits=minimal.limits,
            name=f"minimal {invariant}",
            source=f"shrunk from the {origin}",
        )
    checked = run_checked(factory, capabilities, minimal, timeout)
    runs += 1
    if not shows(checked):  # a flaky target: keep the original
        minimal, checked = example.trace, run_checked(factory, capabilities, example.trace, timeout)
    if checked.trace.events != minimal.events and not isinstance(minimal, WireTrace):  # relabelled: show what ran
        minimal = Trace(
            events=checked.trace.events,
            tools=minimal.tools,
            limits=minimal.limits,
            name=minimal.name,
            source=minimal.source,
        )
    keys = {f.key for f in checked.judgement.of(invariant) if f.key is not None}
    explanation = [f"{key.short()}: {line}" for key in sorted(keys, key=str) for line in checked.oracle.explain(key)]
    found = checked.judgement.of(invariant)
    ordered = [f for f in found if f.cause == cause] + [f for f in found if f.cause != cause]
    name = counterexample_name(invariant, minimal, ordered)
    if isinstance(minimal, WireTrace):
        minimal = dataclasses.replace(minimal, name=name)
    else:
        minimal = Trace(
            events=minimal.events, tools=minimal.tools, limits=minimal.limits, name=name, source=minimal.source
        )
    return Counterexample(
        invariant=invariant,
        generator=example.generator,
        original=example.trace,
        minimal=minimal,
        findings=ordered,
        observations=list(checked.run.observations) if checked.run else [],
        errors=list(checked.run.errors) if checked.run else [],
        explanation=explanation,
        tests_run=runs,
        calls=list(checked.run.calls) if checked.run else [],
        reading=checked.judgement.reading,
        cause=cause,
        traces=example.traces,
    )


def decisive_events(trace: Trace) -> str:
    """The events of a (minimal) trace in a few words: their kinds in order, a run of one
    kind counted (``fragment x2``), during-validation ones marked."""
    words: list[str] = []
    for event in trace.events:
        word = event.kind + (" (during validation)" if getattr(event, "during_validation", False) else "")
        if words and (words[-1] == word or words[-1].startswith(word + " x")):
            count = int(words[-1].rpartition(" x")[2]) + 1 if " x" in words[-1] and words[-1] != word else 2
            words[-1] = f"{word} x{count}"
        else:
            words.append(word)
    return ", ".join(words) or "no events"


def counterexample_name(invariant: str, trace: Trace, findings: Sequence[Finding]) -> str:
    """What a minimal trace shows: the invariant, the call, the finding's gist and the
    decisive events (``INV-ONCE t1/c1 executed 2 times: turn_started, call_opened, ...``)."""
    head = invariant
    if findings:
        first = findings[0]
        if first.key is not None:
            head += f" {first.key.short()}"
        gist = first.message.split(";")[0].split(" (")[0].strip()
        if gist:
            head += f" {gist}"
    return f"{head}: {decisive_events(trace)}"[:200]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "counterexample"


def _literal(text: str) -> str:
    """``text`` as a Python literal: a raw triple-quoted string when that is exact (it
    reads like the JSON file), else ``repr``."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def pytest_source(trace: Trace, invariant: str, target: str, json_name: str = "", seed: int | None = None) -> str:
    """A standalone pytest file: fails while ``target`` violates ``invariant`` on
    ``trace``; set ``CALLSAFE_TARGET`` to run it against another implementation."""
    found = f"`callsafe certify {target}`" + (f" (seed {seed})" if seed is not None else "")
    replay = f"\nReplay it by hand: {replay_command(json_name, target)}\n" if json_name else ""
    return f'''"""Minimal counterexample for {invariant}, found by {found}.

It fails on the certified target and passes on an implementation that keeps {invariant}:

    pytest THIS_FILE                                 # the certified target: fails
    CALLSAFE_TARGET=reference pytest THIS_FILE       # the reference implementation: passes
{replay}"""

import os

import pytest

from callsafe.certify.harness import check_trace
from callsafe.model.vocabulary import Trace

TARGET = os.environ.get("CALLSAFE_TARGET", {target!r})
INVARIANT = {invariant!r}
TRACE = Trace.loads({_literal(trace.dumps())})


def test_{_slug(invariant)}_minimal_counterexample() -> None:
    checked = check_trace(TARGET, TRACE)
    if checked.missing:
        pytest.skip(f"{{TARGET}} lacks {{', '.join(checked.missing)}}")
    assert INVARIANT not in checked.violated, checked.explain(INVARIANT)
'''
