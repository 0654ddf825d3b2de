"""OpenAI Responses API streaming (``response.*`` events), also spoken by Azure OpenAI and
Open Responses servers (LM Studio).

Call keys: the response is ``response.id`` from ``response.created``; the item is the output
item's ``id``; the call is the item's ``call_id``. The item id, the call id and the
``output_index`` are bound once: an index naming two items, an item at two indexes or with
two call ids is a :class:`~callsafe.providers.base.ProtocolViolation`. Only
``function_call`` items are calls the client executes; ``tool_search_call``, ``program``,
``mcp_call``, web and file search items run on OpenAI's side, and ``custom_tool_call``
(free-form input, not JSON arguments) is outside what callsafe certifies: none of them is
announced. A ``function_call`` whose ``caller`` is a program (programmatic tool calling)
is still the client's to execute.

Positions: ``response.function_call_arguments.delta`` carries a response-wide
``sequence_number``, not a per-call position. A delta's position is its rank among its
call's deltas in sequence order, computed as it arrives: its sequence number, minus the
call's first possible one (just after its ``output_item.added``), minus the sequence numbers
in between that other events already used. In order (interleaved calls included) this is
exact; a replayed delta gets its earlier position, so the model sees a repeat (same text)
or a conflict (different text). Out of order, a gap that a later event of another call
fills shows up as a missing position and the call fails: rejecting is what the spec allows
when order cannot be established. Without ``sequence_number``, positions are arrival order;
mixing both within one call (its ``output_item.added`` included) is a violation. Empty
deltas carry nothing.

Terminals: ``response.output_item.done`` is the call's terminal event, ``completed`` (the
item's ``status`` may say ``completed`` or, for programmatic calls, ``in_progress``). An
item done with status ``incomplete`` emits nothing: the response's end decides its fate.
The complete ``arguments`` that ``function_call_arguments.done`` and ``output_item.done``
carry are checked against the call's own fragments: when no delta carried text they are
the call's one fragment (LM Studio streams no deltas); when they differ from the fragments
assembled by position the call ends with ``error`` rather than execute either text.

Response ends: ``response.completed`` ends the response (calls still open fail on it);
``response.incomplete`` stops every open call with ``length`` (``max_output_tokens``) or
``content_filter``, anything else ``error``; ``response.failed`` and ``error`` stop them
with ``error``. A new ``response.created`` while a response is open is a violation; after
it ended, a new response starts (recorded multi-step streams, WebSocket mode); an item
event after the end with no new ``response.created`` is data after the final stop, refused
(the stream ends there as a dropped connection). A stream
that ends with a response still open disconnects it.

Rendering: fragments carry positions (sequence numbers), so repeated and reordered
positions and gaps are representable: each call's deltas get the block of sequence numbers
right after its ``output_item.added`` (``base + position``), which the parser reads back
exactly whatever the arrival order. The done events carry the complete arguments only when
they are well defined (every position present once, repeats identical); otherwise they
carry none, so that the wire never vouches for a text the trace does not have.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.model.vocabulary import Event, Fragment, ResponseTerminal, StopReason, TextFragment
from callsafe.providers.base import (
    CallState,
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

__all__ = ["PROTOCOL", "ResponsesParser", "ResponsesRenderer"]

INCOMPLETE_REASONS: Final[dict[str, StopReason]] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


@dataclass
class _Item:
    """A ``function_call`` item: its call, where its deltas' sequence numbers start, the
    position each sequence number got, and what its done events said."""

    state: CallState
    base: int | None  # sequence number right after output_item.added (None: added had none)
    seq_pos: dict[int, int] = field(default_factory=dict)
    own: list[int] = field(default_factory=list)  # sorted sequence numbers of its deltas
    texts: dict[int, str] = field(default_factory=dict)  # first text at each position
    mismatch: bool = False


@dataclass
class _Response:
    id: str
    ended: bool = False
    items: dict[str, _Item] = field(default_factory=dict)
    other_items: set[str] = field(default_factory=set)
    index_item: dict[int, str] = field(default_factory=dict)
    item_index: dict[str, int] = field(default_factory=dict)
    seq_owner: dict[int, str] = field(default_factory=dict)  # item id for deltas, "" for the rest
    seqs: list[int] = field(default_factory=list)  # every sequence number seen, sorted


class ResponsesParser(Parser):
    """One Responses stream (possibly several responses, one after another)."""

    protocol = "openai-responses"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._current: _Response | None = None

    # -- responses -------------------------------------------------------------------

    def _start(self, rid: str) -> _Response:
        if self._current is not None and not self._current.ended:
            raise ProtocolViolation(f"openai-responses: response {rid!r} created while {self._current.id!r} is open")
        self._begin_response(rid)
        self._current = _Response(rid)
        return self._current

    def _open_response(self, etype: str) -> _Response:
        """The response an item event belongs to (started with the fallback id when the
        stream never created one). After a response ended, only a new ``response.created``
        starts another: an item event there is data after the final stop, whatever id a
        reader would fall back on (a reader whose fallback id differed from the ended
        response's would otherwise read a whole late call as a new response's and run it)."""
        if self._current is None:
            return self._start(self.fallback_response)
        if self._current.ended:
            raise ProtocolViolation(
                f"openai-responses: {etype} after response {self._current.id!r} ended, with no response.created"
            )
        return self._current

    def _response_obj_id(self, payload: dict[str, Any], etype: str) -> str | None:
        response = opt_dict(payload, "response", etype)
        return None if response is None else opt_str(response, "id", f"{etype}.response")

    def _claim(self, resp: _Response, seq: int | None, owner: str) -> None:
        if seq is None:
            return
        previous = resp.seq_owner.get(seq)
        if previous is not None:
            if previous != owner:
                raise ProtocolViolation(f"openai-responses: sequence_number {seq} used by two different events")
            return  # a replayed event
        resp.seq_owner[seq] = owner
        bisect.insort(resp.seqs, seq)

    def _bind(self, resp: _Response, output_index: int | None, item_id: str) -> None:
        if output_index is None:
            return
        bound = resp.index_item.get(output_index)
        if bound is not None and bound != item_id:
            raise ProtocolViolation(f"openai-responses: output_index {output_index} names {bound!r} and {item_id!r}")
        at = resp.item_index.get(item_id)
        if at is not None and at != output_index:
            raise ProtocolViolation(f"openai-responses: item {item_id!r} at output_index {at} and {output_index}")
        resp.index_item[output_index] = item_id
        resp.item_index[item_id] = output_index

    # -- events ------------------------------------------------------------------------

    def _feed(self, payload: dict[str, Any]) -> None:
        etype = need_str(payload, "type", "openai-responses event")
        seq = opt_int(payload, "sequence_number", etype)
        if etype == "response.created":
            rid = self._response_obj_id(payload, etype) or self.fallback_response
            self._claim(self._start(rid), seq, "")
        elif etype in ("response.in_progress", "response.queued"):
            named = self._response_obj_id(payload, etype)
            resp = self._current
            if resp is None or resp.ended:
                resp = self._start(named or self.fallback_response)
            elif named is not None and named != resp.id:
                raise ProtocolViolation(f"openai-responses: {etype} for {named!r} while {resp.id!r} is open")
            self._claim(resp, seq, "")
        elif etype == "response.output_item.added":
            self._item_added(payload, etype, seq)
        elif etype == "response.function_call_arguments.delta":
            self._delta(payload, etype, seq)
        elif etype == "response.function_call_arguments.done":
            resp, item = self._function_item(payload, etype)
            self._claim(resp, seq, "")
            self._complete_arguments(item, opt_str(payload, "arguments", etype))
        elif etype == "response.output_item.done":
            self._item_done(payload, etype, seq)
        elif etype in ("response.output_text.delta", "response.refusal.delta"):
            resp = self._open_response(etype)
            self._claim(resp, seq, "")
            item_id = need_str(payload, "item_id", etype)
            self._bind(resp, opt_int(payload, "output_index", etype), item_id)
            self._text(resp.id, item_id, need_str(payload, "delta", etype))
        elif etype == "response.completed":
            self._response_end(payload, etype, "completed")
        elif etype == "response.incomplete":
            response = opt_dict(payload, "response", etype) or {}
            details = opt_dict(response, "incomplete_details", f"{etype}.response") or {}
            why = opt_str(details, "reason", f"{etype}.response.incomplete_details") or ""
            self._response_end(payload, etype, INCOMPLETE_REASONS.get(why, "error"))
        elif etype == "response.failed":
            self._response_end(payload, etype, "error")
        elif etype == "error":
            if self._current is not None and not self._current.ended:
                self._current.ended = True
                self._end_response(self._current.id, "error", "an error event from the server")
        elif self._current is not None and not self._current.ended:
            self._claim(self._current, seq, "")  # other events still use their sequence numbers

    def _item_added(self, payload: dict[str, Any], etype: str, seq: int | None) -> None:
        resp = self._open_response(etype)
        self._claim(resp, seq, "")
        item = need_dict(payload.get("item"), f"{etype}.item")
        item_id = need_str(item, "id", f"{etype}.item")
        self._bind(resp, opt_int(payload, "output_index", etype), item_id)
        if need_str(item, "type", f"{etype}.item") != "function_call":
            if item_id in resp.items:
                raise ProtocolViolation(f"openai-responses: item {item_id!r} added again as another type")
            resp.other_items.add(item_id)
            return
        if item_id in resp.other_items:
            raise ProtocolViolation(f"openai-responses: item {item_id!r} added again as a function_call")
        call_id = need_str(item, "call_id", f"{etype}.item")
        name = need_str(item, "name", f"{etype}.item")
        known = resp.items.get(item_id)
        if known is not None and known.state.call != call_id:
            raise ProtocolViolation(f"openai-responses: item {item_id!r} re-added with another call_id")
        state = self._open_call(resp.id, item_id, call_id, name)
        if known is None:
            resp.items[item_id] = _Item(state, None if seq is None else seq + 1)

    def _function_item(self, payload: dict[str, Any], etype: str) -> tuple[_Response, _Item]:
        resp = self._current
        if resp is None or resp.ended:
            raise ProtocolViolation(f"openai-responses: {etype} outside a response")
        item_id = need_str(payload, "item_id", etype)
        self._bind(resp, opt_int(payload, "output_index", etype), item_id)
        item = resp.items.get(item_id)
        if item is None:
            kind = "an item that is not a function_call" if item_id in resp.other_items else "an item never added"
            raise ProtocolViolation(f"openai-responses: {etype} for {kind} ({item_id!r})")
        return resp, item

    def _delta(self, payload: dict[str, Any], etype: str, seq: int | None) -> None:
        resp, item = self._function_item(payload, etype)
        text = need_str(payload, "delta", etype)
        if not text:
            self._claim(resp, seq, "")  # an empty delta carries nothing and holds no position
            return
        base = item.base
        if (seq is None) != (base is None):
            raise ProtocolViolation("openai-responses: numbered and unnumbered events in one call")
        position = None if seq is None or base is None else self._seq_position(resp, item, seq, base)
        at = item.state.next_position if position is None else position
        item.texts.setdefault(at, text)
        self._fragment(item.state, text, position)

    def _seq_position(self, resp: _Response, item: _Item, seq: int, base: int) -> int:
        known = item.seq_pos.get(seq)
        if known is not None:
            return known  # a replayed delta keeps its position
        if seq in resp.seq_owner:
            raise ProtocolViolation(f"openai-responses: sequence_number {seq} used by two different events")
        if seq < base:
            raise ProtocolViolation(f"openai-responses: delta numbered {seq}, before its item was added")
        all_between = bisect.bisect_left(resp.seqs, seq) - bisect.bisect_left(resp.seqs, base)
        own_between = bisect.bisect_left(item.own, seq)
        position = seq - base - (all_between - own_between)
        resp.seq_owner[seq] = item.state.item
        bisect.insort(resp.seqs, seq)
        bisect.insort(item.own, seq)
        item.seq_pos[seq] = position
        return position

    def _complete_arguments(self, item: _Item, arguments: str | None) -> None:
        """The complete arguments a done event carries: the call's fragment when no delta
        carried text, otherwise a check of the fragments."""
        if not arguments:
            return
        if not item.state.has_text:
            item.texts[0] = arguments
            self._fragment(item.state, arguments)
            return
        positions = sorted(item.texts)
        if positions != list(range(len(positions))) or "".join(item.texts[p] for p in positions) != arguments:
            item.mismatch = True

    def _item_done(self, payload: dict[str, Any], etype: str, seq: int | None) -> None:
        resp = self._current
        if resp is None or resp.ended:
            raise ProtocolViolation(f"openai-responses: {etype} outside a response")
        self._claim(resp, seq, "")
        body = need_dict(payload.get("item"), f"{etype}.item")
        item_id = need_str(body, "id", f"{etype}.item")
        self._bind(resp, opt_int(payload, "output_index", etype), item_id)
        if need_str(body, "type", f"{etype}.item") != "function_call":
            if item_id in resp.items:
                raise ProtocolViolation(f"openai-responses: item {item_id!r} done as another type")
            return
        item = resp.items.get(item_id)
        if item is None:
            raise ProtocolViolation(f"openai-responses: {etype} for an item never added ({item_id!r})")
        call_id = opt_str(body, "call_id", f"{etype}.item")
        if call_id is not None and call_id != item.state.call:
            raise ProtocolViolation(f"openai-responses: item {item_id!r} done with another call_id")
        self._complete_arguments(item, opt_str(body, "arguments", f"{etype}.item"))
        if opt_str(body, "status", f"{etype}.item") == "incomplete":
            return  # the response's end gives the reason
        self._terminal(
            item.state,
            "error" if item.mismatch else "completed",
            "the done events' arguments disagree with the deltas" if item.mismatch else None,
        )

    def _response_end(self, payload: dict[str, Any], etype: str, reason: StopReason) -> None:
        rid = self._response_obj_id(payload, etype)
        resp = self._current
        if resp is None or resp.ended:
            if resp is not None and rid == resp.id:
                return  # a replayed end of a response that already ended
            resp = self._start(rid or self.fallback_response)
        elif rid is not None and rid != resp.id:
            raise ProtocolViolation(f"openai-responses: {etype} for {rid!r} while {resp.id!r} is open")
        self._claim(resp, opt_int(payload, "sequence_number", etype), "")
        resp.ended = True
        self._end_response(resp.id, reason)


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


class ResponsesRenderer(Renderer):
    """Abstract events -> ``response.*`` events with sequence numbers."""

    protocol = "openai-responses"
    positional = True
    several_responses = True

    def render(self, events: Sequence[Event]) -> list[dict[str, Any]]:
        self._extent: dict[tuple[str, str, str], int] = {}
        for e in events:
            if isinstance(e, Fragment) and e.position >= 0:
                key = (e.response, e.item, e.call)
                self._extent[key] = max(self._extent.get(key, 0), e.position + 1)
        return super().render(events)

    def _on_response_start(self, response: str, where: str) -> None:
        self._seq = 0
        self._next_index = 0
        self._blocks: dict[tuple[str, str, str], tuple[int, int]] = {}  # key -> (output_index, base)
        self._messages: dict[str, int] = {}  # message item id -> output_index
        self._call_items: set[str] = set()
        body = {"id": response, "object": "response", "status": "in_progress", "output": []}
        self._event("response.created", response=body)

    def _event(self, etype: str, **fields: Any) -> None:
        self._emit({"type": etype, "sequence_number": self._seq, **fields})
        self._seq += 1

    def _on_open(self, call: RenderCall, where: str) -> None:
        if call.item in self._call_items or call.item in self._messages:
            raise NotRepresentable(f"{where}: one Responses output item carries one call")
        self._call_items.add(call.item)
        index = self._next_index
        self._next_index += 1
        item = {"id": call.item, "type": "function_call", "status": "in_progress", "arguments": ""}
        self._event(
            "response.output_item.added", output_index=index, item={**item, "call_id": call.call, "name": call.tool}
        )
        extent = self._extent.get(call.key, 0)
        self._blocks[call.key] = (index, self._seq)
        self._seq += extent  # the call's deltas take base + position

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        index, base = self._blocks[call.key]
        self._emit(
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": base + event.position,
                "item_id": call.item,
                "output_index": index,
                "delta": event.text,
            }
        )

    def _on_text(self, event: TextFragment, where: str) -> None:
        if event.item in self._call_items:
            raise NotRepresentable(f"{where}: item {event.item!r} is a function_call, not a message")
        index = self._messages.get(event.item)
        if index is None:
            index = self._messages[event.item] = self._next_index
            self._next_index += 1
            item = {"id": event.item, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            self._event("response.output_item.added", output_index=index, item=item)
        self._event(
            "response.output_text.delta", item_id=event.item, output_index=index, content_index=0, delta=event.text
        )

    def _item_body(self, call: RenderCall, status: str) -> dict[str, Any]:
        body: dict[str, Any] = {"id": call.item, "type": "function_call", "status": status}
        arguments = call.arguments()
        if arguments is not None:
            body["arguments"] = arguments
        return {**body, "call_id": call.call, "name": call.tool}

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        index, _ = self._blocks[call.key]
        arguments = call.arguments()
        if arguments is not None:
            self._event(
                "response.function_call_arguments.done", item_id=call.item, output_index=index, arguments=arguments
            )
        self._event("response.output_item.done", output_index=index, item=self._item_body(call, "completed"))

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        for call in stopped:
            index, _ = self._blocks[call.key]
            self._event("response.output_item.done", output_index=index, item=self._item_body(call, "incomplete"))
        for item_id, index in self._messages.items():
            message = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": []}
            self._event("response.output_item.done", output_index=index, item=message)
        body: dict[str, Any] = {"id": event.response, "object": "response", "output": []}
        if event.reason == "completed":
            self._event("response.completed", response={**body, "status": "completed"})
        elif event.reason == "error":
            failure = {"code": "server_error", "message": "the response failed"}
            self._event("response.failed", response={**body, "status": "failed", "error": failure})
        else:
            why = "max_output_tokens" if event.reason == "length" else "content_filter"
            details = {"reason": why}
            self._event("response.incomplete", response={**body, "status": "incomplete", "incomplete_details": details})


PROTOCOL: Final = Protocol(
    name="openai-responses",
    parser=ResponsesParser,
    renderer=ResponsesRenderer,
    event_name=type_field("type"),
)
