"""What an agent already holds, as the wire payloads callsafe's provider parsers read.

Why a module of its own: the guard takes the objects the SDKs hand out, not a format of
callsafe's. An SDK event is a pydantic model built from the very JSON object the server
sent (the OpenAI and Anthropic SDKs build their stream events with ``construct``, no
validation), so :func:`payload_of` turns it back into that object with the model's own
``to_dict``/``model_dump`` (fields the server did not send stay out). A dict is taken as
the payload itself. SSE bytes are decoded by :mod:`callsafe.providers.sse` in
:class:`~callsafe.guard.guard.StreamReader`.

The SDKs' *helper* streams interleave events of their own with the server's:
``client.chat.completions.stream()`` yields ``chunk`` events (the server's chunk is their
``.chunk``) beside derived ones (``content.delta``, ``tool_calls.function.arguments.done``);
Anthropic's ``client.messages.stream()`` adds ``text``, ``input_json``, ``citation``,
``thinking`` and ``signature`` events computed from the server's own. Derived events carry
nothing the server's events do not, so they are skipped (:data:`SKIP`), and the server's
events are read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from callsafe.guard.errors import UnknownInput, UnknownProtocol
from callsafe.providers import registry

__all__ = ["ANTHROPIC_EVENTS", "SKIP", "check_protocol", "detect_protocol", "error_event_of", "payload_of"]

REALTIME_FAMILIES: Final = frozenset(
    {"session", "response", "conversation", "input_audio_buffer", "output_audio_buffer", "rate_limits", "error"}
)
"""The first word of the OpenAI Realtime API's server event types (every one has an ``event_id``)."""

SKIP: Final = object()
""":func:`payload_of`'s answer for an SDK helper's derived event: nothing to read."""

ANTHROPIC_EVENTS: Final = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)
# Anthropic's MessageStream adds these, derived from the server's events.
_ANTHROPIC_DERIVED: Final = frozenset({"text", "input_json", "citation", "thinking", "signature"})


def _dump(obj: Any) -> Any:
    if type(obj).__module__.startswith("google.genai"):
        # google-genai's pydantic types name their fields in snake_case and the wire's
        # camelCase as aliases (a LiveServerMessage's toolCall.functionCalls); unset is None
        return obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True, warnings=False)
    raise UnknownInput(
        f"the guard reads SDK stream events, dict payloads or SSE bytes, got {type(obj).__module__}."
        f"{type(obj).__qualname__}"
    )


def payload_of(item: object) -> Mapping[str, Any] | object:
    """The server's JSON object for one stream item, or :data:`SKIP` for a helper's derived
    event. Raises :class:`~callsafe.guard.errors.UnknownInput` for anything else."""
    if isinstance(item, Mapping):
        return item
    kind = getattr(item, "type", None)
    if kind == "chunk" and hasattr(item, "chunk"):  # openai's ChatCompletionStream event
        return payload_of(item.chunk)
    if isinstance(kind, str) and getattr(item, "object", None) != "chat.completion.chunk":
        module = type(item).__module__
        if module.startswith("openai.lib.streaming.chat"):
            return SKIP  # content.delta, tool_calls.function.arguments.delta/done, ...
        if kind in _ANTHROPIC_DERIVED and module.startswith("anthropic"):
            return SKIP
    payload = _dump(item)
    if not isinstance(payload, Mapping):
        raise UnknownInput(f"{type(item).__qualname__} does not dump to a JSON object")
    return payload


def error_event_of(exc: BaseException, protocol: str | None) -> Mapping[str, Any] | None:
    """The server's error event an SDK consumed to raise ``exc``, or None.

    Why: the SDKs read an error event themselves and raise instead of yielding it (the
    ``openai`` SDK raises ``APIError`` for a payload with an ``error``, whose ``body`` is that
    error; ``anthropic`` raises ``APIStatusError`` for an ``error`` event, whose ``body`` is
    the whole event). Read back, the calls it stopped are recorded as stopped by an
    ``error`` (what the server said), not as a dropped connection."""
    body = getattr(exc, "body", None)
    if not isinstance(body, Mapping):
        return None
    module = type(exc).__module__
    if protocol == "openai-chat" and module.startswith("openai"):
        return {"error": dict(body)}
    if protocol == "anthropic-messages" and module.startswith("anthropic") and body.get("type") == "error":
        return body
    return None


def detect_protocol(payload: Mapping[str, Any]) -> str:
    """The protocol of a stream, told from its first payload: OpenAI Chat Completions chunks
    say ``"object": "chat.completion.chunk"`` (or carry ``choices``), Realtime server events
    carry an ``event_id`` beside their type (``session.created``, ``response.*``, ...),
    Responses events have a ``response.*`` type and no ``event_id``, Anthropic events their
    own type names. Other protocols (Gemini, Bedrock, Cohere) are named with ``protocol=``."""
    if payload.get("object") == "chat.completion.chunk" or "choices" in payload:
        return "openai-chat"
    kind = payload.get("type")
    if isinstance(kind, str) and "event_id" in payload and kind.split(".")[0] in REALTIME_FAMILIES:
        return "openai-realtime"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if kind in ANTHROPIC_EVENTS or kind == "ping":
        return "anthropic-messages"
    raise UnknownProtocol(
        f"cannot tell the stream's protocol from its first event (type {kind!r}); pass protocol=, "
        f"one of {', '.join(registry.names())}"
    )


def check_protocol(protocol: str) -> str:
    """``protocol`` when callsafe reads it, else :class:`UnknownProtocol`."""
    if protocol not in registry.names():
        raise UnknownProtocol(f"unknown protocol {protocol!r}; known: {', '.join(registry.names())}")
    return protocol
