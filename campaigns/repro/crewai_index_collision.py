"""crewai: two tool calls that share index 0 are merged into one that never runs (LIVE-DISPATCH)."""

import os

import httpx
from crewai import LLM, Agent
from crewai.tools import tool
from openai import OpenAI

os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false")
CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"%s","function":{"name":"pay","arguments":"{\\"amount\\":1}"}}]}'
END = CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CHUNK % (CALL % "a") + CHUNK % (CALL % "b") + END], []
chat = lambda r: r.url.path.endswith("/completions")  # noqa: E731 (crewAI also asks /responses/input_tokens)
sse = lambda: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode())  # noqa: E731
serve = httpx.MockTransport(lambda r: sse() if chat(r) else httpx.Response(404))
run = lambda amount: ran.append(amount) or "paid"  # noqa: E731
run.__doc__ = "Pay."
llm = LLM(model="gpt-4o", api_key="x", stream=True)
llm._client = OpenAI(api_key="x", base_url="http://l.invalid/v1", http_client=httpx.Client(transport=serve))
Agent(role="r", goal="g", backstory="b", llm=llm, tools=[tool("pay")(run)], max_iter=2).kickoff("go")
print("calls run of the two sharing index 0:", ran)
raise SystemExit(1 if len(ran) < 2 else 0)
