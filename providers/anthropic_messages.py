"""Anthropic Messages streaming (``message_start`` ... ``message_stop``).

Call keys: the response is the message ``id`` from ``message_start``; the item is the
content block ``index`` as a decimal string; the call is the ``tool_use`` block's ``id``.

Decisions, and why:

* **Only ``tool_use`` blocks are calls the client executes.** ``server_tool_use`` (web
  search, code execution, tool search), ``mcp_tool_use`` and their ``*_tool_result`` blocks
  are run by Anthropic: they are never announced, and their ``input_json_delta`` is
  dropped. A ``tool_use`` block whose ``caller`` is code execution (programmatic tool
  calling) is still a client tool and is announced.
* **``content_block_stop`` is the call's terminal event** (``completed``). Input arrives as
  ``input_json_delta`` fragments in arrival order (no positions). When no delta carries any
  text, the block's start ``input`` is the arguments: ``{}`` (the protocol's empty value)
  for a tool without arguments, or the complete input that programmatic calls put in the
  start block. That fragment is emitted at ``content_block_stop``, at position 0. A
  non-empty start input *and* streamed input is a violation (two sources for one text).
* **Complete ``tool_use`` blocks inside ``message_start.message.content``** (programmatic
  tool calling resumes a message that way) are announced at ``message_start`` with their
  input as their one fragment; having no block events, their terminal event is the
  message's end: ``message_stop``, with the message's stop reason.
* **A second ``message_start`` while a message is open is a protocol violation**, never a
  merge: a spliced stream must not glue a second message's deltas onto the first
  message's calls. After ``message_stop`` a new message may start (recorded multi-step
  streams).
* ``message_delta.stop_reason``: ``end_turn``, ``tool_use``, ``stop_sequence`` and
  ``pause_turn`` are ``completed``; ``max_tokens`` and ``model_context_window_exceeded``
  are ``length``; ``refusal`` is ``content_filter``; anything else ``error``. A stop reason
  other than ``completed`` stops at once every call not yet stopped; ``message_stop`` then
  ends the response. An ``error`` event stops the open calls with ``error`` and ends the
  message. A stream that ends inside a message disconnects it.
* Text blocks' ``text_delta`` is text (item = block index); thinking is dropped.

Rendering: items are block indexes, unique within a message (text blocks included);
fragments in position order only (no wire positions). Every call renders as a streamed
``tool_use`` block with ``input: {}`` (so a call with no fragment parses back with the
fragment ``{}``). Ends: ``completed`` -> ``message_delta`` (``tool_use``, or ``end_turn``
without calls) and ``message_stop``; ``length`` -> ``max_tokens``; ``content_filter`` ->
``refusal``; ``error`` -> an ``error`` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.model.vocabulary import Fragment, ResponseTerminal, StopReason, TextFragment
from callsafe.providers.base import (
    CallState,
    NotRepresentable,
    Parser,
    Protocol,
    ProtocolViolation,
    RenderCall,
    Renderer,
    canonical_json,
    index_item,
    need_dict,
    need_int,
    need_str,
    opt_dict,
    opt_list,
    opt_str,
    type_field,
)

__all__ = ["PROTOCOL", "AnthropicParser", "AnthropicRenderer"]

STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "completed",
    "tool_use": "completed",
    "stop_sequence": "completed",
    "pause_turn": "completed",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


@dataclass
class _Block:
    kind: str  # "tool_use", "text", or "other" (server tools, thinking, results)
    call: CallState | None = None
    start_input: Any = None
    stopped: bool = False


@dataclass
class _Message:
    id: str
    blocks: dict[int, _Block] = field(default_factory=dict)
    prepopulated: list[CallState] = field(default_factory=list)
    stop_reason: StopReason | None = None


class AnthropicParser(Parser):
    """One Messages stream (messages one after another, never nested)."""

    protocol = "anthropic-messages"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._message: _Message | None = None

    def _feed(self, payload: dict[str, Any]) -> None:
        etype = need_str(payload, "type", "anthropic event")
        if etype == "message_start":
            self._message_start(need_dict(payload.get("message"), "message_start.message"))
        elif etype == "content_block_start":
            self._block_start(payload)
        elif etype == "content_block_delta":
            self._block_delta(payload)
        elif etype == "content_block_stop":
            self._block_stop(payload)
        elif etype == "message_delta":
            message = self._open_message(etype)
            delta = opt_dict(payload, "delta", etype) or {}
            stop = opt_str(delta, "stop_reason", f"{etype}.delta")
            if stop is not None:
                message.stop_reason = STOP_REASONS.get(stop, "error")
                if message.stop_reason != "completed":
                    self._stop_open_calls(message.id, message.stop_reason)
        elif etype == "message_stop":
            message = self._open_message(etype)
            reason = message.stop_reason or "completed"
            for state in message.prepopulated:
                if not state.ended:
                    self._terminal(state, reason)
            self._message = None
            self._end_response(message.id, reason)
        elif etype == "error" and self._message is not None:
            message, self._message = self._message, None
            self._end_response(message.id, "error", "an error event from the server")
        # ping and unknown events carry nothing for calls

    def _open_message(self, etype: str) -> _Message:
        if self._message is None:
            raise ProtocolViolation(f"anthropic-messages: {etype} outside a message")
        return self._message

    def _message_start(self, body: dict[str, Any]) -> None:
        if self._message is not None:
            raise ProtocolViolation(
                f"anthropic-messages: a second message_start while {self._message.id!r} is open; "
                "a spliced stream is not merged"
            )
        rid = opt_str(body, "id", "message_start.message") or self.fallback_response
        self._begin_response(rid)
        message = self._message = _Message(rid)
        stop = opt_str(body, "stop_reason", "message_start.message")
        if stop is not None:
            message.stop_reason = STOP_REASONS.get(stop, "error")
        for index, raw in enumerate(opt_list(body, "content", "message_start.message") or []):
            block = need_dict(raw, "message_start.message.content[]")
            if need_str(block, "type", "message_start.message.content[]") != "tool_use":
                message.blocks[index] = _Block("other", stopped=True)
                continue
            state = self._open_call(rid, str(index), *self._id_and_name(block, "message_start.message.content[]"))
            self._fragment(state, canonical_json(block.get("input", {})))
            message.blocks[index] = _Block("tool_use", state, stopped=True)
            message.prepopulated.append(state)

    @staticmethod
    def _id_and_name(block: dict[str, Any], what: str) -> tuple[str, str]:
        return need_str(block, "id", what), need_str(block, "name", what)

    def _block_start(self, payload: dict[str, Any]) -> None:
        message = self._open_message("content_block_start")
        index = need_int(payload, "index", "content_block_start")
        if index in message.blocks:
            raise ProtocolViolation(f"anthropic-messages: content block {index} started twice")
        block = need_dict(payload.get("content_block"), "content_block_start.content_block")
        kind = need_str(block, "type", "content_block_start.content_block")
        if kind == "tool_use":
            call_id, name = self._id_and_name(block, "content_block_start.content_block")
            state = self._open_call(message.id, str(index), call_id, name)
            message.blocks[index] = _Block("tool_use", state, start_input=block.get("input", {}))
        elif kind == "text":
            message.blocks[index] = _Block("text")
            self._text(message.id, str(index), opt_str(block, "text", "content_block_start.content_block") or "")
        else:
            message.blocks[index] = _Block("other")

    def _block(self, payload: dict[str, Any], etype: str) -> tuple[_Message, int, _Block]:
        message = self._open_message(etype)
        index = need_int(payload, "index", etype)
        block = message.blocks.get(index)
        if block is None:
            raise ProtocolViolation(f"anthropic-messages: {etype} for content block {index}, never started")
        return message, index, block

    def _block_delta(self, payload: dict[str, Any]) -> None:
        message, index, block = self._block(payload, "content_block_delta")
        delta = need_dict(payload.get("delta"), "content_block_delta.delta")
        dtype = need_str(delta, "type", "content_block_delta.delta")
        if dtype == "input_json_delta":
            text = need_str(delta, "partial_json", "content_block_delta.delta")
            if block.kind == "tool_use" and block.call is not None:
                self._fragment(block.call, text)
            elif block.kind == "text":
                raise ProtocolViolation(f"anthropic-messages: input_json_delta for text block {index}")
        elif dtype == "text_delta":
            text = need_str(delta, "text", "content_block_delta.delta")
            if block.kind == "tool_use":
                raise ProtocolViolation(f"anthropic-messages: text_delta for tool_use block {index}")
            if block.kind == "text":
                self._text(message.id, str(index), text)

    def _block_stop(self, payload: dict[str, Any]) -> None:
        _, index, block = self._block(payload, "content_block_stop")
        state = block.call
        if block.kind != "tool_use" or state is None:
            block.stopped = True
            return
        if not block.stopped:
            block.stopped = True
            if not state.has_text:
                self._fragment(state, canonical_json(block.start_input))
            elif block.start_input not in ({}, None):
                raise ProtocolViolation(
                    f"anthropic-messages: tool_use block {index} has both a start input and streamed input"
                )
        # a repeated stop is emitted again with the same event id: the model sees a replay
        self._terminal(state, "completed")


class AnthropicRenderer(Renderer):
    """Abstract events -> Messages stream events."""

    protocol = "anthropic-messages"
    several_responses = True

    def _on_response_start(self, response: str, where: str) -> None:
        self._blocks: dict[int, str] = {}  # index -> "tool_use" | "text"
        self._open_text: list[int] = []
        message: dict[str, Any] = {
            "id": response,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "callsafe",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._emit({"type": "message_start", "message": message})

    def _on_open(self, call: RenderCall, where: str) -> None:
        index = index_item(call.item, where)
        if index in self._blocks:
            raise NotRepresentable(f"{where}: content block {index} already used in this message")
        self._blocks[index] = "tool_use"
        block = {"type": "tool_use", "id": call.call, "name": call.tool, "input": {}}
        self._emit({"type": "content_block_start", "index": index, "content_block": block})

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": event.text}
        self._emit({"type": "content_block_delta", "index": int(call.item), "delta": delta})

    def _on_text(self, event: TextFragment, where: str) -> None:
        index = index_item(event.item, where)
        kind = self._blocks.get(index)
        if kind is None:
            self._blocks[index] = "text"
            self._open_text.append(index)
            self._emit({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        elif kind != "text":
            raise NotRepresentable(f"{where}: content block {index} is a tool_use block")
        self._emit({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": event.text}})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._emit({"type": "content_block_stop", "index": int(call.item)})

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        for index in self._open_text:
            self._emit({"type": "content_block_stop", "index": index})
        if event.reason == "error":
            self._emit({"type": "error", "error": {"type": "api_error", "message": "the message failed"}})
            return
        has_calls = "tool_use" in self._blocks.values()
        stop = {
            "completed": "tool_use" if has_calls else "end_turn",
            "length": "max_tokens",
            "content_filter": "refusal",
        }[event.reason]
        self._emit({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}})
        self._emit({"type": "message_stop"})


PROTOCOL: Final = Protocol(
    name="anthropic-messages",
    parser=AnthropicParser,
    renderer=AnthropicRenderer,
    event_name=type_field("type"),
)
