"""openai: a tool call delta without "index" (Mistral sends none) makes
ChatCompletionStreamState.handle_chunk raise TypeError: the call is lost (LIVE-DISPATCH)."""

import sys
from typing import Any

from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

call = {"id": "gSIMJiOkT", "function": {"name": "weather", "arguments": '{"location": "San Francisco"}'}}
choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}
body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
state: Any = ChatCompletionStreamState()
try:
    list(state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=body)))
except TypeError as exc:
    print("handle_chunk raised TypeError:", exc)
    sys.exit(1)
print("handled")
