"""``python -m callsafe.adapters.gemini_live_example``: an ordinary voice-agent program on
google-genai's Live API client, certified in wire mode over a WebSocket.

The program does what Google's Live API tool-use guide has a client do:
``client.aio.live.connect(model=..., config=...)`` with the tools as function declarations,
a turn sent with ``send_client_content``, and, in ``async for message in
session.receive()``, each ``message.tool_call``'s function calls run at once and answered
with ``send_tool_response``. Nothing in the SDK is replaced: the SDK's WebSocket client
(``websockets``, over TLS: the SDK speaks only ``wss``) reads the loopback provider's
session, its certificate trusted through ``SSL_CERT_FILE`` as any private endpoint's is,
and callsafe sees only what the program sends to its executor.

What callsafe finds in it (``--generators wire-adversities``): the pattern has no memory of
the calls it ran, so a ``toolCall`` the stream repeats (mastra #22969: a Live call
dispatched from two frames) runs twice (INV-ONCE), and a call with an empty id (pipecat
#4987), which nobody can answer, runs. ``callsafe.guard`` behind the same client
(``callsafe.adapters.guard_sdk --protocol gemini-live``) runs each call once and refuses
the empty id.

``callsafe certify 'exec:python -m callsafe.adapters.gemini_live_example'``
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

from google import genai
from google.genai import types

from callsafe.adapters.stdio import read_reporter, serve
from callsafe.contract.target import TargetEnv
from callsafe.loopback.server import message_bytes
from callsafe.model.vocabulary import CallKey, Event, TurnStarted


class GeminiLiveProgram:
    """The application around the SDK's Live client: binds calls to the turn in force,
    opens a session when callsafe has a response ready, runs each function call of a
    ``toolCall`` when it arrives and answers it."""

    name = "gemini-live-example"
    protocol = "gemini-live"
    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.env: TargetEnv | None = None
        self.turn: TurnStarted | None = None

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.turn = None

    def receive(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event

    def receive_wire(self, payload: Any) -> None:
        raise RuntimeError("this program reads its stream over a WebSocket (wire='http')")

    def end_stream(self) -> None:
        """The turn ended: the program's loop stops at ``turnComplete`` by itself."""

    def restart(self) -> None:
        self.turn = None

    def close(self) -> None:
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None
        report = read_reporter()
        declarations = [{"name": name, "parameters_json_schema": {"type": "object"}} for name in env.tools]
        config: Any = {"response_modalities": ["TEXT"], "tools": [{"function_declarations": declarations}]}
        client = genai.Client(api_key="callsafe-loopback", http_options=types.HttpOptions(base_url=base_url))
        # the Live API names neither the response nor an item: the program names the model's
        # turn itself, and each call by its place among the ids it has seen
        response = f"live-{uuid.uuid4().hex[:8]}"
        items: dict[str, str] = {}
        read = 0

        async def session_turn() -> None:
            nonlocal read
            async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as session:
                await session.send_client_content(turns={"role": "user", "parts": [{"text": "go"}]}, turn_complete=True)
                async for message in session.receive():
                    read += len(message_bytes(message.model_dump(by_alias=True, exclude_none=True, mode="json")))
                    if message.tool_call and turn is not None:
                        answers = []
                        for call in message.tool_call.function_calls or []:
                            item = items.setdefault(call.id or "", str(len(items)))
                            key = CallKey(turn.tenant, turn.turn, response, item, call.id or "")
                            env.executor(key, turn.actor, call.name or "", dict(call.args or {}), turn.traceparent)
                            answers.append(types.FunctionResponse(id=call.id, name=call.name, response={"ok": True}))
                        await session.send_tool_response(function_responses=answers)
                    report(read, False)
                    if message.server_content and message.server_content.interrupted:
                        return  # the user spoke over the model: its turn is over

        try:
            asyncio.run(session_turn())
        except Exception as exc:  # the socket dropped (the SDK's APIError 1006)
            print(f"gemini-live-example: the session ended with {type(exc).__name__}", file=sys.stderr)
        finally:
            report(read, True)


def main() -> int:
    return serve(GeminiLiveProgram, wire="http", acks="bytes")


if __name__ == "__main__":
    raise SystemExit(main())
