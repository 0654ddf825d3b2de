"""openai-agents: a streamed run runs the tool call of a body that ended without any finish_reason (INV-CANCEL)."""

import asyncio

import httpx2
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"pay","arguments":"{\\"amount\\":100}"}}]}'
WIRE = CHUNK % CALL  # and the body ends: no finish_reason, no [DONE]
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [WIRE], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))
pay = function_tool(lambda amount: ran.append(amount) or "paid", name_override="pay")  # type: ignore[func-returns-value]


async def main() -> None:
    set_tracing_disabled(True)
    agent = Agent(name="a", model=OpenAIChatCompletionsModel("gpt-4o", openai_client=client), tools=[pay])
    async for _ in Runner.run_streamed(agent, "go").stream_events():
        pass


asyncio.run(main())
print("tools run for a body that ended without a finish_reason:", ran)
raise SystemExit(1 if ran else 0)
