"""The loopback provider's Gemini Live endpoint: a ``BidiGenerateContent`` WebSocket session.

Why a module of its own: a Live session is a conversation with its own handshake, not the
OpenAI Realtime API's (:mod:`callsafe.loopback.realtime`). The client's first message is
``setup`` (the model, the tools), answered by ``setupComplete``; then the client sends
``clientContent`` (turns of text), ``realtimeInput`` (audio, text, activity signals) and
``toolResponse`` (its functions' results), and the server streams ``serverContent``,
``toolCall`` and ``toolCallCancellation`` messages (:mod:`callsafe.providers.gemini_live`).
The server writes each message as one binary frame of UTF-8 JSON, as the Live API does
(the ``google-genai`` SDK reads them with ``recv(decode=False)``).

Paths: any path ending in ``BidiGenerateContent``: the SDK builds
``{base}/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent``
for the Gemini Developer API (and ``.../LlmBidiService/BidiGenerateContent`` for Vertex AI).
The SDK speaks only ``wss``: with an API key it rewrites the base URL's scheme to ``wss``
(``_api_client._websocket_base_url``), and in every mode it gives ``websockets`` an SSL
context, which ``websockets`` refuses for a ``ws://`` address. So a program reaches the
session at the loopback's TLS listener
(:meth:`callsafe.loopback.server.LoopbackServer.tls_base_url`) with
``http_options.base_url=https://127.0.0.1:TLSPORT`` and the loopback's certificate in
``SSL_CERT_FILE`` (:mod:`callsafe.loopback.tls`), which the SDK loads for its WebSocket.

What a session gets: ``setupComplete`` for its ``setup`` (a first message that is not a
``setup`` closes the session with 1007, as the API refuses it); for its first
``clientContent`` or ``realtimeInput``, the session's share of the trace
(:meth:`callsafe.loopback.realtime.Session.respond`), and the socket drops (no close frame)
where the trace disconnects; for a later ``clientContent``, the short text reply; for
``toolResponse`` and later ``realtimeInput``, nothing (the trace already holds the turn's
continuation). A message that is not a JSON object closes the session with 1007.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Final

from callsafe.loopback.realtime import Session

__all__ = ["PATH", "PATH_END", "serve_live_session"]

PATH_END: Final = "BidiGenerateContent"
PATH: Final = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
"""The Gemini Developer API's Live path, as the SDK builds it from its base URL."""
CONTENT_FIELDS: Final = frozenset({"clientContent", "client_content"})
TURN_FIELDS: Final = CONTENT_FIELDS | {"realtimeInput", "realtime_input"}
"""The client messages that ask for the model's turn; the API reads protobuf JSON, which
takes a field by its JSON name or its proto name, and the SDK sends the proto names
(``client_content``, ``realtime_input``, ``tool_response``)."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def serve_live_session(scope: Mapping[str, Any], receive: Receive, send: Send, session: Session) -> None:
    """One Live session, from the handshake to the client's close (or the trace's drop)."""
    if (await receive()).get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})

    async def send_message(text: str) -> None:
        await send({"type": "websocket.send", "bytes": text.encode("utf-8")})

    set_up = answered = False
    while True:
        message = await receive()
        if message.get("type") == "websocket.disconnect":
            return
        if message.get("type") != "websocket.receive":
            continue
        try:
            body = json.loads(message.get("text") or message.get("bytes") or b"")
        except ValueError:
            body = None
        if not isinstance(body, dict) or (not set_up and "setup" not in body):
            reason = "Request contains an invalid argument." if set_up else "the first message is a setup"
            await send({"type": "websocket.close", "code": 1007, "reason": reason})
            return
        if "setup" in body:
            set_up = True
            await send_message(json.dumps({"setupComplete": {}}))
        elif body.keys() & TURN_FIELDS:
            first = not answered
            if first or body.keys() & CONTENT_FIELDS:
                answered = True
                if await session.respond(send_message, first):
                    return  # no close frame: uvicorn closes the transport, as a dropped connection
        # toolResponse: the trace already holds what follows it
