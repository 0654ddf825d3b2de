"""smolagents: a tool call of a response cut off by finish_reason "length" runs (INV-CANCEL)."""

import httpx2
from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"pay","arguments":"{\\"amount\\":100}"}}]}'
CUT = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"length"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CUT], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
client = {"max_retries": 0, "http_client": httpx2.Client(transport=serve)}


class Pay(Tool):
    name, description, output_type = "pay", "pay", "string"
    inputs = {"amount": {"type": "integer", "description": "amount"}}  # noqa: RUF012

    def forward(self, amount: int) -> str:
        ran.append(amount)
        return "ok"


model = OpenAIServerModel("m", api_base="http://local.invalid/v1", api_key="x", client_kwargs=client, retry=False)
ToolCallingAgent(tools=[Pay()], model=model, stream_outputs=True, max_steps=1, verbosity_level=-1).run("go")
print("tool runs of a call cut off by finish_reason length:", ran)
raise SystemExit(1 if ran else 0)
