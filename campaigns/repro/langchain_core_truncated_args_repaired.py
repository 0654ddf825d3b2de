"""langchain-core: a call cut off at finish_reason=length ('{"amount":10' of 100) comes out of
AIMessageChunk aggregation as a valid tool_call with args {"amount": 10}; parse_partial_json
repaired it, and tool_calls (what LangGraph's ToolNode runs) ignore the finish reason."""

import sys

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

gathered = AIMessageChunk(
    content="", tool_call_chunks=[tool_call_chunk(name="pay", args='{"amount":10', id="call_a", index=0)]
)
gathered += AIMessageChunk(content="", response_metadata={"finish_reason": "length"}, chunk_position="last")
print("tool_calls:", gathered.tool_calls, "| invalid:", gathered.invalid_tool_calls, "|", gathered.response_metadata)
sys.exit(1 if gathered.tool_calls and gathered.tool_calls[0]["args"] == {"amount": 10} else 0)
