"""openai: two calls sharing tool index 0 become one call, pay({"amount": 100}) under the id
"call_acall_b", from call a's '{"amount":1' and call b's '00}' (INV-EXACT-ARGS)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def chunk(tool_calls: Any = None, finish: str | None = None) -> Any:
    choice = {"index": 0, "delta": {"tool_calls": tool_calls} if tool_calls else {}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
    return construct_type(type_=ChatCompletionChunk, value=body)


tool: Any = {"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}, "strict": True}}
state: Any = ChatCompletionStreamState(input_tools=[tool])
a = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "pay", "arguments": '{"amount":1'}}
b = {"index": 0, "id": "call_b", "type": "function", "function": {"arguments": ""}}
events = [e for c in ([a], [b], [{"index": 0, "function": {"arguments": "00}"}}]) for e in state.handle_chunk(chunk(c))]
events += state.handle_chunk(chunk(finish="tool_calls"))
done = [(e.name, e.parsed_arguments) for e in events if e.type == "tool_calls.function.arguments.done"]
call_id = state.get_final_completion().choices[0].message.tool_calls[0].id
print("arguments.done events:", done, "| final tool call id:", call_id)
sys.exit(1 if call_id not in ("call_a", "call_b") or ("pay", {"amount": 100}) in done else 0)
