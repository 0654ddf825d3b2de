"""Whole streams: a protocol's payloads or SSE bytes in, abstract events out, and back.

These helpers hold the one policy the per-payload parsers leave to their caller: when a
payload fails to parse, reading stops and the stream ends as not clean, so every response
still open is disconnected and nothing the broken stream opened can execute. The error is
returned beside the events rather than raised, because the events before it are still
what the wire delivered.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callsafe.model.vocabulary import Event
from callsafe.providers import registry
from callsafe.providers.base import ProtocolViolation, ProviderError, ends_cleanly
from callsafe.providers.sse import DONE, SSEDecoder, encode_payloads, payload_of

__all__ = [
    "ParsedStream",
    "as_servers_send",
    "feed_all",
    "parse_payloads",
    "parse_sse",
    "render_payloads",
    "render_sse",
]


@dataclass(frozen=True)
class ParsedStream:
    """The abstract events of a stream, and the error that stopped reading it, if any."""

    events: list[Event]
    error: ProviderError | None = None


def parse_payloads(
    protocol: str, payloads: Iterable[Any], *, turn: str, response: str, clean: bool = True
) -> ParsedStream:
    """Feed every payload, then end the stream (``clean``: the transport ended normally)."""
    return feed_all(registry.get(protocol).new_parser(turn, response), payloads, clean=clean)


def feed_all(parser: Any, payloads: Iterable[Any], *, clean: bool = True) -> ParsedStream:
    """Feed ``parser`` every payload, then end the stream; a payload the parser refuses ends
    it there, as a dropped connection (what every reading of a stream does the same way)."""
    events: list[Event] = []
    try:
        for payload in payloads:
            events.extend(parser.feed(payload))
    except ProviderError as exc:
        events.extend(parser.finish(clean=False))
        return ParsedStream(events, exc)
    events.extend(parser.finish(clean=clean))
    return ParsedStream(events)


def parse_sse(protocol: str, chunks: Iterable[bytes], *, turn: str, response: str, clean: bool = True) -> ParsedStream:
    """Decode SSE bytes delivered in ``chunks`` and parse them. ``data: [DONE]`` ends the
    stream cleanly; an event cut off by the end of the bytes makes it unclean."""
    parser = registry.get(protocol).new_parser(turn, response)
    decoder = SSEDecoder()
    events: list[Event] = []
    done = False
    try:
        for chunk in chunks:
            for sse in decoder.feed(chunk):
                if done:
                    raise_after_done(protocol)
                if sse.data == DONE:
                    done = True
                    continue
                events.extend(parser.feed(payload_of(sse)))
        for sse in decoder.close():
            if done:
                raise_after_done(protocol)
            if sse.data != DONE:
                events.extend(parser.feed(payload_of(sse)))
    except ProviderError as exc:
        events.extend(parser.finish(clean=False))
        return ParsedStream(events, exc)
    events.extend(parser.finish(clean=(clean and not decoder.truncated) or done))
    return ParsedStream(events)


def raise_after_done(protocol: str) -> None:
    raise ProtocolViolation(f"{protocol}: data after [DONE]")


def render_payloads(protocol: str, events: Sequence[Event]) -> list[dict[str, Any]]:
    """The protocol's payloads for ``events`` (see each module for what is representable)."""
    return registry.get(protocol).new_renderer().render(events)


def render_sse(protocol: str, events: Sequence[Event]) -> bytes:
    """The SSE bytes for ``events``: event names where the protocol uses them, and the
    ``[DONE]`` sentinel where the protocol ends with one and the stream ends cleanly."""
    spec = registry.get(protocol)
    payloads: list[Mapping[str, Any]] = list(spec.new_renderer().render(events))
    return encode_payloads(payloads, spec.event_name, done=spec.done_sentinel and ends_cleanly(events))


def as_servers_send(protocol: str, groups: list[list[dict[str, Any]]]) -> None:
    """Add, in place, the fields real servers always send that the renderers leave out, and
    whose absence would make an SDK fail for a reason no server gives it: Anthropic's
    ``message_delta`` always carries ``usage`` (zero tokens here), and a Responses
    ``response.completed`` / ``incomplete`` / ``failed`` carries the response's ``output``
    items (taken from the stream's own ``response.output_item.done`` items). Neither changes
    what the providers' parsers read. ``groups`` are the payloads of one stream, in groups
    (one per abstract event, as the harness renders them; a single group works too)."""
    if protocol == "anthropic-messages":
        for payload in (p for g in groups for p in g):
            if payload.get("type") == "message_delta" and "usage" not in payload:
                payload["usage"] = {"output_tokens": 0}
    elif protocol == "openai-responses":
        done: dict[int, Any] = {}
        for payload in (p for g in groups for p in g):
            kind = payload.get("type")
            if kind == "response.created":
                done = {}
            elif kind == "response.output_item.done" and isinstance(payload.get("output_index"), int):
                done[payload["output_index"]] = payload.get("item")
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                body = payload.get("response")
                if isinstance(body, dict) and not body.get("output"):
                    body["output"] = [copy.deepcopy(done[i]) for i in sorted(done)]
