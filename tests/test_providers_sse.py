"""The incremental SSE codec: chunk boundaries never change the events.

A stream is decoded whole, then again cut at every byte offset (inside multi-byte
characters, inside ``data:`` lines, between CR and LF), then one byte at a time: the events
must be the same every time.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.providers.base import MalformedEvent, NotRepresentable
from callsafe.providers.sse import DONE, SSEDecoder, SSEEvent, cut, decode_all, encode_event, encode_payloads

# é (2 bytes), € (3 bytes), 🦄 (4 bytes); CRLF, LF and CR line ends; a comment; multi-line
# data; an event name; a field without a space; an event with no data; [DONE].
STREAM = (
    "\ufeff: a comment with é\r\n"
    "event: response.output_text.delta\r\n"
    'data: {"delta":"café €5 🦄"}\r\n'
    "\r\n"
    "data:first line é\n"
    "data: second line €\n"
    "id: 7\n"
    "\n"
    "event: ping\r"
    "\r"
    "retry: 100\n"
    'data: {"x":"🦄🦄"}\r'
    "\r"
    "data: [DONE]\n"
    "\n"
).encode()

EXPECTED = [
    SSEEvent("response.output_text.delta", '{"delta":"café €5 🦄"}'),
    SSEEvent("message", "first line é\nsecond line €"),
    SSEEvent("message", '{"x":"🦄🦄"}'),
    SSEEvent("message", DONE),
]


def test_whole_stream() -> None:
    events, truncated = decode_all([STREAM])
    assert events == EXPECTED
    assert not truncated


@pytest.mark.parametrize("offset", range(1, len(STREAM)))
def test_cut_at_every_offset(offset: int) -> None:
    events, truncated = decode_all(cut(STREAM, [offset]))
    assert events == EXPECTED
    assert not truncated


def test_one_byte_at_a_time() -> None:
    decoder = SSEDecoder()
    events = [e for i in range(len(STREAM)) for e in decoder.feed(STREAM[i : i + 1])]
    assert events + decoder.close() == EXPECTED
    assert decoder.last_event_id == "7"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12))
def test_cut_anywhere(offsets: list[int]) -> None:
    assert decode_all(cut(STREAM, offsets))[0] == EXPECTED


def test_an_event_cut_off_by_the_end_is_discarded_and_reported() -> None:
    events, truncated = decode_all([b'data: {"a":1}\n\ndata: {"b":'])
    assert events == [SSEEvent("message", '{"a":1}')]
    assert truncated


def test_a_character_cut_off_by_the_end_is_reported() -> None:
    events, truncated = decode_all([b"data: x\n\n", "é".encode()[:1]])
    assert events == [SSEEvent("message", "x")]
    assert truncated


def test_invalid_utf8_is_malformed_not_replaced() -> None:
    with pytest.raises(MalformedEvent):
        SSEDecoder().feed(b"data: \xff\n\n")


def test_a_bom_is_dropped_only_at_the_start() -> None:
    events, _ = decode_all([b"\xef\xbb", b"\xbfdata: a\n\ndata: \xef\xbb\xbfb\n\n"])
    assert events == [SSEEvent("message", "a"), SSEEvent("message", "\ufeffb")]


def test_encoder_round_trip_with_event_names_and_done() -> None:
    payloads = [{"type": "a", "text": "é€🦄"}, {"type": "b", "lines": "x\ny"}]
    data = encode_payloads(payloads, lambda p: str(p["type"]), done=True)
    events, truncated = decode_all(cut(data, range(1, len(data), 3)))
    assert [e.event for e in events] == ["a", "b", "message"]
    assert [json.loads(e.data) for e in events[:2]] == payloads
    assert events[2].data == DONE and not truncated


def test_multi_line_data_is_encoded_as_several_data_lines() -> None:
    assert encode_event("one\ntwo", "e") == b"event: e\ndata: one\ndata: two\n\n"
    assert decode_all([encode_event("one\r\ntwo")])[0] == [SSEEvent("message", "one\ntwo")]


def test_event_names_are_one_line() -> None:
    with pytest.raises(NotRepresentable):
        encode_event("x", "two\nlines")


def test_cut_joins_back() -> None:
    data = "é€🦄".encode()
    for offsets in ([], [1], [1, 2, 3, 100, -1, 2], range(len(data))):
        chunks = cut(data, offsets)
        assert b"".join(chunks) == data
        assert all(chunks)
