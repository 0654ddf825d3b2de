"""openai: with non-strict tools, finish_reason "length" still emits
tool_calls.function.arguments.done with the arguments, presented as done (INV-CANCEL)."""

import json
import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_calls: Any = None, finish: str | None = None) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": tool_calls} if tool_calls else {}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


state: Any = ChatCompletionStreamState(
    input_tools=[{"type": "function", "function": {"name": "pay", "parameters": {}}}]
)
a = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}}
list(state.handle_chunk(chunk([a])))
done = [e for e in state.handle_chunk(chunk(finish="length")) if e.type == "tool_calls.function.arguments.done"]
print("at finish_reason=length:", [(e.type, e.name, json.loads(e.arguments)) for e in done])
sys.exit(1 if done else 0)
