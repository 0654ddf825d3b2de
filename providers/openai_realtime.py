"""OpenAI Realtime API server events over a WebSocket (``response.*``, with barge-in).

The Realtime API speaks JSON server events on one WebSocket per session; a session carries
responses one after another (each asked for by the client's ``response.create``, or by the
user's speech under server voice activity detection). The events are the SDK's types in
``openai/types/realtime/`` (the ``openai`` Python SDK, 3.60).

Call keys: the response is the ``response.id`` of ``response.created``; the item is the
``function_call`` item's ``id``; the call is its ``call_id``. Every item event names its
response (``response_id``), so responses that overlap (an out-of-band response beside the
default conversation's) are kept apart; an item event for a response that was never
created, or already ended, is a :class:`~callsafe.providers.base.ProtocolViolation`, as
is an ``output_index`` bound to two items, a delta whose ``call_id`` is not its item's,
and an empty item or call id (a call nobody can answer). Only ``function_call`` items are
calls the client runs; ``mcp_call`` runs on OpenAI's side and is not announced.

Positions: arrival order (the events carry no sequence number). Empty deltas carry nothing.

Terminals: ``response.output_item.done`` with the item's ``status`` ``completed`` is the
call's terminal event, ``completed``. The API also sends ``response.function_call_arguments.done``
and ``response.output_item.done`` for a call the response was *interrupted* in, with the
arguments streamed so far and status ``incomplete``: neither is a terminal event (the
response's end decides the call's fate), and a client that runs a call on
``function_call_arguments.done`` runs a call the user interrupted. The complete
``arguments`` the done events carry are checked against the deltas, as for Responses
(no deltas: they are the call's one fragment; different: the call ends with ``error``).

Response ends: ``response.done`` carries the response's final ``status``: ``completed``
ends it (calls still open fail on it); ``incomplete`` stops every open call with ``length``
(``max_output_tokens``) or ``content_filter`` (anything else ``error``); ``failed`` and
``cancelled`` stop them with ``error``. **Barge-in**: with server voice activity detection
the user's speech (``input_audio_buffer.speech_started``) cancels the response in flight
(``status_details.reason`` ``turn_detected``), and a client's ``response.cancel`` does the
same (``client_cancelled``); either way the wire says so with ``response.done`` status
``cancelled``, and the calls still open stop with ``error`` (:attr:`Parser.stop_causes`
names the cancel). ``speech_started`` itself emits nothing: under ``interrupt_response:
false`` the response goes on, and only ``response.done`` says it did not. An ``error``
server event ends nothing (the API sends it for a client event it refused, and the
session goes on). A socket that closes with a response still open disconnects it.

What a Realtime stream carries of a trace: calls, fragments in order, text
(``response.output_text.delta``), a call's own completed terminal, the response's end
with every reason, and a disconnect (the socket closes without ``response.done``). A
:class:`~callsafe.model.vocabulary.CancelTurn` is the application's: the user's speech is
an *input* to the server, which answers it by cancelling the response, so a trace's
cancel reaches a Realtime client as the response ending with ``error``, rendered as the
barge-in the API sends (below), and the cancel itself is delivered to the application as
for every protocol. Confirmations, operator controls and restarts are the application's.

Rendering: each event gets an ``event_id`` (``event_N``). A response that ends with
``error`` is rendered as a barge-in: ``input_audio_buffer.speech_started``, then for each
call still open ``response.function_call_arguments.done`` (with the arguments streamed so
far) and ``response.output_item.done`` with status ``incomplete``, then ``response.done``
with status ``cancelled``, reason ``turn_detected``. ``length`` and ``content_filter`` are
``incomplete`` with ``max_output_tokens`` / ``content_filter``. The JSON rides in SSE
for the package's own tools (a convenience, like Bedrock's); the loopback provider serves
it over a WebSocket, one text message per event (``transport="websocket"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.model.vocabulary import Event, Fragment, ResponseTerminal, StopReason, TextFragment
from callsafe.providers.base import (
    CallState,
    MalformedEvent,
    NotRepresentable,
    Parser,
    Protocol,
    ProtocolViolation,
    RenderCall,
    Renderer,
    need_dict,
    need_str,
    opt_dict,
    opt_int,
    opt_str,
    type_field,
)
from callsafe.providers.openai_responses import INCOMPLETE_REASONS  # the same response statuses

__all__ = ["PROTOCOL", "RealtimeParser", "RealtimeRenderer"]

CANCEL_CAUSES: Final = {
    "turn_detected": "the response was cancelled by the user's speech (barge-in, turn_detected)",
    "client_cancelled": "the response was cancelled by the client (response.cancel)",
}
TEXT_DELTAS: Final = frozenset(
    {
        "response.output_text.delta",
        "response.output_audio_transcript.delta",
        "response.text.delta",  # the beta API's names
        "response.audio_transcript.delta",
    }
)


@dataclass
class _Item:
    """A ``function_call`` item: its call, the text of its deltas, and whether its done
    events disagreed with them."""

    state: CallState
    texts: list[str] = field(default_factory=list)
    mismatch: bool = False


@dataclass
class _Response:
    id: str
    items: dict[str, _Item] = field(default_factory=dict)
    other_items: set[str] = field(default_factory=set)
    index_item: dict[int, str] = field(default_factory=dict)


class RealtimeParser(Parser):
    """One Realtime session's server events (responses one after another, or overlapping)."""

    protocol = "openai-realtime"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._open: dict[str, _Response] = {}
        self.speech_started = 0
        """How many times the user's speech was detected (barge-ins the stream carried)."""

    def _feed(self, payload: dict[str, Any]) -> None:
        etype = need_str(payload, "type", "openai-realtime event")
        if etype == "response.created":
            body = need_dict(payload.get("response"), f"{etype}.response")
            rid = opt_str(body, "id", f"{etype}.response") or self.fallback_response
            self._begin_response(rid)
            self._open[rid] = _Response(rid)
        elif etype == "response.output_item.added":
            self._item_added(payload, etype)
        elif etype == "response.function_call_arguments.delta":
            item = self._function_item(payload, etype)
            text = need_str(payload, "delta", etype)
            if text:
                item.texts.append(text)
                self._fragment(item.state, text)
        elif etype == "response.function_call_arguments.done":
            item = self._function_item(payload, etype)
            self._complete_arguments(item, opt_str(payload, "arguments", etype))
        elif etype == "response.output_item.done":
            self._item_done(payload, etype)
        elif etype in TEXT_DELTAS:
            resp = self._response(payload, etype)
            self._text(resp.id, self._nonempty(payload, "item_id", etype), need_str(payload, "delta", etype))
        elif etype == "response.done":
            self._response_done(payload, etype)
        elif etype == "input_audio_buffer.speech_started":
            self.speech_started += 1  # the response's end says whether it was cancelled
        # session.*, conversation.*, input_audio_buffer.*, rate_limits.updated, audio and
        # content-part events, and ``error`` (a refused client event) carry no call data

    # -- helpers -----------------------------------------------------------------------

    @staticmethod
    def _nonempty(container: dict[str, Any], key: str, what: str) -> str:
        value = need_str(container, key, what)
        if not value:
            raise MalformedEvent(f"{what}.{key} is empty")
        return value

    def _response(self, payload: dict[str, Any], etype: str) -> _Response:
        rid = need_str(payload, "response_id", etype)
        resp = self._open.get(rid)
        if resp is None:
            state = "already ended" if rid in self._responses else "never created"
            raise ProtocolViolation(f"openai-realtime: {etype} for a response {state}")
        return resp

    def _bind(self, resp: _Response, payload: dict[str, Any], etype: str, item_id: str) -> None:
        index = opt_int(payload, "output_index", etype)
        if index is None:
            return
        bound = resp.index_item.setdefault(index, item_id)
        if bound != item_id:
            raise ProtocolViolation(f"openai-realtime: output_index {index} names two items")

    def _item_added(self, payload: dict[str, Any], etype: str) -> None:
        resp = self._response(payload, etype)
        item = need_dict(payload.get("item"), f"{etype}.item")
        item_id = self._nonempty(item, "id", f"{etype}.item")
        self._bind(resp, payload, etype, item_id)
        if need_str(item, "type", f"{etype}.item") != "function_call":
            if item_id in resp.items:
                raise ProtocolViolation(f"openai-realtime: item {item_id!r} added again as another type")
            resp.other_items.add(item_id)
            return
        if item_id in resp.other_items:
            raise ProtocolViolation(f"openai-realtime: item {item_id!r} added again as a function_call")
        call_id = self._nonempty(item, "call_id", f"{etype}.item")
        name = need_str(item, "name", f"{etype}.item")
        known = resp.items.get(item_id)
        if known is not None and known.state.call != call_id:
            raise ProtocolViolation(f"openai-realtime: item {item_id!r} re-added with another call_id")
        state = self._open_call(resp.id, item_id, call_id, name)
        if known is None:
            resp.items[item_id] = _Item(state)
        self._complete_arguments(resp.items[item_id], opt_str(item, "arguments", f"{etype}.item"))

    def _function_item(self, payload: dict[str, Any], etype: str) -> _Item:
        resp = self._response(payload, etype)
        item_id = need_str(payload, "item_id", etype)
        self._bind(resp, payload, etype, item_id)
        item = resp.items.get(item_id)
        if item is None:
            kind = "an item that is not a function_call" if item_id in resp.other_items else "an item never added"
            raise ProtocolViolation(f"openai-realtime: {etype} for {kind}")
        call_id = opt_str(payload, "call_id", etype)
        if call_id is not None and call_id != item.state.call:
            raise ProtocolViolation(f"openai-realtime: {etype} names another call_id than its item's")
        return item

    def _complete_arguments(self, item: _Item, arguments: str | None) -> None:
        """Complete arguments a done event (or an item) carries: the call's one fragment
        when no delta carried text, otherwise a check of the deltas."""
        if not arguments:
            return
        if not item.texts:
            item.texts.append(arguments)
            self._fragment(item.state, arguments)
        elif "".join(item.texts) != arguments:
            item.mismatch = True

    def _item_done(self, payload: dict[str, Any], etype: str) -> None:
        resp = self._response(payload, etype)
        body = need_dict(payload.get("item"), f"{etype}.item")
        item_id = need_str(body, "id", f"{etype}.item")
        self._bind(resp, payload, etype, item_id)
        if need_str(body, "type", f"{etype}.item") != "function_call":
            if item_id in resp.items:
                raise ProtocolViolation(f"openai-realtime: item {item_id!r} done as another type")
            return
        item = resp.items.get(item_id)
        if item is None:
            raise ProtocolViolation(f"openai-realtime: {etype} for an item never added")
        call_id = opt_str(body, "call_id", f"{etype}.item")
        if call_id is not None and call_id != item.state.call:
            raise ProtocolViolation(f"openai-realtime: item {item_id!r} done with another call_id")
        self._complete_arguments(item, opt_str(body, "arguments", f"{etype}.item"))
        if opt_str(body, "status", f"{etype}.item") != "completed":
            return  # incomplete (interrupted) or unsaid: the response's end decides
        self._terminal(
            item.state,
            "error" if item.mismatch else "completed",
            "the done events' arguments disagree with the deltas" if item.mismatch else None,
        )

    def _response_done(self, payload: dict[str, Any], etype: str) -> None:
        body = need_dict(payload.get("response"), f"{etype}.response")
        rid = need_str(body, "id", f"{etype}.response")
        resp = self._open.get(rid)
        if resp is None:
            if rid in self._responses:
                return  # a repeated end of a response that already ended
            raise ProtocolViolation("openai-realtime: response.done for a response never created")
        status = opt_str(body, "status", f"{etype}.response")
        details = opt_dict(body, "status_details", f"{etype}.response") or {}
        why = opt_str(details, "reason", f"{etype}.response.status_details") or ""
        reason: StopReason
        cause: str | None = None
        if status == "completed":
            reason = "completed"
        elif status == "incomplete":
            reason = INCOMPLETE_REASONS.get(why, "error")
        elif status == "cancelled":
            reason = "error"
            cause = CANCEL_CAUSES.get(why, "the response was cancelled")
        elif status == "failed":
            reason, cause = "error", "the response failed"
        else:
            raise MalformedEvent(f"openai-realtime: response.done needs a final status, got {status!r}")
        del self._open[rid]
        self._end_response(rid, reason, cause)


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


class RealtimeRenderer(Renderer):
    """Abstract events -> Realtime server events (a barge-in for a response ending in error)."""

    protocol = "openai-realtime"
    several_responses = True

    def render(self, events: Sequence[Event]) -> list[dict[str, Any]]:
        self._event_no = 0
        return super().render(events)

    def _event(self, etype: str, **fields: Any) -> None:
        self._emit({"type": etype, "event_id": f"event_{self._event_no}", **fields})
        self._event_no += 1

    def _on_response_start(self, response: str, where: str) -> None:
        self._next_index = 0
        self._indexes: dict[tuple[str, str, str], int] = {}
        self._messages: dict[str, int] = {}
        self._call_items: set[str] = set()
        self._done_items: dict[int, dict[str, Any]] = {}
        self._event("response.created", response=self._body(response, "in_progress"))

    @staticmethod
    def _body(response: str, status: str) -> dict[str, Any]:
        return {"id": response, "object": "realtime.response", "status": status, "output": []}

    def _on_open(self, call: RenderCall, where: str) -> None:
        if call.item in self._call_items or call.item in self._messages:
            raise NotRepresentable(f"{where}: one Realtime output item carries one call")
        if not call.item or not call.call:
            raise NotRepresentable(f"{where}: a Realtime item and call need ids")
        self._call_items.add(call.item)
        index = self._indexes[call.key] = self._next_index
        self._next_index += 1
        self._event(
            "response.output_item.added",
            response_id=call.response,
            output_index=index,
            item=self._item(call, "in_progress", ""),
        )

    @staticmethod
    def _item(call: RenderCall, status: str, arguments: str) -> dict[str, Any]:
        return {
            "id": call.item,
            "object": "realtime.item",
            "type": "function_call",
            "status": status,
            "name": call.tool,
            "call_id": call.call,
            "arguments": arguments,
        }

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        self._event(
            "response.function_call_arguments.delta",
            response_id=call.response,
            item_id=call.item,
            output_index=self._indexes[call.key],
            call_id=call.call,
            delta=event.text,
        )

    def _on_text(self, event: TextFragment, where: str) -> None:
        if event.item in self._call_items:
            raise NotRepresentable(f"{where}: item {event.item!r} is a function_call, not a message")
        index = self._messages.get(event.item)
        if index is None:
            index = self._messages[event.item] = self._next_index
            self._next_index += 1
            message = {"id": event.item, "object": "realtime.item", "type": "message", "status": "in_progress"}
            self._event(
                "response.output_item.added",
                response_id=event.response,
                output_index=index,
                item={**message, "role": "assistant", "content": []},
            )
        self._event(
            "response.output_text.delta",
            response_id=event.response,
            item_id=event.item,
            output_index=index,
            content_index=0,
            delta=event.text,
        )

    def _done(self, call: RenderCall, status: str) -> None:
        index = self._indexes[call.key]
        arguments = "".join(call.order)
        self._event(
            "response.function_call_arguments.done",
            response_id=call.response,
            item_id=call.item,
            output_index=index,
            call_id=call.call,
            name=call.tool,
            arguments=arguments,
        )
        item = self._item(call, status, arguments)
        self._done_items[index] = item
        self._event("response.output_item.done", response_id=call.response, output_index=index, item=item)

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._done(call, "completed")

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        if event.reason == "error":
            self._event("input_audio_buffer.speech_started", audio_start_ms=0, item_id=f"{event.response}_user")
        for call in stopped:
            self._done(call, "incomplete")
        for item_id, index in self._messages.items():
            message = {"id": item_id, "object": "realtime.item", "type": "message", "status": "completed"}
            item = {**message, "role": "assistant", "content": []}
            self._done_items[index] = item
            self._event("response.output_item.done", response_id=event.response, output_index=index, item=item)
        output = [self._done_items[i] for i in sorted(self._done_items)]
        body = {**self._body(event.response, "completed"), "output": output}
        if event.reason == "error":
            body.update(status="cancelled", status_details={"type": "cancelled", "reason": "turn_detected"})
        elif event.reason != "completed":
            why = "max_output_tokens" if event.reason == "length" else "content_filter"
            body.update(status="incomplete", status_details={"type": "incomplete", "reason": why})
        self._event("response.done", response=body)


PROTOCOL: Final = Protocol(
    name="openai-realtime",
    parser=RealtimeParser,
    renderer=RealtimeRenderer,
    event_name=type_field("type"),
    transport="websocket",
)
