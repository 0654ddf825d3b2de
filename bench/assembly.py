"""The assembly-cost benchmark: what the safe assembler costs over assembling naively.

Issue "Benchmarks", item 1: the reference implementation within 2x of a raw floor, and
linear in bytes, while doing strictly more checking.

The same event streams go through four (five) variants:

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

Two shapes:

* **many small calls**: ``calls`` calls (200) of about 200 bytes each in 22 fragments, one
  turn, a realistic schema (required fields, enum, pattern, array, no extra properties);
* **one growing call**: a ``write_file``-like call whose ``content`` (code text with
  quotes, backslashes, tabs, non-ASCII) grows from 1 KB to 1 MB in 16-character
  fragments; the table of time per byte against size shows whether a variant is linear
  (flat) or quadratic (growing with size).

Each variant's result is checked (outside the timed region) against the expected
arguments, and the harness runs against the model's oracle
(:func:`~callsafe.reference_impl.conformance.conformance_problems`), so a fast path that
broke something cannot look fast.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from bench.common import Config, Section, Timing, best_of, busy_note, markdown_table
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
GROW_FRAGMENT = 16  # characters per fragment in the growing call
GROW_SIZES = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20)
QUICK_GROW_SIZES = (1 << 10, 4 << 10, 16 << 10)

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


def many_calls(calls: int, fragments: int = FRAGMENTS_PER_CALL) -> tuple[Trace, dict[CallKey, Any]]:
    """One turn, one response, ``calls`` calls one after the other, each in ``fragments``
    fragments; and the arguments each must execute with."""
    events: list[Event] = [TurnStarted(turn="t1", actor="u1", tenant="acme")]
    expected: dict[CallKey, Any] = {}
    for c in range(calls):
        item, call = f"i{c}", f"call_{c}"
        text = _small_arguments(c)
        events.append(CallOpened(turn="t1", response="r1", item=item, call=call, tool="book_meeting"))
        for p, part in enumerate(_split(text, fragments)):
            events.append(Fragment(turn="t1", response="r1", item=item, call=call, position=p, text=part))
        events.append(CallTerminal(turn="t1", response="r1", item=item, call=call, event_id=f"ev-{c}"))
        expected[CallKey("acme", "t1", "r1", item, call)] = json.loads(text)
    events.append(ResponseTerminal(turn="t1", response="r1"))
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


def embedded_core(trace: Trace) -> list[tuple[CallKey, Any]]:
    """The core as an application embeds it: core, driver, memory store, own executor."""
    executed: list[tuple[CallKey, Any]] = []
    seen: list[Observation] = []

    def executor(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None) -> None:
        executed.append((key, arguments))

    core = Core(trace.tools, trace.limits)
    driver = Driver(
        core,
        MemoryStore(),
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


def _variants(trace: Trace, with_adaptive: bool) -> list[tuple[str, Runner]]:
    events = trace.events
    out: list[tuple[str, Runner]] = [
        ("floor", lambda: floor(events)),
        ("core", lambda: embedded_core(trace)),
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


@dataclass(frozen=True)
class _Many:
    calls: int
    fragments: int
    nbytes: int
    best: dict[str, Timing]
    parts: dict[str, Timing]  # the core's cost, taken apart (see _breakdown)


def _measure_many(config: Config) -> _Many:
    calls = 20 if config.quick else 200
    trace, expected = many_calls(calls)
    variants = _variants(trace, with_adaptive=not config.quick)
    _check(trace, expected, variants)
    repeat = 3 if config.quick else config.repeat
    best = best_of(variants, repeat)
    fragments = sum(1 for e in trace.events if isinstance(e, Fragment))
    nbytes = sum(len(e.text.encode()) for e in trace.events if isinstance(e, Fragment))
    return _Many(calls, fragments, nbytes, best, _breakdown(calls, expected, repeat))


def _breakdown(calls: int, expected: dict[CallKey, Any], repeat: int) -> dict[str, Timing]:
    """The core's cost of the small calls taken apart: the same calls in one fragment
    each (the difference is the per-fragment path), the schema validation alone (the
    validator the core caches: jsonschema's ``is_valid``), the strict parse alone, and
    ``json.loads`` alone (the floor's parse)."""
    one, _ = many_calls(calls, fragments=1)
    values = list(expected.values())
    texts = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in values]
    validator = jsonschema.validators.validator_for(BOOK_MEETING.schema)(BOOK_MEETING.schema)
    if not all(validator.is_valid(v) for v in values):
        raise AssertionError("the small calls must be valid for their schema")
    return best_of(
        [
            ("core, 1 fragment per call", lambda: embedded_core(one)),
            ("schema validation", lambda: [validator.is_valid(v) for v in values]),
            ("strict parse", lambda: [strict_parse(t) for t in texts]),
            ("json.loads", lambda: [json.loads(t) for t in texts]),
        ],
        repeat,
    )


def _measure_growth(config: Config) -> list[tuple[int, int, dict[str, Timing]]]:
    rows: list[tuple[int, int, dict[str, Timing]]] = []
    sizes = QUICK_GROW_SIZES if config.quick else GROW_SIZES
    for size in sizes:
        trace, expected, nbytes = growing_call(size)
        variants = _variants(trace, with_adaptive=False)
        if size == sizes[0] or size == sizes[-1]:
            _check(trace, expected, variants)
        # large inputs take long and vary less: fewer repetitions keep the run short
        repeat = 3 if config.quick else (config.repeat if size <= 64 << 10 else max(2, config.repeat - 2))
        best = best_of(variants, repeat)
        fragments = sum(1 for e in trace.events if isinstance(e, Fragment))
        rows.append((nbytes, fragments, best))
    return rows


def _fmt_ratio(value: float) -> str:
    return f"{value:.2f}x"


def _size(nbytes: int) -> str:
    return f"{nbytes / 1024:.0f} KiB" if nbytes < 1 << 20 else f"{nbytes / (1 << 20):.2f} MiB"


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
    """Where the core's time goes per small call (CPU), against the floor's."""
    per_call = {name: t.cpu / many.calls / 1e3 for name, t in many.parts.items()}
    core = many.best["core"].cpu / many.calls / 1e3
    floor = many.best["floor"].cpu / many.calls / 1e3
    one = per_call["core, 1 fragment per call"]
    extra = (many.fragments - many.calls) / many.calls  # fragments per call beyond the first
    fragment = max(core - one, 0.0) / extra if extra else 0.0
    schema, parse = per_call["schema validation"], per_call["strict parse"]
    rest = one - schema - parse - fragment
    rows: list[tuple[str, float]] = [
        (f"{FRAGMENTS_PER_CALL} fragments ({fragment * 1e3:.0f} ns each)", FRAGMENTS_PER_CALL * fragment),
        ("schema validation (jsonschema `is_valid`, validator cached)", schema),
        ("strict parse (`json.loads` alone: " + f"{per_call['json.loads']:.1f} us)", parse),
        ("the rest: open, terminal, claim, ledger, status, effects, store", rest),
    ]
    table = [[what, f"{us:.1f}", f"{us / core * 100:.0f}%", _fmt_ratio(us / floor)] for what, us in rows]
    table.append(["core, total", f"{core:.1f}", "100%", _fmt_ratio(core / floor)])
    return [
        f"Where the core's time goes, per call (CPU; the floor spends {floor:.1f} us per call, "
        f"{many.best['floor'].cpu / many.fragments:.0f} ns per fragment):",
        "",
        markdown_table(["part", "CPU us/call", "share", "against the whole floor"], table),
    ]


def run(config: Config) -> Section:
    """Both shapes. The section's headline ratios (against the floor) are
    ``many/<variant>`` and ``grow/<variant>`` (at the largest size) by wall clock,
    the same with ``@cpu`` by CPU time, and ``slope/<variant>`` (log-log growth of CPU
    time over the largest sizes; ``@wall`` by wall clock)."""
    ratios: dict[str, float] = {}
    many = _measure_many(config)
    floor = many.best["floor"]
    lines = [
        f"## {TITLE}",
        "",
        "Variants: **floor** (append per key, one `json.loads` at the terminal event); **core** (Core + Driver +",
        "MemoryStore, as an application embeds it); **target-memory** / **target-sqlite** (ReferenceTarget through",
        'the harness runner; SQLite `synchronous="normal"`, and the default `"adaptive"` that fsyncs every dispatch',
        "claim). Ratios are against the floor, by wall clock (`perf_counter_ns`) and by CPU time",
        "(`process_time_ns`), each the best of the repetitions.",
        "",
    ]
    note = busy_note()
    if note:
        lines += [f"> {note}", ""]
    lines += [
        f"### Many small calls: {many.calls} calls x {FRAGMENTS_PER_CALL} fragments "
        f"({many.fragments} fragments, {many.nbytes} bytes of arguments)",
        "",
    ]
    rows = []
    for name, t in many.best.items():
        ratios[f"many/{name}"] = t.wall / floor.wall
        ratios[f"many/{name}@cpu"] = t.cpu / floor.cpu
        rows.append(
            [
                name,
                f"{t.wall / 1e6:.2f}",
                f"{t.cpu / many.calls / 1e3:.1f}",
                f"{t.cpu / many.fragments:.0f}",
                _fmt_ratio(t.wall / floor.wall),
                _fmt_ratio(t.cpu / floor.cpu),
            ]
        )
    header = ["variant", "wall ms", "CPU us/call", "CPU ns/fragment", "ratio (wall)", "ratio (CPU)"]
    lines.append(markdown_table(header, rows))
    lines += ["", *_breakdown_table(many)]

    growth = _measure_growth(config)
    names = list(growth[0][2])
    lines += [
        "",
        f"### One growing call: `write_file` arguments in {GROW_FRAGMENT}-character fragments, time per byte",
        "",
        "CPU ns per byte of arguments, and ratios to the floor as wall / CPU.",
        "",
    ]
    header = ["size", "fragments"] + [f"{n} ns/B" for n in names] + [f"{n} ratio" for n in names if n != "floor"]
    rows = []
    for nbytes, fragments, best in growth:
        per_byte = [f"{best[n].cpu / nbytes:.1f}" for n in names]
        rel = [
            f"{_fmt_ratio(best[n].wall / best['floor'].wall)} / {_fmt_ratio(best[n].cpu / best['floor'].cpu)}"
            for n in names
            if n != "floor"
        ]
        rows.append([_size(nbytes), str(fragments), *per_byte, *rel])
    lines.append(markdown_table(header, rows))
    top = growth[-3:]
    (n0, _, b0), (n1, _, b1) = top[0], top[-1]
    floor_slope = _slope([(n, b["floor"].cpu) for n, _, b in top])
    slopes = []
    for name in names:
        slope = _slope([(n, b[name].cpu) for n, _, b in top])
        wall_slope = _slope([(n, b[name].wall) for n, _, b in top])
        ratios[f"slope/{name}"] = slope
        ratios[f"slope/{name}@wall"] = wall_slope
        if name != "floor":
            ratios[f"grow/{name}"] = b1[name].wall / b1["floor"].wall
            ratios[f"grow/{name}@cpu"] = b1[name].cpu / b1["floor"].cpu
        flat = b1[name].cpu / n1 / (b0[name].cpu / n0)
        slopes.append([name, f"{slope:.2f}", f"{wall_slope:.2f}", f"{flat:.2f}", _verdict(slope, floor_slope)])
    lines += [
        "",
        f"Growth from {_size(n0)} to {_size(n1)}: least-squares slope of log(time) against log(size) over the",
        f"{len(top)} largest sizes (1 = linear, 2 = quadratic), and CPU time per byte at {_size(n1)} over CPU time",
        f"per byte at {_size(n0)} (1 = flat). The verdict reads the CPU slope.",
        "",
        markdown_table(["variant", "slope (CPU)", "slope (wall)", "ns/B ratio", "verdict"], slopes),
    ]
    return Section(NAME, TITLE, "\n".join(lines), ratios)
