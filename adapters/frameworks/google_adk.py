"""``python -m callsafe.adapters.frameworks.google_adk``: Google's Agent Development Kit
(``google-adk``) running its own tools over the Gemini API's ``streamGenerateContent``.

The program: an ``LlmAgent`` over ``google.adk.models.Gemini`` with a ``google.genai.Client``
of its own (``HttpOptions(base_url=...)`` at callsafe's loopback provider, an
``httpx.AsyncClient`` as its HTTP client, no retries), one ``BaseTool`` per catalog entry
(the catalog's JSON Schema as ``parameters_json_schema``), and ``InMemoryRunner.run_async``
with ``StreamingMode.SSE``: ADK reads the SSE stream (``google/adk/utils/streaming_utils.py``
aggregates the partial responses), builds the final model response and runs its function
calls; each tool body hands ``args`` to callsafe's executor.

Call keys: Gemini gives a call no id unless the API sends one (ADK then makes up an
``adk-...`` id of its own), so a tool's call is keyed by its place: the n-th tool run of the
stream is the n-th ``functionCall`` on the wire (as :mod:`callsafe.providers.gemini` names
calls: item = ordinal, call = ``<responseId>#<ordinal>``).

Cancellation: ``run_async(abort_signal=...)``, ADK's own cancel of an invocation.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents._streaming_mode import StreamingMode
from google.adk.agents.run_config import RunConfig
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import Client, types

from callsafe.adapters.frameworks._program import FrameworkProgram, main
from callsafe.adapters.http_reads import tls_context
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import TurnStarted


class _CatalogTool(BaseTool):
    def __init__(self, program: GoogleADKProgram, name: str, schema: dict[str, Any]) -> None:
        super().__init__(name=name, description=name)
        self.program = program
        self.schema = schema

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(name=self.name, description=self.name, parameters_json_schema=self.schema)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        nth = self.program.runs
        self.program.runs += 1
        call_id = tool_context.function_call_id
        wire_id = call_id if call_id and not call_id.startswith("adk-") else None
        return {"result": self.program.execute(self.name, args, wire_id, nth)}


class GoogleADKProgram(FrameworkProgram):
    name = "google-adk:gemini:agent"
    protocol = "gemini"

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0
        self._abort: asyncio.Event | None = None

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        self.runs = 0
        http = self.watching_client()
        # The process's TLS context for the client's own sync client and WebSocket: without
        # one, every Client loads the CA bundle twice (about half a second a stream here).
        tls = tls_context()
        options = types.HttpOptions(
            base_url=base_url, httpx_async_client=http, client_args={"verify": tls}, async_client_args={"ssl": tls}
        )
        client = Client(api_key="callsafe-loopback", http_options=options)
        tools: list[Any] = [_CatalogTool(self, name, dict(spec.schema)) for name, spec in env.tools.items()]
        agent = LlmAgent(name="callsafe", model=Gemini(model="gemini-2.5-flash", client=client), tools=tools)
        runner = InMemoryRunner(agent=agent, app_name="callsafe")
        session = await runner.session_service.create_session(app_name="callsafe", user_id="u")
        self._abort = abort = asyncio.Event()
        message = types.Content(role="user", parts=[types.Part(text="go")])
        config = RunConfig(streaming_mode=StreamingMode.SSE, max_llm_calls=3)
        try:
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=message, run_config=config, abort_signal=abort
            ):
                pass
        finally:
            self._abort = None
            await http.aclose()

    def cancel(self, task: asyncio.Task[None]) -> None:
        if self._abort is not None:
            self._abort.set()
        else:
            task.cancel()


if __name__ == "__main__":
    raise SystemExit(main(GoogleADKProgram))
