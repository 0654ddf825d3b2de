"""The guard's log records: every value escaped, every field structured.

A provider's stream decides the call ids, the response ids and the tool names; the
application's callers decide turn ids, tenants, actors and operator reasons. Each is fed
the sequences an attacker would use on a log line (ESC and CSI, an OSC 8 link, CR/LF to
forge a second line, NEL and the 8-bit CSI, a bidirectional override and isolate, the
Unicode line separator, NUL), at once, through every path that logs: decisions, statuses,
confirmation requests, hand-overs, an executor that raises (an exception class named with
them), a stream that cannot be read, operator controls, and an unknown outcome found at
start. No formatted message and no structured field may hold one of them raw; each must
be shown escaped, and the fields must be there for a JSON handler.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from callsafe.guard import Guard, StreamError, ToolCall, ToolSpec
from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal
from callsafe.providers.streams import render_payloads
from callsafe.safe_text import CONTROL, printable

HOSTILE = "\x1b[2J\x1b]8;;https://example.invalid/\x1b\\link\x1b]8;;\x1b\\\r\nFORGED line\x85\x9b2J\u202egnp.exe\u2066\u2028\x00"
RAW = ("\x1b", "\r", "\n", "\x85", "\x9b", "\u202e", "\u2066", "\u2028", "\x00")
SHOWN = printable(HOSTILE, newlines=False)
NAMEABLE = HOSTILE.replace("\x00", "")  # a class name cannot hold NUL
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL = "get_weather"
# every event the guard logs, and the fields each must carry
EXPECTED = {
    "decision": {"key", "decision", "parse", "validation", "fragments", "terminal_reason"},
    "status": {"turn", "status"},
    "execute": {"key", "tool"},
    "note": {"text"},
    "stream_error": {"turn", "error"},
    "operator": {"action", "reason", "count", "keys"},
    "confirmation": {"key", "tool"},
    "unknown_outcome": {"key", "tool"},
}


class Records(logging.Handler):
    """Every record of the guard's logger, formatted as a plain handler and a JSON handler would."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


def call_events(turn: str, response: str, call: str, tool: str = TOOL) -> list[Event]:
    text = json.dumps({"city": "Paris"})
    return [
        CallOpened(turn, response, "0", call, tool),
        Fragment(turn, response, "0", call, 0, text[:5]),
        Fragment(turn, response, "0", call, 1, text[5:]),
        CallTerminal(turn, response, "0", call, "", "completed"),
        ResponseTerminal(turn, response, "completed"),
    ]


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {k[len("callsafe_") :]: v for k, v in vars(record).items() if k.startswith("callsafe_")}


def values(value: Any) -> list[str]:
    if isinstance(value, list):
        return [s for v in value for s in values(v)]
    return [value] if isinstance(value, str) else []


@pytest.fixture
def handler() -> Any:
    logger = logging.getLogger("callsafe.guard")
    handler = Records()
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_a_hostile_value_in_every_field_is_escaped_and_structured(tmp_path: Path, handler: Records) -> None:
    evil_error = type(f"Boom{NAMEABLE}", (Exception,), {})

    def executor(call: ToolCall) -> str:
        if call.id.startswith("raise"):
            raise evil_error("tool failed")
        return "sunny"

    tools = {TOOL: SCHEMA, "confirm_me": ToolSpec(SCHEMA, confirm=True)}
    turn_id, tenant, actor = f"t{HOSTILE}", f"acme{HOSTILE}", f"u{HOSTILE}"
    guard = Guard(tools, executor=executor, store="memory:")
    turn = guard.turn(turn_id, actor, tenant)
    streams = [
        call_events(turn_id, f"r1{HOSTILE}", f"call{HOSTILE}"),  # runs: decision, status, execute
        call_events(turn_id, f"r2{HOSTILE}", f"raise{HOSTILE}"),  # the executor raises: a note
        call_events(turn_id, f"r3{HOSTILE}", f"c3{HOSTILE}", tool=f"nope{HOSTILE}"),  # an unknown tool
        call_events(turn_id, f"r4{HOSTILE}", f"c4{HOSTILE}", tool="confirm_me"),  # a confirmation
    ]
    for evs in streams:
        list(turn.stream(render_payloads("openai-chat", evs)))
    with pytest.raises(StreamError):  # a stream that cannot be read
        list(turn.stream([{"id": "r5", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": "zz"}]}}]}]))
    guard.quarantine(f"r4{HOSTILE}", reason=f"why{HOSTILE}")
    guard.stop_tenant(tenant, reason=f"stop{HOSTILE}")

    # an unknown outcome found at start: a call claimed before a crash, on a durable store
    url = f"sqlite:///{tmp_path / 'guard.db'}"

    class Crash(BaseException):
        pass

    def dies(call: ToolCall) -> None:
        raise Crash

    crashed = Guard({TOOL: SCHEMA}, executor=dies, store=url, create=True)
    with pytest.raises(Crash):
        list(crashed.turn(turn_id, actor, tenant).stream(render_payloads("openai-chat", streams[0])))
    crashed.close()
    Guard({TOOL: SCHEMA}, executor=executor, store=url).close()

    by_event: dict[str, list[logging.LogRecord]] = {}
    for record in handler.records:
        by_event.setdefault(record.callsafe_event, []).append(record)  # type: ignore[attr-defined]
    assert set(by_event) == set(EXPECTED), "an event the guard logs is missing from this test, or not logged"

    json_lines = [json.dumps({"message": r.getMessage(), **fields_of(r)}, ensure_ascii=False) for r in handler.records]
    for text in [*handler.lines, *json_lines]:
        assert not CONTROL.search(text), f"a raw control character reached a log line: {text!r}"
        assert not any(seq in text for seq in RAW), text

    for event, names in EXPECTED.items():
        for record in by_event[event]:
            fields = fields_of(record)
            assert names | {"event"} <= set(fields), (event, sorted(fields))
            for value in values(list(fields.values())):
                assert not CONTROL.search(value) and "\n" not in value and "\r" not in value, (event, value)

    # the hostile text is there, escaped, where it was a value: readable and lossless
    escaped = [r.getMessage() for r in handler.records]
    assert any(f"call{SHOWN}" in m for m in escaped)  # a call id
    assert any(f"c3{SHOWN}" in m for m in escaped)  # the call of an unknown tool
    assert any(f"why{SHOWN}" in m for m in escaped)  # an operator's reason
    assert any(f"Boom{printable(NAMEABLE, newlines=False)}" in m for m in escaped)  # an exception's class name
    assert by_event["stream_error"][0].getMessage().startswith(f"stream of turn t{SHOWN} failed")
    unknown = by_event["unknown_outcome"][0]
    assert fields_of(unknown)["key"].endswith(f"call{SHOWN}") and fields_of(unknown)["tool"] == TOOL
    operator = by_event["operator"][0]  # the quarantine stopped the call awaiting confirmation
    assert fields_of(operator)["keys"] and all(SHOWN in k for k in fields_of(operator)["keys"])


def test_a_quiet_logger_costs_no_formatting() -> None:
    """With the logger above INFO nothing is formatted or escaped (the guard's hot path)."""
    logger = logging.getLogger("callsafe.guard.quiet-test")
    logger.setLevel(logging.WARNING)
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger.addHandler(Keep())
    guard = Guard({TOOL: SCHEMA}, executor=lambda call: "ok", store="memory:", logger=logger)
    list(guard.turn("t", "u", "acme").stream(render_payloads("openai-chat", call_events("t", "r1", "c1"))))
    assert seen == []
    guard.quarantine("r1", reason=f"r{HOSTILE}")
    assert [r.callsafe_event for r in seen] == ["operator"]  # type: ignore[attr-defined]
    assert SHOWN in seen[0].getMessage()
