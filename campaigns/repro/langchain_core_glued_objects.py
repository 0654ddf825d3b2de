"""langchain-core: malformed arguments '{"amount":1}{"amount":2}' (two glued objects) come out
as a valid tool_call with args {"amount": 1}, not as an invalid_tool_call (INV-EXACT-ARGS)."""

import sys

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

chunk = tool_call_chunk(name="pay", args='{"amount":1}{"amount":2}', id="call_a", index=0)
message = AIMessageChunk(content="", tool_call_chunks=[chunk]) + AIMessageChunk(content="", chunk_position="last")
print("tool_calls:", message.tool_calls, "| invalid_tool_calls:", message.invalid_tool_calls)
sys.exit(1 if message.tool_calls and not message.invalid_tool_calls else 0)
