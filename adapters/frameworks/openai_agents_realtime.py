"""``python -m callsafe.adapters.frameworks.openai_agents_realtime``: the OpenAI Agents SDK's
realtime agents (``agents.realtime``: ``RealtimeAgent``, ``RealtimeRunner``) running their own
function tools over the OpenAI Realtime API, a WebSocket session.

The program: a ``RealtimeAgent`` with one ``FunctionTool`` per catalog entry (the catalog's
JSON Schema as its parameters), ``RealtimeRunner(agent).run(model_config={"url": ...})``
pointed at the loopback provider's Realtime endpoint (``ws://127.0.0.1:PORT/.../realtime``),
and, as the SDK's docs show, ``session.send_message(...)`` then ``async for event in
session``. The SDK's model (``OpenAIRealtimeWebSocketModel``, over ``websockets``) reads the
server events and emits a tool call for each ``function_call`` output item whose status is
``completed``; the session runs the tool, whose body parses the arguments as
``@function_tool`` does and checks them against the tool's JSON Schema (``jsonschema``: a
``@function_tool`` checks them against the pydantic model of its signature; the catalog's
tools are JSON Schemas), then hands them to callsafe's executor. The program leaves the
session once the response is done and every tool it started has ended.

Call keys: the response id (``response.created``) and each call's item are read from the
server events the session forwards (``raw_model_event``, :meth:`WireIds.read_event`); the
tool gets its call id from the SDK (``ToolContext.tool_call_id``).

No cancellation capability: a realtime session is interrupted by the user's speech, which
the trace carries (a barge-in is the response ending ``cancelled``), not by an application
call; traces with application cancels are not applicable.
"""

from __future__ import annotations

import asyncio
from typing import Any

import jsonschema
from agents import FunctionTool
from agents.exceptions import ModelBehaviorError
from agents.realtime import RealtimeAgent, RealtimeRunner
from agents.tool import _parse_function_tool_json_input
from agents.tool_context import ToolContext

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted

_DONE_WAIT = 5.0  # seconds the program waits for the tools a finished response started
FINISHED_CALL = ("function_call", "completed")  # (type, status) of an output item the SDK runs


class OpenAIAgentsRealtimeProgram(FrameworkProgram):
    name = "openai-agents:openai-realtime:realtime-agent"
    protocol = "openai-realtime"
    capabilities: frozenset[str] = frozenset()

    def _tool(self, name: str, schema: dict[str, Any]) -> FunctionTool:
        checker = jsonschema.validators.validator_for(schema)(schema)

        async def invoke(context: ToolContext[Any], raw: str) -> str:
            try:  # what @function_tool does with the model's argument text
                arguments = _parse_function_tool_json_input(tool_name=name, input_json=raw)
            except ModelBehaviorError as exc:
                return f"error: {exc}"
            if not checker.is_valid(arguments):  # what @function_tool's pydantic model does for its signature
                return f"error: the arguments of {name} do not match its parameters"
            return self.execute(name, arguments, context.tool_call_id)

        return FunctionTool(name, name, schema, invoke, strict_json_schema=False)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        url = base_url.replace("http://", "ws://", 1) + "/v1/realtime?model=gpt-realtime"
        tools: list[Any] = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent: RealtimeAgent[Any] = RealtimeAgent(name="callsafe", instructions="", tools=tools)
        session = await RealtimeRunner(agent).run(model_config={"url": url, "api_key": "callsafe-loopback"})
        async with session:
            await session.send_message("go")
            events = session.__aiter__()
            completed: set[str] = set()  # call ids of function_call items done with status completed
            ended = 0
            done = False
            while not done or ended < len(completed):
                try:
                    event = await (asyncio.wait_for(anext(events), _DONE_WAIT) if done else anext(events))
                except (StopAsyncIteration, TimeoutError):
                    return  # the session ended, or a finished response's tools did not all end
                if event.type == "raw_model_event" and event.data.type == "raw_server_event":
                    data = event.data.data
                    if isinstance(data, dict):
                        self.ids.read_event(data)
                        item = data.get("item") if data.get("type") == "response.output_item.done" else None
                        if isinstance(item, dict) and (item.get("type"), item.get("status")) == FINISHED_CALL:
                            completed.add(str(item.get("call_id")))
                        done = done or data.get("type") == "response.done"
                elif event.type == "tool_end":
                    ended += 1
                elif event.type == "error":
                    return  # the socket dropped or the server refused: the session is over


if __name__ == "__main__":
    raise SystemExit(main(OpenAIAgentsRealtimeProgram, acks=False))  # a WebSocket session: no HTTP body to acknowledge
