"""crewai: an Agent runs the tool call of a Chat Completions response cut off by finish_reason "length" (INV-CANCEL)."""

import os

import httpx
from crewai import LLM, Agent
from crewai.tools import tool
from openai import OpenAI

os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false")
CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"pay","arguments":"{\\"amount\\":100}"}}]}'
WIRE = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"length"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [WIRE], []
chat = lambda r: r.url.path.endswith("/completions")  # noqa: E731 (crewAI also asks /responses/input_tokens)
sse = lambda: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode())  # noqa: E731
serve = httpx.MockTransport(lambda r: sse() if chat(r) else httpx.Response(404))
run = lambda amount: ran.append(amount) or "paid"  # noqa: E731
run.__doc__ = "Pay."
llm = LLM(model="gpt-4o", api_key="x", stream=True)
llm._client = OpenAI(api_key="x", base_url="http://l.invalid/v1", http_client=httpx.Client(transport=serve))
Agent(role="r", goal="g", backstory="b", llm=llm, tools=[tool("pay")(run)], max_iter=2).kickoff("go")
print("tools run for a response that ended with finish_reason=length:", ran)
raise SystemExit(1 if ran else 0)
