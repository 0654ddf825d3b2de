"""pydantic-ai: an Agent runs a tool call of a response that ended with finish_reason "length":
only a last call whose JSON does not parse is refused (check_incomplete_tool_call) (INV-CANCEL)."""

import sys

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

WIRE = rb"""
data:{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":"{\"amount\":100}"}}]}}]}

data:{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}

"""
REPLY = rb"""
data:{"id":"d","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

"""
bodies = [WIRE]
serve = httpx2.MockTransport(lambda request: httpx2.Response(200, content=bodies.pop() if bodies else REPLY))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))
agent, ran = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))), []
agent.tool_plain(lambda amount: ran.append(("pay", amount)) or "paid", name="pay")  # type: ignore[call-overload, func-returns-value]
agent.run_stream_sync("go").get_output()
print("tools run for a response that ended with finish_reason=length:", ran)
sys.exit(1 if ran else 0)
