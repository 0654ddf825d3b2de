"""llama-index: a call's arguments continued after the next call opened are cut, the prefix parsed as final (#22580)."""

import asyncio

import httpx
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
TC = '"delta":{"tool_calls":[{"index":%d,%s"function":{%s"arguments":"%s"}}]}'
END = CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
A, B = TC % (0, '"id":"a",', '"name":"pay",', '{\\"amount\\":1'), TC % (1, '"id":"b",', '"name":"pay",', "")
bodies, ran = [CHUNK % A + CHUNK % B + CHUNK % (TC % (0, "", "", "00}")) + END], []
serve = httpx.MockTransport(lambda r: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
llm = OpenAI(
    model="gpt-4o", api_key="x", api_base="http://l.invalid/v1", async_http_client=httpx.AsyncClient(transport=serve)
)
pay = FunctionTool.from_defaults(fn=lambda **kwargs: ran.append(kwargs) or "paid", name="pay", description="pay")


async def main() -> None:
    await FunctionAgent(tools=[pay], llm=llm, streaming=True).run(user_msg="go", max_iterations=5)


asyncio.run(main())
print('arguments run for {"amount":100}:', ran)
raise SystemExit(1 if {"amount": 1} in ran else 0)
