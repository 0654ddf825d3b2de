"""``python -m callsafe.adapters.frameworks.crewai_agent``: crewAI (``crewai``) running its own
tools over Chat Completions, in the ``openai<3`` environment (``make venv-openai2``).

The program: a crewAI ``Agent`` with ``LLM(model="gpt-4o", stream=True)``, which crewAI
serves with its native OpenAI provider (``crewai/llms/providers/openai/completion.py``:
``_ahandle_streaming_completion`` accumulates tool-call deltas by ``index``, and
``_finalize_streaming_response`` hands them to the agent's executor), one ``BaseTool`` per
catalog entry, and ``Agent.kickoff_async``. The provider's ``AsyncOpenAI`` client is given an
``httpx`` client whose responses are watched for the call keys (``max_retries=0``). crewAI
validates a call's arguments against the tool's ``args_schema`` (here the catalog schema's
required fields, any value; other fields pass as they came) and runs ``_run``, whose body
hands the arguments to callsafe's executor.

Call keys: a crewAI tool is given its arguments only, and crewAI may run a response's calls
in parallel threads, so a run is keyed as the first call opened on the wire whose streamed
arguments are the run's arguments (:meth:`WireIds.key_by_arguments`), else as the n-th.

Cancellation: crewAI has no API to cancel a running kickoff (the standalone ``Agent`` and the
``Crew`` alike), so the program declares no ``cancellation`` capability and those traces are
not applicable to the row.
"""

from __future__ import annotations

import threading
from typing import Any

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted

# crewai's telemetry and trace upload are off: callsafe.offline, set by this package's __init__.


class CrewAIProgram(FrameworkProgram):
    name = "crewai:openai-chat:agent"
    protocol = "openai-chat"
    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0
        self.lock = threading.Lock()

    def _tool(self, name: str, schema: dict[str, Any]) -> Any:
        from crewai.tools import BaseTool
        from pydantic import ConfigDict, create_model

        required = [f for f in schema.get("required", []) if isinstance(f, str)]
        fields: Any = {field: (Any, ...) for field in required}
        args = create_model(f"{name}_args", __config__=ConfigDict(extra="allow"), **fields)
        program = self

        class CatalogTool(BaseTool):  # type: ignore[misc]
            def _run(self, **arguments: Any) -> str:
                with program.lock:  # parallel runs claim their calls one at a time
                    nth = program.runs
                    program.runs += 1
                    return program.execute_by_arguments(name, arguments, nth)

        return CatalogTool(name=name, description=name, args_schema=args)

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        from crewai import LLM, Agent
        from openai import AsyncOpenAI, OpenAI

        self.runs = 0
        url = f"{base_url}/v1"
        llm: Any = LLM(model="gpt-4o", api_key="callsafe-loopback", base_url=url, stream=True)
        http = self.watching_client()
        llm._async_client = AsyncOpenAI(api_key="callsafe-loopback", base_url=url, max_retries=0, http_client=http)
        sync = self.watching_client(sync=True)
        llm._client = OpenAI(api_key="callsafe-loopback", base_url=url, max_retries=0, http_client=sync)
        tools = [self._tool(name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = Agent(role="callsafe", goal="go", backstory="go", llm=llm, tools=tools, max_iter=3, verbose=False)
        try:
            await agent.kickoff_async("go")
        finally:
            await http.aclose()
            sync.close()


if __name__ == "__main__":
    raise SystemExit(main(CrewAIProgram))
