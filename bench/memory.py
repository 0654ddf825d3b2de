"""Process memory and store size over many finished calls: a long-running guard over SQLite.

Issue 31, item 2. A guard runs for weeks; what it keeps per finished call must go back to
nothing once the call's turn is over, or memory grows with traffic (the issue measured
about 0.7 KB per finished call before), and its store must not grow without bound either.
Here one guard over a SQLite file decides ``calls`` calls: turns of ``CALLS_PER_TURN`` calls
in one response each (:func:`bench.common.guard_turn`), spread over ``CONVERSATIONS``
conversations, so each new turn supersedes its conversation's previous one (which is then
over). At ``points`` checkpoints the process's resident memory (RSS, after a
``gc.collect()``) and the store's size on disk (the database and its ``-wal`` file) are
read: the curve, and the memory growth per 1,000 calls from the checkpoint in the middle to
the last (the first half includes warm-up: SQLite's page cache, the interpreter's pools,
the core's replay window of ``OVER_TURNS_KEPT`` over turns kept whole, and the store filling
up to its retention window).

Side by side in one run: **keep** (the core keeping every turn and every decided call, as
before: ``forget_over_turns=False``, and no retention) and **forget** (as shipped, with
online retention: ``Guard(retention=...)``, its thread pruning every ``EVERY`` s). The
guard's clock is logical, one second per turn, so the retention window is the same number
of calls on any machine: ``WINDOW`` seconds (turns) after a turn is over, with ledger and
audit rows kept as long. The target is at most 50 KB per 1,000 calls for **forget**, and
a store whose size levels off.

The store commits with ``synchronous="normal"`` (the same statements and rows; no fsync per
claim, which would only make the run longer).

``python -m bench.memory --calls 1000000 --only forget --points 20`` for the million
(prints each checkpoint as it is reached); ``python -m bench --only memory`` runs the
default size (a minute or two on the development VM).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import COUNT_SCHEMA, Config, Section, guard_turn, markdown_table
from callsafe.guard import Guard, Retention, ToolCall
from callsafe.reference_impl.sqlite_store import SqliteStore

__all__ = ["NAME", "TITLE", "measure", "run"]

NAME = "memory"
TITLE = "callsafe.guard: process memory over many finished calls (SQLite)"

CALLS, QUICK_CALLS = 20_000, 2_000
CALLS_PER_TURN = 4
CONVERSATIONS = 50
POINTS = 10
TARGET_BYTES_PER_1000 = 50_000
WINDOW = 2_000.0  # the replay window, in turns of the logical clock (8,000 calls)
KEEP = 1_000  # over turns, terminal ids, ledger and audit rows always kept
EVERY = 1.0  # seconds between two retention passes (wall clock)


def rss_bytes() -> int:
    """The process's resident set size, from ``/proc/self/status`` (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")  # pragma: no cover - Linux only


def store_bytes(path: Path) -> int:
    """The store's size on disk: the database file and its write-ahead log."""
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


class Tick:
    """The guard's logical clock: one second per turn, read by the retention thread too."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


Checkpoint = tuple[int, int, int]  # (finished calls, RSS bytes, store bytes)


def measure(
    calls: int,
    *,
    forget: bool,
    folder: Path,
    points: int = POINTS,
    progress: Callable[[Checkpoint], None] | None = None,
) -> dict[str, Any]:
    """Decide ``calls`` calls in one guard; the curve (RSS and store size at ``points``
    checkpoints) and the memory growth per 1,000 calls over the second half."""
    path = folder / f"guard-{'forget' if forget else 'keep'}.db"
    store = SqliteStore(path, create=True, synchronous="normal", witness=False)

    def execute(call: ToolCall) -> str:
        return "ok"

    tick = Tick()
    retention = Retention(window=WINDOW, keep=KEEP, records=WINDOW, every=EVERY, max_batches=1_000)
    guard = Guard(
        {"count": COUNT_SCHEMA},
        executor=execute,
        store=store,
        heartbeat=False,
        clock=tick,
        retention=retention if forget else None,
    )
    guard._core._forget = forget  # the "keep" variant: the core as it was before
    turns = max(points, calls // CALLS_PER_TURN)
    step = turns // points
    curve: list[Checkpoint] = []

    def checkpoint(done: int) -> None:
        gc.collect()
        curve.append((done * CALLS_PER_TURN, rss_bytes(), store_bytes(path)))
        if progress is not None:
            progress(curve[-1])

    ran = 0
    started = time.perf_counter()
    try:
        for index in range(turns):
            if index % step == 0:
                checkpoint(index)
            tick.now += 1.0
            ran += guard_turn(guard, f"t{index}", CALLS_PER_TURN, conversation=f"c{index % CONVERSATIONS}")
        checkpoint(turns)
        kept = len(guard._core._decided), len(guard._core.turns)
        rows = {table: sum(1 for _ in store.rows(table)) for table in ("turns", "calls", "terminal_ids", "ledger")}
    finally:
        guard.close()
    took = time.perf_counter() - started
    if ran != turns * CALLS_PER_TURN:
        raise AssertionError(f"{ran} calls ran of {turns * CALLS_PER_TURN}")
    # from the middle: the first turns fill the replay window (OVER_TURNS_KEPT over turns
    # kept whole) and the store's retention window, bounded amounts; what matters is the
    # growth past them
    (first_calls, first_rss, _), (last_calls, last_rss, _) = curve[len(curve) // 2], curve[-1]
    per_1000 = (last_rss - first_rss) * 1000 / max(1, last_calls - first_calls)
    return {
        "curve": curve,
        "per_1000": per_1000,
        "seconds": took,
        "decided": kept[0],
        "turns": kept[1],
        "rows": rows,
    }


def _table(results: dict[str, dict[str, Any]]) -> str:
    keep, forget = results["keep"], results["forget"]
    rows = []
    for (n, a, da), (_, b, db) in zip(keep["curve"], forget["curve"], strict=True):
        rows.append([f"{n:,}", f"{a / 2**20:.1f}", f"{da / 2**20:.1f}", f"{b / 2**20:.1f}", f"{db / 2**20:.1f}"])
    return markdown_table(
        ["finished calls", "keep: RSS MiB", "keep: store MiB", "forget: RSS MiB", "forget: store MiB"], rows
    )


def report(calls: int, results: dict[str, dict[str, Any]]) -> Section:
    keep, forget = results["keep"], results["forget"]
    lines = [
        f"## {TITLE}",
        "",
        f"{calls:,} calls per variant, {CALLS_PER_TURN} per turn, {CONVERSATIONS} conversations; RSS after "
        "`gc.collect()` and the store's size on disk (database and -wal) at every tenth; the growth is measured "
        "over the second half (the first turns fill the replay window of over turns kept whole, `OVER_TURNS_KEPT`, "
        f"and the store's retention window, {WINDOW:,.0f} turns of the logical clock: bounded amounts).",
        "",
        _table(results),
        "",
        f"- keep (every turn and decided call in memory, no retention): {keep['per_1000'] / 1000:.1f} KB per 1,000 "
        f"calls; {keep['decided']:,} decided calls and {keep['turns']:,} turns held at the end; "
        f"{keep['seconds']:.0f} s",
        f"- forget (as shipped, online retention on): {forget['per_1000'] / 1000:.1f} KB per 1,000 calls "
        f"(target: at most {TARGET_BYTES_PER_1000 // 1000} KB); {forget['decided']:,} decided calls and "
        f"{forget['turns']:,} turns held at the end; store rows at the end: {_rows(forget['rows'])}; "
        f"{forget['seconds']:.0f} s",
    ]
    ratio = forget["per_1000"] / keep["per_1000"] if keep["per_1000"] > 0 else 0.0
    return Section(
        NAME,
        TITLE,
        "\n".join(lines) + "\n",
        {
            "forget_kb_per_1000": forget["per_1000"] / 1000,
            "forget_over_keep": ratio,
            "store_forget_over_keep": forget["curve"][-1][2] / max(1, keep["curve"][-1][2]),
        },
    )


def _rows(rows: dict[str, int]) -> str:
    return ", ".join(f"{count:,} {table}" for table, count in rows.items())


def run(config: Config, calls: int | None = None) -> Section:
    n = calls or (QUICK_CALLS if config.quick else CALLS)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "keep": measure(n, forget=False, folder=Path(tmp)),
            "forget": measure(n, forget=True, folder=Path(tmp)),
        }
    return report(n, results)


def _print(point: Checkpoint) -> None:
    n, rss, size = point
    print(f"{n:>10,} calls  RSS {rss / 2**20:8.1f} MiB  store {size / 2**20:8.1f} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per variant (default {CALLS:,})")
    parser.add_argument("--only", choices=("keep", "forget"), help="run one variant, printing each checkpoint")
    parser.add_argument("--points", type=int, default=POINTS, help=f"checkpoints (default {POINTS})")
    args = parser.parse_args(argv)
    if args.points < 2:
        parser.error("--points is at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only:
            result = measure(
                args.calls, forget=args.only == "forget", folder=Path(tmp), points=args.points, progress=_print
            )
            print(
                f"{args.only}: {result['per_1000'] / 1000:.1f} KB per 1,000 calls over the second half; "
                f"store rows at the end: {_rows(result['rows'])}; {result['seconds']:.0f} s",
                flush=True,
            )
            return 0
    section = run(Config(), args.calls)
    sys.stdout.write(section.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
