"""Bedrock's binary event stream: callsafe's frames read byte for byte by botocore's own
decoder, the loopback provider serving ConverseStream in that framing, and boto3's
``converse_stream`` reading it whole (split preludes included); the damaged frames
(a CRC mismatch, an oversized declared length) refused by the maintained decoder."""

from __future__ import annotations

import json
import struct

import httpx
import pytest

from callsafe.loopback.server import LoopbackServer, StaticTrace
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Trace
from callsafe.providers.eventstream import (
    CONTENT_TYPE,
    PRELUDE,
    bedrock_frame,
    corrupt_crc,
    encode_message,
    frame_chunks,
    oversized_length,
)
from callsafe.providers.streams import render_payloads

eventstream = pytest.importorskip(
    "botocore.eventstream", reason="botocore is not installed (pip install boto3, or the frameworks extra)"
)

EVENTS = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tu_1", "name": "pay"}}}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"note":"h\u00e9'}}}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "tool_use"}},
    {"modelStreamErrorException": {"message": "the stream failed"}},
]


def _decode(pieces: list[bytes]) -> list[tuple[dict[str, object], bytes]]:
    buffer = eventstream.EventStreamBuffer()
    out = []
    for piece in pieces:
        buffer.add_data(piece)
        out += [(dict(m.headers), m.payload) for m in buffer]
    return out


@pytest.mark.parametrize("event", EVENTS, ids=[next(iter(e)) for e in EVENTS])
def test_each_frame_decodes_in_botocore_from_any_split_to_its_headers_and_inner_payload(
    event: dict[str, object],
) -> None:
    frame = bedrock_frame(event)
    ((name, inner),) = event.items()
    for pieces in (frame_chunks(frame), [frame[i : i + 1] for i in range(len(frame))]):
        ((headers, payload),) = _decode(pieces)
        kind = "exception" if name.endswith("Exception") else "event"
        assert headers[":message-type"] == kind
        assert headers[":exception-type" if kind == "exception" else ":event-type"] == name
        assert headers[":content-type"] == "application/json"
        assert json.loads(payload) == inner
    # the prelude states the whole frame and its headers exactly
    total, headers_length = struct.unpack(">II", frame[:8])
    assert total == len(frame) and PRELUDE + headers_length < total


def test_the_cuts_fall_inside_the_prelude_after_it_in_the_payload_and_before_the_crc() -> None:
    frame = bedrock_frame(EVENTS[2])
    pieces = frame_chunks(frame)
    assert b"".join(pieces) == frame
    ends = [sum(len(p) for p in pieces[: i + 1]) for i in range(len(pieces))]
    assert ends[0] < PRELUDE, "a piece ends inside the prelude"
    assert PRELUDE in ends and len(frame) - 4 in ends


def test_a_damaged_crc_and_an_oversized_length_are_refused_by_the_maintained_decoder() -> None:
    frame = bedrock_frame(EVENTS[2])
    with pytest.raises(eventstream.ChecksumMismatch):
        _decode([corrupt_crc(frame)])
    with pytest.raises(eventstream.InvalidPayloadLength):
        _decode([oversized_length(frame)])
    # and the encoder refuses what it cannot frame
    with pytest.raises(ValueError):
        bedrock_frame({"a": {}, "b": {}})
    with pytest.raises(ValueError):
        encode_message({"x" * 256: "v"}, b"")


def _trace() -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("tu_1", "pay", item="0").fragment("tu_1", '{"note":"h\u00e9').fragment("tu_1", 'llo"}')
    return b.terminal("tu_1").response_end().build()


def test_the_loopback_serves_converse_stream_as_frames_that_boto3_reads_whole() -> None:
    boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (the frameworks extra brings it)")
    trace = _trace()
    server = LoopbackServer(static=StaticTrace("bedrock-converse", trace.events)).start()
    try:
        url = f"{server.base_url}/model/anthropic.claude/converse-stream"
        with httpx.stream("POST", url, json={"messages": [{"role": "user", "content": [{"text": "go"}]}]}) as response:
            assert response.headers["content-type"] == CONTENT_TYPE
            pieces = list(response.iter_raw())
        decoded = _decode(pieces)
        wire = [{str(h[":event-type"]): json.loads(p)} for h, p in decoded]
        assert wire == render_payloads(
            "bedrock-converse", [e for e in trace.events if e.__class__.__name__ != "TurnStarted"]
        )
        client = boto3.client(
            "bedrock-runtime",
            endpoint_url=server.base_url,
            region_name="us-east-1",
            aws_access_key_id="callsafe",
            aws_secret_access_key="callsafe",
        )
        answer = client.converse_stream(
            modelId="anthropic.claude", messages=[{"role": "user", "content": [{"text": "go"}]}]
        )
        events = list(answer["stream"])
    finally:
        server.stop()
    names = [next(iter(e)) for e in events]
    assert names[0] == "messageStart" and names[-1] == "messageStop"
    text = "".join(e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events if "contentBlockDelta" in e)
    assert json.loads(text) == {"note": "h\u00e9llo"}
    assert events[-1]["messageStop"]["stopReason"] == "tool_use"
