"""``python -m callsafe.adapters.guard_sdk --protocol P``: an agent program that reads its
model's stream with the real ``openai`` or ``anthropic`` SDK and hands it to
:class:`callsafe.guard.Guard`, certified end to end over HTTP.

``callsafe certify 'exec:python -m callsafe.adapters.guard_sdk --protocol anthropic-messages'``
runs it in wire mode over the loopback provider: for every response of a trace, callsafe
asks the program to stream one completion; the program opens it as application code does
(``client.chat.completions.create(..., stream=True)``, ``client.responses.create(...,
stream=True)`` or ``client.messages.create(..., stream=True)``, the SDK's own HTTP client
and SSE decoder reading the adversarially cut bytes the loopback serves; for
``openai-realtime``, ``client.realtime.connect(...)``, a WebSocket session whose
``response.create`` gets the stream as server events; for ``gemini-live``, google-genai's
``client.aio.live.connect(...)`` over the loopback's TLS listener, read with
``turn.astream``) and iterates
``turn.stream(sdk_stream)``; the guard runs each finished, permitted call through the
executor callsafe owns. Application events (turns, cancels, confirmations, operator
controls, restarts) arrive meanwhile on the program's main thread and go to the guard's
methods, as in :class:`callsafe.targets.guard.GuardTarget`, whose behaviour this program
shares; the stream runs in a thread of its own, which the guard's lock makes safe.

A dropped connection is what the SDK raises when the loopback stops a body mid-stream: the
guard has then ended the stream as disconnected (nothing it left open runs), and the
program goes on, as an agent's read loop that catches it does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from callsafe.adapters.http_reads import plain_client, reporting_client
from callsafe.adapters.stdio import read_reporter, serve
from callsafe.contract.target import Target
from callsafe.guard import ClosedGuard, GuardError
from callsafe.model.vocabulary import Disconnect, Event
from callsafe.targets.guard import GUARD_STORES, GuardTarget

__all__ = ["PROTOCOLS", "GuardSDKProgram", "main"]

PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages", "openai-realtime", "gemini-live")
SESSION_EVENTS = frozenset({"session.created", "session.updated"})
"""The Realtime session's own greetings: no part of the response stream callsafe serves."""


class GuardSDKProgram(GuardTarget):
    """The guard behind an SDK that reads the stream over HTTP (``wire="http"``)."""

    def __init__(self, store: str = "memory", protocol: str = "openai-chat") -> None:
        super().__init__(store, protocol)
        self.name = f"guard-sdk:{store}:{protocol}"

    def receive(self, event: Event) -> None:
        if isinstance(event, Disconnect) and self._reader is None:
            return  # the SDK sees the connection drop itself: the guard ends the stream then
        # A drop while the validator runs (callsafe delivers it to the stream's thread, inside
        # the validator): the SDK cannot see it before the validator returns, so the program
        # ends the stream as disconnected now, as an application told of the drop by its
        # transport does; the business answer is then ignored, as the spec's window says.
        super().receive(event)

    def receive_wire(self, payload: Any) -> None:
        raise RuntimeError("this program reads its stream over HTTP (wire='http')")

    def end_stream(self) -> None:
        """The body ended: the SDK's iterator ends by itself."""

    def stream(self, base_url: str) -> None:
        """Stream one completion from ``base_url`` through the SDK into the guard."""
        turn = self._turn
        if turn is None:
            return  # no turn in force: an application has no request to make
        if self.protocol == "openai-realtime":
            self._realtime(base_url, turn)
            return
        if self.protocol == "gemini-live":
            self._gemini_live(base_url, turn)
            return
        try:
            self._read(turn, self._request(base_url))
        except ClosedGuard:
            return  # the process restarted under this stream: its connection is gone
        except GuardError as exc:  # a stream the guard refused to read: ended safely, recorded
            print(f"guard-sdk: {type(exc).__name__}: {exc}", file=sys.stderr)
        except Exception as exc:  # the SDK's own error for a dropped connection or an error event
            print(f"guard-sdk: the stream ended with {type(exc).__name__}", file=sys.stderr)

    def _read(self, turn: Any, source: Any) -> None:
        """``turn.stream(source)``, with the stream's reader kept (``self._reader``) while it
        is read, so that a drop delivered inside the validator ends it (:meth:`receive`); in
        executor mode the guard runs each call it hands over."""
        reader = self._reader = turn.open_stream()
        clean = False
        try:
            try:
                for item in source:
                    reader.feed(item)
            except Exception as exc:
                reader.read_error(exc)
                raise
            clean = True
            reader.end(clean=True)
        finally:
            if self._reader is reader:
                self._reader = None
            if not clean:
                reader.end(clean=False)

    def _realtime(self, base_url: str, turn: Any) -> None:
        """One Realtime session: ``client.realtime.connect``, the catalog as the session's
        tools, ``response.create``, and the server events up to ``response.done`` into the
        guard. Each message is read as its bytes (``recv_bytes``) and parsed by the SDK
        (``parse_event``), so the program reports how far it has read in the bytes the
        loopback wrote (the session's own greetings are not the stream's)."""
        import openai

        report = read_reporter()
        catalog = self.guard.tools if self.guard is not None else {}
        tools: Any = [
            {"type": "function", "name": name, "parameters": dict(spec.schema)} for name, spec in catalog.items()
        ]
        client = openai.OpenAI(base_url=base_url, api_key="loopback", max_retries=0, http_client=plain_client("openai"))
        read = 0

        def events(connection: Any) -> Any:
            nonlocal read
            try:
                while True:
                    raw = connection.recv_bytes()
                    event = connection.parse_event(raw)
                    if event.type not in SESSION_EVENTS:
                        read += len(raw)
                    yield event
                    report(read, False)  # the guard has handled it (and run what it made ready)
                    if event.type == "response.done":
                        return
            finally:
                report(read, True)

        try:
            with client.realtime.connect(model="gpt-realtime") as connection:
                connection.session.update(session={"type": "realtime", "tools": tools})
                connection.response.create()
                for _call in turn.stream(events(connection), protocol="openai-realtime"):
                    pass  # executor mode: the guard ran it
        except ClosedGuard:
            return
        except GuardError as exc:
            print(f"guard-sdk: {type(exc).__name__}: {exc}", file=sys.stderr)
        except Exception as exc:  # the socket dropped (websockets' ConnectionClosed), or the SDK failed
            print(f"guard-sdk: the session ended with {type(exc).__name__}", file=sys.stderr)

    def _gemini_live(self, base_url: str, turn: Any) -> None:
        """One Gemini Live session: google-genai's ``client.aio.live.connect`` (the loopback's
        TLS address, its certificate trusted through ``SSL_CERT_FILE``), the catalog as the
        session's function declarations, one ``clientContent`` turn, and the server messages
        of the model's turn (up to ``turnComplete``, or ``interrupted``: the user's barge-in
        ends it) into the guard's ``astream``. The SDK parses each message itself, so the
        bytes read are counted as the message's compact JSON, which is what the loopback
        wrote (key order aside, which does not change a length)."""
        import asyncio

        from google import genai
        from google.genai import types

        from callsafe.loopback.server import message_bytes

        report = read_reporter()
        catalog = self.guard.tools if self.guard is not None else {}
        declarations = [{"name": name, "parameters_json_schema": dict(spec.schema)} for name, spec in catalog.items()]
        config: Any = {"response_modalities": ["TEXT"], "tools": [{"function_declarations": declarations}]}
        client = genai.Client(api_key="callsafe-loopback", http_options=types.HttpOptions(base_url=base_url))

        async def session_turn() -> None:
            async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as session:
                await session.send_client_content(turns={"role": "user", "parts": [{"text": "go"}]}, turn_complete=True)

                async def messages() -> Any:
                    read = 0
                    try:
                        async for message in session.receive():
                            payload = message.model_dump(by_alias=True, exclude_none=True, mode="json")
                            read += len(message_bytes(payload))
                            yield message
                            report(read, False)  # the guard has handled it (and run what it made ready)
                            content = message.server_content
                            if content is not None and content.interrupted:
                                return  # the user spoke over the model: its turn is over
                    finally:
                        report(read, True)

                async for _call in turn.astream(messages(), protocol="gemini-live"):
                    pass  # executor mode: the guard ran it

        try:
            asyncio.run(session_turn())
        except ClosedGuard:
            return
        except GuardError as exc:
            print(f"guard-sdk: {type(exc).__name__}: {exc}", file=sys.stderr)
        except Exception as exc:  # the socket dropped (the SDK's APIError 1006), or the SDK failed
            print(f"guard-sdk: the session ended with {type(exc).__name__}", file=sys.stderr)

    def _request(self, base_url: str) -> Any:
        """The request an agent makes, with the catalog as its ``tools=``. Its HTTP client
        reports how far it has read each body (``read`` {bytes}), so that callsafe delivers a
        control event only after the program has handled the stream bytes before it in the
        trace (``docs/target-protocol.md``, "Order")."""
        catalog = self.guard.tools if self.guard is not None else {}
        schemas = {name: dict(spec.schema) for name, spec in catalog.items()}
        messages: Any = [{"role": "user", "content": "go"}]
        if self.protocol == "anthropic-messages":
            import anthropic

            tools: Any = [{"name": name, "input_schema": schema} for name, schema in schemas.items()]
            client = anthropic.Anthropic(
                base_url=base_url, max_retries=0, http_client=reporting_client("anthropic", read_reporter())
            )
            return client.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, messages=messages, tools=tools, stream=True
            )
        import openai

        oa = openai.OpenAI(base_url=base_url, max_retries=0, http_client=reporting_client("openai", read_reporter()))
        if self.protocol == "openai-responses":
            tools = [{"type": "function", "name": n, "parameters": s, "strict": False} for n, s in schemas.items()]
            return oa.responses.create(model="gpt-4.1", input="go", tools=tools, stream=True)
        tools = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in schemas.items()]
        return oa.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools, stream=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m callsafe.adapters.guard_sdk")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="openai-chat")
    parser.add_argument("--store", choices=GUARD_STORES, default="memory")
    args = parser.parse_args(argv)

    def factory() -> Target:
        return GuardSDKProgram(args.store, args.protocol)

    return serve(factory, wire="http", acks="bytes")


if __name__ == "__main__":
    raise SystemExit(main())
