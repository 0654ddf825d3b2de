"""The scaling benchmark: one certification on one process, on local worker processes and
on a Dask cluster of one and of two workers, side by side.

Issue "Scale out certification on Dask", item 5: the speed-up measured here, 1 against 2
workers. Two workloads, because what distribution buys depends on the work per trace:
``callsafe certify reference:memory`` (the reference implementation over its in-memory
store: a trace takes a fraction of a millisecond, so shipping partitions and results is a
large share) and ``callsafe certify reference:sqlite`` (a SQLite file per trace, with its
fsyncs: a few milliseconds per trace, the kind of target that outgrows one machine), each
with the catalog, the random walks and the exhaustive enumeration, no minimisation. The
variants:

* **one process**: the floor; traces run in the driver, no partitions;
* **processes-2**: ``--workers 2``, a spawned pool of two processes (started inside each
  run, as the command line does);
* **dask-1**, **dask-2**: ``--scheduler``, a cluster started beforehand as docs/howto-dask.md says
  (``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` as subprocesses on
  loopback), so its start is not timed; connecting to it is.

Each variant is timed ``repeat`` times, interleaved, best kept (:mod:`bench.common`); wall
time gives the speed-up, CPU time is counted over *every* process of the run (the driver,
the pool, the scheduler and the workers: ``psutil`` on the live descendants, and the
reaped children's times), so the CPU ratio is the price of distributing the work. The
reports of all variants are compared (outside the timed region) with the single-process
one, apart from timings and the execution account: a variant that ran other traces
cannot look fast.

Why the clusters not in use are suspended (``SIGSTOP``) while a variant runs, and their
processes left out of its CPU: an idle Dask scheduler and its workers keep ticking (about
0.2 CPU-seconds per second for the two clusters here, measured with both idle). Counted,
that idle time was added to every variant in proportion to its wall time, so the slowest
variant, one process, looked the most expensive (the first version of this benchmark
charged it so). Running, it also took CPU from the variant being timed.

Each round's Dask 2 over 1 is reported beside the best-against-best figure: the runs take
seconds, and on a shared machine the figure moves between runs; the spread says how far.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import ROOT, Config, Section, busy_note, fmt_ratio, markdown_table
from callsafe.certify.harness import Certification, Options, certify
from callsafe.reporting.report import comparable_text, report_json

NAME = "scaling"
TITLE = "Scaling out certification (local processes, Dask)"
SPEC = "reference:memory"
# (target, label, exhaustive depth): the second is smaller, its traces cost ten times more
WORKLOADS: tuple[tuple[str, str, int], ...] = (
    ("reference:memory", "in-memory store", 3),
    ("reference:sqlite", "SQLite file store", 2),
)


class _Cluster:
    """A scheduler and its workers started as subprocesses: the address, and the process
    trees, to suspend while another variant is timed and to count when this one is."""

    def __init__(self, address: str, roots: list[subprocess.Popen[bytes]]) -> None:
        self.address = address
        self.roots = roots

    def processes(self) -> list[Any]:
        import psutil

        out = []
        for root in self.roots:
            with contextlib.suppress(psutil.Error):
                top = psutil.Process(root.pid)
                out += [top, *top.children(recursive=True)]
        return out

    def pause(self, paused: bool) -> None:
        import psutil

        for process in self.processes():
            with contextlib.suppress(psutil.Error):
                process.suspend() if paused else process.resume()


def _cpu(own: _Cluster | None, others: list[_Cluster]) -> float:
    """CPU seconds of this process, its reaped children, its live descendants that belong
    to no cluster (a local pool), and the processes of ``own``, the cluster the variant
    runs on; never the other clusters'."""
    import psutil

    me = psutil.Process()
    times = me.cpu_times()
    total: float = times.user + times.system + times.children_user + times.children_system
    skip = {p.pid for cluster in others for p in cluster.processes()}
    for child in me.children(recursive=True):
        if child.pid in skip:
            continue
        with contextlib.suppress(psutil.Error):
            t = child.cpu_times()
            total += t.user + t.system
    return total


def _scheduler_address(info: Path, scheduler: subprocess.Popen[bytes], timeout: float = 60) -> str:
    """The address in the scheduler file, once the scheduler has written it whole: the file
    exists before its text is complete, and reading it at that instant gave a
    ``JSONDecodeError`` that failed a smoke run."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if scheduler.poll() is not None:
            raise RuntimeError(f"the Dask scheduler exited with status {scheduler.returncode} before it started")
        with contextlib.suppress(OSError, ValueError, KeyError):
            address = json.loads(info.read_text(encoding="utf-8"))["address"]
            if isinstance(address, str) and address:
                return address
        time.sleep(0.1)
    raise RuntimeError(f"the Dask scheduler wrote no address to {info} in {timeout:.0f} s")


@contextlib.contextmanager
def _cluster(workers: int, folder: Path) -> Iterator[_Cluster]:
    """A scheduler and ``workers`` single-threaded workers as subprocesses on loopback."""
    from distributed import Client

    info = folder / f"scheduler-{workers}.json"
    quiet: dict[str, object] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": ROOT}
    dask = [sys.executable, "-m", "dask"]
    scheduler = subprocess.Popen(
        [*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
        **quiet,
    )
    processes = [scheduler]
    cluster: _Cluster | None = None
    try:
        processes.append(
            subprocess.Popen(
                [
                    *dask,
                    "worker",
                    "--scheduler-file",
                    str(info),
                    "--nworkers",
                    str(workers),
                    "--nthreads",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                ],
                **quiet,
            )
        )
        address = _scheduler_address(info, scheduler)
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        cluster = _Cluster(address, processes)
        yield cluster
    finally:
        if cluster is not None:
            cluster.pause(False)  # a stopped process acts on SIGTERM only once continued
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _normalised(cert: Certification) -> str:
    """report.json's text without the parts that say when and how the run was executed."""
    return comparable_text(report_json(cert))


def _measure(
    spec: str, variants: list[tuple[str, Options]], repeat: int, clusters: list[_Cluster]
) -> tuple[dict[str, float], dict[str, float], dict[str, Any], dict[str, list[float]]]:
    """Best wall and CPU seconds of each variant, interleaved; its last run; and every
    round's wall time (for the spread). While a variant runs, only its own cluster (if
    any) is running, and counted."""
    cpu: dict[str, float] = {name: float("inf") for name, _ in variants}
    rounds: dict[str, list[float]] = {name: [] for name, _ in variants}
    last: dict[str, Certification] = {}
    try:
        for _ in range(repeat):
            for name, opts in variants:
                own = next((c for c in clusters if c.address == opts.scheduler), None)
                others = [c for c in clusters if c is not own]
                for cluster in others:
                    cluster.pause(True)
                if own is not None:
                    own.pause(False)
                gc.collect()
                c0, t0 = _cpu(own, others), time.perf_counter()
                last[name] = certify(spec, opts)
                t1, c1 = time.perf_counter(), _cpu(own, others)
                rounds[name].append(t1 - t0)
                cpu[name] = min(cpu[name], c1 - c0)
    finally:
        for cluster in clusters:
            cluster.pause(False)
    return {name: min(times) for name, times in rounds.items()}, cpu, last, rounds


# (workload, label, options, best wall, best CPU, traces run, spread of dask-2 over dask-1)
_Measured = tuple[str, str, Options, dict[str, float], dict[str, float], dict[str, int], str]


def _spread(rounds: dict[str, list[float]]) -> str:
    """Dask 2 over 1 in each round, where the two ran back to back under the same load:
    the median and the range, so a reader sees how far one run's figure can move on a
    shared machine."""
    pairs = sorted(one / two for one, two in zip(rounds["dask-1"], rounds["dask-2"], strict=True))
    median, low, high = (fmt_ratio(x) for x in (statistics.median(pairs), pairs[0], pairs[-1]))
    return f"median {median}, from {low} to {high} over {len(pairs)} rounds"


def run(config: Config) -> Section:
    repeat = 1 if config.quick else config.repeat
    measured: list[_Measured] = []
    with (
        tempfile.TemporaryDirectory(prefix="callsafe-bench-") as tmp,
        _cluster(1, Path(tmp)) as one_worker,
        _cluster(2, Path(tmp)) as two_workers,
    ):
        for spec, label, depth in WORKLOADS:
            options = Options(
                depth=1 if config.quick else depth,
                walks=20 if config.quick else 200,
                generators=("catalog", "walks", "exhaustive"),
                minimize=False,
            )
            variants = [
                ("one process", options),
                ("processes-2", Options(**{**vars(options), "workers": 2})),
                ("dask-1", Options(**{**vars(options), "scheduler": one_worker.address})),
                ("dask-2", Options(**{**vars(options), "scheduler": two_workers.address})),
            ]
            wall, cpu, last, rounds = _measure(spec, variants, repeat, [one_worker, two_workers])
            floor = _normalised(last["one process"])
            different = [name for name, cert in last.items() if _normalised(cert) != floor]
            if different:
                raise RuntimeError(f"{spec}: {', '.join(different)} wrote another report than one process did")
            traces = {name: cert.traces_run for name, cert in last.items()}
            measured.append((spec, label, options, wall, cpu, traces, _spread(rounds)))
    return _section(repeat, measured)


def _section(repeat: int, measured: list[_Measured]) -> Section:
    floor = "one process"
    ratios: dict[str, float] = {}
    text = [f"## {TITLE}", ""]
    for number, (spec, label, options, wall, cpu, traces, spread) in enumerate(measured):
        prefix = "" if number == 0 else f"{spec}/"  # the first workload's keys are the headline
        rows = [
            [
                name,
                str(traces[name]),
                f"{wall[name]:.2f}",
                f"{traces[name] / wall[name]:,.0f}",
                f"{wall[floor] / wall[name]:.2f}",
                f"{cpu[name]:.2f}",
                f"{cpu[name] / cpu[floor]:.2f}",
            ]
            for name in wall
        ]
        table = markdown_table(
            ["variant", "traces", "wall s", "traces/s", "speed-up (wall)", "CPU s, all processes", "CPU / one process"],
            rows,
        )
        for name in wall:
            ratios[f"{prefix}speedup/{name}"] = round(wall[floor] / wall[name], 3)
            ratios[f"{prefix}cpu/{name}"] = round(cpu[name] / cpu[floor], 3)
        ratios[f"{prefix}speedup/dask-2 vs dask-1"] = round(wall["dask-1"] / wall["dask-2"], 3)
        text += [
            f"### `callsafe certify {spec}` ({label})",
            "",
            f"Generators {', '.join(options.generators)}: exhaustive depth {options.depth}, {options.walks} walks, "
            f"seed {options.seed}, no minimisation; partitions of 256 traces; best of {repeat}, interleaved. "
            "Speed-up = one process's wall time / the variant's. CPU is summed over every process of the run "
            "(driver, pool, scheduler, workers); the cluster a variant does not use is suspended meanwhile and "
            "not counted. Every variant wrote the single-process report.",
            "",
            table,
            "",
            f"Dask, 2 workers against 1: {fmt_ratio(ratios[f'{prefix}speedup/dask-2 vs dask-1'])} (best against best); "
            f"round by round (the two ran one after the other in each round) {spread}.",
            "",
        ]
    text.append(
        f"The machine has {os.cpu_count()} logical CPUs, shared by the driver, the scheduler and the workers, so "
        "two workers cannot double one process's speed here; Dask with 2 workers against 1 is the scaling figure. "
        "With the in-memory store a trace is so little work that shipping partitions and results weighs; a "
        "SQLite trace is more work (a store file, fsyncs), so distribution pays more there."
    )
    note = busy_note()
    if note:
        text += ["", note]
    return Section(NAME, TITLE, "\n".join(text) + "\n", ratios)
