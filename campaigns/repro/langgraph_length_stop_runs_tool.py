"""langgraph: a tool call of a response cut off by finish_reason "length" runs (INV-CANCEL)."""

import httpx2
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"pay","arguments":"{\\"amount\\":100}"}}]}'
CUT = CHUNK % CALL + CHUNK % '"delta":{},"finish_reason":"length"' + "data: [DONE]\n\n"
REPLY = CHUNK % '"delta":{"content":"ok"},"finish_reason":"stop"' + "data: [DONE]\n\n"
bodies, ran = [CUT], []
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=(bodies.pop() if bodies else REPLY).encode()))
http = httpx2.Client(transport=serve)
llm = ChatOpenAI(model="m", api_key="x", base_url="http://local.invalid/v1", streaming=True, http_client=http)


@tool
def pay(amount: int) -> str:
    """Pay an amount."""
    return ran.append(amount) or "ok"  # type: ignore[func-returns-value]


create_react_agent(llm, [pay]).invoke({"messages": [("user", "go")]})
raise SystemExit(print("tool runs of a call cut off by finish_reason length:", ran) or (1 if ran else 0))
