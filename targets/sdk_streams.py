"""The SDKs' own stream objects over an in-process HTTP transport: what an application's
accessor returns after the stream.

Why: a ``final`` surface is what the application sees when it calls the library's accessor
once the stream is over (``MessageStream.get_final_message()``,
``ResponseStream.get_final_response()``), and that is not always what the library handed out
at the stop event: a delta after ``message_stop`` still changes the message the accessor
returns, and a body that ends with no stop event still has one. So these helpers serve one
body of wire payloads (as SSE bytes, exactly as :func:`callsafe.providers.adversities.sse_bytes`
writes them) to the SDK's own client through ``httpx2.MockTransport`` (no socket, nothing
leaves the process), drive ``client.*.stream(...)`` to its end and call the accessor. What the
accessor raises is raised.

One client per SDK and thread, built on first use: building one costs far more than a
stream (about 7 ms a body once built). The body to serve is the thread's own, so concurrent
runs in threads never read each other's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from callsafe.providers.adversities import sse_bytes

__all__ = ["anthropic_final_message", "openai_final_response"]

_MESSAGES: Final = [{"role": "user", "content": "callsafe"}]
_local = threading.local()


def _transport() -> Any:
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        body: bytes = getattr(_local, "body", b"")
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def _client(name: str) -> Any:
    client = getattr(_local, name, None)
    if client is None:
        if name == "anthropic":
            import anthropic

            client = anthropic.Anthropic(
                api_key="callsafe-local", base_url="http://callsafe.invalid", http_client=_transport(), max_retries=0
            )
        else:
            import openai

            client = openai.OpenAI(
                api_key="callsafe-local", base_url="http://callsafe.invalid/v1", http_client=_transport(), max_retries=0
            )
        setattr(_local, name, client)
    return client


def anthropic_final_message(payloads: Sequence[Mapping[str, Any]], *, beta: str | None = None) -> Any:
    """What ``client.messages.stream(...).get_final_message()`` returns for a body of
    ``payloads`` (``beta``: through ``client.beta.messages`` with that ``anthropic-beta``
    header)."""
    _local.body = sse_bytes("anthropic-messages", payloads)
    client = _client("anthropic")
    if beta is not None:
        with client.beta.messages.stream(model="callsafe", max_tokens=1024, messages=_MESSAGES, betas=[beta]) as stream:
            return stream.get_final_message()
    with client.messages.stream(model="callsafe", max_tokens=1024, messages=_MESSAGES) as stream:
        return stream.get_final_message()


def openai_final_response(payloads: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Any:
    """What ``client.responses.stream(...).get_final_response()`` returns for a body of
    ``payloads`` with ``tools`` declared (strict tools are parsed by the SDK)."""
    _local.body = sse_bytes("openai-responses", payloads)
    client = _client("openai")
    with client.responses.stream(model="callsafe", input="callsafe", tools=list(tools)) as stream:
        return stream.get_final_response()


_ENDS: Final = {
    "message_start": frozenset({"message_stop"}),
    "response.created": frozenset({"response.completed", "response.incomplete", "response.failed"}),
}


def responses_of(payloads: Sequence[Mapping[str, Any]], start: str) -> list[list[Mapping[str, Any]]]:
    """A body cut into the responses an application reads one by one: a new one begins at
    a ``start`` event (``message_start``, ``response.created``) that comes after the
    previous response ended (a recorded multi-step stream holds several, and the application
    calls the accessor once per response). A ``start`` inside an open response, and data
    after a response's end, stay in that response: what the SDK makes of them is judged."""
    ends = _ENDS[start]
    out: list[list[Mapping[str, Any]]] = []
    ended = True
    for payload in payloads:
        kind = payload.get("type")
        if kind == start and ended and out and any(p.get("type") in ends for p in out[-1]):
            out.append([])
        if not out:
            out.append([])
        out[-1].append(payload)
        if kind == start:
            ended = False
        elif kind in ends:
            ended = True
    return out
