"""pydantic-ai: an Agent appends a fragment that came after the finish_reason ('{"amount":1' with
"tool_calls", then "00}", jcode #1326) and runs pay(amount=100), a reading the end never gave."""

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

WIRE = rb"""
data:{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":"{\"amount\":1"}}]},"finish_reason":"tool_calls"}]}

data:{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"00}"}}]},"finish_reason":"tool_calls"}]}

data:[DONE]

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
print("tools run after a late fragment:", ran)
raise SystemExit(1 if ("pay", 100) in ran else 0)
