"""anthropic: message_stop arrives while call a's tool_use block never got content_block_stop;
the final message (stop_reason tool_use) still holds the block, its input '{"amount":1' repaired
to {"amount": 1}: a call that never ended is presented as finished (INV-TERMINAL, INV-CANCEL)."""

import json
import sys
from typing import Any

from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event, build_events
from anthropic.types import RawMessageStreamEvent

WIRE = r"""
{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"pay","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":1"}}
{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}
{"type":"message_stop"}"""
snapshot: Any = None
bufs: dict[int, bytes] = {}
for line in WIRE.split():
    event: Any = construct_type(type_=RawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    final = [e.message for e in build_events(event=event, message_snapshot=snapshot) if e.type == "message_stop"]
blocks = [(b.name, b.input) for b in final[0].content if b.type == "tool_use"]
print("final message:", final[0].stop_reason, blocks, "| no content_block_stop was sent")
sys.exit(1 if blocks == [("pay", {"amount": 1})] else 0)
