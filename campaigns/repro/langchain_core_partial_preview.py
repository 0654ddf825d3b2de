"""langchain-core: mid-stream, the aggregate's tool_calls already hold the call as parsed with
a repaired prefix of its arguments, {"day": "Tue", "time": "1"} while "0:30" is still coming:
partial arguments exposed as a parsed call before the call ended (INV-TERMINAL if acted on)."""

import sys

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

first = AIMessageChunk(
    content="", tool_call_chunks=[tool_call_chunk(name="book", args='{"day":"Tue","time":"1', id="call_a", index=0)]
)
preview = first.tool_calls
final = first + AIMessageChunk(content="", tool_call_chunks=[tool_call_chunk(args='0:30"}', index=0)])
print("mid-stream tool_calls:", preview, "| final:", final.tool_calls)
sys.exit(1 if preview and preview[0]["args"] != final.tool_calls[0]["args"] else 0)
