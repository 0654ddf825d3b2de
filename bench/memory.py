"""Process memory over many finished calls: a long-running guard over SQLite.

Issue 31, item 2. A guard runs for weeks; what it keeps per finished call must go back to
nothing once the call's turn is over, or memory grows with traffic (the issue measured
about 0.7 KB per finished call before). Here one guard over a SQLite file decides
``calls`` calls: turns of ``CALLS_PER_TURN`` calls in one response each, spread over
``CONVERSATIONS`` conversations, so each new turn supersedes its conversation's previous
one (which is then over). The process's resident memory (RSS, after a ``gc.collect()``)
is read every tenth of the way: the curve, and the growth per 1,000 calls from the first
checkpoint of the second half to the last (the first half includes warm-up: SQLite's
page cache, the interpreter's pools, and the replay window of over turns the core keeps
whole, ``OVER_TURNS_KEPT`` turns: bounded, and full after about 4,000 calls here).

Side by side in one run: **keep** (the core keeping every turn and every decided call,
as before: ``forget_over_turns=False``) and **forget** (as shipped). The target is at most
50 KB per 1,000 calls for **forget**.

Events are delivered as the abstract events (``Guard.deliver``), not as provider payloads:
the parsers keep nothing per stream once it ends, and the store is what is measured. The
store commits with ``synchronous="normal"`` (the same statements and rows; no fsync per
claim, which would only make the run longer).

``python -m bench.memory --calls 1000000`` for the million; ``python -m bench --only
memory`` runs the default size (under a minute on the development VM).
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Config, Section, markdown_table
from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import CallOpened, CallTerminal, Fragment, ResponseTerminal
from callsafe.reference_impl.sqlite_store import SqliteStore

__all__ = ["NAME", "TITLE", "measure", "run"]

NAME = "memory"
TITLE = "callsafe.guard: process memory over many finished calls (SQLite)"

CALLS, QUICK_CALLS = 20_000, 2_000
CALLS_PER_TURN = 4
CONVERSATIONS = 50
POINTS = 10
TARGET_BYTES_PER_1000 = 50_000
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def rss_bytes() -> int:
    """The process's resident set size, from ``/proc/self/status`` (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")  # pragma: no cover - Linux only


def _turn(guard: Guard, index: int) -> int:
    """One turn of CALLS_PER_TURN calls, all run; how many ran."""
    turn_id = f"t{index}"
    response = f"r{index}"
    guard.turn(turn_id, "alice", "acme", conversation=f"c{index % CONVERSATIONS}")
    ran = 0
    for c in range(CALLS_PER_TURN):
        text = json.dumps({"n": c})
        call = f"call_{index}_{c}"
        guard.deliver(CallOpened(turn_id, response, str(c), call, "count"))
        guard.deliver(Fragment(turn_id, response, str(c), call, 0, text[:3]))
        guard.deliver(Fragment(turn_id, response, str(c), call, 1, text[3:]))
        ran += len(guard.deliver(CallTerminal(turn_id, response, str(c), call, f"e-{call}", "completed")))
    guard.deliver(ResponseTerminal(turn_id, response, "completed"))
    return ran


def measure(calls: int, *, forget: bool, folder: Path) -> dict[str, Any]:
    """Decide ``calls`` calls in one guard; the RSS curve and the growth per 1,000 calls."""
    path = folder / f"guard-{'forget' if forget else 'keep'}.db"
    store = SqliteStore(path, create=True, synchronous="normal", witness=False)

    def execute(call: ToolCall) -> str:
        return "ok"

    guard = Guard({"count": SCHEMA}, executor=execute, store=store, heartbeat=False)
    guard._core._forget = forget  # the "keep" variant: the core as it was before
    turns = max(POINTS, calls // CALLS_PER_TURN)
    step = turns // POINTS
    curve: list[tuple[int, int]] = []
    ran = 0
    started = time.perf_counter()
    try:
        for index in range(turns):
            if index % step == 0:
                gc.collect()
                curve.append((index * CALLS_PER_TURN, rss_bytes()))
            ran += _turn(guard, index)
        gc.collect()
        curve.append((turns * CALLS_PER_TURN, rss_bytes()))
        kept = len(guard._core._decided), len(guard._core.turns)
    finally:
        guard.close()
    took = time.perf_counter() - started
    if ran != turns * CALLS_PER_TURN:
        raise AssertionError(f"{ran} calls ran of {turns * CALLS_PER_TURN}")
    # from the middle: the first turns fill the replay window (OVER_TURNS_KEPT over turns
    # kept whole), a bounded amount; what matters is the growth past it
    (first_calls, first_rss), (last_calls, last_rss) = curve[len(curve) // 2], curve[-1]
    per_1000 = (last_rss - first_rss) * 1000 / max(1, last_calls - first_calls)
    return {"curve": curve, "per_1000": per_1000, "seconds": took, "decided": kept[0], "turns": kept[1]}


def _table(results: dict[str, dict[str, Any]]) -> str:
    keep, forget = results["keep"], results["forget"]
    rows = []
    for (n, a), (_, b) in zip(keep["curve"], forget["curve"], strict=True):
        rows.append([f"{n:,}", f"{a / 2**20:.1f}", f"{b / 2**20:.1f}"])
    return markdown_table(["finished calls", "keep: RSS MiB", "forget: RSS MiB"], rows)


def report(calls: int, results: dict[str, dict[str, Any]]) -> Section:
    keep, forget = results["keep"], results["forget"]
    lines = [
        f"## {TITLE}",
        "",
        f"{calls:,} calls per variant, {CALLS_PER_TURN} per turn, {CONVERSATIONS} conversations; RSS after "
        "`gc.collect()` at every tenth; the growth is measured over the second half (the first turns fill the "
        "replay window of over turns kept whole, `OVER_TURNS_KEPT`, a bounded amount).",
        "",
        _table(results),
        "",
        f"- keep (every turn and decided call in memory): {keep['per_1000'] / 1000:.1f} KB per 1,000 calls; "
        f"{keep['decided']:,} decided calls and {keep['turns']:,} turns held at the end; {keep['seconds']:.0f} s",
        f"- forget (as shipped): {forget['per_1000'] / 1000:.1f} KB per 1,000 calls "
        f"(target: at most {TARGET_BYTES_PER_1000 // 1000} KB); {forget['decided']:,} decided calls and "
        f"{forget['turns']:,} turns held at the end; {forget['seconds']:.0f} s",
    ]
    ratio = forget["per_1000"] / keep["per_1000"] if keep["per_1000"] > 0 else 0.0
    return Section(
        NAME,
        TITLE,
        "\n".join(lines) + "\n",
        {"forget_kb_per_1000": forget["per_1000"] / 1000, "forget_over_keep": ratio},
    )


def run(config: Config, calls: int | None = None) -> Section:
    n = calls or (QUICK_CALLS if config.quick else CALLS)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "keep": measure(n, forget=False, folder=Path(tmp)),
            "forget": measure(n, forget=True, folder=Path(tmp)),
        }
    return report(n, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per variant (default {CALLS:,})")
    parser.add_argument("--only", choices=("keep", "forget"), help="run one variant")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.only:
            result = measure(args.calls, forget=args.only == "forget", folder=Path(tmp))
            for n, rss in result["curve"]:
                print(f"{n:>10,} calls  {rss / 2**20:8.1f} MiB")
            print(f"{args.only}: {result['per_1000'] / 1000:.1f} KB per 1,000 calls, {result['seconds']:.0f} s")
            return 0
    section = run(Config(), args.calls)
    print(section.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
