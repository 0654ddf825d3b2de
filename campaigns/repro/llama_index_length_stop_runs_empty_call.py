"""llama-index: a FunctionAgent runs a tool call that was cut off by finish_reason "length" before any
argument arrived, with the arguments {} (get_tool_calls_from_response parses '' as {}) (INV-CANCEL)."""

import asyncio

import httpx
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"pay","arguments":""}}]}'
WIRE = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"length"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [WIRE], []
serve = httpx.MockTransport(lambda r: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
llm = OpenAI(
    model="gpt-4o", api_key="x", api_base="http://l.invalid/v1", async_http_client=httpx.AsyncClient(transport=serve)
)
pay = FunctionTool.from_defaults(fn=lambda **kwargs: ran.append(kwargs) or "paid", name="pay", description="pay")


async def main() -> None:
    await FunctionAgent(tools=[pay], llm=llm, streaming=True).run(user_msg="go", max_iterations=5)


asyncio.run(main())
print("tools run for a response that ended with finish_reason=length:", ran)
raise SystemExit(1 if ran else 0)
