"""openai: ResponseStreamState raises at response.completed because call a's item never got
response.output_item.done: the final response is lost, with call b in it, complete and valid
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
{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_a","call_id":"call_a","name":"pay","arguments":""}}
{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"pay","arguments":""}}
{"type":"response.output_item.done","sequence_number":3,"output_index":1,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"pay","arguments":"{\"amount\":100}","status":"completed"}}
{"type":"response.completed","sequence_number":4,"response":{"id":"r","status":"completed","output":[{"type":"function_call","id":"fc_b","call_id":"call_b","name":"pay","arguments":"{\"amount\":100}","status":"completed"}]}}"""
state = ResponseStreamState(input_tools=omit, text_format=omit)
try:
    for line in WIRE.split():
        event: Any = construct_type(type_=ResponseStreamEvent, value=json.loads(line))
        state.handle_event(event)
except RuntimeError as exc:
    print("response.completed raised:", exc, "| lost with it: call_b pay {'amount': 100}, complete and valid")
    sys.exit(1)
sys.exit(0)
