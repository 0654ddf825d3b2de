"""langgraph: two tool calls on index 0 (later fragments without id) merge: one runs, one is lost (LIVE-DISPATCH)."""

import httpx2
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,%s}]}\n\n'
CALL = '"delta":{"tool_calls":[{"index":0,"id":"%s","function":{"name":"pay","arguments":"{\\"amount\\":1"}}]}'
MORE = '"delta":{"tool_calls":[{"index":0,"function":{"arguments":"00}"}}]}'
END = CHUNK % '"delta":{},"finish_reason":"tool_calls"' + "data: [DONE]\n\n"
CUT = CHUNK % (CALL % "a") + CHUNK % MORE + CHUNK % (CALL % "b") + CHUNK % MORE + END
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
raise SystemExit(print("tool runs of the two calls sharing index 0:", ran) or (1 if len(ran) < 2 else 0))
