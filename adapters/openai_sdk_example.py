"""``python -m callsafe.adapters.openai_sdk_example``: an ordinary ``openai`` SDK program,
certified in wire mode over HTTP.

The program does what application code does with the SDK: ``OpenAI()`` (the base URL and
key come from ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, which callsafe sets to its
loopback provider), ``chat.completions.create(..., stream=True)``, the SDK's own HTTP client
and SSE decoder, the tool-call deltas accumulated by index, and the tools run when the
response finished with ``finish_reason == "tool_calls"``. Nothing in the SDK is replaced:
callsafe sees only what the program sends to its executor.

What callsafe finds in it (``--generators wire``): accumulating by ``index``, as the SDK's
own examples do, glues two calls that share an index into one call named ``paypay``
(INV-EXACT-ARGS, INV-TERMINAL), the bug the library matrix finds in the SDKs' accumulators.

``callsafe certify 'exec:python -m callsafe.adapters.openai_sdk_example'``
"""

from __future__ import annotations

import json
from typing import Any

import openai

from callsafe.adapters.stdio import serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, Event, TurnStarted


class OpenAIChatProgram:
    """The application around the SDK: binds calls to the turn in force, streams a
    completion through the SDK when callsafe has a response ready, runs its tool calls."""

    name = "openai-sdk-example"
    protocol = "openai-chat"
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
        raise RuntimeError("this program reads its stream over HTTP (wire='http')")

    def end_stream(self) -> None:
        """The body ended: the SDK's iterator ends by itself."""

    def restart(self) -> None:
        self.turn = None

    def close(self) -> None:
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None
        client = openai.OpenAI(max_retries=0)
        tools: Any = [
            {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}} for name in env.tools
        ]
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        response_id = ""
        stream: Any = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "go"}],
            tools=tools,
            stream=True,
        )
        with stream:
            for chunk in stream:
                response_id = chunk.id
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                    if delta.id:
                        call["id"] = delta.id
                    if delta.function is not None:
                        call["name"] += delta.function.name or ""
                        call["arguments"] += delta.function.arguments or ""
                if choice.finish_reason:
                    finish = choice.finish_reason
        if finish != "tool_calls" or turn is None:
            return
        for index, call in sorted(calls.items()):
            try:
                arguments = json.loads(call["arguments"])  # no arguments at all is not "{}"
            except ValueError:
                continue  # not a call the model finished: never run it
            key = CallKey(turn.tenant, turn.turn, response_id, str(index), call["id"] or f"{response_id}#{index}")
            env.executor(key, turn.actor, call["name"], arguments, turn.traceparent)


def main() -> int:
    return serve(OpenAIChatProgram, wire="http")


if __name__ == "__main__":
    raise SystemExit(main())
