"""The certification-throughput benchmark: traces per second, run and judged against the
reference implementation (its memory store, and its SQLite store in memory and in a file per
trace), in one process and with two workers; and ``callsafe certify reference``'s default run
against the same run over a file per trace, the setup it had before (issue 20, item 1).

Issue "Benchmarks", item 3. Every variant judges the same traces: ``callsafe certify``'s
default generators (catalog, coverage, synthesis, 200 walks, exhaustive), the exhaustive one
at depth 2 rather than 3 (see :data:`FULL_OPTIONS`; ``--quick``: the catalog and 20 walks).
Both stores declare the same capabilities, so the harness plans the same traces for them,
and the generators are deterministic; each run is checked after the clock stops (every
trace ran, nothing violated, no target error), so a variant that skipped work cannot look
fast.

* **floor: the oracle alone.** The model judges each trace (:func:`callsafe.model.oracle.judge`:
  its verdicts and lifecycle steps), with no target. A certification cannot do less per
  trace, so the ratio to it is what running a real target and judging its observations
  costs beyond the model.
* **in process** (:func:`callsafe.certify.harness.run_traces`, traces listed beforehand,
  :data:`CHUNK` at a time):
  oracle, a fresh target per trace, the run through the harness's spies, judging the
  observations, over the memory store, over SQLite in memory (``reference``: a database per
  trace, lent and emptied, :mod:`callsafe.targets.reference`) and over a SQLite file per trace
  (``reference:sqlite``, what ``reference`` ran before: ``synchronous="adaptive"``, an fsync
  per dispatch claim and per stop, a checkpoint at every close).
* **certify, end to end** (:func:`callsafe.certify.harness.certify`, what ``callsafe
  certify`` runs, minimisation off): generation, partitions, judging and bookkeeping, with
  ``workers=1`` and ``workers=2``. Two workers are a pool of spawned processes, so their
  CPU time is counted with this process's. The pool's fixed cost (spawn two interpreters,
  import the harness, build a target, shut down) is measured on its own; subtracting it
  gives an upper bound of the speed-up without it (the parent plans while the workers start).

* **the default run** (not with ``--quick``): ``callsafe certify reference`` with its default
  options (exhaustive depth 3, 5,972 traces) against the same run over a file per trace
  (``reference:sqlite``), side by side, :data:`DEFAULT_REPEAT` rounds: the Done-when of issue 20
  ("at least 5x faster than the as-shipped setup"). On a shared machine the file setup's wall
  time is mostly waiting for the disk, so it moves from run to run more than the CPU time.
* **the default run, whole** (issue 36): ``python -m callsafe certify reference --report DIR
  --junit DIR/junit.xml`` as a fresh process, :data:`DEFAULT_REPEAT` rounds interleaved with the
  in-process runs, its CPU time read with :func:`os.wait4` (that child's alone): start-up,
  imports, planning, the z3 synthesis, the runs and the reports, what a user waits for.
* **the concrete domain, before and after** (issue 16, item 5): the default certification
  (what ``callsafe certify reference:memory`` runs: depth 3, 200 walks, minimisation on,
  which finds nothing to minimise on the reference) with the plain domain of old
  (``--domain plain``: one tenant, one tool, ``{"v":100}``, roomy caps) and with the rich
  domain (:mod:`callsafe.generators.domain`), side by side; and the same pair over
  ``reference`` (SQLite in memory: what ``make certify`` runs).
  The rich domain must stay within 2x (``domain/...`` ratios: rich over plain, wall).

The coverage suite (a graph search) and the z3-synthesised traces are built once per
process and cached by the harness; the timed runs find them built, and the one-off cost of
building them (what a fresh ``callsafe certify`` process pays once) is printed apart.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import (
    Config,
    Prepare,
    Section,
    Timing,
    Work,
    best_of_prepared,
    busy_note,
    fmt_ratio,
    markdown_table,
)
from callsafe.certify.harness import Certification, Options, certify, plan_partitions, run_traces
from callsafe.certify.targets import describe, resolve_target
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import Trace

__all__ = ["NAME", "TITLE", "run"]

NAME = "throughput"
TITLE = "Certification throughput: traces per second against the reference implementation"

# label -> (spec, ratio key)
TARGETS = {
    "memory": ("reference:memory", "memory"),
    "SQLite in memory": ("reference", "sqlite-ram"),
    "SQLite file": ("reference:sqlite", "sqlite-file"),
}
DEFAULT_SPECS = {
    "default run: certify reference (SQLite in memory)": "reference",
    "default run: certify reference:sqlite (a file per trace, as shipped before)": "reference:sqlite",
}
DEFAULT_REPEAT = 2  # the file setup's default run takes about half a minute on a quiet disk
QUICK_OPTIONS = Options(generators=("catalog", "walks"), walks=20, minimize=False)
# Every default generator, the exhaustive one at depth 2 (620 traces): at the default depth 3
# (5972 traces) one run against SQLite as shipped takes minutes (an fsync per claim), and a
# benchmark that runs it a dozen times would occupy a shared machine's disk for an hour.
FULL_OPTIONS = Options(depth=2, minimize=False)
# What `callsafe certify` runs by default, and the same with the domain of old.
DEFAULT_OPTIONS = Options()
QUICK_DOMAIN_OPTIONS = Options(generators=("coverage", "walks"), walks=40)
CHUNK = 256  # traces per run_traces call in process: the harness's partition size
WORKERS = 2


def _list_traces(options: Options, spec: str) -> list[Trace]:
    """The traces a certification of ``spec`` with ``options`` runs, in its order."""
    factory = resolve_target(spec)
    info = describe(factory, spec)
    return [trace for partition in plan_partitions(options, info, {}, None) for trace in partition.traces()]


def _same_traces(options: Options) -> None:
    """Both stores must be planned the same traces, else their times are not comparable."""
    infos = [describe(resolve_target(spec), spec) for spec, _ in TARGETS.values()]
    if len({(i.protocol, i.capabilities) for i in infos}) != 1:
        raise AssertionError("the memory and SQLite targets declare different capabilities: different traces")


# ------------------------------------------------------------------------------------
# variants: each a preparation whose exit checks what the timed run did
# ------------------------------------------------------------------------------------


def _timed(run: Callable[[], Any], check: Callable[[Any], None]) -> Prepare:
    """A variant that needs no fresh state: run, keep the result, check it after the clock."""

    @contextmanager
    def prepare() -> Iterator[Work]:
        kept: list[Any] = []

        def work() -> int:
            kept.append(run())
            return 0

        yield work
        check(kept[0])

    return prepare


def _check_listed(expected: int) -> Callable[[Any], None]:
    def check(traces: list[Trace]) -> None:
        if len(traces) != expected:
            raise AssertionError(f"listing the traces again gave {len(traces)}, not {expected}")

    return check


def _oracle(traces: Sequence[Trace]) -> Callable[[], int]:
    """The floor: the model's verdicts for each trace, counted (not kept, as above)."""

    def run() -> int:
        judged = 0
        for trace in traces:
            judge(trace)
            judged += 1
        return judged

    return run


def _check_oracle(expected: int) -> Callable[[Any], None]:
    def check(judged: int) -> None:
        if judged != expected:
            raise AssertionError(f"the oracle judged {judged} traces, not {expected}")

    return check


def _in_process(spec: str, traces: Sequence[Trace]) -> Callable[[], tuple[int, list[str]]]:
    """Run and judge ``traces`` here, :data:`CHUNK` at a time, keeping only a summary (the
    traces that ran; those violated or with target errors): holding every run's
    observations until the end would make each garbage collection slower than the last,
    which a certification, which summarises as it goes, does not pay."""

    def run() -> tuple[int, list[str]]:
        ran, bad = 0, []
        for start in range(0, len(traces), CHUNK):
            for checked in run_traces(spec, traces[start : start + CHUNK]):
                if checked.missing:
                    continue
                ran += 1
                if checked.violated or (checked.run is not None and checked.run.errors):
                    bad.append(checked.trace.name)
        return ran, bad

    return run


def _check_in_process(label: str, expected: int) -> Callable[[Any], None]:
    def check(summary: tuple[int, list[str]]) -> None:
        ran, bad = summary
        if ran != expected or bad:
            raise AssertionError(f"{label}: {ran} of {expected} traces ran; violated or errors: {bad[:3]}")

    return check


def _check_certification(label: str, expected: int) -> Callable[[Any], None]:
    def check(cert: Certification) -> None:
        if cert.traces_run != expected or not cert.ok or cert.errors or cert.budget_exhausted:
            raise AssertionError(
                f"{label}: {cert.traces_run} of {expected} traces ran, violated {cert.violated}, "
                f"errors {cert.errors[:3]}"
            )

    return check


def _ready(spec: str, queue: Any) -> None:
    """A pool worker's fixed cost: import the harness and resolve the target (the harness's
    worker initialiser), and build one target (the imports its first trace would pay)."""
    import callsafe.certify.harness  # noqa: F401  (what a worker imports to run partitions)

    describe(resolve_target(spec), spec)
    queue.put(os.getpid())


def _pool_cycle(spec: str) -> Prepare:
    """Start a pool of spawned workers, wait until every one is ready, shut it down."""

    @contextmanager
    def prepare() -> Iterator[Work]:
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        pids: set[int] = set()

        def work() -> int:
            pool = ctx.Pool(WORKERS, initializer=_ready, initargs=(spec, queue))
            try:
                pids.update(queue.get(timeout=300) for _ in range(WORKERS))
            finally:
                pool.close()
                pool.join()
            return 0

        yield work
        queue.close()
        if len(pids) != WORKERS:
            raise AssertionError(f"{len(pids)} of {WORKERS} pool workers started")

    return prepare


# ------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------


def _rate(n: int, ns: int) -> str:
    return f"{n / (ns / 1e9):.0f}"


def _in_process_table(best: dict[str, Timing], names: Sequence[str], n: int, floor: Timing) -> str:
    rows = []
    for name in names:
        t = best[name]
        rows.append(
            [
                name,
                f"{t.wall / 1e9:.2f}",
                f"{t.cpu / 1e9:.2f}",
                _rate(n, t.wall),
                f"{t.cpu / n / 1e3:.0f}",
                fmt_ratio(t.wall / floor.wall),
                fmt_ratio(t.cpu / floor.cpu),
            ]
        )
    header = ["variant", "wall s", "CPU s", "traces/s (wall)", "CPU us/trace", "ratio (wall)", "ratio (CPU)"]
    return markdown_table(header, rows)


def run(config: Config) -> Section:
    """Headline ratios (time per trace; ``@cpu`` by CPU time; ``<store>`` is ``memory``,
    ``sqlite-ram`` or ``sqlite-file``): ``inprocess/<store>`` against the oracle alone;
    ``sqlite-ram-over-memory`` and ``sqlite-file-over-ram`` (in process);
    ``certify/<store>-w1`` and ``certify/<store>-w2`` against the oracle alone;
    ``speedup/<store>`` (workers=1 wall over workers=2 wall, >1 is faster) and
    ``speedup/<store>-no-startup`` (the pool's start-up subtracted); without ``--quick``,
    ``default/file-over-ram``: the default run over a file per trace over the same run in
    memory (>1: the in-memory setup is faster)."""
    options = QUICK_OPTIONS if config.quick else FULL_OPTIONS
    repeat = 2 if config.quick else min(config.repeat, 3)  # a full run takes a minute: 3 are enough
    _same_traces(options)
    started = time.perf_counter()
    traces = _list_traces(options, TARGETS["memory"][0])  # builds (and caches) coverage and synthesis
    cold = time.perf_counter() - started
    n = len(traces)

    variants: list[tuple[str, Prepare]] = [
        (
            "generation alone (listing the traces)",
            _timed(lambda: _list_traces(options, TARGETS["memory"][0]), _check_listed(n)),
        ),
        ("floor: the oracle alone", _timed(_oracle(traces), _check_oracle(n))),
    ]
    for store, (spec, _) in TARGETS.items():
        label = f"in process, {store}"
        variants.append((label, _timed(_in_process(spec, traces), _check_in_process(label, n))))
    for store, (spec, _) in TARGETS.items():
        for workers in (1, WORKERS):
            label = f"certify, {store}, workers={workers}"
            opts = replace(options, workers=workers)
            variants.append((label, _timed(functools.partial(certify, spec, opts), _check_certification(label, n))))
    pool = f"pool of {WORKERS} spawned workers: start and shut down"
    variants.append((pool, _pool_cycle(TARGETS["memory"][0])))
    domain_pairs = _domain_pairs(config.quick)
    for label, spec, opts, count in domain_pairs:
        variants.append((label, _timed(functools.partial(certify, spec, opts), _check_certification(label, count))))
    best = best_of_prepared(variants, repeat, keep_gc=True)
    floor = best["floor: the oracle alone"]

    ratios: dict[str, float] = {}
    for store, (_, key) in TARGETS.items():
        t = best[f"in process, {store}"]
        ratios[f"inprocess/{key}"] = t.wall / floor.wall
        ratios[f"inprocess/{key}@cpu"] = t.cpu / floor.cpu
    mem, ram, disk = (best[f"in process, {store}"] for store in TARGETS)
    ratios["sqlite-ram-over-memory"] = ram.wall / mem.wall
    ratios["sqlite-ram-over-memory@cpu"] = ram.cpu / mem.cpu
    ratios["sqlite-file-over-ram"] = disk.wall / ram.wall
    ratios["sqlite-file-over-ram@cpu"] = disk.cpu / ram.cpu
    startup = best[pool]
    speed_rows = []
    for store, (_, key) in TARGETS.items():
        one, two = best[f"certify, {store}, workers=1"], best[f"certify, {store}, workers={WORKERS}"]
        ratios[f"certify/{key}-w1"] = one.wall / floor.wall
        ratios[f"certify/{key}-w1@cpu"] = one.cpu / floor.cpu
        ratios[f"certify/{key}-w{WORKERS}"] = two.wall / floor.wall
        ratios[f"certify/{key}-w{WORKERS}@cpu"] = two.cpu / floor.cpu
        ratios[f"speedup/{key}"] = one.wall / two.wall
        without = max(two.wall - startup.wall, 1)
        ratios[f"speedup/{key}-no-startup"] = one.wall / without
        speed_rows.append(
            [
                store,
                f"{_rate(n, one.wall)} / {_rate(n, two.wall)}",
                fmt_ratio(one.wall / two.wall),
                _rate(n, without),
                fmt_ratio(one.wall / without),
                f"{one.cpu / 1e9:.1f} / {two.cpu / 1e9:.1f}",
            ]
        )

    domain_rows = []
    for k in range(0, len(domain_pairs), 2):
        (plain_label, spec, opts, plain_n), (rich_label, _, _, rich_n) = domain_pairs[k : k + 2]
        plain, rich = best[plain_label], best[rich_label]
        key = f"domain/{'memory' if spec == TARGETS['memory'][0] else 'sqlite'}-depth{opts.depth}"
        ratios[key] = rich.wall / plain.wall
        ratios[f"{key}@cpu"] = rich.cpu / plain.cpu
        domain_rows.append(
            [
                f"`{spec}`, depth {opts.depth}, {opts.walks} walks",
                f"{plain_n} / {rich_n}",
                f"{plain.wall / 1e9:.2f} / {rich.wall / 1e9:.2f}",
                f"{plain.cpu / 1e9:.2f} / {rich.cpu / 1e9:.2f}",
                fmt_ratio(rich.wall / plain.wall),
                fmt_ratio(rich.cpu / plain.cpu),
            ]
        )

    generators = ", ".join(options.generators)
    lines = [f"## {TITLE}", ""]
    note = busy_note()
    if note:
        lines += [f"> {note}", ""]
    lines += [
        f"{n} traces: generators {generators} (depth {options.depth}, {options.walks} walks, seed {options.seed}),",
        "the same for every variant; every run checked afterwards (all traces ran, nothing violated, no target",
        f"error). Best of {repeat}, interleaved; CPU time includes the worker processes. Building the coverage suite",
        f"and the z3 traces the first time took {cold:.1f} s (once per process; cached in the timed runs).",
        "",
        "### In process, the traces listed beforehand",
        "",
        "Ratios are time per trace against the floor: the oracle alone (the model's verdicts, no target).",
        "",
        _in_process_table(
            best,
            [
                "floor: the oracle alone",
                *(f"in process, {store}" for store in TARGETS),
                "generation alone (listing the traces)",
            ],
            n,
            floor,
        ),
        "",
        f"SQLite in memory over the memory store: {fmt_ratio(ram.wall / mem.wall)} wall, "
        f"{fmt_ratio(ram.cpu / mem.cpu)} CPU (the same schema, statements and transactions as the file);",
        f"a SQLite file per trace over SQLite in memory: {fmt_ratio(disk.wall / ram.wall)} wall, "
        f"{fmt_ratio(disk.cpu / ram.cpu)} CPU (a file per trace, an fsync per claim and per stop).",
        "",
        "### `certify`, end to end: generation, runs, judging, bookkeeping",
        "",
        _in_process_table(best, [name for name, _ in variants if name.startswith("certify")], n, floor),
        "",
        f"Workers: traces/s with 1 and {WORKERS} workers (wall), the speed-up, and the same without the pool's fixed",
        f"cost: starting and stopping {WORKERS} spawned workers took {startup.wall / 1e9:.2f} s wall "
        f"({startup.cpu / 1e9:.2f} s CPU). The machine has {os.cpu_count()} CPUs.",
        "",
        markdown_table(
            [
                "store",
                f"traces/s, 1 / {WORKERS} workers",
                "speed-up",
                "traces/s without start-up",
                "speed-up without start-up",
                f"CPU s, 1 / {WORKERS} workers",
            ],
            speed_rows,
        ),
        "",
        "### The concrete domain: plain (before issue 16) against rich (now), side by side",
        "",
        "`certify` with `--domain plain` and with the default rich domain, everything else the same (the default",
        "generators; the target's report is built as `callsafe certify` builds it). Rich over plain must stay",
        "within 2x.",
        "",
        markdown_table(
            ["certification", "traces, plain / rich", "wall s", "CPU s", "rich / plain wall", "rich / plain CPU"],
            domain_rows,
        ),
    ]
    if not config.quick:
        lines += ["", *_default_run(ratios)]
    return Section(NAME, TITLE, "\n".join(lines), ratios)


def _default_run(ratios: dict[str, float]) -> list[str]:
    """``callsafe certify reference`` as a user runs it (default options), over SQLite in
    memory and over a file per trace, side by side; adds ``default/...`` ratios."""
    options = Options()
    n = len(_list_traces(options, "reference"))
    variants = [
        (label, _timed(functools.partial(certify, spec, options), _check_certification(label, n)))
        for label, spec in DEFAULT_SPECS.items()
    ]
    whole: list[Timing] = []
    best: dict[str, Timing] = {}
    for _ in range(DEFAULT_REPEAT):  # interleaved: a fresh process, then the in-process pair
        whole.append(whole_process(["reference"]))
        for label, t in best_of_prepared(variants, 1, keep_gc=True).items():
            kept = best.get(label, t)
            best[label] = Timing(min(kept.wall, t.wall), min(kept.cpu, t.cpu))
    ram, disk = (best[label] for label in DEFAULT_SPECS)
    fresh = Timing(min(t.wall for t in whole), min(t.cpu for t in whole))
    ratios["default/whole-over-inprocess"] = fresh.wall / ram.wall
    ratios["default/whole-over-inprocess@cpu"] = fresh.cpu / ram.cpu
    ratios["default/file-over-ram"] = disk.wall / ram.wall
    ratios["default/file-over-ram@cpu"] = disk.cpu / ram.cpu
    rows = [
        [label, f"{t.wall / 1e9:.2f}", f"{t.cpu / 1e9:.2f}", _rate(n, t.wall), f"{t.cpu / n / 1e3:.0f}"]
        for label, t in [*best.items(), (WHOLE_LABEL, fresh)]
    ]
    return [
        "### `callsafe certify reference`, the default run",
        "",
        f"Default options (exhaustive depth {options.depth}, {options.walks} walks, seed {options.seed}): {n} traces,",
        f"every run checked afterwards; best of {DEFAULT_REPEAT}, interleaved, one process.",
        "",
        markdown_table(["variant", "wall s", "CPU s", "traces/s (wall)", "CPU us/trace"], rows),
        "",
        f"SQLite in memory is **{fmt_ratio(disk.wall / ram.wall)}** faster than a file per trace (wall; "
        f"{fmt_ratio(disk.cpu / ram.cpu)} by CPU time).",
        "",
        "The whole process (`python -m callsafe certify reference --report DIR --junit DIR/junit.xml`, best of",
        f"{DEFAULT_REPEAT} by CPU: start-up, imports, planning, z3 synthesis, runs, reports) took "
        f"**{fresh.cpu / 1e9:.2f} s CPU** ({fresh.wall / 1e9:.2f} s wall): "
        f"{fmt_ratio(fresh.cpu / ram.cpu)} the in-process certification's CPU time.",
    ]


WHOLE_LABEL = "whole process: python -m callsafe certify reference --report DIR --junit DIR/junit.xml"


def whole_process(args: Sequence[str]) -> Timing:
    """``python -m callsafe certify ARGS --report DIR --junit DIR/junit.xml`` in a fresh
    interpreter: its wall time and its own CPU time (:func:`os.wait4`); raises unless it
    exits 0 (certified)."""
    import callsafe

    # the callsafe this process imported, whatever put it on the path
    path = [str(Path(callsafe.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    with tempfile.TemporaryDirectory(prefix="callsafe-bench-certify-") as tmp:
        cmd = [sys.executable, "-m", "callsafe", "certify", *args, "--report", tmp, "--junit", f"{tmp}/junit.xml"]
        with tempfile.TemporaryFile("w+") as out:
            t0 = time.perf_counter_ns()
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter_ns() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            text = out.read()
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{text[-3000:]}")
    return Timing(wall=wall, cpu=int((usage.ru_utime + usage.ru_stime) * 1e9))


def _domain_pairs(quick: bool) -> list[tuple[str, str, Options, int]]:
    """The plain-then-rich certification pairs (label, target, options, traces): the
    default certification of the memory store and of ``reference`` (SQLite in memory, as
    ``make certify`` runs it); quick: coverage and 40 walks."""
    options = QUICK_DOMAIN_OPTIONS if quick else DEFAULT_OPTIONS
    out: list[tuple[str, str, Options, int]] = []
    for store, opts in (("memory", options), ("SQLite in memory", options)):
        spec = TARGETS[store][0]
        for domain in ("plain", "rich"):
            chosen = replace(opts, domain=domain)
            count = len(_list_traces(chosen, spec))
            out.append((f"default certify, {store}, {domain} domain", spec, chosen, count))
    return out
