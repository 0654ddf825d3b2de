"""litellm: stream_chunk_builder reports finish_reason "stop" for a stream whose chunks never
carried a finish_reason: a call that never got its terminal event is presented as finished
(INV-TERMINAL)."""

import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")  # no model price list download
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
from litellm.types.utils import ModelResponseStream

WIRE = r"""
{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":"{\"amount\":100}"}}]}}]}"""
response: Any = litellm.stream_chunk_builder([ModelResponseStream(**json.loads(line)) for line in WIRE.split()])
choice = response.choices[0]
print(
    "finish_reason:", choice.finish_reason, "| tool calls:", [c.function.arguments for c in choice.message.tool_calls]
)
sys.exit(1 if choice.finish_reason in ("stop", "tool_calls") else 0)
