"""The loopback provider's OpenAI Realtime endpoint: a WebSocket session at ``.../realtime``.

Why a module of its own: a Realtime session is a conversation, not a request and a body.
The client connects (the ``openai`` SDK's ``client.realtime.connect(model=...)`` opens
``ws://HOST:PORT/v1/realtime?model=M`` from ``base_url=http://HOST:PORT/v1``), the server
greets it with ``session.created``, and responses stream as JSON text messages when the
client asks for one (``response.create``). uvicorn speaks the WebSocket protocol through
the maintained ``websockets`` library (its ``websockets-sansio`` implementation); what is
here is only which server events answer which client event.

What a session gets:

* ``session.created`` as soon as it opens; ``session.updated`` for a ``session.update``;
* for its first ``response.create`` (or ``input_audio_buffer.commit``, the manual end of
  the user's speech), the session's share of the trace (:meth:`Session.respond`):
  for ``callsafe serve`` the n-th WebSocket gets the trace's n-th connection, each
  server event one text message; a response the trace ends with ``error`` arrives as the
  user's barge-in (:mod:`callsafe.providers.openai_realtime`). Where the trace
  disconnects, the socket closes without a close frame (the client sees 1006, abnormal
  closure), as a dropped connection does; a reconnect is a new WebSocket;
* for a later ``response.create`` (an agent that sent its tools' outputs and asks for
  the next response), the short text reply that ends normally
  (:func:`callsafe.loopback.server.reply_payloads`);
* under certification (no trace served; the harness feeds live streams), each response
  request gets the channel's next live stream (``ws://.../c/CHANNEL/v1/realtime``), one
  text message per server event as the harness renders it, and the socket drops where
  the trace disconnects;
* for ``response.cancel``, the ``error`` the API sends when no response is in progress:
  the session's response was sent whole before the client could cancel it (a client's
  cancel reaches a served trace only through the trace itself);
* anything that is not a JSON object with a ``type`` gets an ``invalid_request_error``
  event, and the session goes on, as the API's does. Audio is accepted and ignored.

A message over ``max_body`` bytes closes the session (1009, message too big), checked by
the ``websockets`` library before the message is read whole.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Final, Protocol

__all__ = ["PATH", "Session", "serve_session"]

PATH: Final = "/realtime"
"""The path's end the SDK connects to (``base_url`` + ``/realtime``)."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Session(Protocol):
    """Where a WebSocket session's responses come from (``callsafe serve``'s trace, or the
    harness's live streams)."""

    async def respond(self, send_text: Callable[[str], Awaitable[None]], first: bool) -> bool:
        """Send the server events for one response request (``first``: the session's first);
        true when the socket drops after them."""
        ...


def _session_body(model: str) -> dict[str, Any]:
    return {"type": "realtime", "object": "realtime.session", "id": "sess_callsafe", "model": model}


class _Events:
    """Numbers the session's own events (``session.*``, ``error``) apart from the trace's."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.count = 0

    async def text(self, text: str) -> None:
        await self.send({"type": "websocket.send", "text": text})

    async def json(self, payload: Mapping[str, Any]) -> None:
        await self.text(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))

    async def own(self, etype: str, **fields: Any) -> None:
        self.count += 1
        await self.json({"type": etype, "event_id": f"event_session_{self.count}", **fields})

    async def error(self, message: str, client_event: str | None = None) -> None:
        body: dict[str, Any] = {"type": "invalid_request_error", "message": message}
        if client_event is not None:
            body["event_id"] = client_event
        await self.own("error", error=body)


async def serve_session(scope: Mapping[str, Any], receive: Receive, send: Send, session: Session) -> None:
    """One WebSocket session, from the handshake to the client's close (or the trace's drop)."""
    if (await receive()).get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    events = _Events(send)
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    model = next((v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "model"), "") or "gpt-realtime"
    await events.own("session.created", session=_session_body(model))
    answered = False
    while True:
        message = await receive()
        if message.get("type") == "websocket.disconnect":
            return
        if message.get("type") != "websocket.receive":
            continue
        try:
            event = json.loads(message.get("text") or message.get("bytes") or b"")
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            await events.error("a client event is a JSON object with a type")
            continue
        etype = event["type"]
        client_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        if etype == "session.update":
            await events.own("session.updated", session=_session_body(model))
        elif etype in ("response.create", "input_audio_buffer.commit"):
            first, answered = not answered, True
            if await session.respond(events.text, first):
                return  # no close frame: uvicorn closes the transport, as a dropped connection
        elif etype == "response.cancel":
            await events.error("Cancellation failed: no active response found", client_id)
        # conversation.item.*, input_audio_buffer.append/clear, output_audio_buffer.clear:
        # accepted, nothing to answer
