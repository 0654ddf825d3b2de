"""``callsafe observe --follow``: a growing file tailed, the first violation reported when
its record is written, in bounded memory.

No wall-clock assertion: the tests wait for the follower to have read what was written,
polling with a bound sized for a loaded machine (:mod:`loaded`), and assert on what it
found, never on how long it took.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from click.testing import CliRunner
from loaded import TRACE_TIMEOUT
from test_observe import EXECUTION, INCIDENT

from callsafe.cli.main import main
from callsafe.observe.follow import Follower, follow_file
from callsafe.observe.jsonl_log import LogReader


def wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + TRACE_TIMEOUT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"the follower never {what}"
        time.sleep(0.05)


def test_a_violation_appended_later_is_found(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(INCIDENT) + "\n", encoding="utf-8")
    follower = Follower(LogReader("agent.jsonl"))
    done = threading.Event()

    def run() -> None:
        follow_file(path, follower, stop=lambda: bool(follower.found) or done.is_set(), poll=0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: follower.lines >= len(INCIDENT), "read the first lines")
        assert follower.found == []  # one execution: nothing yet
        with path.open("a", encoding="utf-8") as handle:
            handle.write(EXECUTION + "\n")
        wait_for(lambda: bool(follower.found), "found the second execution")
    finally:
        done.set()
        thread.join(TRACE_TIMEOUT)
    (found,) = follower.found
    assert found.finding.invariant == "INV-ONCE"
    assert f"line {len(INCIDENT) + 1} (executed)" in found.evidence


def test_a_half_written_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(INCIDENT) + "\n" + EXECUTION[:20], encoding="utf-8")
    follower = Follower(LogReader())
    polls = iter(range(200))
    follow_file(path, follower, stop=lambda: next(polls, None) is None, poll=0.0)
    assert follower.lines == len(INCIDENT) and follower.found == []


def _turn(n: int, conversation: str) -> list[bytes]:
    turn = f"t{n}"
    return [
        json.dumps(
            {"turn_started": {"turn": turn, "actor": "a", "tenant": "x", "conversation": conversation}}
        ).encode(),
        json.dumps({"execution": {"turn": turn, "call": "c", "tool": "refund", "arguments": {}}}).encode(),
    ]


def test_memory_is_bounded_and_forgotten_turns_still_catch_late_runs() -> None:
    follower = Follower(LogReader(), max_turns=20, remember=50)
    for n in range(500):
        for line in _turn(n, conversation=f"c{n}"):
            follower.feed(line)
        assert len(follower._turns) <= 20 and len(follower._finished) <= 50
        assert len(follower.reader.records.entries) == 0
        assert len(follower.reader._calls) <= 21 and len(follower.reader._bindings) <= 21
    assert follower.found == []
    # a second run of a call whose turn was finished (evicted) and remembered
    follower.feed(_turn(495, "c495")[1])
    assert [f.finding.invariant for f in follower.found] == ["INV-ONCE"]


def test_a_run_of_a_superseded_turn_is_found_after_the_turn_was_finished() -> None:
    follower = Follower(LogReader())
    follower.feed(json.dumps({"turn_started": {"turn": "t1", "actor": "a", "tenant": "x"}}).encode())
    follower.feed(json.dumps({"turn_started": {"turn": "t2", "actor": "a", "tenant": "x"}}).encode())
    assert "t1" not in follower._turns and "t1" in follower._finished
    follower.feed(json.dumps({"execution": {"turn": "t1", "call": "c", "tool": "refund", "arguments": {}}}).encode())
    assert {f.finding.invariant for f in follower.found} & {"INV-TURN", "INV-CANCEL"}


def test_the_command_follows_until_the_first_violation(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join([*INCIDENT, EXECUTION]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["observe", str(path), "--follow"])
    assert result.exit_code == 1, result.output
    assert "VIOLATED at line 9" in result.output and "INV-ONCE" in result.output
    store = CliRunner().invoke(main, ["observe", str(path), "--follow", "--format", "store"])
    assert store.exit_code == 2 and "not a store" in store.output


def test_a_span_file_written_a_document_per_line_is_followed() -> None:
    from callsafe.observe.sources import line_reader

    span = {
        "traceId": "1",
        "spanId": "2",
        "name": "execute_tool refund",
        "startTimeUnixNano": "5",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "refund"}},
            {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_7Qa"}},
        ],
    }
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    follower = Follower(line_reader("spans", "spans.jsonl"))
    follower.feed(line)
    assert follower.found == []
    follower.feed(line)
    assert [f.finding.invariant for f in follower.found] == ["INV-ONCE"]
    assert follower.found[0].evidence[0].startswith("line 1: span 2")
