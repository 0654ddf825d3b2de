"""anthropic: a second message_start while a tool_use block is open is ignored; the second message's
block 0 deltas go to the FIRST message's block 0, presented as finished with them (INV-EXACT-ARGS)."""

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
{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_b","name":"pay","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":5}"}}
{"type":"content_block_stop","index":0}"""
snapshot: Any = None
bufs: dict[int, bytes] = {}
stopped: list[Any] = []
for line in WIRE.split():
    event: Any = construct_type(type_=RawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    events: Any = build_events(event=event, message_snapshot=snapshot)
    stopped += [(e.content_block.id, e.content_block.input) for e in events if e.type == "content_block_stop"]
print("content_block_stop:", stopped, "| snapshot:", snapshot.id, [(b.id, b.input) for b in snapshot.content])
sys.exit(1 if stopped and stopped[0][0] == "toolu_a" else 0)
