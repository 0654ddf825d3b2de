"""langchain-core: a server that repeats the tool name on every chunk gets it concatenated
("paypay"); the id is deduplicated, the name is not, so the call names no tool (LIVE-DISPATCH)."""

import sys
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

gathered: Any = None
for args in ('{"amount":', "100}"):
    chunk = AIMessageChunk(content="", tool_call_chunks=[tool_call_chunk(name="pay", args=args, id="call_a", index=0)])
    gathered = chunk if gathered is None else gathered + chunk
print("tool_calls:", gathered.tool_calls)
sys.exit(1 if gathered.tool_calls[0]["name"] != "pay" else 0)
