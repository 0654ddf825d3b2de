"""The openai SDK program (``callsafe.adapters.openai_sdk_example``) declaring the
``cancellation`` capability, so that traces that drop a connection apply to it; with the
argument ``eager`` it runs a call as soon as its arguments parse (the node example's bug),
which a reconnect that replays the call makes it run twice; with ``careful`` it remembers
the calls of a stream whose connection dropped (the spec cancels them) and never runs them
when a reconnect replays them.

``exec:python tests/exec_programs/reconnecting_sdk.py [eager|careful]``"""

from __future__ import annotations

import json
import sys
from typing import Any

import openai

from callsafe.adapters.openai_sdk_example import OpenAIChatProgram
from callsafe.adapters.stdio import serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, CancelTurn, Event


class Reconnecting(OpenAIChatProgram):
    name = "openai-sdk-example (cancellation)"
    capabilities = frozenset({"cancellation"})

    def receive(self, event: Event) -> None:
        super().receive(event)
        if isinstance(event, CancelTurn) and self.turn is not None and event.turn == self.turn.turn:
            self.turn = None


class Eager(Reconnecting):
    name = "eager openai-sdk program (cancellation)"

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None and turn is not None
        client = openai.OpenAI(max_retries=0)
        stream: Any = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], stream=True
        )
        calls: dict[int, dict[str, Any]] = {}
        with stream:
            for chunk in stream:
                for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": "", "ran": False})
                    call["id"] = delta.id or call["id"]
                    if delta.function is not None:
                        call["name"] += delta.function.name or ""
                        call["arguments"] += delta.function.arguments or ""
                    try:
                        arguments = json.loads(call["arguments"])
                    except ValueError:
                        continue
                    if not call["ran"]:
                        call["ran"] = True  # "it parses, so it is done"
                        key = CallKey(turn.tenant, turn.turn, chunk.id, str(delta.index), call["id"] or "?")
                        env.executor(key, turn.actor, call["name"], arguments, turn.traceparent)


class Careful(Reconnecting):
    name = "careful openai-sdk program (cancellation)"

    def start(self, env: TargetEnv) -> None:
        super().start(env)
        self.cancelled: set[str] = set()

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None and turn is not None
        client = openai.OpenAI(max_retries=0)
        stream: Any = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], stream=True
        )
        calls: dict[int, dict[str, Any]] = {}
        finish, response_id = None, ""
        try:
            with stream:
                for chunk in stream:
                    response_id = chunk.id
                    choice = chunk.choices[0] if chunk.choices else None
                    for delta in (choice.delta.tool_calls or []) if choice else []:
                        call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                        call["id"] = delta.id or call["id"]
                        if delta.function is not None:
                            call["name"] += delta.function.name or ""
                            call["arguments"] += delta.function.arguments or ""
                    finish = (choice.finish_reason if choice else None) or finish
        except openai.APIError:
            self.cancelled |= {c["id"] for c in calls.values() if c["id"]}  # the drop cancels them
            raise
        if finish != "tool_calls":
            return
        for index, call in sorted(calls.items()):
            if call["id"] in self.cancelled:
                continue  # a replay never revives a cancelled call
            key = CallKey(turn.tenant, turn.turn, response_id, str(index), call["id"] or f"{response_id}#{index}")
            env.executor(key, turn.actor, call["name"], json.loads(call["arguments"]), turn.traceparent)


PROGRAMS = {"eager": Eager, "careful": Careful}

if __name__ == "__main__":
    raise SystemExit(serve(PROGRAMS.get(sys.argv[1] if sys.argv[1:] else "", Reconnecting), wire="http"))
