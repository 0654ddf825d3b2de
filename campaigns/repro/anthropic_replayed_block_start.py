"""anthropic: a replayed content_block_start (the same block, index 0, sent again) is read as a
new block: the final message holds the call twice, once with its input and once as a phantom
tool_use with input {} (and with two calls, the blocks after it shift: the second call's
deltas fill the phantom), so an application that runs every tool_use block runs one it never
got (INV-EXACT-ARGS)."""

import json
import sys
from typing import Any

from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent

WIRE = r"""
{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"pay","input":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"pay","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":100}"}}
{"type":"content_block_stop","index":0}"""
snapshot: Any = None
bufs: dict[int, bytes] = {}
for line in WIRE.split():
    event: Any = construct_type(type_=RawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
blocks = [(b.id, b.input) for b in snapshot.content if b.type == "tool_use"]
print("tool_use blocks in the final message:", blocks)
sys.exit(1 if blocks != [("toolu_a", {"amount": 100})] else 0)
