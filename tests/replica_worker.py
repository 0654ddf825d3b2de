"""One guard worker process of the replica tests (``tests/test_guard_replicas.py``).

Why a process: replicas of a deployment are processes with their own connections (and,
on SQLite, their own file locks); what the issue reported (a worker starting fails the
others' calls in flight) happens between processes. The workers start in a chain, so each
one opens the store while the one before it is in the middle of a stream: worker ``i``
opens its guard once worker ``i - 1`` wrote ``mid-(i-1)``; worker ``i - 1`` finishes that
stream only after worker ``i`` wrote ``opened-i``. The gate files live in ``GATE``.

Usage: ``python replica_worker.py STORE NAMESPACE INDEX WORKERS TURNS CALLS GATE OUT [hang]``;
writes the keys of the calls its executor ran, one a line, to ``OUT``. With ``hang`` it
stops in the middle of its first stream (after ``mid-INDEX``) and waits to be killed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from callsafe.guard import Guard, ToolCall
from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal
from callsafe.providers.streams import render_payloads

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
WAIT_SECONDS = 120.0


def turn_events(turn: str, calls: int) -> list[Event]:
    """One response of ``calls`` tool calls, each in two fragments (the calls end with the
    response, as OpenAI's chat streams end them)."""
    out: list[Event] = []
    r = f"{turn}-r"  # provider response ids are unique
    for c in range(calls):
        text = json.dumps({"n": c})
        out += [
            CallOpened(turn, r, str(c), f"call_{c}", "count"),
            Fragment(turn, r, str(c), f"call_{c}", 0, text[:3]),
            Fragment(turn, r, str(c), f"call_{c}", 1, text[3:]),
        ]
    out += [CallTerminal(turn, r, str(c), f"call_{c}", "", "completed") for c in range(calls)]
    return [*out, ResponseTerminal(turn, r, "completed")]


def expected_keys(workers: int, turns: int, calls: int) -> set[str]:
    """Every call every worker streams, as ``str(CallKey)``."""
    from callsafe.model.vocabulary import CallKey

    return {
        str(CallKey("acme", f"w{i}-t{j}", f"w{i}-t{j}-r", str(c), f"call_{c}"))
        for i in range(workers)
        for j in range(turns)
        for c in range(calls)
    }


def _wait(path: Path) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {path.name}")
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    store, namespace, index_s, workers_s, turns_s, calls_s, gate_s, out_s = argv[:8]
    hang = argv[8:] == ["hang"]
    index, workers, turns, calls = int(index_s), int(workers_s), int(turns_s), int(calls_s)
    gate, out = Path(gate_s), Path(out_s)
    ran: list[str] = []

    def execute(call: ToolCall) -> Any:
        ran.append(str(call.key))
        return "ok"

    if index > 0:
        _wait(gate / f"mid-{index - 1}")
    guard = Guard({"count": SCHEMA}, executor=execute, store=store, namespace=namespace or None)
    (gate / f"opened-{index}").touch()
    try:
        for j in range(turns):
            turn_id = f"w{index}-t{j}"
            turn = guard.turn(turn_id, "alice", "acme", conversation=turn_id)
            payloads = render_payloads("openai-chat", turn_events(turn_id, calls))
            reader = turn.open_stream("openai-chat")
            half = len(payloads) // 2
            for payload in payloads[:half]:
                reader.feed(payload)
            if j == 0:  # the next worker opens the store while this stream is half read
                (gate / f"mid-{index}").touch()
                while hang:  # killed here, its calls in flight (SIGKILL: no close, no release)
                    time.sleep(1)
                if index + 1 < workers:
                    _wait(gate / f"opened-{index + 1}")
            for payload in payloads[half:]:
                reader.feed(payload)
            reader.end(clean=True)
    finally:
        guard.close()
    out.write_text("".join(f"{key}\n" for key in ran))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
