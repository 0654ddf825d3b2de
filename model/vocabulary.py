"""The words every other part of callsafe speaks: call keys, input events, observations.

Everything here is a small frozen dataclass that serialises to and from plain JSON, so a
trace is a document a person can read, edit and diff. An event is written as a one-key
object, ``{"fragment": {...}}``, with the key being the event's ``kind``. Nothing here
knows about any implementation, wire protocol or library: providers render these events
to their wire forms, targets consume them, and the oracle judges observations of them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeVar

import jsonschema

__all__ = [
    "EVENT_TYPES",
    "OBSERVATION_TYPES",
    "STOP_REASONS",
    "AuditRow",
    "BusinessValidated",
    "CallKey",
    "CallOpened",
    "CallTerminal",
    "CancelTurn",
    "Confirm",
    "ConfirmationRequested",
    "DisableTool",
    "Disconnect",
    "Event",
    "Executed",
    "Fragment",
    "LedgerRow",
    "Limits",
    "LogLine",
    "Observation",
    "QuarantineResponse",
    "Replay",
    "ResponseTerminal",
    "Restart",
    "StatusShown",
    "StopTenant",
    "StoreFault",
    "TextFragment",
    "ToolChanged",
    "ToolSpec",
    "Trace",
    "TraceFormatError",
    "TurnStarted",
    "event_from_json",
    "event_to_json",
    "observation_from_json",
    "observation_to_json",
]


class TraceFormatError(ValueError):
    """A trace, event or observation document does not have the expected shape.

    Raised with a message that names the offending part; never swallowed, never partial.
    """


StopReason = Literal["completed", "length", "content_filter", "error"]
STOP_REASONS: Final = ("completed", "length", "content_filter", "error")


_KEY_FIELDS: Final = ("tenant", "turn", "response", "item", "call")


@dataclass(frozen=True, order=True)
class CallKey:
    """The identity of one tool call: ``(tenant, turn, response, item, call)``.

    Tenant and turn come from the application (the turn binding); response, item and call
    come from the protocol. Fragments are appended only to the buffer of their exact key.
    """

    tenant: str
    turn: str
    response: str
    item: str
    call: str

    def short(self) -> str:
        """The ``turn/call`` form used in verdicts and reports."""
        return f"{self.turn}/{self.call}"

    def __str__(self) -> str:
        return f"{self.tenant}/{self.turn}/{self.response}/{self.item}/{self.call}"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> CallKey:
        """The key as written; a field the target left out (``null``: a target that built
        ``CallKey(None, ...)``, which the harness records as observed) reads back as
        ``None``, so that every report certify writes can be read again."""
        if isinstance(data, dict) and any(data.get(f) is None for f in _KEY_FIELDS if f in data):
            present = {k: v for k, v in data.items() if v is not None}
            missing = {k: None for k in _KEY_FIELDS if data.get(k, "") is None}
            _build(cls, {**{k: "" for k in missing}, **present}, "call key")  # the other fields still checked
            return cls(**{**present, **missing})
        return _build(cls, data, "call key")


# --------------------------------------------------------------------------------------
# Input events
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Base of every abstract input event. ``kind`` is the JSON name of the event.

    Most events carry ``during_validation``: when true, the harness delivers the event
    while the business validator of the call whose terminal event precedes it is running
    (late data, a stop, a confirmation arriving in that window). A ``Restart`` during
    validation is a crash there: the validator never returns (the harness unwinds the
    target and restarts it). ``Replay`` and ``TextFragment`` do not carry the flag."""

    kind: ClassVar[str] = "event"


@dataclass(frozen=True)
class CallAddressed(Event):
    """An event that names one call by its protocol identity within a turn."""

    turn: str
    response: str
    item: str
    call: str

    def key(self, tenant: str) -> CallKey:
        return CallKey(tenant, self.turn, self.response, self.item, self.call)


@dataclass(frozen=True)
class TurnStarted(Event):
    """A user turn begins: binds the turn to an actor and a tenant, and supersedes the
    conversation's previous turn. ``traceparent`` is a W3C trace context for the turn."""

    kind: ClassVar[str] = "turn_started"
    turn: str
    actor: str
    tenant: str
    conversation: str = "main"
    traceparent: str | None = None
    during_validation: bool = False


@dataclass(frozen=True)
class CallOpened(CallAddressed):
    """The protocol announced a tool call (its id and tool name)."""

    kind: ClassVar[str] = "call_opened"
    tool: str = ""
    during_validation: bool = False


@dataclass(frozen=True)
class Fragment(CallAddressed):
    """Argument text at a protocol position (a sequence number, or arrival order where the
    protocol guarantees order). Positions of one call start at 0."""

    kind: ClassVar[str] = "fragment"
    position: int = 0
    text: str = ""
    during_validation: bool = False


@dataclass(frozen=True)
class TextFragment(Event):
    """Assistant text output, kept apart from arguments even when interleaved with them."""

    kind: ClassVar[str] = "text_fragment"
    turn: str
    response: str
    item: str
    text: str


@dataclass(frozen=True)
class CallTerminal(CallAddressed):
    """The call's own terminal event under its protocol, with the provider's stop reason."""

    kind: ClassVar[str] = "call_terminal"
    event_id: str = ""
    reason: StopReason = "completed"
    during_validation: bool = False


@dataclass(frozen=True)
class ResponseTerminal(Event):
    """The response ended. Calls of that response still collecting never got their own
    terminal event, so they fail."""

    kind: ClassVar[str] = "response_terminal"
    turn: str
    response: str
    reason: StopReason = "completed"
    during_validation: bool = False


@dataclass(frozen=True)
class CancelTurn(Event):
    """The user said stop."""

    kind: ClassVar[str] = "cancel_turn"
    turn: str
    during_validation: bool = False


@dataclass(frozen=True)
class Disconnect(Event):
    """The stream's connection dropped before the response ended."""

    kind: ClassVar[str] = "disconnect"
    turn: str
    response: str
    during_validation: bool = False


@dataclass(frozen=True)
class Replay(Event):
    """A reconnect re-delivers the earlier delivered events ``[start, stop)`` (indices into
    the trace's event list). Expanded by :meth:`Trace.delivered`."""

    kind: ClassVar[str] = "replay"
    start: int
    stop: int


@dataclass(frozen=True)
class ToolChanged(Event):
    """The tool catalog changed mid-release: ``rename`` (to ``new_name``), ``remove``, or
    ``schema`` (to ``schema``). Calls are validated against the catalog as it stands."""

    kind: ClassVar[str] = "tool_changed"
    tool: str
    change: Literal["rename", "remove", "schema"]
    new_name: str | None = None
    schema: Mapping[str, Any] | None = None
    during_validation: bool = False


@dataclass(frozen=True)
class Confirm(CallAddressed):
    """The user's answer to a confirmation request."""

    kind: ClassVar[str] = "confirm"
    approved: bool = True
    during_validation: bool = False


@dataclass(frozen=True)
class QuarantineResponse(Event):
    """Operator control: every call of this response becomes inert, durably."""

    kind: ClassVar[str] = "quarantine_response"
    response: str
    reason: str = "operator"
    during_validation: bool = False


@dataclass(frozen=True)
class DisableTool(Event):
    """Operator control: the named tool is disabled; its in-flight calls become inert."""

    kind: ClassVar[str] = "disable_tool"
    tool: str
    reason: str = "operator"
    during_validation: bool = False


@dataclass(frozen=True)
class StopTenant(Event):
    """Operator control: every in-flight buffer of the tenant is forced into cancellation,
    and the tenant's live turns are closed. A later turn starts fresh."""

    kind: ClassVar[str] = "stop_tenant"
    tenant: str
    reason: str = "operator"
    during_validation: bool = False


@dataclass(frozen=True)
class Restart(Event):
    """The process restarts: what is not durable is gone."""

    kind: ClassVar[str] = "restart"
    during_validation: bool = False


@dataclass(frozen=True)
class StoreFault(Event):
    """The implementation's durable store fails while the *next* input is delivered (a
    capability of its own, ``store_faults``: only a target with a store can take it).

    * ``lasting=False``: a hiccup the implementation is expected to ride out. The store's
      operations of the next input, after the first ``after`` of them, fail with a
      transient fault (a held lock) as many times in a row as the target's own retries
      absorb, and then work. Nothing the spec judges may differ from the same trace
      without the fault.
    * ``lasting=True``: every store operation of the next input fails (``after`` must be
      0), and the store is back once that delivery returns. The implementation may
      refuse that input with a typed error; the harness then delivers it again (up to
      three times, as a caller does after a refusal). The spec is silent on store failure,
      so the oracle allows two readings (:class:`~callsafe.model.system.Reading`): the
      implementation fails closed as a crash would (what it had in flight fails, as at a
      restart) and then takes the input again, or it rolls the input back cleanly and
      takes it again as if nothing had happened. It may never run a call whose claim the
      store did not take, nor run one twice.

    Why a trace event rather than a harness setting: where the fault lands (before which
    input, after how many store operations of it) is what tells a retry loop, a claim's
    retry and a resync after a lost write apart, and a trace file must replay it."""

    kind: ClassVar[str] = "store_fault"
    lasting: bool = False
    after: int = 0

    def __post_init__(self) -> None:
        if self.after < 0:
            raise TraceFormatError(f"store_fault: 'after' counts store operations, got {self.after}")
        if self.lasting and self.after:
            raise TraceFormatError("store_fault: a lasting fault takes every store operation of the input (after=0)")


EVENT_TYPES: Final[dict[str, type[Event]]] = {
    cls.kind: cls
    for cls in (
        TurnStarted,
        CallOpened,
        Fragment,
        TextFragment,
        CallTerminal,
        ResponseTerminal,
        CancelTurn,
        Disconnect,
        Replay,
        ToolChanged,
        Confirm,
        QuarantineResponse,
        DisableTool,
        StopTenant,
        Restart,
        StoreFault,
    )
}


# --------------------------------------------------------------------------------------
# Observations: what the harness sees at the boundary of an implementation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """Base of every observation. ``step`` is the index, in the delivered event sequence,
    of the event being delivered when the observation was made."""

    kind: ClassVar[str] = "observation"
    step: int


@dataclass(frozen=True)
class Executed(Observation):
    """What the executor received (recorded by the harness's executor spy)."""

    kind: ClassVar[str] = "executed"
    key: CallKey
    actor: str
    tool: str
    arguments: Any
    traceparent: str | None = None


@dataclass(frozen=True)
class ConfirmationRequested(Observation):
    """The implementation asked the user to confirm a validated call."""

    kind: ClassVar[str] = "confirmation_requested"
    key: CallKey
    tool: str


@dataclass(frozen=True)
class BusinessValidated(Observation):
    """The harness's business validator for a tool was called for this key."""

    kind: ClassVar[str] = "business_validated"
    key: CallKey
    tool: str


@dataclass(frozen=True)
class StatusShown(Observation):
    """The status the user sees for a turn: ``preparing``, ``awaiting_confirmation``,
    ``done`` (an action ran), ``retry`` or ``handoff``."""

    kind: ClassVar[str] = "status_shown"
    turn: str
    status: str


@dataclass(frozen=True)
class LedgerRow(Observation):
    """One assembly decision. Never holds argument values."""

    kind: ClassVar[str] = "ledger_row"
    key: CallKey
    fragments: int
    terminal_reason: str | None
    parse: str
    validation: str
    decision: str
    traceparent: str | None = None


@dataclass(frozen=True)
class AuditRow(Observation):
    """An operator control: which action, why, and which call keys it affected."""

    kind: ClassVar[str] = "audit_row"
    action: str
    reason: str
    keys: tuple[CallKey, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class LogLine(Observation):
    """A line the implementation logged (checked for leaked argument values)."""

    kind: ClassVar[str] = "log_line"
    text: str


OBSERVATION_TYPES: Final[dict[str, type[Observation]]] = {
    cls.kind: cls
    for cls in (
        Executed,
        ConfirmationRequested,
        BusinessValidated,
        StatusShown,
        LedgerRow,
        AuditRow,
        LogLine,
    )
}


# --------------------------------------------------------------------------------------
# Tools and limits
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpec:
    """A tool declaration: its JSON Schema, whether it needs confirmation, and simple
    business rules (``{"max": {"amount": 500}}``: the field must not exceed the bound)
    that the harness's business validator enforces."""

    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    confirm: bool = False
    business: Mapping[str, Any] = field(default_factory=dict)
    actors: tuple[str, ...] | None = None  # who may use the tool (None: every actor)

    def permits(self, actor: str) -> bool:
        """The permission boundary: may ``actor`` run this tool?"""
        return self.actors is None or actor in self.actors

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": _thaw(self.schema)}
        if self.confirm:
            out["confirm"] = True
        if self.business:
            out["business"] = _thaw(self.business)
        if self.actors is not None:
            out["actors"] = list(self.actors)
        return out

    @classmethod
    def from_json(cls, data: Any) -> ToolSpec:
        if not isinstance(data, dict):
            raise TraceFormatError(f"a tool declaration must be an object, got {data!r}")
        unknown = set(data) - {"schema", "confirm", "business", "actors"}
        if unknown:
            raise TraceFormatError(f"unknown tool declaration fields: {sorted(unknown)}")
        schema = data.get("schema", {"type": "object"})
        if not isinstance(schema, dict):
            raise TraceFormatError("a tool's schema must be a JSON object")
        business = data.get("business", {})
        if not isinstance(business, dict):
            raise TraceFormatError("a tool's business rules must be a JSON object")
        actors = data.get("actors")
        if actors is not None and not (isinstance(actors, list) and all(isinstance(a, str) for a in actors)):
            raise TraceFormatError("a tool's actors must be a list of actor names")
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise TraceFormatError(f"a tool's schema is not a valid JSON Schema: {exc.message}") from None
        return cls(
            schema=schema,
            confirm=bool(data.get("confirm", False)),
            business=business,
            actors=tuple(actors) if actors is not None else None,
        )


@dataclass(frozen=True)
class Limits:
    """Byte caps: per call, and per turn (so a flood of parallel calls cannot bypass the
    per-call cap)."""

    call_bytes: int = 64 * 1024
    turn_bytes: int = 256 * 1024

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Limits:
        return _build(cls, data, "limits")


# --------------------------------------------------------------------------------------
# Traces
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """A scenario: the tool catalog, the limits, the input events, and optionally the
    verdicts its author expects (``{"t8/a": {"execute": false, "reason": "cancelled"}}``)."""

    events: tuple[Event, ...]
    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    name: str = ""
    source: str = ""
    verdicts: Mapping[str, Any] = field(default_factory=dict)

    def delivered(self) -> list[Event]:
        """The concrete event sequence a target receives: each :class:`Replay` is replaced
        by copies of the earlier events it re-delivers."""
        out: list[Event] = []
        for event in self.events:
            if isinstance(event, Replay):
                out.extend(e for e in self.events[event.start : event.stop] if not isinstance(e, Replay))
            else:
                out.append(event)
        return out

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        if self.name:
            doc["name"] = self.name
        if self.source:
            doc["source"] = self.source
        doc["tools"] = {name: spec.to_json() for name, spec in self.tools.items()}
        if self.limits != Limits():
            doc["limits"] = self.limits.to_json()
        doc["events"] = [event_to_json(e) for e in self.events]
        if self.verdicts:
            doc["verdicts"] = _thaw(self.verdicts)
        return doc

    def dumps(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_json(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, data: Any) -> Trace:
        if not isinstance(data, dict):
            raise TraceFormatError("a trace must be a JSON object")
        unknown = set(data) - {"name", "source", "tools", "limits", "events", "verdicts"}
        if unknown:
            raise TraceFormatError(f"unknown trace fields: {sorted(unknown)}")
        raw_events = data.get("events")
        if not isinstance(raw_events, list):
            raise TraceFormatError("a trace needs an 'events' list")
        events = tuple(event_from_json(e, index=i) for i, e in enumerate(raw_events))
        for i, e in enumerate(events):
            if isinstance(e, Replay) and not (0 <= e.start <= e.stop <= i):
                raise TraceFormatError(f"event {i}: replay must re-deliver earlier events, got [{e.start}, {e.stop})")
        tools_raw = data.get("tools", {})
        if not isinstance(tools_raw, dict):
            raise TraceFormatError("'tools' must be an object of tool declarations")
        tools = {str(k): ToolSpec.from_json(v) for k, v in tools_raw.items()}
        verdicts = data.get("verdicts", {})
        if not isinstance(verdicts, dict):
            raise TraceFormatError("'verdicts' must be an object")
        return cls(
            events=events,
            tools=tools,
            limits=Limits.from_json(data["limits"]) if "limits" in data else Limits(),
            name=str(data.get("name", "")),
            source=str(data.get("source", "")),
            verdicts=verdicts,
        )

    @classmethod
    def loads(cls, text: str | bytes) -> Trace:
        """A trace from its JSON text (or UTF-8 bytes). Anything else, also random bytes and
        JSON nested deeper than Python's recursion allows, is a :class:`TraceFormatError`
        with one line, never a traceback."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TraceFormatError(f"a trace must be UTF-8 JSON: byte {exc.start} is not UTF-8") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"a trace must be JSON: {exc}") from None
        except RecursionError:
            raise TraceFormatError("a trace must be JSON nested less deeply than this one") from None
        try:
            return cls.from_json(data)
        except RecursionError:
            raise TraceFormatError("a trace's values are nested too deeply to be read") from None


# --------------------------------------------------------------------------------------
# JSON codec
# --------------------------------------------------------------------------------------


def _thaw(value: Any) -> Any:
    """Plain JSON values from mappings and tuples (what frozen dataclasses hold)."""
    if isinstance(value, Mapping):
        return {str(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if isinstance(value, CallKey):
        return value.to_json()
    return value


def _fields_to_json(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING and value == f.default and f.name != "position":
            continue
        out[f.name] = _thaw(value)
    return out


def event_to_json(event: Event) -> dict[str, Any]:
    """``{"kind": {fields}}``, leaving out fields that hold their default."""
    return {event.kind: _fields_to_json(event)}


def _one_key(data: Any, what: str) -> tuple[str, Any]:
    if not isinstance(data, dict) or len(data) != 1:
        raise TraceFormatError(f"{what} must be an object with exactly one key, got {data!r}"[:300])
    ((name, body),) = data.items()
    return str(name), body


def event_from_json(data: Any, index: int | None = None) -> Event:
    where = "event" if index is None else f"event {index}"
    name, body = _one_key(data, where)
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise TraceFormatError(f"{where}: unknown event kind {name!r}; known: {sorted(EVENT_TYPES)}")
    return _build(cls, body, f"{where} ({name})")


def observation_to_json(obs: Observation) -> dict[str, Any]:
    return {obs.kind: _fields_to_json(obs)}


def observation_from_json(data: Any) -> Observation:
    name, body = _one_key(data, "observation")
    cls = OBSERVATION_TYPES.get(name)
    if cls is None:
        raise TraceFormatError(f"unknown observation kind {name!r}")
    if isinstance(body, dict):
        body = dict(body)
        if "key" in body:
            body["key"] = CallKey.from_json(body["key"])
        if "keys" in body:
            body["keys"] = tuple(CallKey.from_json(k) for k in body["keys"])
    return _build(cls, body, f"observation ({name})")


_SIMPLE = {"str": str, "int": int, "bool": bool}
_T = TypeVar("_T")


def _check_type(annotation: str, value: Any) -> bool:
    """A small check of JSON values against the field annotations used in this module."""
    ann = annotation.replace(" ", "")
    options = ann.split("|")
    for opt in options:
        if opt == "None" and value is None:
            return True
        if opt in _SIMPLE and isinstance(value, _SIMPLE[opt]):
            if opt == "int" and isinstance(value, bool):
                continue
            return True
        if opt.startswith("Literal["):
            allowed = [a.strip("'\"") for a in opt[len("Literal[") : -1].split(",")]
            if value in allowed:
                return True
        if opt == "StopReason" and value in STOP_REASONS:
            return True
        if opt.startswith("Mapping[") and isinstance(value, dict):
            return True
        if opt in ("Any", "CallKey") or opt.startswith("tuple["):
            return True
    return False


def _build(cls: type[_T], body: Any, what: str) -> _T:
    if not isinstance(body, dict):
        raise TraceFormatError(f"{what}: expected an object of fields, got {body!r}"[:300])
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(body) - set(known)
    if unknown:
        raise TraceFormatError(f"{what}: unknown fields {sorted(unknown)}")
    for name, f in known.items():
        if name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise TraceFormatError(f"{what}: missing field {name!r}")
            continue
        if not _check_type(str(f.type), body[name]):
            raise TraceFormatError(f"{what}: field {name!r} must be {f.type}, got {body[name]!r}"[:300])
    return cls(**body)


def iter_keys(events: Sequence[Event]) -> Iterator[tuple[str, str, str, str]]:
    """The protocol identities ``(turn, response, item, call)`` in order of first mention."""
    seen: set[tuple[str, str, str, str]] = set()
    for e in events:
        if isinstance(e, CallAddressed):
            ident = (e.turn, e.response, e.item, e.call)
            if ident not in seen:
                seen.add(ident)
                yield ident
