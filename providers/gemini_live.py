"""Gemini Live API server messages over a WebSocket (``BidiGenerateContent``).

A Live session is one WebSocket: the client's ``setup`` is answered by ``setupComplete``,
then the model's turns arrive as JSON messages, each with one field of
``LiveServerMessage`` (the ``google-genai`` SDK's ``types.py``, 2.34): ``serverContent``
(``modelTurn`` parts, ``generationComplete``, ``turnComplete`` with an optional
``turnCompleteReason``, ``interrupted``), ``toolCall`` (``functionCalls``: ``id``, ``name``,
``args``), ``toolCallCancellation`` (``ids``), ``usageMetadata``, ``goAway``,
``sessionResumptionUpdate`` and voice-activity signals.

Calls arrive whole. The Live API sends no argument deltas: a ``toolCall`` is the SDK's
"request for the client to execute the function_calls and return the responses with the
matching ids", so each of its function calls is read as the call opened, its ``args`` as
one fragment of compact JSON (:func:`~callsafe.providers.base.canonical_json`; no ``args``
is ``{}``), and its terminal event, ``completed``. The call is ``id``; an empty or missing
id is a :class:`~callsafe.providers.base.MalformedEvent` (a tool response is matched to its
call by id, so such a call can be answered by nobody: the empty ids pipecat #4987 made up).
The item is the call's ordinal in its turn (``"0"``, ``"1"``, ...).

Turns are responses. The wire names none, so the session's first turn is the parser's
fallback response id and the n-th after it ``<fallback>#n``. A turn opens with its first
``serverContent`` part or ``toolCall`` and ends with ``turnComplete`` (``completed``;
``turnCompleteReason`` ``MALFORMED_FUNCTION_CALL`` or ``RESPONSE_REJECTED`` is ``error``, a
prohibited-content reason ``content_filter``) or with ``interrupted``: the user spoke over
the model (barge-in), which ends the turn with ``error``. A ``turnComplete`` with no turn
open (after an interruption) ends nothing.

The hazards, read as the spec has them:

* **A call repeated across two messages** (mastra #22969: a Live call dispatched from two
  frames, every tool ran twice): an ``id`` already issued in the session is the same call,
  whatever turn repeats it; the parser emits what the wire said again under the first key
  (open, the same one fragment, the same terminal event id), and the model runs it at most
  once (a repeated terminal event is a replay). Other arguments or another name under the
  same id are a conflict, and the call fails unless it already ran.
* **toolCallCancellation** ("a previously issued ToolCallMessage with the specified ids
  should have been not executed and should be cancelled"; it comes when the user interrupts
  the turn): each named call gets a terminal event with reason ``error`` and an event id of
  its own (``.../end:cancelled``). A call that waits for its confirmation, or has not been
  dispatched yet, then never runs (the spec: "every cancellation prevents dispatch"); a
  call that already ran is not undone (the model rejects the stop: "the call already ran"),
  and compensating for its side effects is the application's, as the API says. An id never
  issued cancels nothing (counted in :attr:`GeminiLiveParser.unknown_cancellations`).
* **Barge-in** (``interrupted``) ends the turn; it stops no call the wire already issued
  (those are stopped by ``toolCallCancellation``, when the server sends it).

Rendering: text as ``serverContent.modelTurn`` parts (item ``text``); a completed call as
one ``toolCall`` message whose ``args`` are its fragments joined, which must be one JSON
object; a turn ending ``completed`` as ``generationComplete`` then ``turnComplete``, one
ending ``error`` as ``interrupted`` (the user's barge-in). A call its turn stops before it
completes, or a socket that drops in the middle of one, is not representable: the Live API
sends a call only whole, so such a call never reaches the wire at all. ``length`` and
``content_filter`` have no turn end of their own. The JSON rides in SSE for the package's
own tools (a convenience); the loopback serves it over a WebSocket
(:mod:`callsafe.loopback.gemini_live`, ``transport="websocket"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import CallTerminal, Disconnect, Fragment, ResponseTerminal, StopReason, TextFragment
from callsafe.providers.base import (
    CallState,
    MalformedEvent,
    NotRepresentable,
    Parser,
    Protocol,
    RenderCall,
    Renderer,
    canonical_json,
    need_dict,
    need_str,
    no_event_name,
    opt_dict,
    opt_list,
    opt_str,
    terminal_event_id,
)

__all__ = ["CANCELLED_SUFFIX", "PROTOCOL", "TEXT_ITEM", "GeminiLiveParser", "GeminiLiveRenderer"]

TEXT_ITEM: Final = "text"
CANCELLED_SUFFIX: Final = ":cancelled"
"""Appended to a call's terminal event id for the stop a ``toolCallCancellation`` gives it."""
KNOWN_FIELDS: Final = frozenset(
    {
        "setupComplete",
        "serverContent",
        "toolCall",
        "toolCallCancellation",
        "usageMetadata",
        "goAway",
        "sessionResumptionUpdate",
        "voiceActivityDetectionSignal",
        "voiceActivity",
    }
)
ERROR_REASONS: Final = frozenset({"MALFORMED_FUNCTION_CALL", "RESPONSE_REJECTED"})
BARGE_IN: Final = "the user spoke over the model (serverContent.interrupted, barge-in)"
CANCELLATION: Final = "the server cancelled the call (toolCallCancellation)"


@dataclass
class _Issued:
    """A call the session issued: its state, and the arguments it carried."""

    state: CallState
    arguments: str


class GeminiLiveParser(Parser):
    """One Live session's server messages (turns one after another)."""

    protocol = "gemini-live"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._current: str | None = None
        self._turns = 0
        self._ordinal = 0
        self._issued: dict[str, _Issued] = {}
        self.interruptions = 0
        """How many turns the user's speech interrupted (barge-ins the stream carried)."""
        self.unknown_cancellations = 0
        """Ids a ``toolCallCancellation`` named that the session never issued."""

    def _feed(self, payload: dict[str, Any]) -> None:
        if payload and not KNOWN_FIELDS & payload.keys():
            raise MalformedEvent(f"gemini-live: not a server message (fields {sorted(payload)[:5]})")
        content = opt_dict(payload, "serverContent", "gemini-live message")
        if content is not None:
            self._server_content(content)
        tool_call = opt_dict(payload, "toolCall", "gemini-live message")
        if tool_call is not None:
            self._response()  # model output: the turn is under way, whatever its calls say
            for n, raw in enumerate(opt_list(tool_call, "functionCalls", "toolCall") or []):
                self._function_call(need_dict(raw, f"toolCall.functionCalls[{n}]"), n)
        cancellation = opt_dict(payload, "toolCallCancellation", "gemini-live message")
        if cancellation is not None:
            for n, raw in enumerate(opt_list(cancellation, "ids", "toolCallCancellation") or []):
                if not isinstance(raw, str):
                    raise MalformedEvent(f"gemini-live: toolCallCancellation.ids[{n}] is not a string")
                self._cancel(raw)
        # setupComplete, usageMetadata, goAway, sessionResumptionUpdate and voice activity
        # carry no call data

    def _response(self) -> str:
        """The turn in progress, opened by the message that needs one."""
        if self._current is None:
            rid = self.fallback_response if self._turns == 0 else f"{self.fallback_response}#{self._turns}"
            self._turns += 1
            self._begin_response(rid)
            self._current, self._ordinal = rid, 0
        return self._current

    def _server_content(self, content: dict[str, Any]) -> None:
        turn = opt_dict(content, "modelTurn", "serverContent")
        if turn is not None:
            rid = self._response()
            for n, raw in enumerate(opt_list(turn, "parts", "serverContent.modelTurn") or []):
                part = need_dict(raw, f"serverContent.modelTurn.parts[{n}]")
                text = opt_str(part, "text", "part")
                if text and not part.get("thought"):
                    self._text(rid, TEXT_ITEM, text)
        if content.get("interrupted") is True:
            self.interruptions += 1
            if self._current is not None:
                self._end(self._current, "error", BARGE_IN)
        if content.get("turnComplete") is True and self._current is not None:
            why = opt_str(content, "turnCompleteReason", "serverContent") or ""
            if why in ERROR_REASONS:
                self._end(self._current, "error", f"the turn ended with turnCompleteReason {why}")
            elif "PROHIBITED" in why:
                self._end(self._current, "content_filter", f"the turn ended with turnCompleteReason {why}")
            else:
                self._end(self._current, "completed")

    def _end(self, rid: str, reason: StopReason, cause: str | None = None) -> None:
        self._current = None
        self._end_response(rid, reason, cause)

    def _function_call(self, call: dict[str, Any], n: int) -> None:
        what = f"toolCall.functionCalls[{n}]"
        call_id = need_str(call, "id", what)
        if not call_id:
            raise MalformedEvent(f"gemini-live: {what}.id is empty; a tool response is matched to its call by id")
        name = need_str(call, "name", what)
        args = opt_dict(call, "args", what)
        arguments = canonical_json(args if args is not None else {})
        issued = self._issued.get(call_id)
        if issued is None:
            rid = self._response()
            state = self._open_call(rid, str(self._ordinal), call_id, name)
            self._ordinal += 1
            self._issued[call_id] = _Issued(state, arguments)
        else:  # the same call again (mastra #22969): what the wire said, under its first key
            state = self._open_call(issued.state.response, issued.state.item, call_id, name)
        self._fragment(state, arguments, position=0)
        if issued is None or issued.arguments == arguments:
            self._terminal(state, "completed")

    def _cancel(self, call_id: str) -> None:
        issued = self._issued.get(call_id)
        if issued is None:
            self.unknown_cancellations += 1
            return
        state = issued.state
        self.stop_causes.setdefault(state.key, CANCELLATION)
        self._out.append(
            CallTerminal(
                turn=self.turn,
                response=state.response,
                item=state.item,
                call=state.call,
                event_id=terminal_event_id(state.response, state.item, state.call) + CANCELLED_SUFFIX,
                reason="error",
            )
        )


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


class GeminiLiveRenderer(Renderer):
    """Abstract events -> Live server messages (a turn ending in error as a barge-in)."""

    protocol = "gemini-live"
    response_reasons = frozenset({"completed", "error"})

    def _on_open(self, call: RenderCall, where: str) -> None:
        if call.item != str(call.ordinal):
            raise NotRepresentable(f"{where}: Live calls are numbered in their turn; expected item {call.ordinal}")
        if not call.call:
            raise NotRepresentable(f"{where}: a Live call needs an id (its tool response names it)")

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        """The Live API sends a call whole: its arguments go with its ``toolCall``."""

    def _on_text(self, event: TextFragment, where: str) -> None:
        if event.item != TEXT_ITEM:
            raise NotRepresentable(f"{where}: Live text has no item of its own; use item {TEXT_ITEM!r}")
        self._emit({"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": event.text}]}}})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        if not call.order:
            raise NotRepresentable(f"{where}: a Live call carries its arguments as an object; this one has none")
        try:
            args = strict_parse("".join(call.order))
        except ParseFailure as exc:
            raise NotRepresentable(f"{where}: Live sends arguments as values; these do not parse ({exc})") from None
        if not isinstance(args, dict):
            raise NotRepresentable(f"{where}: Live arguments are an object")
        self._emit({"toolCall": {"functionCalls": [{"id": call.call, "name": call.tool, "args": args}]}})

    def _incomplete(self, where: str) -> None:
        if self._response is not None and self._open_in(self._response):
            raise NotRepresentable(
                f"{where}: the Live API sends a call only whole; a call stopped before it completes never reaches "
                "the wire"
            )

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        self._incomplete(where)
        if stopped:
            raise NotRepresentable(
                f"{where}: the Live API sends a call only whole; a call its turn stops never reaches the wire"
            )
        if event.reason == "error":
            self._emit({"serverContent": {"interrupted": True}})
        else:
            self._emit({"serverContent": {"generationComplete": True}})
            self._emit({"serverContent": {"turnComplete": True}})

    def _on_disconnect(self, event: Disconnect, where: str) -> None:
        self._incomplete(where)


PROTOCOL: Final = Protocol(
    name="gemini-live",
    parser=GeminiLiveParser,
    renderer=GeminiLiveRenderer,
    event_name=no_event_name,
    transport="websocket",
    names_responses=False,
    whole_calls=True,
)
