"""anthropic: tool_use input '{"amount":1}{"amount":2}' (two glued objects: malformed) is
presented at content_block_stop, and in the final message with stop_reason tool_use, as
{"amount": 1}: the trailing object is silently dropped (INV-EXACT-ARGS)."""

import json
import sys
from typing import Any

from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event, build_events
from anthropic.types import RawMessageStreamEvent

WIRE = r"""
{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"pay","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":1}{\"amount\":2}"}}
{"type":"content_block_stop","index":0}
{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"""
snapshot: Any = None
bufs: dict[int, bytes] = {}
stopped: list[Any] = []
for line in WIRE.split():
    event: Any = construct_type(type_=RawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    events: Any = build_events(event=event, message_snapshot=snapshot)
    stopped += [e.content_block.input for e in events if e.type == "content_block_stop"]
print("content_block_stop:", stopped, "| final:", snapshot.stop_reason, snapshot.content[0].input)
sys.exit(1 if stopped == [{"amount": 1}] else 0)
