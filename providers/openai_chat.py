"""OpenAI Chat Completions streaming (``chat.completion.chunk``), and the many servers that
copy it (DeepSeek, Groq, xAI, Mistral, Alibaba, vLLM, LM Studio, Azure).

Call keys: the response is the chunk ``id`` (the first one seen; the parser's fallback when
chunks carry none); the item is the tool call's ``index`` as a decimal string (Mistral omits
``index``: the entry's place in its ``tool_calls`` list stands in); the call is the tool
call's ``id``, or ``<response>#<index>`` when the server never sends one. Only choice 0 is
read: other choices are alternatives the application did not pick, and never execute.

Decisions, and why:

* **A call opens when it has its name and its id, or its name and its first arguments**
  (the id and the name may come in either order, in separate chunks: vercel/ai #14722,
  Zoo-Code #695); a call that never gets an id is ``<response>#<index>``.
* **``id`` and ``function.name`` are set once, never concatenated.** An empty string is
  "not sent" (Alibaba repeats ``"id": ""`` on every chunk). Repeating the same id or name
  changes nothing. A *different* name for the same call is re-announced to the model,
  which fails the call (a call's tool is fixed).
* **A different id at an index that already has one starts a new call** at that index:
  the id is part of the call key, so the two never share a buffer, and argument chunks
  (which name only the index) go to the call the index named last. Gluing the second call's
  arguments onto the first (the "index collision" bug) is exactly what keys prevent;
  failing the whole stream instead would refuse servers that reuse index 0 for calls
  each sent whole. The earlier call keeps only the fragments it received.
* **Arguments are fragments in arrival order** (the protocol has no positions). Empty
  argument strings carry nothing. Arguments for an index whose call has no name yet are a
  protocol violation: the parser never guesses a call's tool.
* **Calls end only with the stream; the first ``finish_reason`` ends the choice.** No
  terminal event is emitted when a finish reason arrives (a prefix of the arguments may
  well parse, and more may follow); at a clean end of stream (``[DONE]``, or EOF after the
  last chunk) every call gets its terminal event. Its reason: ``tool_calls``, ``stop`` and
  ``function_call`` are ``completed``, ``length`` is ``length``, ``content_filter`` is
  ``content_filter``, anything else ``error``; when the stream sent several different
  finish reasons, the first that is not ``completed`` wins, so **a ``length`` stop is final**
  (a later ``tool_calls`` never turns a cut-off call into a finished one, and a ``length``
  after ``tool_calls`` means two readings of the end, of which one forbids the call). A
  clean end without any finish reason is not the protocol's completion: every call gets
  ``CallTerminal(reason="error")``. A dropped connection gives a
  :class:`~callsafe.model.vocabulary.Disconnect` instead.
* **Tool-call data after the finish reason is late data** (claux #43, jcode #1326: servers
  that send fragments after, or a finish reason on, every chunk). The choice ended at its
  first finish reason, so a call that receives arguments, a name or an id afterwards (or
  is opened afterwards) has two readings, the text up to the end and the text with the late
  data (``'{"amount":1'`` then ``"00}"`` is ``1`` or ``100``), and the spec's rule for data
  after the terminal event applies: the call fails (``CallTerminal(reason="error")`` at the
  end of stream, however the response ended). Calls that got nothing late read the same
  either way and keep their verdict. A finish reason, id or name repeated after the end
  carries nothing new and is not late data.
* An ``{"error": ...}`` payload (sent mid-stream by several compatible servers) stops every
  open call with ``error`` and ends the response.
* ``delta.content`` and ``delta.refusal`` are text (item ``text``); ``reasoning_content``
  is neither text nor arguments and is dropped; the deprecated ``delta.function_call`` form
  is not read.

Rendering: every call ends with the response, so the rendering accepts call terminals only
at the end, one per open call, each with the response's reason; no positions, so fragments
in position order only (a duplicated, missing or reordered position is
:class:`~callsafe.providers.base.NotRepresentable`); items must be decimal indexes; text
uses item ``text``. Two calls may share an index (one after the other), but a fragment
always belongs to the call its index named last. An ``error`` end renders as an error payload; other ends as a final
chunk with the finish reason (``tool_calls`` when the response has calls, else ``stop``).
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
    need_dict,
    no_event_name,
    opt_dict,
    opt_int,
    opt_list,
    opt_str,
)

__all__ = ["PROTOCOL", "TEXT_ITEM", "ChatParser", "ChatRenderer"]

TEXT_ITEM: Final = "text"

FINISH_REASONS: Final[dict[str, StopReason]] = {
    "tool_calls": "completed",
    "stop": "completed",
    "function_call": "completed",
    "length": "length",
    "content_filter": "content_filter",
}


class ChatParser(Parser):
    """One Chat Completions stream."""

    protocol = "openai-chat"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._response: str | None = None
        self._response_from_wire = False
        self._current: dict[int, CallState] = {}  # index -> the call the index named last
        self._pending_id: dict[int, str] = {}  # index -> an id sent before the call's name
        self._pending_name: dict[int, str] = {}  # index -> a name sent before the call's id and arguments
        self._finish_reason: str | None = None  # the end's reason: the first, unless a later one stops
        self._finished_choice = False  # choice 0 sent a finish reason: tool-call data after it is late
        self._late: set[tuple[str, str, str]] = set()  # calls that received data after the finish reason
        self._ended = False

    def _rid(self, chunk_id: str | None) -> str:
        """The stream's response id, fixed by the first chunk that needs or names one."""
        if self._response is None:
            self._response = chunk_id or self.fallback_response
            self._response_from_wire = bool(chunk_id)
            self._begin_response(self._response)
        elif chunk_id and self._response_from_wire and chunk_id != self._response:
            raise ProtocolViolation(
                f"openai-chat: chunk id {chunk_id!r} after {self._response!r}: one stream is one response"
            )
        return self._response

    def _feed(self, payload: dict[str, Any]) -> None:
        what = "chat.completion.chunk"
        chunk_id = opt_str(payload, "id", what) or None
        if self._ended:
            raise ProtocolViolation("openai-chat: chunk after the response ended with an error")
        if payload.get("error") is not None and payload.get("choices") is None:
            rid = self._rid(chunk_id)
            self._ended = True
            self._end_response(rid, "error", "an error payload from the server")
            return
        choices = opt_list(payload, "choices", what) or []
        for raw in choices:
            choice = need_dict(raw, f"{what}.choices[]")
            if (opt_int(choice, "index", f"{what}.choices[]") or 0) != 0:
                continue
            rid = self._rid(chunk_id)
            delta = opt_dict(choice, "delta", f"{what}.choices[0]") or {}
            for key in ("content", "refusal"):
                text = opt_str(delta, key, f"{what}.choices[0].delta")
                if text:
                    self._text(rid, TEXT_ITEM, text)
            entries = opt_list(delta, "tool_calls", f"{what}.choices[0].delta") or []
            for place, entry in enumerate(entries):
                self._tool_call(rid, place, need_dict(entry, f"{what}.choices[0].delta.tool_calls[]"))
            reason = opt_str(choice, "finish_reason", f"{what}.choices[0]")
            if reason:
                self._finish(reason)
        if not choices and chunk_id:
            self._rid(chunk_id)

    def _finish(self, reason: str) -> None:
        """Record a finish reason: the first one ends the choice; a later different one
        replaces it only when it stops the call and the recorded one does not (a ``length``
        stop is final; see the module docstring)."""
        self._finished_choice = True
        if self._finish_reason is None or (
            FINISH_REASONS.get(self._finish_reason) == "completed"
            and FINISH_REASONS.get(reason, "error") != "completed"
        ):
            self._finish_reason = reason

    def _open(self, rid: str, index: int, name: str, *, now: bool = True) -> CallState:
        """Open the call at ``index`` (with the id sent for it, if any). ``now``: because of
        this chunk (a call opened by a chunk after the finish reason is late data), not
        because the stream ended."""
        call = self._pending_id.pop(index, None) or f"{rid}#{index}"
        current = self._open_call(rid, str(index), call, name)
        self._current[index] = current
        if now:
            self._mark_late(current)
        return current

    def _mark_late(self, state: CallState | None) -> None:
        if state is not None and self._finished_choice:
            self._late.add(state.key)

    def _tool_call(self, rid: str, place: int, entry: dict[str, Any]) -> None:
        what = "tool_calls[]"
        index = opt_int(entry, "index", what)
        if index is None:
            index = place
        call_id = opt_str(entry, "id", what) or None
        function = opt_dict(entry, "function", what) or {}
        name = opt_str(function, "name", f"{what}.function") or None
        arguments = opt_str(function, "arguments", f"{what}.function") or ""
        current = self._current.get(index)
        if call_id is not None:
            if current is None:
                pending = self._pending_id.get(index)
                if pending is not None and pending != call_id:
                    raise ProtocolViolation(f"openai-chat: index {index} named {pending!r}, then {call_id!r}, no name")
                self._pending_id[index] = call_id
            elif call_id != current.call:
                # a new call at the same index: its own key; the earlier call keeps its data
                del self._current[index]
                current = None
                self._pending_id[index] = call_id
        pending_name = self._pending_name.get(index)
        if (
            current is None
            and pending_name is not None
            and (call_id is not None or arguments or name not in (None, pending_name))
        ):
            # the name came first: the call opens with the id that follows it, or with none
            current = self._open(rid, index, self._pending_name.pop(index))
        if name is not None:
            if current is None:
                if call_id is None and index not in self._pending_id and not arguments:
                    self._pending_name[index] = name  # the id may come in a later chunk (vercel/ai #14722)
                    return
                current = self._open(rid, index, name)
            elif name != current.tool:
                self._open_call(rid, current.item, current.call, name)  # the model fails the call
        if arguments:
            if current is None:
                raise ProtocolViolation(f"openai-chat: arguments for index {index} before the call's name")
            self._mark_late(current)
            self._fragment(current, arguments)

    def _eos(self) -> None:
        if self._response is None or self._ended:
            return
        for index in list(self._pending_name):  # a call that never got an id or arguments
            self._open(self._response, index, self._pending_name.pop(index), now=False)
        reason: StopReason = "error"
        if self._finish_reason is not None:
            reason = FINISH_REASONS.get(self._finish_reason, "error")
        cause = (
            "the stream ended without a finish_reason"
            if self._finish_reason is None
            else f"finish_reason {self._finish_reason!r}"
        )
        for state in self._open_calls(self._response):
            if state.key in self._late:
                self._terminal(state, "error", "tool-call data after the finish_reason (late data)")
            else:
                self._terminal(state, reason, cause)
        self._end_response(self._response, reason, cause)


class ChatRenderer(Renderer):
    """Abstract events -> ``chat.completion.chunk`` payloads."""

    protocol = "openai-chat"
    calls_end_with_response = True

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        # Every cloud Chat Completions stream opens with the assistant's role in its first
        # delta, and clients rely on it: LangChain.js types the whole message from the first
        # chunk (a chunk without a role becomes a generic message whose tool calls are
        # dropped; langchainjs #11157, omlx #2117). Servers that omit it, or send "", are
        # the wire adversities "role-missing" and "role-empty".
        if not getattr(self, "_announced", False):
            delta = {"role": "assistant", **delta}
            self._announced = True
        self._emit(
            {
                "id": self._response,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
        )

    def _on_response_start(self, response: str, where: str) -> None:
        self._latest: dict[str, str] = {}  # index -> the call it named last
        self._announced = False  # the role goes in the response's first chunk

    def _on_open(self, call: RenderCall, where: str) -> None:
        index = index_item(call.item, where)
        self._latest[call.item] = call.call
        entry = {"index": index, "id": call.call, "type": "function", "function": {"name": call.tool, "arguments": ""}}
        self._chunk({"tool_calls": [entry]})

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        if self._latest[call.item] != call.call:
            raise NotRepresentable(
                f"{where}: argument chunks name only the index; index {call.item} now names call "
                f"{self._latest[call.item]!r}, not {call.call!r}"
            )
        self._chunk({"tool_calls": [{"index": int(call.item), "function": {"arguments": event.text}}]})

    def _on_text(self, event: TextFragment, where: str) -> None:
        if event.item != TEXT_ITEM:
            raise NotRepresentable(f"{where}: Chat Completions text has no item of its own; use item {TEXT_ITEM!r}")
        self._chunk({"content": event.text})

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        raise AssertionError("Chat Completions calls end with the response")  # pragma: no cover

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        if event.reason == "error":
            self._emit({"id": self._response, "error": {"message": "stream failed", "type": "server_error"}})
            return
        has_calls = any(c.response == event.response for c in self._calls.values())
        finish = {"completed": "tool_calls" if has_calls else "stop"}.get(event.reason, event.reason)
        self._chunk({}, finish)


PROTOCOL: Final = Protocol(
    name="openai-chat",
    parser=ChatParser,
    renderer=ChatRenderer,
    event_name=no_event_name,
    done_sentinel=True,
)
