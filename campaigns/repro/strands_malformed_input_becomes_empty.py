"""strands-agents: a tool call whose arguments do not parse ('}{'-glued objects) is run with
input {} (event_loop/streaming.py defaults unparsable input to an empty dict; harness-sdk #2051)."""

import httpx2
from openai import AsyncOpenAI
from strands import Agent
from strands.models.openai import OpenAIModel
from strands.tools.tools import PythonAgentTool

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
ARGS = '\\"amount\\":1}{\\"amount\\":2}'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"pay","arguments":"{' + ARGS + '"}}]}'
WIRE = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [WIRE], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
run = lambda use, **_: ran.append(use["input"]) or {"toolUseId": use["toolUseId"], "status": "success", "content": []}  # type: ignore[func-returns-value]  # noqa: E731
pay = PythonAgentTool("pay", {"name": "pay", "description": "pay", "inputSchema": {"json": PAY}}, run)  # type: ignore[arg-type]

Agent(model=OpenAIModel(client=client, model_id="m"), tools=[pay], callback_handler=None)("go")
print("a call with malformed arguments ran with input:", ran)
raise SystemExit(1 if ran else 0)
