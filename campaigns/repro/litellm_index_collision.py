"""litellm: stream_chunk_builder merges two calls sharing tool index 0 into one: the last id and
name win and the arguments are joined, '{"amount":1' + '00}' = pay {"amount":100} as call_b
(INV-EXACT-ARGS)."""

import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no model price list download
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
from litellm.types.utils import ModelResponseStream

WIRE = r"""
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":"{\"amount\":1"}}]}}]}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"arguments":"00}"}}]}}]}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"""
response: Any = litellm.stream_chunk_builder([ModelResponseStream(**json.loads(line)) for line in WIRE.split()])
calls = [(c.id, c.function.name, c.function.arguments) for c in response.choices[0].message.tool_calls]
print("rebuilt tool calls:", calls, "| finish_reason:", response.choices[0].finish_reason)
sys.exit(1 if ("call_b", "pay", '{"amount":100}') in calls else 0)
