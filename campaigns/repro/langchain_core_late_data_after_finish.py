"""langchain-core: AIMessageChunk aggregation appends argument chunks that arrive after a
chunk already carried finish_reason: '{"amount":1' ended with "tool_calls", then "00}" comes in
and tool_calls holds {"amount": 100}, a reading the end never gave (issue 18)."""

import sys

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

done = {"finish_reason": "tool_calls"}
first = tool_call_chunk(name="pay", args='{"amount":1', id="call_a", index=0)
gathered = AIMessageChunk(content="", tool_call_chunks=[first], response_metadata=done)
late = tool_call_chunk(name=None, args="00}", id=None, index=0)
gathered += AIMessageChunk(content="", tool_call_chunks=[late], response_metadata=done, chunk_position="last")
print("tool_calls after a late fragment:", gathered.tool_calls)
sys.exit(1 if gathered.tool_calls and gathered.tool_calls[0]["args"] == {"amount": 100} else 0)
