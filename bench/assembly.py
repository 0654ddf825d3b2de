"""The assembly-cost benchmark: what the safe assembler costs over assembling naively.

Issue "Benchmarks", item 1: the reference implementation within 2x of a raw floor, linear
in bytes, and faster than every library accumulator on both shapes while doing strictly
more checking.

The same event streams go through these variants:

* **floor**: what unsafe client code does: append each fragment's text to a list per call
  key, and at the call's terminal event one ``json.loads`` of the joined text, handed to
  the executor. No positions, caps, turns, schema, ledger or status.
* **core**: the reference implementation the way an application embeds it: the sans-IO
  :class:`~callsafe.reference_impl.core.Core` behind its
  :class:`~callsafe.reference_impl.driver.Driver` over a
  :class:`~callsafe.reference_impl.memory_store.MemoryStore`, with a no-op business
  validator and an executor that keeps what it receives.
* **target-memory**: :class:`~callsafe.targets.reference.ReferenceTarget` (memory store)
  through the certification harness (:func:`callsafe.certify.runner.run_trace`): adds the
  harness's spies, observations and step tracking.
* **target-sqlite**: the same over the SQLite store, ``synchronous="normal"`` (every
  transaction committed, no fsync: what survives a process crash), and in the first shape
  also the default ``"adaptive"`` (an fsync for every dispatch claim and every stop).
* **lib-...**: the accumulators of openai (Chat Completions and Responses), anthropic,
  langchain-core, pydantic-ai and litellm (:mod:`bench.library_accumulators`), each fed the
  same streams rendered to its own wire protocol and built into its own chunk objects
  before timing; skipped, with the reason, when not installed. A library can be quadratic,
  so a :class:`~bench.time_guard.TimeGuard` stops it (and says where and why) before one
  run takes longer than :data:`LIBRARY_LIMIT_S` seconds of CPU.

Two shapes:

* **many small calls**: ``calls`` calls (200) of about 200 bytes each in 22 fragments, one
  turn, five calls per model response (an agent loop: responses one after the other, each
  with a few parallel calls; one stream per response for the libraries), a realistic
  schema (required fields, enum, pattern, array, no extra properties);
* **one growing call**: a ``write_file``-like call whose ``content`` (code text with
  quotes, backslashes, tabs, non-ASCII) grows from 1 KB to 1 MB in 16-character
  fragments; the table of time per byte against size shows whether a variant is linear
  (flat) or quadratic (growing with size).

Each variant's result is checked (outside the timed region) against the expected
arguments (a library's also after its last timed run), and the harness runs against the model's oracle
(:func:`~callsafe.reference_impl.conformance.conformance_problems`), so a fast path that
broke something cannot look fast.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from bench import library_accumulators as libraries
from bench.common import Config, Section, Timing, best_of, busy_note, fmt_ratio, markdown_table
from bench.time_guard import TimeGuard, size_label
from callsafe import _fast
from callsafe.certify.runner import run_trace
from callsafe.model.system import strict_parse
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Executed,
    Fragment,
    Limits,
    Observation,
    ResponseTerminal,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.schema_check import SchemaCheck
from callsafe.targets.reference import ReferenceTarget

__all__ = ["NAME", "TITLE", "run"]

NAME = "assembly"
TITLE = "Assembly cost: the reference implementation against a raw floor"

BOOK_MEETING = ToolSpec(
    schema={
        "type": "object",
        "required": ["day", "time", "room"],
        "properties": {
            "day": {"type": "string", "enum": ["Mon", "Tue", "Wed", "Thu", "Fri"]},
            "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
            "room": {"type": "string", "maxLength": 16},
            "attendees": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            "minutes": {"type": "integer", "minimum": 5, "maximum": 480},
            "note": {"type": "string"},
        },
        "additionalProperties": False,
    }
)
WRITE_FILE = ToolSpec(
    schema={
        "type": "object",
        "required": ["path", "content"],
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "content": {"type": "string"},
            "overwrite": {"type": "boolean"},
        },
        "additionalProperties": False,
    }
)
TOOLS = {"book_meeting": BOOK_MEETING, "write_file": WRITE_FILE}
BIG = Limits(call_bytes=4 << 20, turn_bytes=4 << 20)

FRAGMENTS_PER_CALL = 22
CALLS_PER_RESPONSE = 5
GROW_FRAGMENT = 16  # characters per fragment in the growing call
GROW_SIZES = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20)
QUICK_GROW_SIZES = (1 << 10, 4 << 10, 16 << 10)
# seconds one untimed run of a library may take before the library is stopped (see TimeGuard)
LIBRARY_LIMIT_S = 3.0
QUICK_LIBRARY_LIMIT_S = 0.5

# What a variant returns: (call key, executed arguments), the key as a CallKey or, from
# the floor (which knows no tenant), as its (turn, response, item, call) tuple.
Runner = Callable[[], Sequence[tuple[Any, Any]]]


# ------------------------------------------------------------------------------------
# streams (built before any timing)
# ------------------------------------------------------------------------------------


def _split(text: str, parts: int) -> list[str]:
    """``text`` in exactly ``parts`` pieces of near-equal length (none empty)."""
    cuts = [round(i * len(text) / parts) for i in range(parts + 1)]
    return [text[a:b] for a, b in itertools.pairwise(cuts)]


def _small_arguments(i: int) -> str:
    days = ("Mon", "Tue", "Wed", "Thu", "Fri")
    value = {
        "day": days[i % 5],
        "time": f"{9 + i % 8:02d}:{(i * 7) % 60:02d}",
        "room": f"B-{200 + i % 37}",
        "attendees": [f"ana.{i}@example.com", "bo@example.org"],
        "minutes": 30 + i % 60,
        "note": f'bring the Q{1 + i % 4} report, café at {10 + i % 5} ("as usual")',
    }
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def many_calls(
    calls: int, fragments: int = FRAGMENTS_PER_CALL, per_response: int = CALLS_PER_RESPONSE
) -> tuple[Trace, dict[CallKey, Any]]:
    """One turn, ``calls`` calls one after the other, each in ``fragments`` fragments,
    ``per_response`` calls per model response (an agent loop: responses one after the other,
    each with a few parallel calls); and the arguments each call must execute with."""
    events: list[Event] = [TurnStarted(turn="t1", actor="u1", tenant="acme")]
    expected: dict[CallKey, Any] = {}
    for c in range(calls):
        response, item, call = f"r{c // per_response}", f"i{c}", f"call_{c}"
        text = _small_arguments(c)
        events.append(CallOpened(turn="t1", response=response, item=item, call=call, tool="book_meeting"))
        for p, part in enumerate(_split(text, fragments)):
            events.append(Fragment(turn="t1", response=response, item=item, call=call, position=p, text=part))
        events.append(CallTerminal(turn="t1", response=response, item=item, call=call, event_id=f"ev-{c}"))
        expected[CallKey("acme", "t1", response, item, call)] = json.loads(text)
        if c % per_response == per_response - 1 or c == calls - 1:
            events.append(ResponseTerminal(turn="t1", response=response))
    return Trace(events=tuple(events), tools=TOOLS, name=f"assembly-many-{calls}"), expected


_CODE_LINES = (
    "def handle(request):\n",
    '\tname = request.get("name", "world")  # défaut\n',
    '\tpath = "C:\\\\temp\\\\out.txt"\n',
    "\tif len(name) > 40 and name != 'é':\n",
    '\t\traise ValueError(f"too long: {name!r} → ✗ 🙂")\n',
    '\treturn {"greeting": "hello " + name, "ok": True}\n',
    "\n",
)


def _content(size: int) -> str:
    """Code-like text whose JSON encoding is about ``size`` bytes."""
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = _CODE_LINES[i % len(_CODE_LINES)].replace("request", f"request{i}")
        lines.append(line)
        total += len(json.dumps(line, ensure_ascii=False).encode()) - 2
        i += 1
    return "".join(lines)


def growing_call(size: int) -> tuple[Trace, dict[CallKey, Any], int]:
    """One ``write_file`` call of about ``size`` bytes of arguments in
    :data:`GROW_FRAGMENT`-character fragments; its expected arguments and exact size."""
    value = {"path": "src/app/handler.py", "content": _content(size - 60), "overwrite": True}
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    events: list[Event] = [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(turn="t1", response="r1", item="i0", call="call_0", tool="write_file"),
    ]
    for p, start in enumerate(range(0, len(text), GROW_FRAGMENT)):
        events.append(
            Fragment(
                turn="t1", response="r1", item="i0", call="call_0", position=p, text=text[start : start + GROW_FRAGMENT]
            )
        )
    events.append(CallTerminal(turn="t1", response="r1", item="i0", call="call_0", event_id="ev-0"))
    events.append(ResponseTerminal(turn="t1", response="r1"))
    trace = Trace(events=tuple(events), tools=TOOLS, limits=BIG, name=f"assembly-grow-{size}")
    return trace, {CallKey("acme", "t1", "r1", "i0", "call_0"): value}, len(text.encode())


# ------------------------------------------------------------------------------------
# the variants
# ------------------------------------------------------------------------------------


def floor(events: Sequence[Any]) -> list[tuple[tuple[str, str, str, str], Any]]:
    """The raw floor: append per key, one ``json.loads`` at the terminal event. Events
    are typed ``Any`` so that nothing narrows them at run time: the loop is exactly what
    naive client code runs."""
    buffers: dict[tuple[str, str, str, str], list[str]] = {}
    executed: list[tuple[tuple[str, str, str, str], Any]] = []
    for ev in events:
        kind = type(ev)
        if kind is Fragment:
            key = (ev.turn, ev.response, ev.item, ev.call)
            parts = buffers.get(key)
            if parts is None:
                buffers[key] = [ev.text]
            else:
                parts.append(ev.text)
        elif kind is CallTerminal:
            key = (ev.turn, ev.response, ev.item, ev.call)
            executed.append((key, json.loads("".join(buffers.pop(key, [])))))
    return executed


def _no_business_problem(key: CallKey, tool: str, arguments: Any) -> str | None:
    return None


def embedded_core(trace: Trace, compiled: Mapping[str, ModuleType] | None = None) -> list[tuple[CallKey, Any]]:
    """The core as an application embeds it: core, driver, memory store, own executor;
    the pure modules, or the compiled ones of :func:`callsafe._fast.load` (``compiled``)."""
    executed: list[tuple[CallKey, Any]] = []
    seen: list[Observation] = []

    def executor(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None) -> None:
        executed.append((key, arguments))

    core_class, driver_class, store_class = (
        (Core, Driver, MemoryStore)
        if compiled is None
        else (
            compiled["callsafe.reference_impl.core"].Core,
            compiled["callsafe.reference_impl.driver"].Driver,
            compiled["callsafe.reference_impl.memory_store"].MemoryStore,
        )
    )
    core = core_class(trace.tools, trace.limits)
    driver = driver_class(
        core,
        store_class(),
        executor=executor,
        business_validator=_no_business_problem,
        observe=seen.append,
        step=lambda: 0,
        clock=time.time,
    )
    run, receive = driver.run, core.receive
    run(core.start())
    for ev in trace.events:
        run(receive(ev))
    return executed


def _target_run(target: Callable[[], ReferenceTarget], trace: Trace) -> list[tuple[CallKey, Any]]:
    run = run_trace(target(), trace)
    if run.errors:
        raise RuntimeError(f"{trace.name}: the target raised: {run.errors[:3]}")
    return [(o.key, o.arguments) for o in run.observations if isinstance(o, Executed)]


COMPILED = "core-compiled"


def compiled_modules() -> Mapping[str, ModuleType] | None:
    """The compiled core of ``make fast`` (:mod:`callsafe._fast`), or None when there is
    no usable build (:func:`compiled_skipped` says why)."""
    return None if _fast.unavailable() is not None else _fast.load()


def compiled_skipped() -> dict[str, str]:
    """``{"core-compiled": why}`` when the compiled variant cannot run, else empty."""
    why = _fast.unavailable()
    return {} if why is None else {COMPILED: why}


def _variants(trace: Trace, with_adaptive: bool) -> list[tuple[str, Runner]]:
    events = trace.events
    fast = compiled_modules()
    out: list[tuple[str, Runner]] = [
        ("floor", lambda: floor(events)),
        ("core", lambda: embedded_core(trace)),
        *([(COMPILED, lambda: embedded_core(trace, fast))] if fast is not None else []),
        ("target-memory", lambda: _target_run(lambda: ReferenceTarget("memory"), trace)),
        (
            "target-sqlite",
            lambda: _target_run(lambda: ReferenceTarget("sqlite", sqlite_synchronous="normal"), trace),
        ),
    ]
    if with_adaptive:
        out.append(("target-sqlite-adaptive", lambda: _target_run(lambda: ReferenceTarget("sqlite"), trace)))
    return out


def _check(trace: Trace, expected: dict[CallKey, Any], variants: Sequence[tuple[str, Runner]]) -> None:
    """Every variant executes exactly the expected calls with the expected arguments, and
    the harness run agrees with the model; else the timings would mean nothing."""
    for name, runner in variants:
        got = {k if isinstance(k, CallKey) else CallKey("acme", *k): v for k, v in runner()}
        if got != expected:
            missing = len(set(expected) - set(got))
            raise AssertionError(f"{trace.name}: {name} executed {len(got)} calls ({missing} expected ones missing)")
    run = run_trace(ReferenceTarget("memory"), trace)
    problems = conformance_problems(trace, run.observations, run.errors)
    if problems:
        raise AssertionError(f"{trace.name}: the reference run disagrees with the model: {problems[:3]}")


# ------------------------------------------------------------------------------------
# measuring and reporting
# ------------------------------------------------------------------------------------


class _Recorded:
    """A library variant's thunk that keeps its last result, so that the result of the last
    *timed* run is checked too (a library that mutated its input chunks on the first run
    would otherwise be timed doing something else)."""

    def __init__(self, run: Callable[[], list[tuple[str, Any]]]) -> None:
        self.run = run
        self.last: list[tuple[str, Any]] | None = None

    def __call__(self) -> list[tuple[str, Any]]:
        self.last = self.run()
        return self.last


def _check_library(trace: Trace, name: str, got: Sequence[tuple[str, Any]], want: dict[str, Any]) -> None:
    if libraries.by_call(got) != want:
        wrong = sum(1 for call, value in libraries.by_call(got).items() if want.get(call) != value)
        raise AssertionError(f"{trace.name}: {name} presented {len(got)} calls, {wrong} with other arguments")


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Everything alive now moved out of the collector's sight while measuring.

    :func:`~bench.common.best_of` collects garbage before every timed run; with the
    libraries imported (pydantic models by the thousand) and their chunk objects built, one
    full collection takes a good part of a second, and the benchmark would spend its time
    there. Freezing is a constant-time move of the collector's lists; frozen objects are
    still freed by reference counting, and unfreezing hands any cyclic garbage back to the
    collector. Timed runs are unaffected: the collector is off during them either way."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _warm_up(names: Sequence[str]) -> None:
    """One run of each library over a tiny stream, so that its first-use costs (imports,
    pydantic building validators on first use) are not charged to the first probe."""
    trace, expected = many_calls(2, per_response=2)
    want = {key.call: value for key, value in expected.items()}
    for name, run in libraries.prepare(trace, names):
        _check_library(trace, name, run(), want)


def _library_variants(
    trace: Trace, expected: dict[CallKey, Any], guard: TimeGuard, nbytes: int, names: Sequence[str], where: str | None
) -> tuple[list[tuple[str, _Recorded]], dict[str, Timing]]:
    """The library accumulators the guard still admits at this input, each run once untimed
    (collector off, as in a timed run): the run is checked against the expected arguments
    and is the guard's probe, by CPU time (wall time on a busy machine measures the
    neighbours). Returns the libraries to time, and the single runs of those the probe
    stopped (reported as such: one run, not a best of N)."""
    want = {key.call: value for key, value in expected.items()}
    admitted = [name for name in names if guard.admit(name, nbytes)]
    timed: list[tuple[str, _Recorded]] = []
    over: dict[str, Timing] = {}
    prepared = libraries.prepare(trace, admitted)
    with _frozen_heap():
        for name, run in prepared:
            gc.disable()
            c0, t0 = time.process_time_ns(), time.perf_counter_ns()
            got = run()
            t1, c1 = time.perf_counter_ns(), time.process_time_ns()
            gc.enable()
            _check_library(trace, name, got, want)
            if guard.record(name, nbytes, (c1 - c0) / 1e9, where):
                timed.append((name, _Recorded(run)))
            else:
                over[name] = Timing(t1 - t0, max(c1 - c0, 1))
    return timed, over


def _timed(
    trace: Trace,
    expected: dict[CallKey, Any],
    variants: Sequence[tuple[str, Runner]],
    libs: Sequence[tuple[str, _Recorded]],
    repeat: int,
) -> dict[str, Timing]:
    """Best of ``repeat`` over the reference variants and the libraries, interleaved; then
    the libraries' last timed results checked."""
    with _frozen_heap():
        best = best_of([*variants, *libs], repeat)
    want = {key.call: value for key, value in expected.items()}
    for name, recorded in libs:
        _check_library(trace, name, recorded.last or [], want)
    return best


@dataclass(frozen=True)
class _Many:
    calls: int
    responses: int
    fragments: int
    nbytes: int
    best: dict[str, Timing]
    parts: dict[str, Timing]  # the core's cost, taken apart (see _breakdown)
    stopped: dict[str, str]  # library -> why it was not timed
    single: frozenset[str]  # libraries in ``best`` by their one (stopping) probe run


def _measure_many(config: Config, names: Sequence[str]) -> _Many:
    calls = 20 if config.quick else 200
    trace, expected = many_calls(calls)
    variants = _variants(trace, with_adaptive=not config.quick)
    _check(trace, expected, variants)
    guard = TimeGuard(QUICK_LIBRARY_LIMIT_S if config.quick else LIBRARY_LIMIT_S)
    fragments = sum(1 for e in trace.events if isinstance(e, Fragment))
    nbytes = sum(len(e.text.encode()) for e in trace.events if isinstance(e, Fragment))
    libs, over = _library_variants(trace, expected, guard, nbytes, names, f"{calls} calls")
    repeat = 3 if config.quick else config.repeat
    best = _timed(trace, expected, variants, libs, repeat) | over
    responses = sum(1 for e in trace.events if isinstance(e, ResponseTerminal))
    with _frozen_heap():
        parts = _breakdown(calls, expected, repeat)
    return _Many(calls, responses, fragments, nbytes, best, parts, dict(guard.stopped), frozenset(over))


def _breakdown(calls: int, expected: dict[CallKey, Any], repeat: int) -> dict[str, Timing]:
    """The core's cost of the small calls taken apart: the same calls in one fragment
    each (the difference is the per-fragment path), the schema validation alone (what the
    core calls: :class:`SchemaCheck`, warmed past its compile threshold, so the compiled
    validator answers), the strict parse alone, and ``json.loads`` alone (the floor's parse)."""
    one, _ = many_calls(calls, fragments=1)
    values = list(expected.values())
    texts = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in values]
    check = _warmed(SchemaCheck(), values)
    fast = compiled_modules()
    compiled: list[tuple[str, Callable[[], object]]] = []
    if fast is not None:
        fast_check = _warmed(fast["callsafe.reference_impl.schema_check"].SchemaCheck(), values)
        compiled = [
            (f"{COMPILED}, 1 fragment per call", lambda: embedded_core(one, fast)),
            (f"{COMPILED}, schema validation", lambda: [fast_check(BOOK_MEETING, v) for v in values]),
        ]
    return best_of(
        [
            ("core, 1 fragment per call", lambda: embedded_core(one)),
            *compiled,
            ("schema validation", lambda: [check(BOOK_MEETING, v) for v in values]),
            ("strict parse", lambda: [strict_parse(t) for t in texts]),
            ("json.loads", lambda: [json.loads(t) for t in texts]),
        ],
        repeat,
    )


_Check = Callable[[ToolSpec, Any], str | None]


def _warmed(check: _Check, values: Sequence[Any]) -> _Check:
    """A :class:`SchemaCheck` (pure or compiled) past its compile threshold, so that the
    timed runs use the compiled validator, checked to accept every small call."""
    for _ in range(16):
        check(BOOK_MEETING, values[0])
    if any(check(BOOK_MEETING, v) is not None for v in values):
        raise AssertionError("the small calls must be valid for their schema")
    return check


@dataclass(frozen=True)
class _Growth:
    rows: list[tuple[int, int, dict[str, Timing]]]  # (bytes, fragments, best per variant run at that size)
    stopped: dict[str, str]  # library -> where and why it stopped
    single: frozenset[tuple[int, str]]  # (bytes, library) timed by its one (stopping) probe run


def _measure_growth(config: Config, names: Sequence[str]) -> _Growth:
    rows: list[tuple[int, int, dict[str, Timing]]] = []
    single: set[tuple[int, str]] = set()
    sizes = QUICK_GROW_SIZES if config.quick else GROW_SIZES
    guard = TimeGuard(QUICK_LIBRARY_LIMIT_S if config.quick else LIBRARY_LIMIT_S)
    for size in sizes:
        trace, expected, nbytes = growing_call(size)
        variants = _variants(trace, with_adaptive=False)
        if size == sizes[0] or size == sizes[-1]:
            _check(trace, expected, variants)
        libs, over = _library_variants(trace, expected, guard, nbytes, names, None)
        # large inputs take long and vary less: fewer repetitions keep the run short
        repeat = 3 if config.quick else (config.repeat if size <= 64 << 10 else max(2, config.repeat - 2))
        best = _timed(trace, expected, variants, libs, repeat) | over
        single.update((nbytes, name) for name in over)
        fragments = sum(1 for e in trace.events if isinstance(e, Fragment))
        rows.append((nbytes, fragments, best))
    return _Growth(rows, dict(guard.stopped), frozenset(single))


def _slope(points: Sequence[tuple[int, int]]) -> float:
    """Least-squares slope of log(time) against log(size) over ``(size, time)`` points:
    1 for linear, 2 for quadratic. A fit over several sizes is less noisy than two."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _verdict(slope: float, floor_slope: float) -> str:
    """Linear when time grows like size, or no faster than the floor's own (which also
    pays for memory traffic at large sizes); quadratic when it grows like size squared."""
    if slope < 1.25 or slope < floor_slope + 0.15:
        return "linear"
    if slope > 1.75:
        return "quadratic"
    return "superlinear"


def _breakdown_table(many: _Many) -> list[str]:
    """Where the core's time goes per small call (CPU), against the floor's; the compiled
    core beside the pure one when it ran, with its own (compiled) ``SchemaCheck``, which
    hands the same fastjsonschema validator (generated Python) the same values; the strict
    parse is the model's for both (the model is never compiled)."""
    per_call = {name: t.cpu / many.calls / 1e3 for name, t in many.parts.items()}
    floor = many.best["floor"].cpu / many.calls / 1e3
    extra = (many.fragments - many.calls) / many.calls  # fragments per call beyond the first
    parse = per_call["strict parse"]
    columns: list[list[tuple[str, float]]] = []
    for name in ("core", COMPILED):
        if name not in many.best:
            continue
        schema = per_call["schema validation" if name == "core" else f"{COMPILED}, schema validation"]
        whole = many.best[name].cpu / many.calls / 1e3
        one = per_call[f"{name}, 1 fragment per call"]
        fragment = max(whole - one, 0.0) / extra if extra else 0.0
        columns.append(
            [
                (f"{FRAGMENTS_PER_CALL} fragments ({fragment * 1e3:.0f} ns each)", FRAGMENTS_PER_CALL * fragment),
                ("schema validation (the core's `SchemaCheck`, fastjsonschema warmed)", schema),
                ("strict parse (`json.loads` alone: " + f"{per_call['json.loads']:.1f} us)", parse),
                ("the rest: open, terminal, claim, ledger, status, effects, store", one - schema - parse - fragment),
                (f"{name}, total", whole),
            ]
        )
    header = ["part", "CPU us/call", "share", "against the whole floor"]
    tables = []
    for name, rows in zip(("core", COMPILED), columns, strict=False):
        whole = rows[-1][1]
        table = [[what, f"{us:.1f}", f"{us / whole * 100:.0f}%", fmt_ratio(us / floor)] for what, us in rows]
        tables += [f"**{name}**:", "", markdown_table(header, table), ""]
    return [
        f"Where the core's time goes, per call (CPU; the floor spends {floor:.1f} us per call, "
        f"{many.best['floor'].cpu / many.fragments:.0f} ns per fragment):",
        "",
        *tables[:-1],
    ]


SINGLE = " †"  # marks a time that is one run (the probe that stopped a library), not a best of N
_SINGLE_NOTE = f"{SINGLE.strip()}: one run only, the untimed check run on which the time guard stopped the library."


def _not_timed(stopped: dict[str, str], skipped: dict[str, str], single: bool) -> list[str]:
    lines = [f"- **{name}**: {why}" for name, why in stopped.items()]
    lines += [f"- **{name}**: skipped, {why}" for name, why in skipped.items()]
    note = [_SINGLE_NOTE, ""] if single else []
    return ["Not timed further:", "", *lines, "", *note] if lines else note


def _many_lines(many: _Many, skipped: dict[str, str], ratios: dict[str, float]) -> list[str]:
    floor = many.best["floor"]
    lines = [
        f"### Many small calls: {many.calls} calls x {FRAGMENTS_PER_CALL} fragments, {CALLS_PER_RESPONSE} calls "
        f"per response ({many.responses} responses, {many.fragments} fragments, {many.nbytes} bytes of arguments)",
        "",
    ]
    rows = []
    for name, t in many.best.items():
        ratios[f"many/{name}"] = t.wall / floor.wall
        ratios[f"many/{name}@cpu"] = t.cpu / floor.cpu
        rows.append(
            [
                name + (SINGLE if name in many.single else ""),
                f"{t.wall / 1e6:.2f}",
                f"{t.cpu / many.calls / 1e3:.1f}",
                f"{t.cpu / many.fragments:.0f}",
                fmt_ratio(t.wall / floor.wall),
                fmt_ratio(t.cpu / floor.cpu),
            ]
        )
    header = ["variant", "wall ms", "CPU us/call", "CPU ns/fragment", "ratio (wall)", "ratio (CPU)"]
    lines += [markdown_table(header, rows), ""]
    lines += _not_timed(many.stopped, skipped, bool(many.single))
    return [*lines, *_breakdown_table(many)]


def _growth_lines(growth: _Growth, skipped: dict[str, str], ratios: dict[str, float]) -> list[str]:
    rows = growth.rows
    names = list(dict.fromkeys(n for _, _, best in rows for n in best))
    sizes = [size_label(nbytes) for nbytes, _, _ in rows]
    per_byte = [["fragments", *(str(f) for _, f, _ in rows)]]
    relative = []
    for name in names:
        marks = ["" if (nbytes, name) not in growth.single else SINGLE for nbytes, _, _ in rows]
        cells = [
            f"{best[name].cpu / nbytes:.1f}{mark}" if name in best else "-"
            for (nbytes, _, best), mark in zip(rows, marks, strict=True)
        ]
        per_byte.append([name, *cells])
        if name != "floor":
            rel = [
                f"{fmt_ratio(best[name].wall / best['floor'].wall)} / {fmt_ratio(best[name].cpu / best['floor'].cpu)}"
                f"{mark}"
                if name in best
                else "-"
                for (_, _, best), mark in zip(rows, marks, strict=True)
            ]
            relative.append([name, *rel])
    lines = [
        f"### One growing call: `write_file` arguments in {GROW_FRAGMENT}-character fragments, time per byte",
        "",
        "CPU ns per byte of arguments (`-`: not run at that size, the library was stopped before, see below):",
        "",
        markdown_table(["variant", *sizes], per_byte),
        "",
        "Ratio to the floor at each size, wall / CPU:",
        "",
        markdown_table(["variant", *sizes], relative),
        "",
        *_not_timed(growth.stopped, skipped, bool(growth.single)),
    ]
    slopes = []
    for name in names:
        measured = [(n, b) for n, _, b in rows if name in b]
        top = measured[-3:]
        if len(top) < 2:
            slopes.append([name, size_label(top[0][0]) if top else "-", "-", "-", "-", "stopped"])
            continue
        (n0, b0), (n1, b1) = top[0], top[-1]
        slope = _slope([(n, b[name].cpu) for n, b in top])
        wall_slope = _slope([(n, b[name].wall) for n, b in top])
        floor_slope = _slope([(n, b["floor"].cpu) for n, b in top])
        ratios[f"slope/{name}"] = slope
        ratios[f"slope/{name}@wall"] = wall_slope
        if name != "floor":
            ratios[f"grow/{name}"] = b1[name].wall / b1["floor"].wall
            ratios[f"grow/{name}@cpu"] = b1[name].cpu / b1["floor"].cpu
        flat = b1[name].cpu / n1 / (b0[name].cpu / n0)
        span = f"{size_label(n0)} - {size_label(n1)}"
        slopes.append([name, span, f"{slope:.2f}", f"{wall_slope:.2f}", f"{flat:.2f}", _verdict(slope, floor_slope)])
    lines += [
        "Growth: least-squares slope of log(time) against log(size) over each variant's 3 largest sizes (a stopped",
        "library's stopping run included; 1 = linear, 2 = quadratic), and CPU time per byte at the largest of them",
        "over CPU time per byte at the smallest (1 = flat). The verdict reads the CPU slope against the floor's over",
        "the same sizes.",
        "",
        markdown_table(["variant", "sizes", "slope (CPU)", "slope (wall)", "ns/B ratio", "verdict"], slopes),
    ]
    return lines


def _largest(growth: _Growth, name: str) -> tuple[int, dict[str, Timing]] | None:
    """The largest size ``name`` ran at in the growing-call shape, with that size's timings."""
    at = [(nbytes, best) for nbytes, _, best in growth.rows if name in best]
    return at[-1] if at else None


# The reference as compared with each library: embedded (core + memory store), through the
# harness's target wrapper, and over SQLite (synchronous=NORMAL: the growing call runs no
# other setting; on many small calls the shipped "adaptive" adds an fsync per claim, see
# the first table).
_REFS: Final = ("core", "target-memory", "target-sqlite")


def _durable_verdicts(sqlite_cpu: dict[str, dict[str, float]]) -> list[str]:
    """Per shape, the libraries the SQLite-backed reference is slower than, by CPU
    (``sqlite_cpu``: shape -> library -> target-sqlite / library): the target names the
    reference implementation with either store, and a durable store is part of what it
    does more than a library (a claim and a decision written per call)."""
    out = []
    for shape, label in (("many", "Many small calls"), ("grow", "One growing call")):
        cpu = sqlite_cpu.get(shape)
        if not cpu:
            continue
        slower = sorted((name for name, r in cpu.items() if r >= 1), key=lambda n: -cpu[n])
        if slower:
            which = ", ".join(f"{n} ({fmt_ratio(cpu[n])})" for n in slower)
            out.append(
                f"- {label}, with the SQLite store: **slower** than {which} by CPU time; faster than "
                f"the other {len(cpu) - len(slower)} libraries."
            )
        else:
            out.append(f"- {label}, with the SQLite store: faster than every library accumulator timed here.")
    return out


def _reference_vs_libraries(many: _Many, growth: _Growth, ratios: dict[str, float]) -> list[str]:
    """The reference (core, target-memory) over each library, on both shapes; and the
    headline per shape, ``ref-vs-fastest-lib/<shape>``: the largest core-over-library
    ratio, that is against the library the reference compares worst with (below 1: the
    reference is faster than every library timed). The growing call compares at the
    largest size each library ran."""
    worst: dict[str, tuple[float, float, str]] = {}  # shape -> (wall, cpu, library) of core / library
    sqlite_cpu: dict[str, dict[str, float]] = {}  # shape -> library -> target-sqlite / library, CPU

    def compare(shape: str, name: str, best: dict[str, Timing]) -> list[str]:
        lib = best[name]
        cells = []
        for ref in _REFS:
            wall, cpu = best[ref].wall / lib.wall, best[ref].cpu / lib.cpu
            ratios[f"{shape}/{ref}-vs-{name}"] = wall
            ratios[f"{shape}/{ref}-vs-{name}@cpu"] = cpu
            cells.append(f"{fmt_ratio(wall)} / {fmt_ratio(cpu)}")
        sqlite_cpu.setdefault(shape, {})[name] = ratios[f"{shape}/target-sqlite-vs-{name}@cpu"]
        core = (best["core"].wall / lib.wall, best["core"].cpu / lib.cpu, name)
        if shape not in worst or core[1] > worst[shape][1]:
            worst[shape] = core
        return cells

    rows = []
    for acc in libraries.ACCUMULATORS:
        name = acc.name
        at = _largest(growth, name)
        if name not in many.best and at is None:
            continue
        row = [name, *(compare("many", name, many.best) if name in many.best else ["-"] * len(_REFS))]
        if name in many.single:
            row[1:] = [cell + SINGLE for cell in row[1:]]
        if at is None:
            row += ["-"] * (1 + len(_REFS))
        else:
            mark = SINGLE if (at[0], name) in growth.single else ""
            row += [size_label(at[0]) + mark, *compare("grow", name, at[1])]
        rows.append(row)
    if not rows:
        return []
    header = ["library", *(f"many: {r}" for r in _REFS), "grow: at", *(f"grow: {r}" for r in _REFS)]
    lines = [
        "### The reference against each library accumulator",
        "",
        "Reference time over library time for the same streams, wall / CPU (below 1: the reference is faster);",
        "the growing call at the largest size the library ran (a library stopped by the time guard took longer",
        "than the guard allows at a size where the reference did not).",
        "",
        markdown_table(header, rows),
        "",
    ]
    for shape, label in (("many", "Many small calls"), ("grow", "One growing call")):
        if shape in worst:
            wall, cpu, name = worst[shape]
            ratios[f"ref-vs-fastest-lib/{shape}"] = wall
            ratios[f"ref-vs-fastest-lib/{shape}@cpu"] = cpu
            verdict = "faster than every library accumulator" if cpu < 1 else "**not** faster than every library"
            lines.append(
                f"- {label}: the core is {verdict} timed here, by CPU time; the closest is {name}: "
                f"core / {name} = {fmt_ratio(cpu)} CPU, {fmt_ratio(wall)} wall."
            )
    lines += _durable_verdicts(sqlite_cpu)
    lines += [
        "",
        "What each library does per chunk (timed from its prebuilt chunk objects to the final arguments):",
        "",
    ]
    lines += [
        f"- **{acc.name}** ({acc.distribution}, {acc.protocol}): {acc.per_chunk}."
        for acc in libraries.ACCUMULATORS
        if acc.name in many.best or _largest(growth, acc.name) is not None
    ]
    return lines


def run(config: Config) -> Section:
    """Both shapes. The section's headline ratios (against the floor) are
    ``many/<variant>`` and ``grow/<variant>`` (at the largest size the variant ran) by wall
    clock, the same with ``@cpu`` by CPU time, and ``slope/<variant>`` (log-log growth of CPU
    time over the variant's largest sizes; ``@wall`` by wall clock). The reference against
    each library: ``<shape>/<reference>-vs-<library>`` for the core, target-memory and
    target-sqlite (above 1: the reference is slower), and ``ref-vs-fastest-lib/<shape>``, the largest
    core-over-library ratio of the shape."""
    ratios: dict[str, float] = {}
    skipped = {**compiled_skipped(), **libraries.unavailable()}
    names = [acc.name for acc in libraries.ACCUMULATORS if acc.name not in skipped]
    _warm_up(names)
    many = _measure_many(config, names)
    growth = _measure_growth(config, names)
    lines = [
        f"## {TITLE}",
        "",
        "Variants: **floor** (append per key, one `json.loads` at the terminal event); **core** (Core + Driver +",
        "MemoryStore, as an application embeds it); **core-compiled** (the same, its hot modules compiled by",
        "mypyc: `make fast`, `callsafe._fast`; the pure core is the reference); **target-memory** /",
        '**target-sqlite** (ReferenceTarget through the harness runner; SQLite `synchronous="normal"`, and the',
        'default `"adaptive"` that fsyncs every dispatch claim); **lib-...**: the accumulators of openai, anthropic,',
        "langchain-core, pydantic-ai and litellm, each fed the same streams on its own wire protocol as its own",
        "chunk objects, built before timing (see the end of this section). Ratios are against the floor, by wall",
        "clock (`perf_counter_ns`) and by CPU time (`process_time_ns`), each the best of the repetitions. A library",
        f"whose single untimed run (the check of its result) takes more than {LIBRARY_LIMIT_S:.0f} s of CPU "
        f"({QUICK_LIBRARY_LIMIT_S} s with `--quick`), or is predicted to at the next size, is stopped there.",
        "",
    ]
    note = busy_note()
    if note:
        lines += [f"> {note}", ""]
    lines += _many_lines(many, skipped, ratios)
    lines += ["", *_growth_lines(growth, skipped, ratios)]
    lines += ["", *_reference_vs_libraries(many, growth, ratios)]
    return Section(NAME, TITLE, "\n".join(lines), ratios)
