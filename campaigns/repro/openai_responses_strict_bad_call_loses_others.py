"""openai: with strict tools, call a's arguments do not parse ('{"amount":10'), and the final
response raises at response.completed: call b, complete and valid, is lost with it
(LIVE-DISPATCH: validate per call, not per stream)."""

import json
import sys
from typing import Any

from openai._models import construct_type
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

WIRE = r"""
{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}
{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_a","call_id":"call_a","name":"pay","arguments":"{\"amount\":10","status":"completed"}}
{"type":"response.output_item.done","sequence_number":2,"output_index":1,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"pay","arguments":"{\"amount\":100}","status":"completed"}}
{"type":"response.completed","sequence_number":3,"response":{"id":"r","status":"completed","output":[{"type":"function_call","id":"fc_a","call_id":"call_a","name":"pay","arguments":"{\"amount\":10","status":"completed"},{"type":"function_call","id":"fc_b","call_id":"call_b","name":"pay","arguments":"{\"amount\":100}","status":"completed"}]}}"""
tools: Any = [{"type": "function", "name": "pay", "parameters": {}, "strict": True}]
state = ResponseStreamState(input_tools=tools, text_format=omit)
try:
    for line in WIRE.split():
        event: Any = construct_type(type_=ResponseStreamEvent, value=json.loads(line))
        state.handle_event(event)
except ValueError as exc:  # json.JSONDecodeError from call a's arguments
    print("response.completed raised:", type(exc).__name__, "| lost with it: call_b pay {'amount': 100}, valid")
    sys.exit(1)
sys.exit(0)
