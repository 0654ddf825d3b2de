"""pydantic-ai: ModelResponsePartsManager.handle_tool_call_delta, fed a second call id at the same
vendor index (as OpenAIStreamedResponse does), keeps one part: id replaced by call_b and the
arguments glued, '{"amount":1' + '00}' = {"amount": 100} (INV-EXACT-ARGS)."""

import sys

from pydantic_ai._parts_manager import ModelResponsePartsManager
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models import ModelRequestParameters

manager = ModelResponsePartsManager(model_request_parameters=ModelRequestParameters())
manager.handle_tool_call_delta(vendor_part_id=0, tool_name="pay", args='{"amount":1', tool_call_id="call_a")
manager.handle_tool_call_delta(vendor_part_id=0, tool_name=None, args="", tool_call_id="call_b")
manager.handle_tool_call_delta(vendor_part_id=0, tool_name=None, args="00}", tool_call_id=None)
parts = [(p.tool_call_id, p.tool_name, p.args_as_dict()) for p in manager.get_parts() if isinstance(p, ToolCallPart)]
print("parts:", parts)
sys.exit(1 if ("call_b", "pay", {"amount": 100}) in parts else 0)
