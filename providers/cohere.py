"""Cohere v2 chat streaming (``message-start`` ... ``message-end``).

Call keys: the response is the ``id`` of ``message-start``; the item is the tool call's
``index`` as a decimal string (tool calls and content blocks count their indexes apart);
the call is the tool call's ``id``.

* ``tool-call-start`` announces a call (arguments it already carries are its first
  fragment); ``tool-call-delta`` carries fragments in arrival order (no positions);
  ``tool-call-end`` is the call's terminal event, ``completed``. A call whose arguments
  stayed empty gets the fragment ``{}`` at its end: Cohere streams a tool without
  arguments that way (``cohere-empty-tool-call``).
* ``content-delta`` text is text (item = content index); thinking content and the
  ``tool-plan-delta`` (a plan, like reasoning, not the reply) are dropped; citations too.
* ``message-end.delta.finish_reason``: ``COMPLETE``, ``STOP_SEQUENCE`` and ``TOOL_CALL`` are
  ``completed``; ``MAX_TOKENS`` is ``length``; anything else (``ERROR``, ``TIMEOUT``)
  ``error``. Other than ``completed``, it stops every open call with that reason; then the
  response ends. A second ``message-start`` while a message is open is a violation; a
  stream that ends inside a message disconnects it.

Rendering: items are indexes; fragments in position order only; a response cannot end
with ``content_filter`` (Cohere has no such finish reason). A call with no fragment parses
back with the fragment ``{}``.
"""

from __future__ import annotations

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
    need_int,
    need_str,
    opt_dict,
    opt_str,
    type_field,
)

__all__ = ["PROTOCOL", "CohereParser", "CohereRenderer"]

FINISH_REASONS: Final[dict[str, StopReason]] = {
    "COMPLETE": "completed",
    "STOP_SEQUENCE": "completed",
    "TOOL_CALL": "completed",
    "MAX_TOKENS": "length",
}


def _message(payload: dict[str, Any], what: str) -> dict[str, Any]:
    delta = opt_dict(payload, "delta", what) or {}
    return opt_dict(delta, "message", f"{what}.delta") or {}


class CohereParser(Parser):
    """One Cohere v2 chat stream."""

    protocol = "cohere-v2"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._rid: str | None = None
        self._tools: dict[int, CallState] = {}
        self._ended_tools: set[int] = set()
        self._text_blocks: set[int] = set()

    def _start(self, rid: str) -> str:
        self._begin_response(rid)
        self._rid = rid
        self._tools, self._ended_tools, self._text_blocks = {}, set(), set()
        return rid

    def _response(self, etype: str) -> str:
        """The open message (started with the fallback id if the stream skipped its start)."""
        return self._rid if self._rid is not None else self._start(self.fallback_response)

    def _feed(self, payload: dict[str, Any]) -> None:
        etype = need_str(payload, "type", "cohere event")
        if etype == "message-start":
            if self._rid is not None:
                raise ProtocolViolation(f"cohere-v2: a second message-start while {self._rid!r} is open")
            self._start(opt_str(payload, "id", etype) or self.fallback_response)
        elif etype == "content-start":
            rid = self._response(etype)
            index = need_int(payload, "index", etype)
            content = opt_dict(_message(payload, etype), "content", f"{etype}.delta.message") or {}
            if opt_str(content, "type", f"{etype}.content") in (None, "text"):
                self._text_blocks.add(index)
                self._text(rid, str(index), opt_str(content, "text", f"{etype}.content") or "")
        elif etype == "content-delta":
            rid = self._response(etype)
            index = need_int(payload, "index", etype)
            content = opt_dict(_message(payload, etype), "content", f"{etype}.delta.message") or {}
            text = opt_str(content, "text", f"{etype}.content")
            if text and index in self._text_blocks:
                self._text(rid, str(index), text)
        elif etype == "tool-call-start":
            rid = self._response(etype)
            index = need_int(payload, "index", etype)
            if index in self._tools:
                raise ProtocolViolation(f"cohere-v2: tool call {index} started twice")
            call = opt_dict(_message(payload, etype), "tool_calls", f"{etype}.delta.message") or {}
            function = opt_dict(call, "function", f"{etype}.tool_calls") or {}
            state = self._open_call(
                rid,
                str(index),
                need_str(call, "id", f"{etype}.tool_calls"),
                need_str(function, "name", f"{etype}.tool_calls.function"),
            )
            self._tools[index] = state
            self._fragment(state, opt_str(function, "arguments", f"{etype}.tool_calls.function") or "")
        elif etype == "tool-call-delta":
            self._response(etype)
            state = self._tool(payload, etype)
            call = opt_dict(_message(payload, etype), "tool_calls", f"{etype}.delta.message") or {}
            function = opt_dict(call, "function", f"{etype}.tool_calls") or {}
            self._fragment(state, opt_str(function, "arguments", f"{etype}.tool_calls.function") or "")
        elif etype == "tool-call-end":
            self._response(etype)
            state = self._tool(payload, etype)
            index = int(state.item)
            if index not in self._ended_tools:
                self._ended_tools.add(index)
                if not state.has_text:
                    self._fragment(state, "{}")
            self._terminal(state, "completed")
        elif etype == "message-end":
            rid = self._response(etype)
            delta = opt_dict(payload, "delta", etype) or {}
            finish = opt_str(delta, "finish_reason", f"{etype}.delta") or ""
            self._rid = None
            self._end_response(rid, FINISH_REASONS.get(finish, "error"))
        # tool-plan-delta, citation-start/-end, content-end and unknown events carry nothing

    def _tool(self, payload: dict[str, Any], etype: str) -> CallState:
        index = need_int(payload, "index", etype)
        state = self._tools.get(index)
        if state is None:
            raise ProtocolViolation(f"cohere-v2: {etype} for tool call {index}, never started")
        return state


class CohereRenderer(Renderer):
    """Abstract events -> Cohere v2 stream events."""

    protocol = "cohere-v2"
    several_responses = True
    response_reasons = frozenset({"completed", "length", "error"})

    def _on_response_start(self, response: str, where: str) -> None:
        self._text_blocks: list[int] = []
        self._any_call = False
        message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
        self._emit({"id": response, "type": "message-start", "delta": {"message": message}})

    def _on_open(self, call: RenderCall, where: str) -> None:
        index = index_item(call.item, where)
        if any(c.item == call.item and c.response == call.response and c is not call for c in self._calls.values()):
            raise NotRepresentable(f"{where}: tool call index {index} already used")
        self._any_call = True
        tool_call = {"id": call.call, "type": "function", "function": {"name": call.tool, "arguments": ""}}
        self._emit({"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": tool_call}}})

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        tool_call = {"function": {"arguments": event.text}}
        self._emit(
            {"type": "tool-call-delta", "index": int(call.item), "delta": {"message": {"tool_calls": tool_call}}}
        )

    def _on_text(self, event: TextFragment, where: str) -> None:
        index = index_item(event.item, where)
        if index not in self._text_blocks:
            self._text_blocks.append(index)
            content = {"type": "text", "text": ""}
            self._emit({"type": "content-start", "index": index, "delta": {"message": {"content": content}}})
        content = {"text": event.text}
        self._emit({"type": "content-delta", "index": index, "delta": {"message": {"content": content}}})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._emit({"type": "tool-call-end", "index": int(call.item)})

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        for index in self._text_blocks:
            self._emit({"type": "content-end", "index": index})
        finish = {
            "completed": "TOOL_CALL" if self._any_call else "COMPLETE",
            "length": "MAX_TOKENS",
            "error": "ERROR",
        }[event.reason]
        self._emit({"type": "message-end", "delta": {"finish_reason": finish}})


PROTOCOL: Final = Protocol(
    name="cohere-v2",
    parser=CohereParser,
    renderer=CohereRenderer,
    event_name=type_field("type"),
)
