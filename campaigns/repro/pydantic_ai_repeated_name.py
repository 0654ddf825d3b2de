"""pydantic-ai: a server that repeats the tool name on every chunk of one call gets it concatenated
by ModelResponsePartsManager.handle_tool_call_delta: the call names tool "paypay" (LIVE-DISPATCH)."""

import sys

from pydantic_ai._parts_manager import ModelResponsePartsManager
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models import ModelRequestParameters

manager = ModelResponsePartsManager(model_request_parameters=ModelRequestParameters())
for fragment in ('{"amount":', "100}"):  # what OpenAIStreamedResponse passes for each chunk
    manager.handle_tool_call_delta(vendor_part_id=0, tool_name="pay", args=fragment, tool_call_id="call_a")
parts = [(p.tool_call_id, p.tool_name, p.args_as_dict()) for p in manager.get_parts() if isinstance(p, ToolCallPart)]
print("parts:", parts)
sys.exit(1 if parts[0][1] != "pay" else 0)
