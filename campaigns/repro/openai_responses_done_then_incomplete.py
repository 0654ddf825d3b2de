"""openai: ResponseStreamState hands out response.function_call_arguments.done with complete
arguments, then the response ends response.incomplete (max_output_tokens): an application that
acts on the done event has run a call of a cut-off response (INV-CANCEL)."""

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
{"type":"response.incomplete","sequence_number":3,"response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"""
state = ResponseStreamState(input_tools=omit, text_format=omit)
kinds = []
for line in WIRE.split():
    kinds += [
        e.type for e in state.handle_event(cast(Any, construct_type(type_=ResponseStreamEvent, value=json.loads(line))))
    ]
print("events handed to the application, in order:", kinds[1:])
sys.exit(1 if kinds.index("response.function_call_arguments.done") < kinds.index("response.incomplete") else 0)
