"""boto3: the User Guide's ConverseStream loop merges a block left without contentBlockStop into the next block."""

import json
import struct
import zlib

from botocore import eventstream, parsers, session

WIRE = r"""contentBlockStart {"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"a","name":"pay"}}}
contentBlockDelta {"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"amount\":1"}}}
contentBlockStart {"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"b","name":"pay"}}}
contentBlockDelta {"contentBlockIndex":1,"delta":{"toolUse":{"input":"00}"}}}
contentBlockStop {"contentBlockIndex":1}"""
h = lambda k, v: bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()  # noqa: E731
crc = lambda b: b + struct.pack(">I", zlib.crc32(b))  # noqa: E731  (AWS event-stream framing: prelude, headers, CRCs)
pairs = [(h(":message-type", "event") + h(":event-type", n), p.encode()) for n, p in map(str.split, WIRE.split("\n"))]
frames = [crc(crc(struct.pack(">II", 16 + len(head) + len(p), len(head))) + head + p) for head, p in pairs]
shape = session.get_session().get_service_model("bedrock-runtime").operation_model("ConverseStream").output_shape
raw = type("Body", (), {"stream": lambda self: iter(frames), "close": lambda self: None})()
tool_use, content = {}, []  # the User Guide's stream_messages loop; botocore decodes the frames
for chunk in eventstream.EventStream(raw, shape.members["stream"], parsers.EventStreamJSONParser(), "ConverseStream"):
    if "contentBlockStart" in chunk:
        tool_use.update(chunk["contentBlockStart"]["start"]["toolUse"])
    elif "contentBlockDelta" in chunk:
        tool_use["input"] = tool_use.get("input", "") + chunk["contentBlockDelta"]["delta"]["toolUse"]["input"]
    elif "contentBlockStop" in chunk:
        content.append({**tool_use, "input": json.loads(tool_use["input"])})  # (then tool_use = {}: one stop here)
print("tool uses the loop runs after the stream:", content)
raise SystemExit(1 if content == [{"toolUseId": "b", "name": "pay", "input": {"amount": 100}}] else 0)
