"""openai: tool_calls.function.arguments.done fires for call a as soon as call b starts, before
the finish_reason "length" that cuts the response off; the stop comes too late (INV-CANCEL)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_calls: Any = None, finish: str | None = None) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": tool_calls} if tool_calls else {}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


tools: Any = [{"type": "function", "function": {"name": n, "parameters": {}, "strict": True}} for n in ("pay", "book")]
state: Any = ChatCompletionStreamState(input_tools=tools)
a = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}}
b = {"index": 1, "id": "call_b", "type": "function", "function": {"name": "book", "arguments": '{"day":"Tu'}}
done = [e for c in ([a], [b]) for e in state.handle_chunk(chunk(c)) if e.type.endswith("arguments.done")]
try:
    state.handle_chunk(chunk(finish="length"))
except Exception as exc:  # LengthFinishReasonError: too late, call a was already presented as done
    print("then:", type(exc).__name__)
print("presented as done before the finish_reason:", [(e.name, e.parsed_arguments) for e in done])
sys.exit(1 if done else 0)
