"""The AWS event-stream binary framing, as Bedrock's ConverseStream sends it over HTTP.

Why this module exists: Bedrock does not stream SSE. Each event is a binary message (the
``application/vnd.amazon.eventstream`` content type): a 12-byte prelude (total length,
headers length, both big-endian uint32, then the CRC32 of those eight bytes), the headers
(``:message-type``, ``:event-type`` or ``:exception-type``, ``:content-type``), the JSON
payload, and the CRC32 of everything before it. Clients and gateways have mis-split frame
headers, buffered without bound and trusted a declared length (the reports in
``shared/research/public-streaming-bugs.md``, Bedrock section), so the loopback provider
must send the real framing, cut where decoders go wrong, for a client such as boto3 to be
judged on what it reads.

What is ours and what is not: the encoder is ours (nothing maintained writes these frames
in Python; botocore only reads them). Its output is checked byte for byte against
botocore's reader (``botocore.eventstream.EventStreamBuffer``) in
``tests/test_providers_eventstream.py``, which is the maintained decoder the SDKs use. The
CRC is :func:`zlib.crc32`, the same CRC-32 (IEEE 802.3) the framing specifies.

A Bedrock event on the wire carries the *inner* object of the decoded form callsafe uses
(``{"contentBlockDelta": {...}}`` is sent as ``:event-type: contentBlockDelta`` with the
payload ``{...}``); an exception event (``modelStreamErrorException`` and the others of
:data:`callsafe.providers.bedrock_converse.EXCEPTIONS`) is a message of type
``exception`` whose ``:exception-type`` names it.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CONTENT_TYPE",
    "PRELUDE",
    "bedrock_frame",
    "corrupt_crc",
    "encode_message",
    "frame_chunks",
    "oversized_length",
]

CONTENT_TYPE: Final = "application/vnd.amazon.eventstream"
PRELUDE: Final = 12  # total length, headers length, prelude CRC: three uint32
_STRING: Final = 7  # the header value type of a UTF-8 string (uint16 length, then the bytes)
EXCEPTION_SUFFIX: Final = "Exception"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    if len(raw_name) > 255 or len(raw_value) > 0xFFFF:
        raise ValueError(f"event-stream header {name!r} is too long")
    return bytes([len(raw_name)]) + raw_name + bytes([_STRING]) + struct.pack(">H", len(raw_value)) + raw_value


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, prelude CRC, string headers, payload, message CRC."""
    head = b"".join(_header(name, value) for name, value in headers.items())
    total = PRELUDE + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def bedrock_frame(event: Mapping[str, Any]) -> bytes:
    """A decoded ConverseStream event (one key: the event's name) as the frame Bedrock sends."""
    if len(event) != 1:
        raise ValueError(f"a ConverseStream event has exactly one key, got {sorted(event)!r}")
    ((name, inner),) = event.items()
    payload = json.dumps(inner, ensure_ascii=False, separators=(",", ":")).encode()
    if name.endswith(EXCEPTION_SUFFIX):
        headers = {":message-type": "exception", ":exception-type": name, ":content-type": "application/json"}
    else:
        headers = {":message-type": "event", ":event-type": name, ":content-type": "application/json"}
    return encode_message(headers, payload)


def frame_chunks(frame: bytes) -> list[bytes]:
    """One frame cut where decoders go wrong: inside the prelude's first length, right after
    the prelude (before the headers), inside the payload, and before the message CRC, each
    piece its own HTTP chunk (a decoder must reassemble a frame from any split)."""
    points = sorted({p for p in (2, PRELUDE, (PRELUDE + len(frame)) // 2, len(frame) - 4) if 0 < p < len(frame)})
    pieces: list[bytes] = []
    last = 0
    for point in points:
        pieces.append(frame[last:point])
        last = point
    pieces.append(frame[last:])
    return pieces


def corrupt_crc(frame: bytes) -> bytes:
    """The frame with its message CRC wrong (a bit flipped in the payload, the CRC kept): a
    decoder must refuse it rather than deliver the damaged payload."""
    if len(frame) <= PRELUDE + 4:
        raise ValueError("a frame has a prelude, a CRC and something between them")
    at = len(frame) - 5  # the last payload (or header) byte
    return frame[:at] + bytes([frame[at] ^ 0x01]) + frame[at + 1 :]


def oversized_length(frame: bytes, declared: int = 1 << 30) -> bytes:
    """The frame with a total length far beyond what follows (its prelude CRC recomputed, so
    only the length is wrong): a decoder that trusts it buffers without bound or waits for
    bytes that never come; it must refuse the length (botocore caps a message at 16 MiB)."""
    headers_length = struct.unpack(">I", frame[4:8])[0]
    prelude = struct.pack(">II", declared, headers_length)
    return prelude + struct.pack(">I", zlib.crc32(prelude)) + frame[PRELUDE:]
