"""strands-agents: two tool calls sharing index 0 are glued into one, run with {} (LIVE-DISPATCH)."""

import httpx2
from openai import AsyncOpenAI
from strands import Agent
from strands.models.openai import OpenAIModel
from strands.tools.tools import PythonAgentTool

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"%s","function":{"name":"pay","arguments":"{\\"amount\\":1}"}}]}'
END = CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CHUNK % (CALL % "a") + CHUNK % (CALL % "b") + END], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
run = lambda use, **_: ran.append(use["input"]) or {"toolUseId": use["toolUseId"], "status": "success", "content": []}  # type: ignore[func-returns-value]  # noqa: E731
pay = PythonAgentTool("pay", {"name": "pay", "description": "pay", "inputSchema": {"json": PAY}}, run)  # type: ignore[arg-type]

Agent(model=OpenAIModel(client=client, model_id="m"), tools=[pay], callback_handler=None)("go")
print("calls run of the two sharing index 0:", ran)
raise SystemExit(1 if len(ran) < 2 else 0)
