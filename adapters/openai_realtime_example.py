"""``python -m callsafe.adapters.openai_realtime_example``: an ordinary voice-agent program
on the ``openai`` SDK's realtime client, certified in wire mode over a WebSocket.

The program does what OpenAI's Realtime guide has a client do with function calling:
``client.realtime.connect(model=...)``, the tools in ``session.update``,
``response.create``, and each function call run when its
``response.function_call_arguments.done`` arrives (the event that carries the call's
name, id and complete arguments). Nothing in the SDK is replaced: the SDK's WebSocket
client (``websockets``) reads the loopback provider's session, and callsafe sees only
what the program sends to its executor.

What callsafe finds in it (``--generators wire``): the API sends
``function_call_arguments.done`` also for a call the response was *interrupted* in (the
SDK's own type says so), so when the user speaks over the model (a barge-in, the response
``cancelled``), the program runs a call the user interrupted (INV-TERMINAL: a call run
without its terminal event). ``callsafe.guard`` behind the same client
(``callsafe.adapters.guard_sdk --protocol openai-realtime``) runs a call only on its
``completed`` item.

``callsafe certify 'exec:python -m callsafe.adapters.openai_realtime_example'``
"""

from __future__ import annotations

import json
import sys
from typing import Any

import openai

from callsafe.adapters.http_reads import plain_client
from callsafe.adapters.stdio import read_reporter, serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, Event, TurnStarted

SESSION_EVENTS = frozenset({"session.created", "session.updated"})


class OpenAIRealtimeProgram:
    """The application around the SDK's realtime client: binds calls to the turn in force,
    opens a session when callsafe has a response ready, runs each call at its
    ``function_call_arguments.done``."""

    name = "openai-realtime-example"
    protocol = "openai-realtime"
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
        """The response ended: the program's loop stops at ``response.done`` by itself."""

    def restart(self) -> None:
        self.turn = None

    def close(self) -> None:
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None
        report = read_reporter()
        # its HTTP client over the process's TLS context (a default one loads the CA bundle per stream)
        client = openai.OpenAI(base_url=base_url, api_key="loopback", max_retries=0, http_client=plain_client("openai"))
        tools: Any = [{"type": "function", "name": name, "parameters": {"type": "object"}} for name in env.tools]
        read = 0
        try:
            with client.realtime.connect(model="gpt-realtime") as connection:
                connection.session.update(session={"type": "realtime", "tools": tools})
                connection.response.create()
                while True:
                    raw = connection.recv_bytes()
                    event: Any = connection.parse_event(raw)
                    if event.type not in SESSION_EVENTS:
                        read += len(raw)
                    if event.type == "response.function_call_arguments.done" and turn is not None:
                        self._run(env, turn, event)
                    report(read, False)
                    if event.type == "response.done":
                        return
        except Exception as exc:  # the socket dropped (websockets' ConnectionClosed)
            print(f"openai-realtime-example: the session ended with {type(exc).__name__}", file=sys.stderr)
        finally:
            report(read, True)

    @staticmethod
    def _run(env: TargetEnv, turn: TurnStarted, event: Any) -> None:
        try:
            arguments = json.loads(event.arguments)
        except ValueError:
            return  # arguments that do not parse are not a call to run
        key = CallKey(turn.tenant, turn.turn, event.response_id, event.item_id, event.call_id)
        env.executor(key, turn.actor, event.name, arguments, turn.traceparent)


def main() -> int:
    return serve(OpenAIRealtimeProgram, wire="http", acks="bytes")


if __name__ == "__main__":
    raise SystemExit(main())
