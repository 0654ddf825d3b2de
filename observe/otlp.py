"""OpenTelemetry spans (OTLP JSON export files) as records.

Why spans: an agent instrumented with OpenTelemetry already records every tool run.
The GenAI semantic conventions (https://github.com/open-telemetry/semantic-conventions-genai,
``docs/gen-ai/execute-tool.md``; status: development) name a tool run's span
``execute_tool {gen_ai.tool.name}`` with ``gen_ai.operation.name`` = ``execute_tool``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and, opt-in, ``gen_ai.tool.call.arguments``;
a model call's span has ``gen_ai.operation.name`` = ``chat`` and, opt-in,
``gen_ai.output.messages``, whose ``tool_call`` parts carry the completed call's ``id``,
``name`` and ``arguments`` (``gen-ai-output-messages.json`` of the conventions), with
``gen_ai.response.id``. The guard's own span ``callsafe.guard.execute``
(:mod:`callsafe.guard.telemetry`) carries the whole call key (``callsafe.call_key``).

The file is what the OpenTelemetry Collector's file exporter writes (one
``{"resourceSpans": [...]}`` document per line) or one such document. Spans are taken in
order of their start time (an execution happens when its span starts; a chat span's calls
are complete when it ends). A span's turn is its trace (one agent request, one trace)
unless it says ``callsafe.turn``; its tenant and actor are ``callsafe.tenant`` and
``callsafe.actor`` (or ``enduser.id``) when set.

What spans establish: the executions, their arguments when every ``execute_tool`` span
records them, and the calls the model completed when chat spans record their output
("calls"). Not the stream, not the turn bindings or stops: INV-ONCE is judged, and
INV-EXACT-ARGS when both arguments and completed calls are recorded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from callsafe.model.vocabulary import CallKey, Executed
from callsafe.observe.records import CompletedCall, RecordError, Records, shown

__all__ = ["SpanReader", "attributes_of", "read_spans"]

OPERATION: Final = "gen_ai.operation.name"
TOOL_NAME: Final = "gen_ai.tool.name"
CALL_ID: Final = "gen_ai.tool.call.id"
CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
RESPONSE_ID: Final = "gen_ai.response.id"
GUARD_SPAN: Final = "callsafe.guard.execute"
# pydantic-ai sets this on an ``execute_tool`` span of a call that failed before its tool
# ran (arguments that did not validate): a span, but no execution.
NOT_RUN: Final = "pydantic_ai.tool.failure_stage"


def _value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain value."""
    if not isinstance(v, dict):
        return None
    for name in ("stringValue", "boolValue", "doubleValue"):
        if name in v:
            return v[name]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in v and isinstance(v["arrayValue"], dict):
        return [_value(x) for x in v["arrayValue"].get("values", []) or []]
    if "kvlistValue" in v and isinstance(v["kvlistValue"], dict):
        return attributes_of(v["kvlistValue"].get("values", []))
    return None


def attributes_of(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` items as a mapping (items of another shape are skipped)."""
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _spans(doc: Any, where: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(span, resource attributes) of one OTLP JSON document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        raise RecordError(f"{where}: not an OTLP JSON export (no 'resourceSpans' list)")
    for resource_spans in doc["resourceSpans"]:
        if not isinstance(resource_spans, dict):
            raise RecordError(f"{where}: a 'resourceSpans' item is not an object")
        resource = attributes_of((resource_spans.get("resource") or {}).get("attributes"))
        for scope in resource_spans.get("scopeSpans") or []:
            if not isinstance(scope, dict):
                raise RecordError(f"{where}: a 'scopeSpans' item is not an object")
            for span in scope.get("spans") or []:
                if not isinstance(span, dict):
                    raise RecordError(f"{where}: a span is not an object")
                yield span, resource


def _time(span: Mapping[str, Any], name: str) -> int:
    try:
        return int(span.get(name) or 0)
    except (TypeError, ValueError):
        return 0


class SpanReader:
    """Reads OTLP JSON documents (one per :meth:`feed`) into :attr:`records`."""

    def __init__(self, source: str = "spans") -> None:
        self.records = Records(source)
        self._without_arguments = 0

    def feed(self, text: str | bytes, where: str) -> None:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(f"{where}: not UTF-8 (byte {exc.start})") from None
        text = text.strip().lstrip("\ufeff")
        if not text:
            return
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{where}: not JSON ({exc.msg}): {shown(text, 80)}") from None
        except RecursionError:
            raise RecordError(f"{where}: JSON nested too deeply") from None
        taken = sorted(
            _spans(doc, where), key=lambda sr: (_time(sr[0], "startTimeUnixNano"), _time(sr[0], "endTimeUnixNano"))
        )
        # chat spans' calls are complete at the span's end: order them by it
        timeline: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []
        for span, resource in taken:
            attrs = {**resource, **attributes_of(span.get("attributes"))}
            if attrs.get(OPERATION) == "chat" or str(span.get("name", "")).startswith("chat"):
                timeline.append((_time(span, "endTimeUnixNano"), 0, span, attrs))
            else:
                timeline.append((_time(span, "startTimeUnixNano"), 1, span, attrs))
        timeline.sort(key=lambda t: (t[0], t[1]))
        for _, _, span, attrs in timeline:
            self._span(span, attrs, where)

    def _span(self, span: dict[str, Any], attrs: dict[str, Any], where: str) -> None:
        span_id = shown(span.get("spanId", "?"), 40)
        name = str(span.get("name", ""))
        turn = str(attrs.get("callsafe.turn") or span.get("traceId") or "")
        tenant = str(attrs.get("callsafe.tenant") or "")
        actor = str(attrs.get("callsafe.actor") or attrs.get("enduser.id") or "")
        here = f"{where}: span {span_id} ({shown(name, 60)})"
        if name == GUARD_SPAN:
            parts = str(attrs.get("callsafe.call_key", "")).split("/")
            if len(parts) != 5:
                self.records.notes.append(f"{here}: callsafe.call_key is not tenant/turn/response/item/call; not read")
                return
            key = CallKey(*parts)
            self._executed(key, actor, str(attrs.get("callsafe.tool", "")), None, here)
        elif attrs.get(OPERATION) == "execute_tool":
            call = attrs.get(CALL_ID)
            if attrs.get(NOT_RUN) is not None:
                self.records.notes.append(f"{here}: failed before its tool ran ({NOT_RUN}); not an execution")
                return
            if not isinstance(call, str) or not call:
                self.records.notes.append(f"{here}: an execute_tool span without {CALL_ID}; not read")
                return
            response, item = self._call_place(turn, call)
            key = CallKey(tenant, turn, response, item, call)
            self._executed(key, actor, str(attrs.get(TOOL_NAME, "")), attrs.get(CALL_ARGUMENTS), here)
        elif attrs.get(OPERATION) == "chat":
            self._chat(attrs, turn, tenant, actor, here)

    def _call_place(self, turn: str, call: str) -> tuple[str, str]:
        """The response and item of a call id a chat span of ``turn`` completed (an
        ``execute_tool`` span names neither)."""
        for t, response, item, c in self.records.calls:
            if t == turn and c == call:
                return response, item
        return "", call

    def _executed(self, key: CallKey, actor: str, tool: str, arguments: Any, where: str) -> None:
        if arguments is None:
            self._without_arguments += 1
            value: Any = {}
        elif isinstance(arguments, str):
            try:
                value = json.loads(arguments)
            except json.JSONDecodeError:
                value = arguments  # recorded, but not JSON: compared as the text it is
        else:
            value = arguments
        self.records.add_observation(Executed(0, key, actor, tool, value), where)
        self.records.kinds.add("executions")
        if self._without_arguments:
            self.records.kinds.discard("arguments")
        else:
            self.records.kinds.add("arguments")

    def _chat(self, attrs: dict[str, Any], turn: str, tenant: str, actor: str, where: str) -> None:
        raw = attrs.get(OUTPUT_MESSAGES)
        if raw is None:
            return
        try:
            messages = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            self.records.notes.append(f"{where}: {OUTPUT_MESSAGES} is not JSON; not read")
            return
        response = str(attrs.get(RESPONSE_ID) or "")
        for message in messages if isinstance(messages, list) else []:
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else []:
                if not isinstance(part, dict) or part.get("type") != "tool_call":
                    continue
                call, name = part.get("id"), part.get("name")
                if not isinstance(call, str) or not isinstance(name, str):
                    self.records.notes.append(f"{where}: a tool_call part without an id or name; not read")
                    continue
                arguments = part.get("arguments")
                if isinstance(arguments, str):
                    with contextlib.suppress(json.JSONDecodeError):
                        arguments = json.loads(arguments)
                ident = (turn, response, call, call)
                self.records.calls.setdefault(
                    ident, CompletedCall(tenant, actor, name, arguments, len(self.records.entries), where)
                )
                self.records.kinds.add("calls")


def read_spans(data: bytes, source: str = "spans") -> Records:
    """A whole OTLP JSON file: one document, or one per line (the Collector's file
    exporter)."""
    reader = SpanReader(source)
    text = data.decode("utf-8", errors="strict") if _utf8(data) else None
    if text is None:
        raise RecordError(f"{source}: not UTF-8")
    stripped = text.strip()
    if stripped.startswith("{") and "\n" in stripped:
        try:
            json.loads(stripped)
        except json.JSONDecodeError:
            for number, line in enumerate(text.split("\n"), start=1):
                reader.feed(line, f"line {number}")
            return reader.records
    reader.feed(text, "document" if "\n" in stripped else "line 1")
    return reader.records


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
