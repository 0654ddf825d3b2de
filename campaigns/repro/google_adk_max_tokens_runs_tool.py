"""google-adk: an agent runs a streamed function call cut off by finishReason MAX_TOKENS (INV-CANCEL)."""

import asyncio

import httpx
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode  # type: ignore[attr-defined]
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import Client, types

OPEN = '{"functionCall":{"name":"pay","id":"a","willContinue":true}}'
ARGS = '{"functionCall":{"partialArgs":[{"jsonPath":"$.amount","numberValue":100}],"willContinue":true}}'
CHUNK = 'data: {"candidates":[{"content":{"role":"model","parts":[%s]},"index":0%s}],"responseId":"r"}\r\n\r\n'
WIRE = CHUNK % (OPEN, "") + CHUNK % (ARGS, "") + CHUNK % ('{"text":""}', ',"finishReason":"MAX_TOKENS"')
REPLY = CHUNK % ('{"text":"ok"}', ',"finishReason":"STOP"')
bodies, ran = [WIRE], []
serve = httpx.MockTransport(lambda r: httpx.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
http = types.HttpOptions(base_url="http://l.invalid", httpx_async_client=httpx.AsyncClient(transport=serve))
model = Gemini(model="gemini-2.5-flash", client=Client(api_key="x", http_options=http))
pay = lambda amount: ran.append(amount)  # noqa: E731
pay.__name__ = "pay"
runner = InMemoryRunner(agent=LlmAgent(name="a", model=model, tools=[pay]), app_name="a")
session = asyncio.run(runner.session_service.create_session(app_name="a", user_id="u"))
go, sse = types.Content(role="user", parts=[types.Part(text="go")]), RunConfig(streaming_mode=StreamingMode.SSE)
for _ in runner.run(user_id="u", session_id=session.id, new_message=go, run_config=sse):
    pass
print("tools run for a response that ended with finishReason=MAX_TOKENS:", ran)
raise SystemExit(1 if ran else 0)
