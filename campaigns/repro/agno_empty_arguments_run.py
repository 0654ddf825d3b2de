"""agno: a tool call that streamed no argument bytes runs with {} (INV-EXACT-ARGS)."""

import asyncio

import httpx2
from agno.agent import Agent
from agno.models.openai import OpenAIChat
from openai import AsyncOpenAI

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"pay","arguments":""}}]}'
CUT = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CUT], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))


def pay(amount: int = 0) -> str:
    return ran.append(amount) or "ok"  # type: ignore[func-returns-value]


async def main() -> None:
    agent = Agent(model=OpenAIChat(id="m", api_key="x", async_client=client), tools=[pay], telemetry=False)
    [_ async for _ in agent.arun("go", stream=True)]


asyncio.run(main())
raise SystemExit(print("tool runs of a call with no arguments streamed:", ran) or (1 if ran else 0))
