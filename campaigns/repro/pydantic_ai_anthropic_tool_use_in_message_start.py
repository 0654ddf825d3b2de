"""pydantic-ai: an Agent over AnthropicModel reads no content from message_start: a complete tool_use
block there (programmatic tool calling sends them so) is never run (LIVE-DISPATCH)."""

import httpx2
from anthropic import AsyncAnthropic
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

TEXT = rb"""
data:{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"c","content":[{"type":"tool_use","id":"toolu_1","name":"pay","input":{"amount":100}}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}
data:{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}
data:{"type":"message_stop"}
"""
WIRE = b"".join(b"event:" + line[14 : line.index(b'"', 14)] + b"\n" + line + b"\n\n" for line in TEXT.split())
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=WIRE))
client = AsyncAnthropic(api_key="x", base_url="http://local.invalid", http_client=httpx2.AsyncClient(transport=serve))
agent, ran = Agent(AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client))), []
agent.tool_plain(lambda amount: ran.append(("pay", amount)) or "paid", name="pay")  # type: ignore[call-overload, func-returns-value]
try:
    agent.run_stream_sync("go").get_output()
except UnexpectedModelBehavior as exc:
    print("pydantic-ai:", exc)
print("tools run for a message whose message_start holds tool_use pay {'amount': 100}:", ran)
raise SystemExit(0 if ran == [("pay", 100)] else 1)
