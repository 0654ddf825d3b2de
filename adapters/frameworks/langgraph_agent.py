"""``python -m callsafe.adapters.frameworks.langgraph_agent``: LangGraph (``langgraph``) running
its own tools over Chat Completions, through ``langchain-openai``.

The program: ``langgraph.prebuilt.create_react_agent`` over ``langchain_openai.ChatOpenAI``
(``streaming=True``, the loopback provider's base URL, ``max_retries=0``, an
``httpx2.AsyncClient`` whose responses are watched for the call keys), one
``StructuredTool`` per catalog entry (its ``args_schema`` a model with the catalog's required
fields, any value, extra fields allowed, and the call's id injected: ``InjectedToolCallId``), and
``agent.astream(...)`` drained. The model node streams the completion (``ChatOpenAI`` turns
each chunk into an ``AIMessageChunk``; langchain-core adds the chunks up, merging
``tool_call_chunks`` by ``index``, and parses each call's arguments with
``parse_partial_json``); the ``ToolNode`` runs the calls of the final message; the tool body
hands its keyword arguments to callsafe's executor, under the id LangGraph injects.

Cancellation: cancelling the run's asyncio task, how a LangGraph run is stopped.
"""

from __future__ import annotations

from typing import Annotated, Any

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


class LangGraphProgram(FrameworkProgram):
    name = "langgraph:openai-chat:agent"
    protocol = "openai-chat"

    def _tool(self, name: str, schema: dict[str, Any]) -> Any:
        from langchain_core.tools import InjectedToolCallId, StructuredTool
        from pydantic import ConfigDict, create_model

        required = [f for f in schema.get("required", []) if isinstance(f, str)]
        fields: Any = {field: (Any, ...) for field in required}
        fields["callsafe_call_id"] = (Annotated[str, InjectedToolCallId], ...)
        args = create_model(f"{name}_args", __config__=ConfigDict(extra="allow"), **fields)

        async def body(callsafe_call_id: str, **arguments: Any) -> str:
            return self.execute(name, arguments, callsafe_call_id)

        return StructuredTool.from_function(coroutine=body, name=name, description=name, args_schema=args)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        import httpx2
        from langchain_openai import ChatOpenAI
        from langgraph.prebuilt import create_react_agent
        from pydantic import SecretStr

        http = self.watching_client(httpx2)
        llm = ChatOpenAI(
            model="gpt-4o",
            api_key=SecretStr("callsafe-loopback"),
            base_url=f"{base_url}/v1",
            streaming=True,
            max_retries=0,
            http_async_client=http,
        )
        tools = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = create_react_agent(llm, tools)
        try:
            async for _ in agent.astream({"messages": [("user", "go")]}, {"recursion_limit": 6}):
                pass
        finally:
            await http.aclose()


if __name__ == "__main__":
    raise SystemExit(main(LangGraphProgram))
