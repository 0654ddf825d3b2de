"""litellm: chunks rebuilt with stream_chunk_builder turn a tool call whose streamed arguments were '' into '{}':
a call with no arguments at all (malformed JSON) is presented as a valid call with an empty object (INV-TERMINAL)."""

import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no model price list download
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
from litellm.types.utils import ModelResponseStream

WIRE = r"""
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":""}}]}}]}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"""
response: Any = litellm.stream_chunk_builder([ModelResponseStream(**json.loads(line)) for line in WIRE.split()])
arguments = response.choices[0].message.tool_calls[0].function.arguments
print("streamed arguments: '' | rebuilt arguments:", repr(arguments))
sys.exit(1 if arguments != "" else 0)
