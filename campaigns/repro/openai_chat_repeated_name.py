"""openai: a server that repeats the call's id and name on every chunk gets them concatenated:
the finished call is "paypay" with id "call_acall_a", a tool that does not exist (LIVE-DISPATCH)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_calls: Any = None, finish: str | None = None) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": tool_calls} if tool_calls else {}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


state: Any = ChatCompletionStreamState()
for part in ('{"amount":', "100}"):
    list(
        state.handle_chunk(
            chunk([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": part}}])
        )
    )
list(state.handle_chunk(chunk(finish="tool_calls")))
call = state.get_final_completion().choices[0].message.tool_calls[0]
print("final call:", call.id, call.function.name, call.function.arguments)
sys.exit(1 if (call.id, call.function.name) != ("call_a", "pay") else 0)
