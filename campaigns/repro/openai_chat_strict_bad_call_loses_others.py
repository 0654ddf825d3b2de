"""openai: with strict tools, call a's arguments do not parse ('{"amount":10') and the state raises
at a's done event: the stream is over, and call b, complete and valid, is never presented as
done (LIVE-DISPATCH: validate per call, not per stream)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_calls: Any = None, finish: str | None = None) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": tool_calls} if tool_calls else {}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


state: Any = ChatCompletionStreamState(input_tools=[{"type": "function", "function": {"name": "pay", "strict": True}}])
a = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":10'}}
b = {"index": 1, "id": "call_b", "type": "function", "function": {"name": "pay", "arguments": '{"amount":100}'}}
done: list[str] = []
try:  # the application's read loop, which ends with the first exception
    for c in (chunk([a]), chunk([b]), chunk(finish="tool_calls")):
        done += [e.name for e in state.handle_chunk(c) if e.type == "tool_calls.function.arguments.done"]
except ValueError as exc:  # json.JSONDecodeError from parsing call a
    print("raised:", type(exc).__name__, "| calls presented as done:", done)
    sys.exit(1 if not done else 0)
sys.exit(0)
