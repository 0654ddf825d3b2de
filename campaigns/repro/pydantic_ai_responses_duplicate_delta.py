"""pydantic-ai: an Agent over OpenAIResponsesModel appends a delta delivered twice with the same
sequence_number ('{"amount":100}00}'): the call's arguments no longer parse and it never runs (LIVE-DISPATCH)."""

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

TEXT = rb"""
data:{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}
data:{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"pay","arguments":""}}
data:{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"amount\":1"}
data:{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"00}"}
data:{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"00}"}
data:{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"pay","arguments":"{\"amount\":100}","status":"completed"}}
data:{"type":"response.completed","sequence_number":5,"response":{"id":"r","status":"completed","output":[{"id":"fc_1","type":"function_call","call_id":"call_1","name":"pay","arguments":"{\"amount\":100}","status":"completed"}]}}
---
data:{"type":"response.output_text.delta","sequence_number":0,"item_id":"m","output_index":0,"content_index":0,"delta":"ok"}
data:{"type":"response.completed","sequence_number":1,"response":{"id":"d","status":"completed","output":[]}}
"""
bodies = [w.strip().replace(b"\n", b"\n\n") + b"\n\n" for w in TEXT.split(b"---")][::-1]  # reply, wire
serve = httpx2.MockTransport(lambda r: httpx2.Response(200, content=bodies.pop() if len(bodies) > 1 else bodies[0]))
client = AsyncOpenAI(api_key="x", base_url="http://local.invalid/v1", http_client=httpx2.AsyncClient(transport=serve))
agent, ran = Agent(OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(openai_client=client))), []
agent.tool_plain(lambda amount: ran.append(("pay", amount)) or "paid", name="pay")  # type: ignore[call-overload, func-returns-value]
agent.run_stream_sync("go").get_output()
print("tools run for a call whose arguments were '{\"amount\":100}':", ran)
raise SystemExit(0 if ran == [("pay", 100)] else 1)
