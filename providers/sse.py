"""Server-sent events, both directions, incrementally.

The decoder takes the bytes of a stream in chunks cut anywhere (inside a multi-byte UTF-8
character, inside a ``data:`` line, between the CR and the LF of a line break) and yields
each complete event once its blank line arrives, as the WHATWG event-stream rules say:
lines end with CRLF, LF or CR; a leading byte-order mark is dropped; ``:`` starts a comment;
``data`` lines of one event are joined with ``\\n``; an event without data is not
dispatched; an event cut off by the end of the stream is discarded (and reported through
:attr:`SSEDecoder.truncated`, because a cut event means the stream did not end cleanly).
UTF-8 is decoded with an incremental decoder, so a character split across chunks is
joined, and invalid UTF-8 is a :class:`~callsafe.providers.base.MalformedEvent`, never a
replacement character that could change argument text.

The encoder writes payloads as events (compact JSON, UTF-8, optionally an ``event:`` field
and a closing ``data: [DONE]``), and :func:`cut` splits bytes at chosen offsets so tests
can deliver one stream in adversarial chunks.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from callsafe.providers.base import MalformedEvent, NotRepresentable

__all__ = [
    "DONE",
    "SSEDecoder",
    "SSEEvent",
    "cut",
    "decode_all",
    "encode_event",
    "encode_payloads",
    "payload_json",
    "payload_of",
]

DONE: Final = "[DONE]"
"""The data of the sentinel event that ends OpenAI-style streams."""

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


class SSEEvent(NamedTuple):
    """One dispatched event: its name (``message`` when the stream gave none) and data."""

    event: str
    data: str


class SSEDecoder:
    """Bytes in, complete events out. Feed chunks with :meth:`feed`; call :meth:`close` at
    the end of the stream."""

    def __init__(self, max_line: int = 16 * 1024 * 1024) -> None:
        self.max_line = max_line  # a line longer than this is refused, not buffered
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._partial = ""  # text of the line being received
        self._pieces: list[str] = []  # later pieces of that line, not yet joined
        self._pending = 0  # characters of the unfinished line
        self._after_cr = False  # the last chunk ended with CR: a leading LF belongs to it
        self._at_start = True  # a byte-order mark is dropped only at the very start
        self._event = ""
        self._data: list[str] = []
        self._has_fields = False  # any field line since the last dispatch
        self._closed = False
        self.truncated = False
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``."""
        if self._closed:
            raise MalformedEvent("SSE: bytes after the end of the stream")
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise MalformedEvent(f"SSE: invalid UTF-8 ({exc.reason})") from None
        return self._take(text)

    def close(self) -> list[SSEEvent]:
        """End of stream: a character or an event left incomplete is discarded, and
        :attr:`truncated` says whether anything was."""
        if self._closed:
            return []
        self._closed = True
        try:
            text = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            self.truncated = True
            text = ""
        events = self._take(text)
        if self._pieces:
            self._partial += "".join(self._pieces)
            self._pieces.clear()
        if self._partial or self._has_fields:
            self.truncated = True
        self._partial = ""
        self._data = []
        self._event = ""
        self._has_fields = False
        return events

    def _take(self, text: str) -> list[SSEEvent]:
        if self._at_start and text:
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._after_cr and text:
            self._after_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if not text:
            return []
        if _LINE_BREAK.search(text) is None:
            # No line ends in this chunk: keep the piece; joining and re-splitting the whole
            # unfinished line on every chunk would be quadratic in its length.
            self._pieces.append(text)
            self._pending += len(text)
            if self._pending > self.max_line:
                raise MalformedEvent(f"SSE: a line longer than {self.max_line} characters")
            return []
        if self._pieces:
            self._partial += "".join(self._pieces)
            self._pieces.clear()
            self._pending = 0
        lines = _LINE_BREAK.split(self._partial + text)
        self._partial = lines.pop()  # the text after the last line break: not a line yet
        self._pending = len(self._partial)
        if not self._partial and text.endswith("\r"):
            self._after_cr = True
        events: list[SSEEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._has_fields = True
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_event_id = value
        return None  # retry and unknown fields are ignored

    def _dispatch(self) -> SSEEvent | None:
        data, event = self._data, self._event
        self._data, self._event, self._has_fields = [], "", False
        if not data:
            return None
        return SSEEvent(event or "message", "\n".join(data))


def decode_all(chunks: Iterable[bytes]) -> tuple[list[SSEEvent], bool]:
    """Every event of a whole stream delivered in ``chunks``, and whether it was truncated."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events, decoder.truncated


def payload_of(event: SSEEvent) -> dict[str, Any]:
    """The JSON object an event's data carries."""
    try:
        value = json.loads(event.data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, and integers past the digit limit
        raise MalformedEvent(f"SSE: event data is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise MalformedEvent(f"SSE: event data must be a JSON object, got {type(value).__name__}")
    return value


def encode_event(data: str, event: str | None = None) -> bytes:
    """One event: an optional ``event:`` line, one ``data:`` line per line of ``data``."""
    if event is not None and (not event or _LINE_BREAK.search(event)):
        raise NotRepresentable(f"SSE: an event name is one non-empty line, got {event!r}")
    lines = [] if event is None else [f"event: {event}"]
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def payload_json(payload: Mapping[str, Any]) -> str:
    """A payload as compact JSON, non-ASCII kept (multi-byte UTF-8 reaches the wire), except
    a surrogate, which UTF-8 cannot carry: it goes as its ``\\uXXXX`` escape, as a server
    that splits a character's UTF-16 pair between two events writes it (a JSON string may
    hold a lone surrogate escape; only the bytes cannot)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode_payloads(
    payloads: Iterable[Mapping[str, Any]],
    event_name: Callable[[Mapping[str, Any]], str | None] | None = None,
    done: bool = False,
) -> bytes:
    """A whole stream: each payload as compact JSON (non-ASCII kept, so multi-byte UTF-8
    reaches the wire), named by ``event_name`` where the protocol names events, and a
    closing ``data: [DONE]`` when ``done``."""
    out = bytearray()
    for payload in payloads:
        out += encode_event(payload_json(payload), event_name(payload) if event_name else None)
    if done:
        out += encode_event(DONE)
    return bytes(out)


def cut(data: bytes, offsets: Iterable[int]) -> list[bytes]:
    """``data`` split at the given byte offsets (sorted, clipped, repeats ignored); the
    chunks join back to ``data``. Offsets may fall anywhere, inside a character included."""
    points = sorted({o for o in offsets if 0 < o < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a] or [data]
