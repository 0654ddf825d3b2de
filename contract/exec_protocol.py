"""The callsafe target protocol: how callsafe certifies a program in another process.

Why a protocol: most code that assembles streamed tool calls is not a Python object in
callsafe's process (Node SDKs, agent runtimes in Go or Java, or a Python agent reading its
SDK's HTTP stream). As Jepsen's Maelstrom does for distributed nodes, callsafe runs the
program as a command and speaks newline-delimited JSON with it: one JSON object per line on
the program's stdin (from callsafe) and stdout (from the program); stdout carries messages
only, stderr is captured and its last lines reported when something goes wrong.

The executor and the business validator stay callsafe's: the program asks callsafe to run a
tool (``execute``) and to validate a call (``validate``, answered by ``validation``), so
what reached the executor is observed at the boundary, as for an in-process target.
``docs/target-protocol.md`` describes the exchange; :data:`SCHEMA` (also
``docs/target-protocol.schema.json``, which a test keeps equal) is its JSON Schema.

Every message callsafe sends carries an ``id``. The program answers ``init`` with
``init_ok``, ``shutdown`` by exiting, and a ``validation`` (itself the answer to its
``validate``) not at all; every other message with ``done`` and that ``id`` once it has
handled it (``error`` in ``done`` says the program's code raised), after any ``execute``,
``validate`` and observation messages it sent while handling it; a ``stream`` when its
handler returns (``docs/target-protocol.md`` has the table).

Over HTTP callsafe cannot see when the program's SDK has handled a payload it wrote. A
program that says ``"acks": true`` in ``init_ok`` tells it: ``read`` {events: N} once it has
handled the first N events of the current stream (after whatever it ran for them), and
callsafe waits for that before it moves to the next step, so that what the program did for a
payload is recorded at that payload's step however slow the machine is; without acks it
waits for a quiet window (``CALLSAFE_EXEC_SETTLE``). A program may count what it handled
in body bytes instead (``read`` {bytes: N}: its HTTP client asks for bytes past the first N
only once everything those N carried has been handled), which needs no knowledge of the
SDK's events: callsafe then holds every later step, a control event included, until the
program has read past the bytes written before it (``docs/target-protocol.md``, "Order").
The helpers (``callsafe.adapters.stdio.serve`` and the Node helper) declare byte acks by
default over HTTP and report the reads themselves; a program without them gets a best-effort
order, and the reports say so. Validation nests: while the program waits for a
``validation`` answer, callsafe may send it the events that arrive "during validation" (each
answered with its own ``done``) or a ``restart`` (the process crashed inside the validator:
no ``validation`` comes; the program drops every handler that waits for one, never
answering their messages, restarts, and answers the ``restart``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from callsafe.model.record_words import Dispatch, Result, StatusMeaning

__all__ = [
    "FROM_HARNESS",
    "FROM_TARGET",
    "OBSERVATION_KINDS",
    "PROTOCOL_NAME",
    "SCHEMA",
    "TOOL_FIELDS",
    "VERSION",
    "ProtocolError",
    "decode",
    "encode",
]

PROTOCOL_NAME: Final = "callsafe-target"
VERSION: Final = 1

# The observations a target reports through ``observe`` (what it shows people and writes).
# ``executed`` and ``business_validated`` are never reported: callsafe records them itself
# when the program calls ``execute`` and ``validate``.
OBSERVATION_KINDS: Final = ("confirmation_requested", "status_shown", "ledger_row", "audit_row", "log_line")

FROM_HARNESS: Final = (
    "init",
    "start",
    "event",
    "wire",
    "end_stream",
    "stream",
    "restart",
    "reset",
    "validation",
    "shutdown",
)
FROM_TARGET: Final = ("init_ok", "execute", "validate", "observe", "log", "read", "done")


class ProtocolError(ValueError):
    """A line that is not a message of this protocol; the text says what is wrong."""


_ID = {"type": "integer", "minimum": 0}
_OBJ = {"type": "object"}
_STR = {"type": "string"}


def _message(kind: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {"type": {"const": kind}, **required, **(optional or {})}
    return {
        "type": "object",
        "properties": props,
        "required": ["type", *required],
        "additionalProperties": False,
    }


# The tool catalog in ``start`` and in an ``event`` after a catalog change: tool name -> its
# declaration as ``ToolSpec.to_json`` writes it (``confirm`` only when true, ``business`` only
# when the tool has rules, ``actors`` only when not every actor may use it).
TOOL_FIELDS: Final = ("schema", "confirm", "business", "actors")
_TOOL: Final = {
    "type": "object",
    "properties": {
        "schema": {"type": "object", "description": "the JSON Schema of the call's arguments"},
        "confirm": {"type": "boolean", "description": "a call needs the user's confirmation before it runs"},
        "business": {
            "type": "object",
            "description": "callsafe's business rules, enforced by its validator ('validate')",
            "properties": {
                "max": {"type": "object", "additionalProperties": {"type": "number"}},
                "forbid": {"type": "object", "additionalProperties": {"type": "array"}},
            },
        },
        "actors": {"type": "array", "items": _STR, "description": "who may use the tool (absent: every actor)"},
    },
    "required": ["schema"],
    "additionalProperties": False,
}
_TOOLS: Final = {"type": "object", "additionalProperties": {"$ref": "#/$defs/tool"}}
# The byte caps (``Limits.to_json``): per call, and per turn.
_LIMITS: Final = {
    "type": "object",
    "properties": {"call_bytes": {"type": "integer", "minimum": 0}, "turn_bytes": {"type": "integer", "minimum": 0}},
    "required": ["call_bytes", "turn_bytes"],
    "additionalProperties": False,
}

_HARNESS_MESSAGES: Final = {
    "init": _message("init", {"id": _ID, "protocol": {"const": PROTOCOL_NAME}, "version": {"const": VERSION}}),
    "start": _message(
        "start",
        {"id": _ID, "tools": _TOOLS, "limits": _LIMITS},
        {"store_dir": {"type": ["string", "null"]}, "trace": _STR},
    ),
    "event": _message("event", {"id": _ID, "step": {"type": "integer"}, "event": _OBJ}, {"tools": _TOOLS}),
    "wire": _message("wire", {"id": _ID, "step": {"type": "integer"}, "payload": _OBJ}),
    "end_stream": _message("end_stream", {"id": _ID}),
    "stream": _message("stream", {"id": _ID, "protocol": _STR, "base_url": _STR}),
    "restart": _message("restart", {"id": _ID}),
    "reset": _message("reset", {"id": _ID}),
    "validation": _message("validation", {"id": _ID, "reason": {"type": ["string", "null"]}}),
    "shutdown": _message("shutdown", {"id": _ID}),
}

_KEY = {
    "type": "object",
    "properties": {k: _STR for k in ("tenant", "turn", "response", "item", "call")},
    "required": ["tenant", "turn", "response", "item", "call"],
    "additionalProperties": False,
}

# What the program's record words mean (callsafe.model.record_words): per section, word ->
# meaning, added to the built-in words (callsafe's and the spec's own).
_RECORD_WORDS: Final = {
    "type": "object",
    "properties": {
        section: {"type": "object", "additionalProperties": {"enum": [m.value for m in meanings]}}
        for section, meanings in (("decision", Dispatch), ("status", StatusMeaning), ("result", Result))
    },
    "additionalProperties": False,
}

_TARGET_MESSAGES: Final = {
    "init_ok": _message(
        "init_ok",
        {
            "id": _ID,
            "protocol": {"const": PROTOCOL_NAME},
            "version": {"type": "integer"},
            "name": _STR,
            "reads": _STR,
            "capabilities": {"type": "array", "items": _STR},
        },
        {
            "process_per_trace": {"type": "boolean"},
            "wire": {"enum": ["stdio", "http"]},
            "acks": {"enum": [True, False, "bytes"]},
            "record_words": _RECORD_WORDS,
        },
    ),
    "execute": _message(
        "execute",
        {"key": _KEY, "actor": _STR, "tool": _STR, "arguments": {}},
        {"traceparent": {"type": ["string", "null"]}},
    ),
    "validate": _message("validate", {"id": _ID, "key": _KEY, "tool": _STR, "arguments": _OBJ}),
    "observe": _message(
        "observe",
        {"observation": {"type": "object", "minProperties": 1, "maxProperties": 1}},
    ),
    "log": _message("log", {"text": _STR}),
    # ``events`` (events handled) or ``bytes`` (body bytes handled; ``closed``: the program
    # stopped reading this body); at least one of the two, checked where it is read.
    "read": {
        **_message(
            "read",
            {},
            {
                "events": {"type": "integer", "minimum": 0},
                "bytes": {"type": "integer", "minimum": 0},
                "closed": {"type": "boolean"},
            },
        ),
        "anyOf": [{"required": ["events"]}, {"required": ["bytes"]}],
    },
    "done": _message("done", {"id": _ID}, {"error": {"type": ["string", "null"]}}),
}

SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://callsafe.dev/schemas/target-protocol/v{VERSION}.json",
    "title": f"callsafe target protocol, version {VERSION}",
    "description": (
        "One JSON object per line. 'harness' messages go to the target's stdin, 'target' messages "
        "come from its stdout. Events and observations use callsafe's trace vocabulary "
        "(callsafe.model.vocabulary): an event is a one-key object {kind: {fields}}."
    ),
    "$defs": {
        "harness": {"oneOf": [{"$ref": f"#/$defs/{k}"} for k in _HARNESS_MESSAGES]},
        "target": {"oneOf": [{"$ref": f"#/$defs/{k}"} for k in _TARGET_MESSAGES]},
        **{k: v for k, v in _HARNESS_MESSAGES.items()},
        **{k: v for k, v in _TARGET_MESSAGES.items() if k not in _HARNESS_MESSAGES},
        "tool": _TOOL,
    },
    "oneOf": [{"$ref": "#/$defs/harness"}, {"$ref": "#/$defs/target"}],
}


def encode(message: Mapping[str, Any]) -> bytes:
    """One message as one line (compact JSON, non-ASCII kept: it is UTF-8 on the pipe)."""
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def decode(line: bytes | str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """One line as a message whose ``type`` is in ``allowed``. Only the envelope is checked
    here (an object with a known type and the fields its kind requires); the reader of each
    kind checks its fields' values as it uses them."""
    if isinstance(line, bytes):
        try:  # the protocol is UTF-8 on the pipe: other bytes are a broken message, never replaced
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            shown = line[max(0, exc.start - 20) : exc.start + 20]
            raise ProtocolError(f"a line that is not UTF-8 (byte {exc.start}: {shown!r})") from None
    text = line.strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ProtocolError(f"a line that is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"a message must be a JSON object, got {text[:200]!r}")
    kind = value.get("type")
    if kind not in allowed:
        raise ProtocolError(f"unexpected message type {kind!r} (expected one of {', '.join(allowed)}): {text[:200]!r}")
    schema = {**_HARNESS_MESSAGES, **_TARGET_MESSAGES}[kind]
    missing = [k for k in schema["required"] if k not in value]
    if missing:
        raise ProtocolError(f"a {kind!r} message without {', '.join(missing)}: {text[:200]!r}")
    return value
