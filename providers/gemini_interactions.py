"""Gemini Interactions API streaming (``interaction.created``, ``step.start`` ...
``interaction.completed``): Google's newer, step-based protocol, distinct from
``streamGenerateContent`` (see :mod:`callsafe.providers.gemini`).

Call keys: the response is the interaction ``id``; the item is the step ``index`` as a
decimal string; the call is the ``function_call`` step's ``id`` (``<interaction>#<index>``
if a step has none).

* Only ``function_call`` steps are calls the client executes; Google's own tool steps
  (``google_search_call``, ``code_execution_call``, ``url_context_call``,
  ``mcp_server_tool_call``, ``file_search_call``) are not announced.
* ``step.delta`` of type ``arguments_delta`` carries fragments in arrival order (no
  positions); ``step.stop`` is the call's terminal event, ``completed``. When no delta
  carried text, the step's start ``arguments`` object is the call's one fragment (``{}``
  for a call without arguments), as with Anthropic's start input.
* ``text`` deltas are text (item = step index); thoughts are dropped.
* ``interaction.completed`` (``interaction.complete`` in the older revision) ends the
  response with its ``status``: ``completed`` and ``requires_action`` (calls to run) are
  ``completed``; ``incomplete`` is ``length``; ``failed`` and ``cancelled`` are ``error``.
  Other than ``completed``, it stops every open call with that reason. An ``error``
  event stops them with ``error``. A stream that ends before the interaction does
  disconnects it.

Rendering: one interaction per stream; items are step indexes; fragments in position
order only; no ``content_filter`` end (the protocol has no such status).
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
    canonical_json,
    index_item,
    need_dict,
    need_int,
    need_str,
    opt_dict,
    opt_str,
    type_field,
)

__all__ = ["PROTOCOL", "InteractionsParser", "InteractionsRenderer"]

STATUSES: Final[dict[str, StopReason]] = {
    "completed": "completed",
    "requires_action": "completed",
    "incomplete": "length",
}


class InteractionsParser(Parser):
    """One Interactions stream."""

    protocol = "gemini-interactions"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._rid: str | None = None
        self._ended = False
        self._steps: dict[int, str] = {}  # index -> step type
        self._calls_at: dict[int, CallState] = {}
        self._start_args: dict[int, Any] = {}
        self._stopped: set[int] = set()

    def _response(self, rid: str | None = None) -> str:
        if self._ended:
            raise ProtocolViolation("gemini-interactions: event after the interaction ended")
        if self._rid is None:
            self._rid = rid or self.fallback_response
            self._begin_response(self._rid)
        elif rid is not None and rid != self._rid:
            raise ProtocolViolation(f"gemini-interactions: interaction {rid!r} inside {self._rid!r}")
        return self._rid

    def _feed(self, payload: dict[str, Any]) -> None:
        etype = need_str(payload, "event_type", "gemini-interactions event")
        if etype in ("interaction.created", "interaction.start"):
            interaction = need_dict(payload.get("interaction"), f"{etype}.interaction")
            if self._rid is not None:
                raise ProtocolViolation("gemini-interactions: a second interaction in one stream")
            self._response(opt_str(interaction, "id", f"{etype}.interaction"))
        elif etype == "step.start":
            self._step_start(payload, etype)
        elif etype == "step.delta":
            self._step_delta(payload, etype)
        elif etype == "step.stop":
            self._step_stop(payload, etype)
        elif etype in ("interaction.completed", "interaction.complete"):
            body = opt_dict(payload, "interaction", etype) or {}
            rid = self._response(opt_str(body, "id", f"{etype}.interaction"))
            status = opt_str(body, "status", f"{etype}.interaction") or "completed"
            self._ended = True
            self._end_response(rid, STATUSES.get(status, "error"))
        elif etype == "error" and self._rid is not None and not self._ended:
            self._ended = True
            self._end_response(self._rid, "error")
        # interaction.status_update and unknown events carry nothing

    def _step_start(self, payload: dict[str, Any], etype: str) -> None:
        rid = self._response()
        index = need_int(payload, "index", etype)
        if index in self._steps:
            raise ProtocolViolation(f"gemini-interactions: step {index} started twice")
        step = need_dict(payload.get("step"), f"{etype}.step")
        kind = need_str(step, "type", f"{etype}.step")
        self._steps[index] = kind
        if kind != "function_call":
            return
        call = opt_str(step, "id", f"{etype}.step") or f"{rid}#{index}"
        self._calls_at[index] = self._open_call(rid, str(index), call, need_str(step, "name", f"{etype}.step"))
        arguments = step.get("arguments")
        self._start_args[index] = {} if arguments is None else need_dict(arguments, f"{etype}.step.arguments")

    def _step_delta(self, payload: dict[str, Any], etype: str) -> None:
        rid = self._response()
        index = need_int(payload, "index", etype)
        kind = self._steps.get(index)
        if kind is None:
            raise ProtocolViolation(f"gemini-interactions: delta for step {index}, never started")
        delta = need_dict(payload.get("delta"), f"{etype}.delta")
        dtype = opt_str(delta, "type", f"{etype}.delta")
        if dtype == "arguments_delta":
            state = self._calls_at.get(index)
            if state is None:
                raise ProtocolViolation(f"gemini-interactions: arguments for step {index}, not a function_call")
            self._fragment(state, need_str(delta, "arguments", f"{etype}.delta"))
        elif dtype == "text" and kind != "thought":
            self._text(rid, str(index), opt_str(delta, "text", f"{etype}.delta") or "")

    def _step_stop(self, payload: dict[str, Any], etype: str) -> None:
        self._response()
        index = need_int(payload, "index", etype)
        if index not in self._steps:
            raise ProtocolViolation(f"gemini-interactions: stop for step {index}, never started")
        state = self._calls_at.get(index)
        if state is None:
            return
        if index not in self._stopped:
            self._stopped.add(index)
            if not state.has_text:
                self._fragment(state, canonical_json(self._start_args[index]))
        self._terminal(state, "completed")


class InteractionsRenderer(Renderer):
    """Abstract events -> Interactions stream events."""

    protocol = "gemini-interactions"
    response_reasons = frozenset({"completed", "length", "error"})

    def _on_response_start(self, response: str, where: str) -> None:
        self._steps: dict[int, str] = {}
        self._text_started: set[int] = set()
        interaction = {"id": response, "status": "in_progress", "object": "interaction"}
        self._emit({"event_type": "interaction.created", "interaction": interaction})

    def _on_open(self, call: RenderCall, where: str) -> None:
        index = index_item(call.item, where)
        if index in self._steps:
            raise NotRepresentable(f"{where}: step {index} already used")
        self._steps[index] = "function_call"
        step = {"type": "function_call", "id": call.call, "name": call.tool, "arguments": {}}
        self._emit({"event_type": "step.start", "index": index, "step": step})

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        delta = {"type": "arguments_delta", "arguments": event.text}
        self._emit({"event_type": "step.delta", "index": int(call.item), "delta": delta})

    def _on_text(self, event: TextFragment, where: str) -> None:
        index = index_item(event.item, where)
        kind = self._steps.setdefault(index, "model_output")
        if kind != "model_output":
            raise NotRepresentable(f"{where}: step {index} is a {kind} step")
        if index not in self._text_started:
            self._text_started.add(index)
            self._emit({"event_type": "step.start", "index": index, "step": {"type": "model_output"}})
        self._emit({"event_type": "step.delta", "index": index, "delta": {"type": "text", "text": event.text}})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._emit({"event_type": "step.stop", "index": int(call.item)})

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        for index in sorted(self._text_started):
            self._emit({"event_type": "step.stop", "index": index})
        has_calls = "function_call" in self._steps.values()
        status = {
            "completed": "requires_action" if has_calls else "completed",
            "length": "incomplete",
            "error": "failed",
        }[event.reason]
        interaction = {"id": event.response, "status": status, "object": "interaction"}
        self._emit({"event_type": "interaction.completed", "interaction": interaction})


PROTOCOL: Final = Protocol(
    name="gemini-interactions",
    parser=InteractionsParser,
    renderer=InteractionsRenderer,
    event_name=type_field("event_type"),
)
