"""openai: ResponseStreamState hands out function_call_arguments.done with arguments that its own
output_item.done and response.completed contradict, without a word: one call, two final texts,
and each surface runs one of them (INV-CANCEL)."""

import json
import sys
from typing import Any

from openai._models import construct_type
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

WIRE = r"""
{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}
{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"pay","arguments":""}}
{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"amount\":100}"}
{"type":"response.function_call_arguments.done","sequence_number":3,"item_id":"fc_1","output_index":0,"arguments":"{\"amount\":999}"}
{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"pay","arguments":"{\"amount\":100}","status":"completed"}}
{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"pay","arguments":"{\"amount\":100}","status":"completed"}]}}"""
state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
texts: list[Any] = []
for line in WIRE.split():
    for e in state.handle_event(construct_type(type_=ResponseStreamEvent, value=json.loads(line))):
        texts += [e.arguments] if e.type == "response.function_call_arguments.done" else []
        texts += [o.arguments for o in e.response.output] if e.type == "response.completed" else []
print("final arguments handed out for call_1 (arguments.done, then response.completed):", texts)
sys.exit(1 if len(set(texts)) > 1 else 0)
