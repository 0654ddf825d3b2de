"""langchain-core: a second call at the same index (new id) gets its own entry, but its id-less
argument chunks merge into the FIRST entry with that index: call a runs {"amount": 100} from
a's '{"amount":1' and b's '00}' (INV-EXACT-ARGS); call b has no arguments."""

import sys
from typing import Any

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

parts = [dict(name="pay", args='{"amount":1', id="call_a"), dict(name="pay", args="", id="call_b"), dict(args="00}")]
gathered: Any = None
for part in parts:
    chunk = AIMessageChunk(content="", tool_call_chunks=[tool_call_chunk(index=0, **part)])
    gathered = chunk if gathered is None else gathered + chunk
calls = {c["id"]: c["args"] for c in gathered.tool_calls}
print("tool_calls:", calls)
sys.exit(1 if calls.get("call_a") == {"amount": 100} else 0)
