"""openai: ResponseStreamState passes a replayed response.function_call_arguments.done (same
sequence_number, as a reconnect re-delivers it) through again: the call is "done" twice (INV-ONCE)."""

import json
import sys
from typing import Any, cast

from openai._models import construct_type
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

WIRE = r"""
{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}
{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"pay","arguments":""}}
{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_1","output_index":0,"arguments":"{\"amount\":100}"}
{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_1","output_index":0,"arguments":"{\"amount\":100}"}"""
state, seen = ResponseStreamState(input_tools=omit, text_format=omit), []
for line in WIRE.split():
    events = state.handle_event(cast(Any, construct_type(type_=ResponseStreamEvent, value=json.loads(line))))
    seen += [(e.sequence_number, e.arguments) for e in events if e.type == "response.function_call_arguments.done"]
print("function_call_arguments.done events handed to the application:", seen)
sys.exit(1 if len(seen) > 1 else 0)
