"""Gemini API and Vertex AI ``streamGenerateContent`` (``alt=sse``).

Call keys: the response is ``responseId`` (the parser's fallback when chunks carry none);
the item is the call's ordinal in the response (``"0"``, ``"1"``, ...); the call is the
``functionCall.id`` when the API sends one, else ``<responseId>#<ordinal>``: Gemini gives
calls no id, and the response id with the call's place is stable when the same stream is
read again. Only candidate 0 is read; other candidates are alternatives never executed.

Two forms of function calls, one rule: a ``functionCall`` part with a ``name`` opens a
call; the call ends, ``completed``, with the first part that neither says ``willContinue``
nor carries ``partialArgs``.

* **Complete calls** (``{"name": ..., "args": {...}}``): the ``args`` object is written as
  one fragment of compact JSON (:func:`~callsafe.providers.base.canonical_json`), and the
  part closes the call at once. A name alone is a call without arguments: ``{}``.
* **Streamed arguments** (Vertex ``streamFunctionCallArguments``): ``{"name": ...,
  "willContinue": true}`` opens the call; parts with ``partialArgs`` carry values at JSON
  paths (``$.recipe.ingredients[0].name``), a string continuing while its piece says
  ``willContinue``; a bare ``{"functionCall": {}}`` closes the call. Each piece is turned
  into JSON text as it arrives (:class:`ArgsWriter`: containers opened and closed as the
  paths move, keys in arrival order) and emitted as the next fragment, so the call's
  fragments are its arguments as JSON text. Paths that revisit a key give a duplicate key
  (the model's strict parse rejects it); array elements out of order, a key inside an
  array, or a path that moves away from an unfinished string are violations.
* **The closing ``functionCall`` is the call's terminal event.** A ``partialArgs`` part
  without ``willContinue`` does not close the call: a stream whose closing part never
  arrives (``google-stream-tool-call-array-arguments-missing-terminal-function-call``)
  leaves the call open, and the response's end fails it. Finalising it from the
  arguments seen so far would execute a call whose end the protocol never signalled.

``finishReason``: ``STOP`` is ``completed``; ``MAX_TOKENS`` is ``length``; ``SAFETY``,
``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII`` and the image safety reasons
are ``content_filter``; anything else (``MALFORMED_FUNCTION_CALL``, ``OTHER``, ...) is
``error``. Other than ``completed`` it stops the open call with that reason; then the
response ends, and only chunks without content (usage) may follow. ``promptFeedback``
with a ``blockReason`` ends the response with ``content_filter``; an ``{"error": ...}``
chunk ends it with ``error``. Text parts are text (item ``text``); thought parts are dropped.

Rendering: one response per stream; calls one at a time (Gemini's streamed pieces name no
call), items numbered in order, text with item ``text``. Arguments travel as values, so a
call's fragments must join into one JSON object (:class:`~callsafe.providers.base.NotRepresentable`
otherwise: malformed text, duplicate keys, ``}{``); with streamed arguments (the default)
they are sent when the call ends, one piece per leaf, and an empty object or list inside the
arguments cannot be sent (``partialArgs`` has no value for it). A parse therefore gives the
call's arguments back as compact JSON text cut at the leaves, right before its terminal
event; a call left open at the response's end gets its pieces without the closing brackets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import Disconnect, Fragment, ResponseTerminal, StopReason, TextFragment
from callsafe.providers.base import (
    CallState,
    MalformedEvent,
    NotRepresentable,
    Parser,
    Protocol,
    ProtocolViolation,
    RenderCall,
    Renderer,
    canonical_json,
    describe,
    need_dict,
    need_str,
    no_event_name,
    opt_dict,
    opt_int,
    opt_list,
    opt_str,
)

__all__ = [
    "PROTOCOL",
    "TEXT_ITEM",
    "ArgsWriter",
    "GeminiParser",
    "GeminiRenderer",
    "format_json_path",
    "parse_json_path",
]

TEXT_ITEM: Final = "text"

FINISH_REASONS: Final[dict[str, StopReason]] = {
    "STOP": "completed",
    "MAX_TOKENS": "length",
    **{
        reason: "content_filter"
        for reason in (
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
        )
    },
}

Path = list[str | int]

_STEP: Final = re.compile(r"""\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]""")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_json_path(text: str) -> Path:
    """``$.a.b[0]['c d']`` -> ``["a", "b", 0, "c d"]``."""
    if not text.startswith("$"):
        raise MalformedEvent(f"gemini: jsonPath must start with $, got {describe(text)}")
    path: Path = []
    at = 1
    while at < len(text):
        step = _STEP.match(text, at)
        if step is None:
            raise MalformedEvent(f"gemini: jsonPath {describe(text)} is not understood at offset {at}")
        name, index, single, double = step.groups()
        if index is not None:
            path.append(int(index))
        elif name is not None:
            path.append(name)
        else:
            quoted = single if single is not None else double
            path.append(re.sub(r"\\(.)", r"\1", quoted))
        at = step.end()
    return path


def format_json_path(path: Path) -> str:
    """The jsonPath of ``path``, as :func:`parse_json_path` reads it."""
    out = ["$"]
    for step in path:
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif _NAME.fullmatch(step):
            out.append(f".{step}")
        else:
            out.append("['" + step.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


def _escape(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _value(piece: dict[str, Any]) -> tuple[str, Any]:
    """The one value a ``partialArgs`` piece carries, as (kind, value)."""
    found = [key for key in ("stringValue", "numberValue", "boolValue", "nullValue") if key in piece]
    if len(found) != 1:
        raise MalformedEvent(f"gemini: a partialArgs piece carries exactly one value, got {describe(piece)}")
    key = found[0]
    value = piece[key]
    if key == "stringValue" and not isinstance(value, str):
        raise MalformedEvent("gemini: stringValue must be a string")
    if key == "numberValue" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise MalformedEvent("gemini: numberValue must be a number")
    if key == "boolValue" and not isinstance(value, bool):
        raise MalformedEvent("gemini: boolValue must be a boolean")
    return key, value


class ArgsWriter:
    """JSON text for one call's streamed arguments, one piece at a time.

    The writer keeps the containers open along the current path; a piece at another path
    closes what it leaves and opens what it enters, then writes its key and value. It
    never reorders or merges: what the pieces say, in the order they say it, is the text.
    """

    def __init__(self) -> None:
        self._started = False
        self._done = False  # closed, or written whole from complete args
        self._path: Path = []  # the open containers below the root
        self._kinds: list[str] = ["{"]  # their opening brackets, the root's first
        self._counts: list[int] = [0]  # members written in each
        self._string: Path | None = None  # a string value still open

    def whole(self, args: Any) -> str:
        """Complete ``args`` (the non-streamed form)."""
        if self._started or self._done:
            raise ProtocolViolation("gemini: complete args for a call whose arguments already started")
        self._done = True
        return canonical_json(need_dict(args, "functionCall.args"))

    def piece(self, path: Path, kind: str, value: Any, will_continue: bool) -> str:
        if self._done:
            raise ProtocolViolation("gemini: partialArgs after the call's arguments were complete")
        if not path:
            raise ProtocolViolation("gemini: a partialArgs piece at $ would replace the whole arguments")
        if self._string is not None:
            if path == self._string and kind == "stringValue":
                if not will_continue:
                    self._string = None
                    return _escape(value) + '"'
                return _escape(value)
            raise ProtocolViolation(f"gemini: the string at {format_json_path(self._string)} never ended")
        out = []
        if not self._started:
            self._started = True
            out.append("{")
        parent, leaf = path[:-1], path[-1]
        common = 0
        while common < min(len(self._path), len(parent)) and _same(self._path[common], parent[common]):
            common += 1
        while len(self._path) > common:
            self._path.pop()
            self._counts.pop()
            out.append("}" if self._kinds.pop() == "{" else "]")
        for depth in range(common, len(parent)):
            out.append(self._member(parent[depth]))
            following = parent[depth + 1] if depth + 1 < len(parent) else leaf
            opener = "{" if isinstance(following, str) else "["
            out.append(opener)
            self._path.append(parent[depth])
            self._kinds.append(opener)
            self._counts.append(0)
        out.append(self._member(leaf))
        if kind == "stringValue":
            out.append('"' + _escape(value))
            if will_continue:
                self._string = list(path)
            else:
                out.append('"')
        elif kind == "nullValue":
            out.append("null")
        else:
            out.append(json.dumps(value))
        return "".join(out)

    def _member(self, step: str | int) -> str:
        separator = "," if self._counts[-1] else ""
        if self._kinds[-1] == "{":
            if not isinstance(step, str):
                raise ProtocolViolation(f"gemini: array index [{step}] inside an object")
            text = json.dumps(step, ensure_ascii=False) + ":"
        else:
            if not isinstance(step, int):
                raise ProtocolViolation(f"gemini: key {step!r} inside an array")
            if step != self._counts[-1]:
                raise ProtocolViolation(f"gemini: array element [{step}] out of order (expected [{self._counts[-1]}])")
            text = ""
        self._counts[-1] += 1
        return separator + text

    def close(self) -> str:
        """The closing brackets (``{}`` for a call without arguments)."""
        if self._done:
            return ""
        if self._string is not None:
            raise ProtocolViolation(f"gemini: call closed inside the string at {format_json_path(self._string)}")
        self._done = True
        if not self._started:
            return "{}"
        return "".join("}" if kind == "{" else "]" for kind in reversed(self._kinds))


def _same(a: str | int, b: str | int) -> bool:
    return type(a) is type(b) and a == b


class GeminiParser(Parser):
    """One ``streamGenerateContent`` stream."""

    protocol = "gemini"

    def __init__(self, turn: str, response: str) -> None:
        super().__init__(turn, response)
        self._rid: str | None = None
        self._rid_from_wire = False
        self._ended = False
        self._ordinal = 0
        self._streaming: tuple[CallState, ArgsWriter] | None = None

    def _response_id(self, payload: dict[str, Any]) -> str:
        rid = opt_str(payload, "responseId", "gemini chunk") or None
        if self._rid is None:
            self._rid = rid or self.fallback_response
            self._rid_from_wire = rid is not None
            self._begin_response(self._rid)
        elif rid is not None and self._rid_from_wire and rid != self._rid:
            raise ProtocolViolation(f"gemini: responseId {rid!r} after {self._rid!r}: one stream is one response")
        return self._rid

    def _feed(self, payload: dict[str, Any]) -> None:
        rid = self._response_id(payload)
        if payload.get("error") is not None:
            need_dict(payload["error"], "gemini error")
            if not self._ended:
                self._end(rid, "error")
            return
        candidates = opt_list(payload, "candidates", "gemini chunk") or []
        if self._ended:
            if any(self._has_content(need_dict(c, "gemini candidate")) for c in candidates):
                raise ProtocolViolation("gemini: content after the response's finishReason")
            return
        feedback = opt_dict(payload, "promptFeedback", "gemini chunk") or {}
        if opt_str(feedback, "blockReason", "gemini promptFeedback"):
            self._end(rid, "content_filter")
            return
        for raw in candidates:
            candidate = need_dict(raw, "gemini candidate")
            if (opt_int(candidate, "index", "gemini candidate") or 0) != 0:
                continue
            content = opt_dict(candidate, "content", "gemini candidate") or {}
            for part in opt_list(content, "parts", "gemini candidate.content") or []:
                self._part(rid, need_dict(part, "gemini part"))
            finish = opt_str(candidate, "finishReason", "gemini candidate")
            if finish:
                self._end(rid, FINISH_REASONS.get(finish, "error"))

    def _end(self, rid: str, reason: StopReason) -> None:
        self._ended = True
        self._streaming = None
        self._end_response(rid, reason)

    @staticmethod
    def _has_content(candidate: dict[str, Any]) -> bool:
        content = opt_dict(candidate, "content", "gemini candidate") or {}
        parts = opt_list(content, "parts", "gemini candidate.content") or []
        return any(isinstance(p, dict) and (p.get("text") or "functionCall" in p) for p in parts)

    def _part(self, rid: str, part: dict[str, Any]) -> None:
        text = opt_str(part, "text", "gemini part")
        if text and part.get("thought") is not True:
            self._text(rid, TEXT_ITEM, text)
        call = opt_dict(part, "functionCall", "gemini part")
        if call is not None:
            self._function_call(rid, call)

    def _function_call(self, rid: str, body: dict[str, Any]) -> None:
        what = "gemini functionCall"
        name = opt_str(body, "name", what) or None
        pieces = opt_list(body, "partialArgs", what) or []
        will_continue = body.get("willContinue")
        if will_continue is not None and not isinstance(will_continue, bool):
            raise MalformedEvent("gemini: willContinue must be a boolean")
        if name is not None:
            if self._streaming is not None:
                raise ProtocolViolation(f"gemini: call {name!r} opened before the previous call closed")
            call = opt_str(body, "id", what) or f"{rid}#{self._ordinal}"
            state = self._open_call(rid, str(self._ordinal), call, name)
            self._ordinal += 1
            self._streaming = (state, ArgsWriter())
        elif self._streaming is None:
            raise ProtocolViolation("gemini: functionCall data with no call open")
        state, writer = self._streaming
        if body.get("args") is not None:
            self._fragment(state, writer.whole(body["args"]))
        for raw in pieces:
            piece = need_dict(raw, f"{what}.partialArgs[]")
            path = parse_json_path(need_str(piece, "jsonPath", f"{what}.partialArgs[]"))
            kind, value = _value(piece)
            continues = piece.get("willContinue") is True
            self._fragment(state, writer.piece(path, kind, value, continues))
        if not will_continue and not pieces:
            self._fragment(state, writer.close())
            self._terminal(state, "completed")
            self._streaming = None


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def _leaves(value: Any, path: Path, where: str) -> Iterator[tuple[Path, Any]]:
    if isinstance(value, dict):
        if not value and path:
            raise NotRepresentable(f"{where}: partialArgs cannot carry the empty object at {format_json_path(path)}")
        for key, item in value.items():
            yield from _leaves(item, [*path, key], where)
    elif isinstance(value, list):
        if not value:
            raise NotRepresentable(f"{where}: partialArgs cannot carry the empty list at {format_json_path(path)}")
        for index, item in enumerate(value):
            yield from _leaves(item, [*path, index], where)
    else:
        yield path, value


def _piece(path: Path, value: Any, **more: Any) -> dict[str, Any]:
    piece: dict[str, Any] = {"jsonPath": format_json_path(path)}
    if isinstance(value, str):
        piece["stringValue"] = value
    elif isinstance(value, bool):
        piece["boolValue"] = value
    elif value is None:
        piece["nullValue"] = "NULL_VALUE"
    else:
        piece["numberValue"] = value
    return {**piece, **more}


class GeminiRenderer(Renderer):
    """Abstract events -> ``GenerateContentResponse`` chunks. ``stream_arguments`` chooses
    the streamed-arguments form (the default) or complete ``args``."""

    protocol = "gemini"

    def __init__(self, stream_arguments: bool = True) -> None:
        self.stream_arguments = stream_arguments

    def _on_response_start(self, response: str, where: str) -> None:
        self._open: RenderCall | None = None

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None) -> None:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        self._emit({"candidates": [candidate], "responseId": self._response})

    def _call_fields(self, call: RenderCall) -> dict[str, Any]:
        derived = f"{call.response}#{call.ordinal}"
        return {"name": call.tool} if call.call == derived else {"name": call.tool, "id": call.call}

    def _arguments(self, call: RenderCall, where: str) -> dict[str, Any]:
        try:
            return strict_parse("".join(call.order))
        except ParseFailure as exc:
            raise NotRepresentable(
                f"{where}: Gemini sends arguments as values; these are not one object ({exc})"
            ) from None

    def _on_open(self, call: RenderCall, where: str) -> None:
        if call.item != str(call.ordinal):
            raise NotRepresentable(f"{where}: Gemini numbers a response's calls in order; expected item {call.ordinal}")
        if self._open is not None:
            raise NotRepresentable(f"{where}: Gemini streams one call at a time; {self._open.call!r} is still open")
        self._open = call
        if self.stream_arguments:
            self._chunk([{"functionCall": {**self._call_fields(call), "willContinue": True}}])

    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None:
        """Arguments travel as values: they are sent when the call ends."""

    def _send_pieces(self, call: RenderCall, where: str) -> None:
        if not call.order:
            return
        for path, value in _leaves(self._arguments(call, where), [], where):
            if isinstance(value, str) and value:
                self._chunk(
                    [{"functionCall": {"partialArgs": [_piece(path, value, willContinue=True)], "willContinue": True}}]
                )
                value = ""
            self._chunk([{"functionCall": {"partialArgs": [_piece(path, value)], "willContinue": True}}])

    def _on_text(self, event: TextFragment, where: str) -> None:
        if event.item != TEXT_ITEM:
            raise NotRepresentable(f"{where}: Gemini text has no item of its own; use item {TEXT_ITEM!r}")
        self._chunk([{"text": event.text}])

    def _on_call_done(self, call: RenderCall, where: str) -> None:
        self._open = None
        if self.stream_arguments:
            self._send_pieces(call, where)
            self._chunk([{"functionCall": {}}])
        else:
            arguments = self._arguments(call, where) if call.order else {}
            self._chunk([{"functionCall": {**self._call_fields(call), "args": arguments}}])

    def _flush_open(self, where: str) -> None:
        call, self._open = self._open, None
        if call is None:
            return
        if not self.stream_arguments:
            raise NotRepresentable(f"{where}: a complete functionCall part always ends its call")
        self._send_pieces(call, where)

    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        self._flush_open(where)
        finish = {"completed": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY", "error": "OTHER"}
        self._chunk([{"text": ""}], finish[event.reason])

    def _on_disconnect(self, event: Disconnect, where: str) -> None:
        self._flush_open(where)


PROTOCOL: Final = Protocol(
    name="gemini",
    parser=GeminiParser,
    renderer=GeminiRenderer,
    event_name=no_event_name,
)
