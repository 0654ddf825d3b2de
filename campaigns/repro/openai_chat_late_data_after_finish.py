"""openai: a fragment that arrives after the choice's finish_reason is appended: with a
finish_reason on every chunk (jcode #1326), '{"amount":1' ended with "tool_calls", then "00}"
comes in and the final call runs {"amount":100}, a reading the end never gave (issue 18)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_call: Any, finish: str) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": [tool_call]}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


state: Any = ChatCompletionStreamState()
first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":1'}}
list(state.handle_chunk(chunk(first, "tool_calls")))
list(state.handle_chunk(chunk({"index": 0, "function": {"arguments": "00}"}}, "tool_calls")))
call = state.get_final_completion().choices[0].message.tool_calls[0]
print("final call after a late fragment:", call.function.name, call.function.arguments)
sys.exit(1 if call.function.arguments == '{"amount":100}' else 0)
