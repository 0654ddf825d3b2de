"""Reading a recorded provider stream for ``callsafe inspect``: the file's format, its event
payloads, where reading had to stop, and which wire protocol the payloads speak.

Two formats, told apart by the first non-blank line (after a UTF-8 byte-order mark):

* **JSON lines** (``jsonl``), the format of ``../shared/captures/``: one event payload (the
  ``data:`` of one server-sent event) per line. The line ``[DONE]`` is the OpenAI sentinel.
  The first line starts with ``{``.
* **Server-sent events** (``sse``), the raw bytes of an HTTP body as captured from the wire:
  the first line is an SSE field (``data:``, ``event:``, ``id:``, ``retry:``) or a comment
  (``:``). The bytes go through the same incremental decoder the wire path uses
  (:class:`~callsafe.providers.sse.SSEDecoder`), in chunks of ``chunk_size`` bytes when asked,
  so a multi-byte character split across chunks is joined exactly as on the wire.

Why reading is separate from parsing: a file can fail in two different ways, and the user
needs to know which. A file that is not a recording at all (empty, binary, neither format,
a callsafe trace, no protocol recognisable) raises :class:`RecordingError`, one line, and
nothing is inspected. A recording that breaks part-way (a truncated or non-JSON line,
invalid UTF-8, an SSE event cut off at the end) is read up to the break, exactly as the wire
would have delivered it, and the break is kept in :attr:`Recording.stop` (or
:attr:`Recording.truncated`): everything before it is still evidence.

Protocol detection (:func:`detect_protocol`) looks at every payload the file holds (also
those after a break: they tell what the file is, though the wire never delivered them) and
applies :data:`RULES`, one signature per protocol. Payloads that match no rule (``{"type":
"error"}`` and ``{"error": ...}`` objects, which several protocols share; unknown event
types) do not vote. One payload matching two rules is *ambiguous*; payloads of two protocols in one file
are *mixed*; no payload matching any rule is *unknown*: each is a :class:`RecordingError`
that names the lines concerned and suggests ``--protocol``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from callsafe.providers import registry
from callsafe.providers.base import MalformedEvent, ProtocolViolation, ProviderError
from callsafe.providers.sse import DONE, SSEDecoder, SSEEvent, cut, payload_of

__all__ = [
    "FORMATS",
    "RULES",
    "Detection",
    "Payload",
    "ReadStop",
    "Recording",
    "RecordingError",
    "Rule",
    "detect_protocol",
    "read_recording",
    "sniff_format",
]

FORMATS: Final = ("jsonl", "sse")
_BOM: Final = b"\xef\xbb\xbf"
_SSE_FIELD: Final = re.compile(r"(?:data|event|id|retry)(?::|$)")
_LATER_LIMIT: Final = 1000  # payloads after a break kept for detection only


class RecordingError(ValueError):
    """The file cannot be inspected at all. The message is one line, meant for the user."""


@dataclass(frozen=True)
class Payload:
    """One event payload as the wire delivered it, and where it is in the file (``line 12``
    for JSON lines, ``event 12`` for SSE: the twelfth dispatched event)."""

    data: dict[str, Any]
    where: str


@dataclass(frozen=True)
class ReadStop:
    """Why reading stopped before the end of the file.

    ``damaged`` is true when the file itself cannot be read past this point (a line that is
    not JSON, invalid UTF-8): the recording is truncated or corrupt. It is false for data
    after ``[DONE]``, which is well-formed data the protocol forbids: a finding about the
    stream, not about the file."""

    error: ProviderError
    where: str
    damaged: bool


@dataclass(frozen=True)
class Recording:
    """A recorded stream, read as the wire would deliver it.

    ``payloads`` are the events delivered before anything stopped reading (and before
    ``[DONE]``); ``stop`` is what stopped it, if anything; ``truncated`` says an SSE event
    was cut off by the end of the bytes; ``later`` holds payloads the file carries after the
    stop, for protocol detection only."""

    format: str
    payloads: tuple[Payload, ...]
    done: bool = False
    truncated: bool = False
    stop: ReadStop | None = None
    later: tuple[Payload, ...] = ()

    @property
    def clean(self) -> bool:
        """Whether the transport ended normally (``[DONE]``, or the end of the file after a
        whole event), as :func:`callsafe.providers.streams.parse_sse` decides it."""
        return self.stop is None and (self.done or not self.truncated)

    @property
    def damage(self) -> str | None:
        """One line saying how the file is damaged, or ``None`` when it reads to its end."""
        if self.stop is not None and self.stop.damaged:
            return str(self.stop.error)
        if self.truncated and not self.done:
            return "the last event is cut off (no blank line ends it): the recording is truncated"
        return None

    @property
    def disconnected(self) -> bool:
        """Whether a client reading this recording would see the connection drop: the file
        breaks (its reader raises) or its last event is cut off, before any ``[DONE]``."""
        return self.damage is not None


# --------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------


def _first_line(data: bytes) -> tuple[int, bytes]:
    """The first non-blank line (1-based number, bytes without the line break)."""
    for number, line in enumerate(data.splitlines(), start=1):
        if line.strip():
            return number, line
    return 0, b""


def sniff_format(data: bytes) -> str:
    """``jsonl`` or ``sse`` from the first non-blank line; :class:`RecordingError` when the
    file is empty, binary, or neither."""
    body = data[len(_BOM) :] if data.startswith(_BOM) else data
    number, line = _first_line(body)
    if not number:
        raise RecordingError("empty file: no events to inspect")
    if b"\0" in line:
        raise RecordingError(f"binary data, not a recording: line {number} holds NUL bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordingError(f"binary data, not a recording: line {number} is not UTF-8 (byte {exc.start})") from None
    if any(ord(c) < 32 and c not in "\t" for c in text):
        raise RecordingError(f"binary data, not a recording: line {number} holds control characters")
    if _SSE_FIELD.match(text) or text.startswith(":"):
        return "sse"
    if text.lstrip().startswith("{") or text.strip() == DONE:
        return "jsonl"
    if text.lstrip().startswith("["):
        _refuse_whole_documents(body, number)
    shown = text.strip()[:24]
    raise RecordingError(
        f"not a recording: line {number} starts with {shown!r}; expected one JSON event per line "
        "or server-sent events (data: ...)"
    )


def read_recording(data: bytes, *, chunk_size: int | None = None) -> Recording:
    """The recording ``data`` holds. ``chunk_size`` feeds raw SSE to the decoder that many
    bytes at a time (a wire delivers bytes in chunks cut anywhere; the result must not
    depend on where). Raises :class:`RecordingError` for a file that is not a recording."""
    if chunk_size is not None and chunk_size < 1:
        raise RecordingError(f"--chunk-size must be at least 1, got {chunk_size}")
    fmt = sniff_format(data)
    recording = _read_sse(data, chunk_size) if fmt == "sse" else _read_jsonl(data)
    if not recording.payloads and recording.stop is None:
        if recording.truncated:
            raise RecordingError("no complete event: the file ends inside its first event (a truncated recording)")
        raise RecordingError(
            "no events: the file holds no event payload" + (" before [DONE]" if recording.done else "")
        )
    if not recording.payloads and not recording.later and recording.stop is not None:
        raise RecordingError(f"nothing readable: {recording.stop.error}")
    return recording


def _read_jsonl(data: bytes) -> Recording:
    body = data[len(_BOM) :] if data.startswith(_BOM) else data
    payloads: list[Payload] = []
    later: list[Payload] = []
    stop: ReadStop | None = None
    done = False
    for number, raw in enumerate(body.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if stop is None:
                error = MalformedEvent(f"{where}: not UTF-8 text (byte {exc.start} of the line)")
                stop = ReadStop(error, where, damaged=True)
            continue
        if line.strip() == DONE:
            done = done or stop is None
            continue
        value, problem = _json_object(line)
        if stop is not None:
            if value is not None and len(later) < _LATER_LIMIT:
                later.append(Payload(value, where))
            continue
        if problem is not None:
            stop = ReadStop(MalformedEvent(f"{where}: {problem}"), where, damaged=True)
            _refuse_whole_documents(body, number)
        elif done:
            stop = ReadStop(ProtocolViolation(f"{where}: data after [DONE]"), where, damaged=False)
            if value is not None:
                later.append(Payload(value, where))
        else:
            assert value is not None
            payloads.append(Payload(value, where))
    return Recording("jsonl", tuple(payloads), done=done, stop=stop, later=tuple(later))


def _json_object(line: str) -> tuple[dict[str, Any] | None, str | None]:
    """The line's JSON object, or why it is not one."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno}): a truncated or corrupt line"
    except RecursionError:
        return None, "not JSON (nested too deeply)"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an event object"
    return value, None


def _refuse_whole_documents(body: bytes, number: int) -> None:
    """A first line that is not JSON may be the start of one JSON document spanning the
    file (a callsafe trace, a JSON array of events): say what it is rather than reading
    it as a broken stream."""
    if number != _first_line(body)[0]:
        return
    try:
        whole = json.loads(body)
    except (ValueError, RecursionError):
        return
    if isinstance(whole, dict) and "events" in whole:
        raise RecordingError("this is a callsafe trace, not a recording: run it with `callsafe replay`")
    if isinstance(whole, list):
        raise RecordingError("a JSON array, not JSON lines: write one event per line (for example `jq -c '.[]' FILE`)")
    if isinstance(whole, dict):
        raise RecordingError("one JSON document over several lines: a recording holds one event per line")


def _read_sse(data: bytes, chunk_size: int | None) -> Recording:
    decoder = SSEDecoder()
    # Bytes before invalid UTF-8 are delivered in a chunk of their own, as a wire that sent
    # them first would: the events they complete are evidence, whatever follows them.
    bad = _bad_utf8_offset(data)
    sizes = range(chunk_size, len(data), chunk_size) if chunk_size is not None else ()
    chunks = cut(data, [*sizes, bad])
    payloads: list[Payload] = []
    later: list[Payload] = []
    stop: ReadStop | None = None
    done = False
    count = 0

    def take(events: Sequence[SSEEvent]) -> None:
        nonlocal stop, done, count
        for sse in events:
            count += 1
            where = f"event {count}"
            if stop is not None:
                value = _payload_or_none(sse)
                if value is not None and len(later) < _LATER_LIMIT:
                    later.append(Payload(value, where))
                continue
            if done:
                stop = ReadStop(ProtocolViolation(f"{where}: data after [DONE]"), where, damaged=False)
                continue
            if sse.data == DONE:
                done = True
                continue
            try:
                payloads.append(Payload(payload_of(sse), where))
            except MalformedEvent as exc:
                stop = ReadStop(MalformedEvent(f"{where}: {exc}"), where, damaged=True)

    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except MalformedEvent:
            where = f"after event {count}"
            if stop is None:
                stop = ReadStop(MalformedEvent(f"SSE: invalid UTF-8 at byte {bad}"), where, damaged=True)
            return Recording("sse", tuple(payloads), done=done, stop=stop, later=tuple(later))
        take(events)
    take(decoder.close())
    return Recording("sse", tuple(payloads), done=done, truncated=decoder.truncated, stop=stop, later=tuple(later))


def _payload_or_none(sse: SSEEvent) -> dict[str, Any] | None:
    try:
        return payload_of(sse)
    except MalformedEvent:
        return None


def _bad_utf8_offset(data: bytes) -> int:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return len(data)


# --------------------------------------------------------------------------------------
# Protocol detection
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One protocol's signature: a payload that ``matches`` belongs to ``protocol``."""

    protocol: str
    signature: str  # what the rule looks for, as the output and the documentation say it
    matches: Callable[[Mapping[str, Any]], bool]


def _type_in(*names: str) -> Callable[[Mapping[str, Any]], bool]:
    allowed = frozenset(names)
    return lambda p: p.get("type") in allowed


def _type_prefix(field: str, *prefixes: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda p: isinstance(p.get(field), str) and str(p[field]).startswith(prefixes)


_BEDROCK_KEYS: Final = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
        "internalServerException",
        "modelStreamErrorException",
        "throttlingException",
        "validationException",
        "serviceUnavailableException",
    }
)


def _bedrock(p: Mapping[str, Any]) -> bool:
    return len(p) == 1 and next(iter(p)) in _BEDROCK_KEYS and isinstance(next(iter(p.values())), dict)


def _chat(p: Mapping[str, Any]) -> bool:
    return p.get("object") == "chat.completion.chunk" or isinstance(p.get("choices"), list)


def _gemini(p: Mapping[str, Any]) -> bool:
    return isinstance(p.get("candidates"), list) or isinstance(p.get("promptFeedback"), dict)


_REALTIME_PREFIXES: Final = (
    "session.",
    "response.",
    "conversation.",
    "input_audio_buffer.",
    "output_audio_buffer.",
    "rate_limits.",
)


def _realtime(p: Mapping[str, Any]) -> bool:
    return "event_id" in p and _type_prefix("type", *_REALTIME_PREFIXES)(p)


_LIVE_KEYS: Final = frozenset({"setupComplete", "serverContent", "toolCall", "toolCallCancellation"})


def _gemini_live(p: Mapping[str, Any]) -> bool:
    return any(isinstance(p.get(key), dict) for key in _LIVE_KEYS)


def _responses(p: Mapping[str, Any]) -> bool:
    return "event_id" not in p and _type_prefix("type", "response.")(p)


RULES: Final[tuple[Rule, ...]] = (
    Rule("openai-responses", "type response.*, no event_id", _responses),
    Rule(
        "openai-realtime",
        "event_id beside type session.*, response.*, conversation.*, input_audio_buffer.*, output_audio_buffer.* "
        "or rate_limits.*",
        _realtime,
    ),
    Rule(
        "anthropic-messages",
        "type message_start, content_block_*, message_delta, message_stop or ping",
        _type_in(
            "message_start",
            "message_delta",
            "message_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "ping",
        ),
    ),
    Rule(
        "cohere-v2",
        "type message-start, content-*, tool-plan-delta, tool-call-*, citation-* or message-end",
        _type_in(
            "message-start",
            "message-end",
            "content-start",
            "content-delta",
            "content-end",
            "tool-plan-delta",
            "tool-call-start",
            "tool-call-delta",
            "tool-call-end",
            "citation-start",
            "citation-end",
            "debug",
        ),
    ),
    Rule(
        "gemini-interactions", "event_type interaction.* or step.*", _type_prefix("event_type", "interaction.", "step.")
    ),
    Rule(
        "bedrock-converse",
        "a single key messageStart, contentBlock*, messageStop, metadata or *Exception",
        _bedrock,
    ),
    Rule("gemini-live", "setupComplete, serverContent, toolCall or toolCallCancellation", _gemini_live),
    Rule("gemini", "candidates[] or promptFeedback", _gemini),
    Rule("openai-chat", "choices[] or object chat.completion.chunk", _chat),
)
"""The detection rules, one per protocol, in the order the documentation lists them."""


@dataclass(frozen=True)
class Detection:
    """The protocol a recording speaks, the rule that said so, and where it first matched;
    ``counts`` is how many payloads each rule matched."""

    protocol: str
    signature: str
    where: str
    counts: Mapping[str, int]

    def describe(self) -> str:
        return f"{self.signature}, first at {self.where}"


def _matches(payload: Payload) -> list[Rule]:
    return [rule for rule in RULES if rule.matches(payload.data)]


def _all_payloads(recording: Recording) -> Iterator[Payload]:
    yield from recording.payloads
    yield from recording.later


def detect_protocol(recording: Recording) -> Detection:
    """The one protocol the recording's payloads speak; :class:`RecordingError` when it is
    unknown, ambiguous or mixed (the message names the lines and suggests ``--protocol``)."""
    first: dict[str, tuple[Rule, Payload]] = {}
    counts: dict[str, int] = {}
    seen = 0
    for payload in _all_payloads(recording):
        seen += 1
        found = _matches(payload)
        if len(found) > 1:
            names = " and ".join(f"{r.protocol} ({r.signature})" for r in found)
            raise RecordingError(f"ambiguous: {payload.where} matches {names}; name one with --protocol")
        for rule in found:
            first.setdefault(rule.protocol, (rule, payload))
            counts[rule.protocol] = counts.get(rule.protocol, 0) + 1
    known = ", ".join(registry.names())
    if not first:
        if not seen:
            raise RecordingError(
                f"unknown protocol: no line is a JSON event object; name one with --protocol ({known})"
            )
        sample = next(_all_payloads(recording))
        keys = ", ".join(sorted(sample.data)[:6]) or "none"
        raise RecordingError(
            f"unknown protocol: none of the {seen} events looks like a known protocol "
            f"({sample.where} has keys: {keys}); name one with --protocol ({known})"
        )
    if len(first) > 1:
        parts = [f"{payload.where} is {protocol}" for protocol, (_, payload) in first.items()]
        raise RecordingError(
            f"mixed protocols: {', '.join(parts)}; a recording holds one stream (split the file, "
            "or read it as one protocol with --protocol)"
        )
    ((protocol, (rule, payload)),) = first.items()
    return Detection(protocol, rule.signature, payload.where, dict(counts))
