"""A program that reads Gemini's ``streamGenerateContent?alt=sse`` over HTTP from
``GOOGLE_GEMINI_BASE_URL`` (httpx, no Gemini SDK is installed here), decodes the SSE and the
payloads with callsafe's Gemini parser, and runs the calls that completed once the response
completed: certify's loopback provider serving Gemini live, end to end.

``exec:python tests/exec_programs/gemini_http.py``"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx

from callsafe.adapters.stdio import serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, CallTerminal, Event, Fragment, ResponseTerminal, TurnStarted
from callsafe.providers import registry
from callsafe.providers.sse import SSEDecoder


class GeminiOverHTTP:
    name = "gemini over http (httpx and callsafe's parser)"
    protocol = "gemini"
    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.env: TargetEnv | None = None
        self.turn: TurnStarted | None = None

    def start(self, env: TargetEnv) -> None:
        self.env, self.turn = env, None

    def receive(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event

    def receive_wire(self, payload: Any) -> None:
        raise RuntimeError("this program reads its stream over HTTP")

    def end_stream(self) -> None:
        """The body ended: the read loop ends by itself."""

    def restart(self) -> None:
        self.turn = None

    def close(self) -> None:
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        assert env is not None and turn is not None
        url = f"{os.environ['GOOGLE_GEMINI_BASE_URL']}/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        parser = registry.get("gemini").new_parser(turn.turn, "r")
        events: list[Event] = []
        decoder = SSEDecoder()
        with httpx.stream("POST", url, params={"alt": "sse"}, json={}, timeout=30) as response:
            response.raise_for_status()
            for piece in response.iter_raw():
                for sse in decoder.feed(piece):
                    events += parser.feed(json.loads(sse.data))
        events += [e for sse in decoder.close() for e in parser.feed(json.loads(sse.data))]
        events += parser.finish(clean=True)
        if not any(isinstance(e, ResponseTerminal) and e.reason == "completed" for e in events):
            return
        done = {e.call for e in events if isinstance(e, CallTerminal) and e.reason == "completed"}
        for call in dict.fromkeys(e.call for e in events if isinstance(e, Fragment) and e.call in done):
            first = next(e for e in events if isinstance(e, Fragment) and e.call == call)
            text = "".join(e.text for e in events if isinstance(e, Fragment) and e.call == call)
            tool = next(
                getattr(e, "tool", "") for e in events if e.kind == "call_opened" and getattr(e, "call", "") == call
            )
            key = CallKey(turn.tenant, turn.turn, first.response, first.item, call)
            env.executor(key, turn.actor, tool, json.loads(text), turn.traceparent)


if __name__ == "__main__":
    # --no-acks: the program opts out of acknowledging its reads (its order is then best effort)
    raise SystemExit(serve(GeminiOverHTTP, wire="http", acks=False if "--no-acks" in sys.argv else None))
