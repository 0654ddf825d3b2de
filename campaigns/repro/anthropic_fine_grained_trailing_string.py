"""anthropic, fine-grained tool streaming beta: a tool_use block cut off inside a string is
presented at content_block_stop with the partial string as a value, {"day": "Tue", "time": "10:"}
(INV-EXACT-ARGS): the beta accumulator parses with partial_mode="trailing-strings"."""

import json
import sys
from typing import Any

import httpx2
from anthropic._models import construct_type
from anthropic.lib.streaming._beta_messages import accumulate_event, build_events
from anthropic.types.beta import BetaRawMessageStreamEvent

WIRE = r"""
{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{}}}
{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"book","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"day\":\"Tue\",\"time\":\"10:"}}
{"type":"content_block_stop","index":0}"""
headers = httpx2.Headers({"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"})
snapshot: Any = None
bufs: dict[int, bytes] = {}
stopped: list[Any] = []
for line in WIRE.split():
    event: Any = construct_type(type_=BetaRawMessageStreamEvent, value=json.loads(line))
    snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs, request_headers=headers)
    events: Any = build_events(event=event, message_snapshot=snapshot)
    stopped += [e.content_block.input for e in events if e.type == "content_block_stop"]
print("content_block_stop presents tool_use input:", stopped)
sys.exit(1 if stopped and stopped[0].get("time") == "10:" else 0)
