"""Amazon Bedrock ConverseStream.

Bedrock sends its events over the AWS event-stream binary framing, not SSE; this module
reads and writes the decoded events (one-key objects such as ``{"contentBlockDelta":
{...}}``, as the SDKs and the captures show them). Its SSE rendering is a convenience for
tests, named by the event key, and is not what AWS sends.

Call keys: the wire names no response at all, so the response is the parser's fallback;
the item is ``contentBlockIndex`` as a decimal string; the call is ``toolUseId``. An
application names a response itself, as its requests of the turn are numbered
(:func:`response_name`: the ``n``-th ConverseStream of turn ``t`` is ``t.rn``); the harness
names a trace's responses so before a Bedrock target runs it (:func:`callsafe.certify.wire.relabel`),
so that a program, which sees no response id on the wire, keys its calls as the trace does.

* ``contentBlockStart`` with ``start.toolUse`` announces a call; ``contentBlockDelta`` with
  ``delta.toolUse.input`` is a fragment (arrival order, no positions); ``contentBlockStop``
  is the call's terminal event, ``completed``. When no input text arrived, the fragment
  ``{}`` is emitted at the stop: Bedrock streams an empty ``input`` for a tool without
  arguments, as Anthropic does.
* Text deltas (``delta.text``) need no block start; ``reasoningContent`` is dropped.
* ``messageStop.stopReason``: ``end_turn``, ``tool_use`` and ``stop_sequence`` are
  ``completed``; ``max_tokens`` and ``model_context_window_exceeded`` are ``length``;
  ``content_filtered`` and ``guardrail_intervened`` are ``content_filter``; anything else
  ``error``. Other than ``completed``, it stops every open call with that reason; then the
  response ends. The stream's exception events (``internalServerException``,
  ``modelStreamErrorException``, ``throttlingException``, ``validationException``,
  ``serviceUnavailableException``) stop the open calls with ``error``.
* One message per stream: a second ``messageStart`` is a violation. A stream that ends
  before ``messageStop`` disconnects the response. ``metadata`` is ignored.

Rendering: one response per stream, any response id (the parser gets it from its context);
items are block indexes; fragments in position order only. A call with no fragment
renders an empty input and parses back with the fragment ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    index_item,
    need_dict,
    need_int,
    need_str,
    opt_dict,
    opt_str,
)

__all__ = ["PROTOCOL", "BedrockParser", "BedrockRenderer", "response_name"]

STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "completed",
    "tool_use": "completed",
    "stop_sequence": "completed",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}

EXCEPTIONS: Final = (
    "internalServerException",
    "modelStreamErrorException",
    "throttlingException",
    "validationException",
    "serviceUnavailableException",
)


class BedrockParser(Parser):
    """One ConverseStream."""

    protocol = "bedrock-converse"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._started = False
        self._ended = False
        self._tools: dict[int, CallState] = {}
        self._stopped: set[int] = set()

    @property
    def _rid(self) -> str:
        return self.fallback_response

    def _ensure_started(self, what: str) -> None:
        if self._ended:
            raise ProtocolViolation(f"bedrock-converse: {what} after the message ended")
        if not self._started:
            self._started = True
            self._begin_response(self._rid)

    def _feed(self, payload: dict[str, Any]) -> None:
        for name in EXCEPTIONS:
            if name in payload:
                need_dict(payload[name], name)
                if self._started and not self._ended:
                    self._ended = True
                    self._end_response(self._rid, "error")
                return
        handlers = {
            "messageStart": self._message_start,
            "contentBlockStart": self._block_start,
            "contentBlockDelta": self._block_delta,
            "contentBlockStop": self._block_stop,
            "messageStop": self._message_stop,
        }
        for name, handler in handlers.items():  # in the order a stream sends them
            if name in payload:
                handler(need_dict(payload[name], name))

    def _message_start(self, body: dict[str, Any]) -> None:
        if self._started:
            raise ProtocolViolation("bedrock-converse: a second messageStart in one stream")
        self._ensure_started("messageStart")

    def _message_stop(self, body: dict[str, Any]) -> None:
        self._ensure_started("messageStop")
        stop = opt_str(body, "stopReason", "messageStop") or ""
        self._ended = True
        self._end_response(self._rid, STOP_REASONS.get(stop, "error"))

    def _block_start(self, body: dict[str, Any]) -> None:
        self._ensure_started("contentBlockStart")
        index = need_int(body, "contentBlockIndex", "contentBlockStart")
        start = opt_dict(body, "start", "contentBlockStart") or {}
        tool = opt_dict(start, "toolUse", "contentBlockStart.start")
        if tool is None:
            return  # a text or reasoning block
        if index in self._tools:
            raise ProtocolViolation(f"bedrock-converse: content block {index} started twice")
        call = need_str(tool, "toolUseId", "contentBlockStart.start.toolUse")
        name = need_str(tool, "name", "contentBlockStart.start.toolUse")
        self._tools[index] = self._open_call(self._rid, str(index), call, name)

    def _block_delta(self, body: dict[str, Any]) -> None:
        self._ensure_started("contentBlockDelta")
        index = need_int(body, "contentBlockIndex", "contentBlockDelta")
        delta = need_dict(body.get("delta"), "contentBlockDelta.delta")
        text = opt_str(delta, "text", "contentBlockDelta.delta")
        if text is not None:
            if index in self._tools:
                raise ProtocolViolation(f"bedrock-converse: text for tool block {index}")
            self._text(self._rid, str(index), text)
        tool = opt_dict(delta, "toolUse", "contentBlockDelta.delta")
        if tool is not None:
            state = self._tools.get(index)
            if state is None:
                raise ProtocolViolation(f"bedrock-converse: tool input for block {index}, which is not a tool block")
            self._fragment(state, need_str(tool, "input", "contentBlockDelta.delta.toolUse"))

    def _block_stop(self, body: dict[str, Any]) -> None:
        self._ensure_started("contentBlockStop")
        index = need_int(body, "contentBlockIndex", "contentBlockStop")
        state = self._tools.get(index)
        if state is None:
            return  # the end of a text block
        if index not in self._stopped:
            self._stopped.add(index)
            if not state.has_text:
                self._fragment(state, "{}")
        self._terminal(state, "completed")


class BedrockRenderer(Renderer):
    """Abstract events -> ConverseStream events."""

    protocol = "bedrock-converse"

    def _on_response_start(self, response: str, where: str) -> None:
        self._blocks: dict[int, str] = {}
        self._emit({"messageStart": {"role": "assistant"}})

    def _block(self, item: str, kind: str, where: str) -> int:
        index = index_item(item, where)
        known = self._blocks.setdefault(index, kind)
        if known != kind:
            raise NotRepresentable(f"{where}: content block {index} is a {known} block")
        return index

    def _on_open(self, call: RenderCall, where: str) -> None:
        index = index_item(call.item, where)
        if index in self._blocks:
            raise NotRepresentable(f"{where}: content block {index} already used")
        self._blocks[index] = "tool"
        start = {"toolUse": {"toolUseId": call.call, "name": call.tool}}
        self._emit({"contentBlockStart": {"contentBlockIndex": index, "start": start}})

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        delta = {"toolUse": {"input": event.text}}
        self._emit({"contentBlockDelta": {"contentBlockIndex": int(call.item), "delta": delta}})

    def _on_text(self, event: TextFragment, where: str) -> None:
        index = self._block(event.item, "text", where)
        self._emit({"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": event.text}}})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._emit({"contentBlockStop": {"contentBlockIndex": int(call.item)}})

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        for index, kind in self._blocks.items():
            if kind == "text":
                self._emit({"contentBlockStop": {"contentBlockIndex": index}})
        if event.reason == "error":
            self._emit({"modelStreamErrorException": {"message": "the stream failed"}})
            return
        has_calls = "tool" in self._blocks.values()
        stop = {
            "completed": "tool_use" if has_calls else "end_turn",
            "length": "max_tokens",
            "content_filter": "content_filtered",
        }[event.reason]
        self._emit({"messageStop": {"stopReason": stop}})


def response_name(turn: str, nth: int) -> str:
    """The name of the ``nth`` (from 0) ConverseStream response of ``turn``: the wire names
    none, so an application and the harness both number a turn's streams in order."""
    return f"{turn}.r{nth}"


def event_key(payload: Mapping[str, Any]) -> str | None:
    """The event's name: its one key, as the AWS event-stream ``:event-type`` header."""
    return next(iter(payload), None) if len(payload) == 1 else None


PROTOCOL: Final = Protocol(
    name="bedrock-converse",
    parser=BedrockParser,
    renderer=BedrockRenderer,
    event_name=event_key,
    transport="aws-eventstream",
)
