"""llama-index: two tool calls that share index 0 are merged into one that never runs (LIVE-DISPATCH)."""

import asyncio

import httpx
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"%s","function":{"name":"pay","arguments":"{\\"amount\\":1}"}}]}'
END = CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CHUNK % (CALL % "a") + CHUNK % (CALL % "b") + END], []
serve = httpx.MockTransport(lambda r: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
llm = OpenAI(
    model="gpt-4o", api_key="x", api_base="http://l.invalid/v1", async_http_client=httpx.AsyncClient(transport=serve)
)
pay = FunctionTool.from_defaults(fn=lambda **kwargs: ran.append(kwargs) or "paid", name="pay", description="pay")


async def main() -> None:
    await FunctionAgent(tools=[pay], llm=llm, streaming=True).run(user_msg="go", max_iterations=5)


asyncio.run(main())
print("calls run of the two sharing index 0:", ran)
raise SystemExit(1 if len(ran) < 2 else 0)
