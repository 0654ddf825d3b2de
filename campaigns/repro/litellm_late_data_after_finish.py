"""litellm: stream_chunk_builder appends a fragment that arrives after the choice's
finish_reason: '{"amount":1' ended with "tool_calls", then "00}" (a finish_reason on every
chunk, jcode #1326) rebuilds pay {"amount":100}, a reading the end never gave (issue 18)."""

import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no model price list download
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
from litellm.types.utils import ModelResponseStream

WIRE = r"""
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":"{\"amount\":1"}}]},"finish_reason":"tool_calls"}]}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"00}"}}]},"finish_reason":"tool_calls"}]}"""
response: Any = litellm.stream_chunk_builder([ModelResponseStream(**json.loads(line)) for line in WIRE.split()])
calls = [c.function.arguments for c in response.choices[0].message.tool_calls]
print("rebuilt after a late fragment:", calls, "| finish_reason:", response.choices[0].finish_reason)
sys.exit(1 if '{"amount":100}' in calls else 0)
