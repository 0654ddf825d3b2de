"""anthropic: a tool_use block cut off at max_tokens ('{"amount":10' of 100) is presented at
content_block_stop with input {"amount": 10}: partial JSON repaired into a finished call
(INV-EXACT-ARGS); the max_tokens stop reason only arrives after the block stopped."""

import json
import sys
from typing import Any

from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event, build_events
from anthropic.types import RawMessageStreamEvent

WIRE = r"""
{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"pay","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":10"}}
{"type":"content_block_stop","index":0}"""
snapshot: Any = None
bufs: dict[int, bytes] = {}
stopped: list[Any] = []
for line in WIRE.split():
    event: Any = construct_type(type_=RawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    events: Any = build_events(event=event, message_snapshot=snapshot)
    stopped += [e.content_block.input for e in events if e.type == "content_block_stop"]
print("content_block_stop presents tool_use input:", stopped, "from the fragment '{\"amount\":10'")
sys.exit(1 if stopped == [{"amount": 10}] else 0)
