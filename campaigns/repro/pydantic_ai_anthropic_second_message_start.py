"""pydantic-ai (AnthropicModel): a second message_start (another id) is ignored; the spliced call runs."""

import httpx2
from anthropic import AsyncAnthropic
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

TEXT = rb"""
data:{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}
data:{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"pay","input":{}}}
data:{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"amount\":1"}}
data:{"type":"message_start","message":{"id":"m1-2","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}
data:{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"00}"}}
data:{"type":"content_block_stop","index":0}
data:{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}
data:{"type":"message_stop"}
data:{"type":"message_start","message":{"id":"m2","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}
data:{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"ok"}}
data:{"type":"message_stop"}
"""
sse = [b"event:" + e[14 : e.index(b'"', 14)] + b"\n" + e + b"\n\n" for e in TEXT.split()]
bodies = [b"".join(sse[-3:]), b"".join(sse[:-3])]  # the reply (last three events), then the stream under test
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=bodies.pop() if len(bodies) > 1 else bodies[0]))
client = AsyncAnthropic(api_key="x", base_url="http://local.invalid", http_client=httpx2.AsyncClient(transport=serve))
agent, ran = Agent(AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client))), []
agent.tool_plain(lambda amount: ran.append(("pay", amount)) or "paid", name="pay")  # type: ignore[call-overload, func-returns-value]
agent.run_stream_sync("go").get_output()
raise SystemExit(print("tools run for a stream spliced from two messages (m1, then m1-2):", ran) or (1 if ran else 0))
