"""What every benchmark shares: timing, machine information, tables, the results file.

Why these rules:

* **best of N, side by side.** Each variant is timed ``repeat`` times with
  :func:`time.perf_counter_ns`, interleaved (floor, variant a, variant b, floor, ...), and
  the best time is kept: the minimum is the run least disturbed by the machine, and
  interleaving exposes every variant to the same drift (frequency scaling, a noisy
  neighbour).
* **wall and CPU.** Each run also records :func:`time.process_time_ns`: on a machine busier
  than its CPUs (the load average is printed), wall time includes waiting for a CPU, and
  the longer variant waits more, which inflates its ratio; CPU time does not wait. Wall
  time is the number that counts for I/O (an fsync is not CPU time), CPU time the one to
  trust on a busy machine; both are reported.
* **inputs built before timing.** The streams are plain lists of events, built once;
  the clock covers only delivering them.
* **ratios, not seconds.** A ratio against the floor measured in the same run is what
  carries over between machines; absolute times are printed for context only, and no
  benchmark ever asserts a time.
* **results as sections.** ``bench/RESULTS.md`` holds one section per benchmark between
  markers, so running one benchmark (``--only``) replaces its own section and keeps the
  others'.
"""

from __future__ import annotations

import gc
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "COUNT_SCHEMA",
    "Config",
    "Prepare",
    "Section",
    "Timing",
    "Work",
    "best_of",
    "best_of_prepared",
    "busy_note",
    "children_cpu_ns",
    "guard_turn",
    "machine_info",
    "markdown_table",
    "update_results",
]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Config:
    """How a benchmark should run: ``quick`` shrinks inputs and repetitions (for smoke
    tests; the numbers are then only indicative)."""

    quick: bool = False
    repeat: int = 5


@dataclass
class Section:
    """One benchmark's outcome: its markdown text, and its headline ratios by name (so
    callers and the smoke test can read them without parsing text)."""

    name: str
    title: str
    markdown: str
    ratios: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    """The best wall time and the best CPU time of a variant, in ns (each the minimum
    over the repetitions, so they may come from different runs)."""

    wall: int
    cpu: int


def best_of(variants: Sequence[tuple[str, Callable[[], object]]], repeat: int) -> dict[str, Timing]:
    """Best wall and CPU time of each ``(name, thunk)``, run ``repeat`` times, interleaved:
    :func:`best_of_prepared` for work that can run again as it is (nothing to prepare).

    The garbage collector is collected before and disabled during each timed call: a
    collection triggered by one variant's garbage would otherwise be charged to whichever
    variant happens to run next."""

    def ready(thunk: Callable[[], object]) -> Prepare:
        def work() -> int:
            thunk()
            return 0

        @contextmanager
        def prepare() -> Iterator[Work]:
            yield work

        return prepare

    return best_of_prepared([(name, ready(thunk)) for name, thunk in variants], repeat)


# The timed work: returns the CPU ns spent in processes that report their own (0 if none).
Work = Callable[[], int]
# Builds fresh state, yields the work, then checks and cleans up (all outside the clock).
Prepare = Callable[[], AbstractContextManager[Work]]


def children_cpu_ns() -> int:
    """User and system CPU of every child process this process has waited for, in ns."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((usage.ru_utime + usage.ru_stime) * 1e9)


def best_of_prepared(
    variants: Sequence[tuple[str, Prepare]], repeat: int, *, keep_gc: bool = False
) -> dict[str, Timing]:
    """Best wall and CPU time of each ``(name, prepare)``, ``repeat`` times, interleaved.

    Why a preparation, where :func:`best_of` has a thunk that can run again as it is: a
    durable store cannot: deciding the same calls twice in one database is a replay (every
    claim is refused), not a measurement; and a certification with ``workers=2`` spends most of
    its CPU in worker processes that ``process_time`` of this process never sees. So here each
    variant is a *preparation*: a context manager that builds fresh state (a new database file,
    a new schema, replica processes told what to do) outside the clock and yields the work to
    time; its exit (also outside the clock) checks what the work did and cleans up. The rules of
    this module hold otherwise: repetitions interleaved across variants, the garbage
    collector collected before each timed run, the minimum of wall and of CPU time kept.

    The collector is disabled during a run unless ``keep_gc``: a short run must not pay for a
    collection that the previous variant's garbage triggered; a run of many seconds that
    allocates all along (a whole certification) keeps it, because its memory would otherwise
    grow without bound, and collecting is part of what such a run costs.

    CPU time counts every process that worked: this one (``process_time``), the child
    processes it started and waited for during the run (``RUSAGE_CHILDREN``: a pool of workers
    that ``certify`` joins before it returns), and processes that outlive the run and report
    their own CPU time (the work returns it: long-lived replica processes).
    """
    wall: dict[str, int] = {name: sys.maxsize for name, _ in variants}
    cpu: dict[str, int] = dict(wall)
    enabled = gc.isenabled()
    try:
        for _ in range(repeat):
            for name, prepare in variants:
                with prepare() as work:
                    gc.collect()
                    if not keep_gc:
                        gc.disable()
                    k0, c0, t0 = children_cpu_ns(), time.process_time_ns(), time.perf_counter_ns()
                    elsewhere = work()
                    t1, c1, k1 = time.perf_counter_ns(), time.process_time_ns(), children_cpu_ns()
                    if enabled:
                        gc.enable()
                wall[name] = min(wall[name], t1 - t0)
                cpu[name] = min(cpu[name], (c1 - c0) + (k1 - k0) + elsewhere)
    finally:
        if enabled:
            gc.enable()
        else:  # pragma: no cover - only when a caller disabled it
            gc.disable()
    return {name: Timing(wall[name], max(cpu[name], 1)) for name, _ in variants}


def busy_note() -> str | None:
    """A warning when the machine has more runnable work than CPUs (wall-clock ratios are
    then inflated by waiting); None when it does not, or cannot tell."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - platforms without a load average
        return None
    cpus = os.cpu_count() or 1
    if load <= cpus:
        return None
    return (
        f"The machine was busy (load average {load:.1f} on {cpus} CPUs): wall-clock ratios include waiting for a CPU"
        " and are inflated; read the CPU-time ratios."
    )


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or platform.machine()
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return m.group(1).strip() if m else (platform.processor() or platform.machine())


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1, 5, 15 min)"
    except OSError:  # pragma: no cover - platforms without a load average
        return "unknown"


def machine_info() -> list[tuple[str, str]]:
    """What a reader needs to compare two results files: CPU, OS, interpreter, the
    libraries on the measured path, and the code's revision."""
    import sqlite3

    return [
        ("cpu", f"{_cpu_model()} ({os.cpu_count()} logical CPUs)"),
        ("os", platform.platform()),
        ("python", f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"),
        ("jsonschema", _version("jsonschema")),
        ("sqlite", sqlite3.sqlite_version),
        ("load average", _load()),
        ("revision", _git_revision()),
    ]


def fmt_ratio(value: float) -> str:
    """A ratio for people: two decimals, but never rounded to ``0.00x``. A library that is
    hundreds of times slower gives ratios like 0.0031x, and printing those as zero would hide
    the very comparison the table is for (and a reader could not tell it from a failed run)."""
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.2f}x"
    return f"{value:.2g}x"


def ratio_line(ratios: dict[str, float]) -> str:
    """The machine-readable ``ratios:`` line, with four significant digits so that a small
    ratio keeps its value instead of being rounded to 0."""
    return "ratios: " + ", ".join(f"{k}={v:.4g}" for k, v in ratios.items())


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table, columns padded so that it also reads well as plain text."""
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    out = [line(cells[0]), "| " + " | ".join("-" * w for w in widths) + " |"]
    out.extend(line(r) for r in cells[1:])
    return "\n".join(out)


_HEADER_END = "<!-- end of header -->"


def _marker(name: str, end: bool = False) -> str:
    return f"<!-- {'/' if end else ''}bench:{name} -->"


def update_results(path: Path, header: str, sections: Sequence[Section]) -> None:
    """Write ``sections`` into the results file at ``path``: each replaces its own
    previous section (between its markers) or is appended; other sections stay. The
    header (machine, command) is replaced with ``header``."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    body = old.split(_HEADER_END, 1)[1] if _HEADER_END in old else ""
    for section in sections:
        block = f"{_marker(section.name)}\n{section.markdown.rstrip()}\n{_marker(section.name, end=True)}"
        start, end = body.find(_marker(section.name)), body.find(_marker(section.name, end=True))
        if 0 <= start < end:
            body = body[:start] + block + body[end + len(_marker(section.name, end=True)) :]
        else:
            body = body.rstrip() + "\n\n" + block + "\n"
    path.write_text(header.rstrip() + "\n\n" + _HEADER_END + "\n" + body.lstrip("\n").rstrip() + "\n", encoding="utf-8")


# The one tool of the guard benchmarks (bench.memory, bench.replicas): a call's arguments
# are ``{"n": <its index in the turn>}``.
COUNT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def guard_turn(guard: Any, turn_id: str, calls: int, *, conversation: str) -> int:
    """One turn of ``calls`` complete calls of the ``count`` tool (:data:`COUNT_SCHEMA`) in
    one response, through a :class:`callsafe.guard.Guard`: the loop the guard benchmarks
    share. Each call is opened, sent in two fragments and ended with a terminal event id
    unique to the turn and call; then the response ends. How many calls were handed over
    (run, in executor mode).

    Events are delivered as the abstract events (``Guard.deliver``), not as provider
    payloads: the parsers keep nothing per stream once it ends, and the guard and its store
    are what is measured."""
    from callsafe.model.vocabulary import CallOpened, CallTerminal, Fragment, ResponseTerminal

    response = f"{turn_id}-r"
    guard.turn(turn_id, "alice", "acme", conversation=conversation)
    ran = 0
    for c in range(calls):
        text = f'{{"n": {c}}}'
        call, item = f"call_{c}", str(c)
        guard.deliver(CallOpened(turn_id, response, item, call, "count"))
        guard.deliver(Fragment(turn_id, response, item, call, 0, text[:3]))
        guard.deliver(Fragment(turn_id, response, item, call, 1, text[3:]))
        ran += len(guard.deliver(CallTerminal(turn_id, response, item, call, f"{turn_id}-{call}", "completed")))
    guard.deliver(ResponseTerminal(turn_id, response, "completed"))
    return ran
