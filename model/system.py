"""The system around the per-call lifecycle: turns, tenants, operator controls, restart.

:mod:`callsafe.model.lifecycle` says what an event *means* to one call; this module says
*which* lifecycle event an input event is for each call it touches, given the state of the
system. It holds:

* :data:`BROADCASTS`: the declarative rules by which one input (a cancel, a new turn, an
  operator control, a restart) reaches many calls, and the lifecycle event each receives;
* the guards (:func:`classify_open`, :func:`classify_fragment`, :func:`classify_terminal`,
  :func:`classify_dispatch`), pure functions of booleans and counts, shared by the
  executable semantics below and by the state-graph explorer; :data:`GUARDS` states them
  as data (the facts each checks, the events each can return) for the system-rules diagram;
* :class:`SystemState` and :class:`Semantics`, the executable model of one trace: it
  applies events one by one, runs the internal steps (parse, validate, dispatch) eagerly,
  and records what a correct implementation must do. The oracle reads its result.

What is durable (survives :class:`~callsafe.model.vocabulary.Restart`): the turn table,
the terminal event ids, every call that reached a terminal state, the quarantined
responses, the disabled tools, the catalog. What is not: buffers of unfinished calls,
which fail on restart rather than come back as candidates (:data:`RESTART_KEEPS`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonschema

from callsafe.model.ecma_regex import validator_class
from callsafe.model.lifecycle import (
    NON_DISPATCHING,
    TERMINAL_STATES,
    CallEvent,
    Rejected,
    State,
    outcome,
)
from callsafe.model.vocabulary import (
    CallAddressed,
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    Fragment,
    Limits,
    QuarantineResponse,
    ResponseTerminal,
    Restart,
    StopTenant,
    StoreFault,
    TextFragment,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

E = CallEvent

__all__ = [
    "BROADCASTS",
    "GUARDS",
    "LONE_SURROGATE",
    "MODEL_READING",
    "NO_ARGUMENTS",
    "READING_SPEC",
    "RESTART_KEEPS",
    "Broadcast",
    "CallRecord",
    "Guard",
    "ParseFailure",
    "Reading",
    "Semantics",
    "SystemState",
    "TurnRecord",
    "apply_tool_change",
    "business_check",
    "classify_dispatch",
    "classify_fragment",
    "classify_open",
    "classify_terminal",
    "join_surrogate_pairs",
    "strict_parse",
    "utf8_len",
]


# --------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------


@dataclass
class TurnRecord:
    """A turn's binding (actor, tenant, conversation) and whether it is still live.
    Conversations are named within a tenant: another tenant's turn never supersedes.

    ``status`` is ``live`` while the turn is the conversation's current turn and nobody
    stopped it; then ``cancelled`` (the user), ``superseded`` (a newer turn) or
    ``stopped`` (an operator stopped the tenant)."""

    turn: str
    actor: str
    tenant: str
    conversation: str
    traceparent: str | None
    status: str = "live"


@dataclass
class CallRecord:
    """Everything the model tracks about one call key."""

    key: CallKey
    tool: str | None = None
    state: State = State.ABSENT
    fragments: dict[int, str] = field(default_factory=dict)
    bytes: int = 0
    max_position_seen: int = -1
    out_of_order: bool = False
    terminal_event_id: str | None = None
    terminal_reason: str | None = None
    arguments: Any = None
    parse: str = "not parsed"
    validation: str = "not validated"
    confirmation_requested: bool = False
    confirmed: bool = False
    why: str = ""  # why the call is in its terminal state, for verdicts and ledgers
    ended_by: CallEvent | None = None  # the lifecycle event that made it terminal
    ended_at: int | None = None  # the delivered step at which that happened
    validated_catalog: Any = None  # the tool declaration it was validated against


# --------------------------------------------------------------------------------------
# Broadcast rules: one input, many calls
# --------------------------------------------------------------------------------------


# The facts the guards below check. A broadcast that stops calls also makes one of them
# false for whatever arrives later (``Broadcast.breaks``), which is why nothing revives
# what it stopped; the system-rules diagram draws that link from these names.
TURN_LIVE: Final = "turn is live and current"
RESPONSE_OPEN: Final = "response has not ended"
NOT_QUARANTINED: Final = "response is not quarantined"
TOOL_AS_VALIDATED: Final = "tool enabled, declared as when validated"
NEW_POSITION: Final = "position not received before"
WITHIN_CAPS: Final = "within the call and turn byte caps"
NEW_TERMINAL_ID: Final = "terminal event id not seen before"
COMPLETED: Final = "stop reason is completed"
PERMITTED: Final = "actor may use the tool"
CONFIRMED_IF_NEEDED: Final = "confirmed, if the tool needs it"


# The spec's sentences the rules below enforce (quoted verbatim, typography aside;
# tests/test_spec_traceability.py finds each in the spec, and docs/spec-traceability.md
# is generated from them by callsafe.model.traceability).
STOPS_ARE_INERT: Final = (
    "Cancellation, supersession, connection loss, malformed data, unknown tool name, and size limit all move "
    "the buffer to a non-dispatching terminal state."
)
OPERATOR_CONTROL: Final = (
    "Expose a bounded operator control that can quarantine a response, disable a named tool, or force all "
    "in-flight buffers for a tenant into inert cancellation."
)
OLD_TUPLE: Final = "an old tuple cannot affect a newer turn."
ENDED_UNDER_PROTOCOL: Final = (
    "fragments must remain inert until the adapter knows that one call has ended under its protocol."
)
OWN_DECLARATION: Final = "Validate each call against its own tool declaration, sequence, size allowance, and policy."
RENAMED_MID_RELEASE: Final = "a tool renamed mid-release"
STAY_TERMINAL: Final = "buffers must stay terminal, never become candidates because an adapter reconnects."
LATE_TERMINAL: Final = (
    "A late terminal event for a cancelled turn must be rejected by turn ownership, not revived because its JSON "
    "happens to parse."
)
REPEATED_DELTA: Final = (
    "A repeated delta is a delivery condition, not evidence that the user requested the action twice."
)
REJECT_OR_REASSEMBLE: Final = (
    "If ordering is not guaranteed by a protocol, reject or reassemble by its documented position rather than "
    "guessing from arrival time."
)
BYTE_LIMIT: Final = "A buffer should have a byte limit"
TERMINAL_ID: Final = "Persist the terminal event ID so reconnect delivery cannot dispatch it twice."
TERMINAL_PERMITS_PARSING: Final = "A terminal event permits parsing; it does not itself authorize execution."
DISPATCHER_RECHECK: Final = (
    "The dispatcher must additionally check the current turn's cancellation and confirmation state at execution time."
)
PERMISSION_BOUNDARY: Final = "pass them through the existing permission and confirmation boundary"
BIND_TURN: Final = "bind them to the active turn and authenticated actor"
PARSE_ONCE: Final = "Parse the assembled arguments once, enforce the declared schema"


@dataclass(frozen=True)
class Broadcast:
    """When ``event_type`` arrives, every call for which ``selects`` holds receives
    ``call_event``; ``why`` becomes the reason recorded for calls it stops.

    The rest is for people (the system-rules diagram): ``who`` sends the input,
    ``reaches`` says in words which calls ``selects`` picks, and ``breaks`` names the
    guard facts that no longer hold afterwards for the turn, response or tool it names."""

    event_type: type[Event]
    call_event: CallEvent
    selects: Callable[[Any, CallRecord, SystemState], bool]
    why: str
    who: str
    reaches: str
    breaks: tuple[str, ...] = ()
    # reaches the calls when the *next* input arrives, not at the event itself (a lasting
    # store fault: the input it meets), and only under the model's reading (failing closed)
    deferred: bool = False
    # the spec sentences the rule enforces, and, where the spec is silent, callsafe's own
    # choice in words (the readings it allows instead are in READING_SPEC)
    spec: tuple[str, ...] = ()
    own: str = ""


def _same_turn(ev: Any, call: CallRecord, _s: SystemState) -> bool:
    return bool(call.key.turn == ev.turn)


def _same_response(ev: Any, call: CallRecord, _s: SystemState) -> bool:
    return bool(call.key.turn == ev.turn and call.key.response == ev.response)


def _older_turn_same_conversation(ev: Any, call: CallRecord, s: SystemState) -> bool:
    if ev.turn in s.turns:
        return False  # a re-delivered turn start supersedes nothing
    turn = s.turns.get(call.key.turn)
    return bool(turn is not None and (turn.tenant, turn.conversation) == (ev.tenant, ev.conversation))


BROADCASTS: Final[tuple[Broadcast, ...]] = (
    Broadcast(
        CancelTurn,
        E.CANCEL,
        _same_turn,
        "cancelled by the user",
        who="user",
        reaches="unfinished calls of that turn",
        breaks=(TURN_LIVE,),
        spec=(STOPS_ARE_INERT,),
    ),
    Broadcast(
        TurnStarted,
        E.SUPERSEDE,
        _older_turn_same_conversation,
        "superseded by a new turn",
        who="user",
        reaches="unfinished calls of older turns\nin that tenant's conversation",
        breaks=(TURN_LIVE,),
        spec=(STOPS_ARE_INERT, OLD_TUPLE),
    ),
    Broadcast(
        Disconnect,
        E.DISCONNECT,
        _same_response,
        "connection lost",
        who="stream",
        reaches="unfinished calls of that response",
        breaks=(RESPONSE_OPEN,),
        spec=(STOPS_ARE_INERT,),
    ),
    Broadcast(
        ResponseTerminal,
        E.RESPONSE_ENDED,
        _same_response,
        "response ended before the call's terminal event",
        who="stream",
        reaches="unfinished calls of that response",
        breaks=(RESPONSE_OPEN,),
        spec=(ENDED_UNDER_PROTOCOL,),
        own="a call still collecting when its response ends never ended under its protocol: it fails",
    ),
    Broadcast(
        QuarantineResponse,
        E.QUARANTINE,
        lambda ev, c, s: bool(c.key.response == ev.response),
        "response quarantined by an operator",
        who="operator",
        reaches="unfinished calls of that response",
        breaks=(NOT_QUARANTINED,),
        spec=(OPERATOR_CONTROL,),
    ),
    Broadcast(
        DisableTool,
        E.DISABLE_TOOL,
        lambda ev, c, s: bool(c.tool == ev.tool),
        "tool disabled by an operator",
        who="operator",
        reaches="unfinished calls of that tool",
        breaks=(TOOL_AS_VALIDATED,),
        spec=(OPERATOR_CONTROL,),
    ),
    Broadcast(
        StopTenant,
        E.STOP_TENANT,
        lambda ev, c, s: bool(c.key.tenant == ev.tenant),
        "tenant stopped by an operator",
        who="operator",
        reaches="unfinished calls of that tenant",
        breaks=(TURN_LIVE,),
        spec=(OPERATOR_CONTROL,),
    ),
    Broadcast(
        ToolChanged,
        E.CATALOG_CHANGE,
        lambda ev, c, s: bool(c.tool == ev.tool),
        "tool changed mid-release",
        who="application",
        reaches="unfinished calls of that tool",
        breaks=(TOOL_AS_VALIDATED,),
        spec=(OWN_DECLARATION, RENAMED_MID_RELEASE),
        own="the model cancels the calls in flight of a changed tool at the change (keeping them is allowed)",
    ),
    Broadcast(
        Restart,
        E.RESTART,
        lambda ev, c, s: True,
        "interrupted by a restart",
        who="process",
        reaches="every unfinished call\n(buffers are not durable)",
        spec=(STAY_TERMINAL,),
        own="buffers are not durable: unfinished calls fail at a restart rather than come back",
    ),
    Broadcast(
        StoreFault,
        E.RESTART,
        lambda ev, c, s: bool(ev.lasting),
        "interrupted by a store fault",
        who="store",
        reaches=(
            "a lasting fault: every unfinished call,\nwhen the input it meets arrives\n"
            "(failing closed; rolling back is allowed)"
        ),
        deferred=True,
        own="the spec says nothing of store failure: the model fails closed, as a crash would",
    ),
)


# --------------------------------------------------------------------------------------
# Guards: which lifecycle event an input means, from plain facts
# --------------------------------------------------------------------------------------


def classify_open(turn_live: bool, response_open: bool, quarantined: bool) -> CallEvent:
    """A call may open only in a live turn, on a response that has not ended and is not
    quarantined."""
    return E.OPEN if (turn_live and response_open and not quarantined) else E.OPEN_BLOCKED


def classify_fragment(
    seen_same: bool, seen_different: bool, call_bytes_after: int, turn_bytes_after: int, limits: Limits
) -> CallEvent:
    """A repeated position is a delivery condition (same bytes) or a failure (different
    bytes); a new position is data, unless it would break a byte cap."""
    if seen_same:
        return E.FRAGMENT_REPEAT
    if seen_different:
        return E.FRAGMENT_CONFLICT
    if call_bytes_after > limits.call_bytes or turn_bytes_after > limits.turn_bytes:
        return E.OVER_LIMIT
    return E.FRAGMENT


def classify_terminal(event_id_seen: bool, reason: str) -> CallEvent:
    """A terminal event id seen before is a replay; otherwise only ``completed`` lets the
    call become a candidate."""
    if event_id_seen:
        return E.TERMINAL_REPEAT
    return E.TERMINAL_COMPLETED if reason == "completed" else E.TERMINAL_STOPPED


def classify_dispatch(
    needs_confirmation: bool,
    confirmed: bool,
    turn_live: bool,
    quarantined: bool,
    tool_unchanged: bool,
    permitted: bool = True,
) -> CallEvent:
    """The permission boundary and the dispatcher's re-check at execution time. The actor
    must be permitted to use the tool; the turn must still be live and current, the
    response not quarantined, the tool still enabled and declared as it was when the call
    was validated; a tool that needs confirmation waits for it."""
    if not (permitted and turn_live and not quarantined and tool_unchanged):
        return E.DISPATCH_BLOCKED
    if needs_confirmation and not confirmed:
        return E.AWAIT_CONFIRMATION
    return E.DISPATCH


@dataclass(frozen=True)
class Guard:
    """One decision of the system rules: from plain facts about an input (``checks``) to
    the lifecycle event one call receives (one of ``outcomes``). ``at`` is the state the
    call is normally in when the guard runs: the diagram shows where each outcome leads
    from there, read from the lifecycle table."""

    name: str
    when: str
    function: Callable[..., CallEvent]
    checks: tuple[str, ...]
    outcomes: tuple[CallEvent, ...]
    at: State
    spec: tuple[str, ...] = ()  # the spec sentences it enforces
    own: str = ""  # where the spec is silent: callsafe's own choice


GUARDS: Final[tuple[Guard, ...]] = (
    Guard(
        "open",
        "call_opened",
        classify_open,
        (TURN_LIVE, RESPONSE_OPEN, NOT_QUARANTINED),
        (E.OPEN, E.OPEN_BLOCKED),
        State.ABSENT,
        spec=(LATE_TERMINAL, OPERATOR_CONTROL),
        own="a call opened in a turn, response or tenant already stopped is cancelled at its opening",
    ),
    Guard(
        "fragment",
        "fragment",
        classify_fragment,
        (NEW_POSITION, WITHIN_CAPS),
        (E.FRAGMENT, E.FRAGMENT_REPEAT, E.FRAGMENT_CONFLICT, E.OVER_LIMIT),
        State.COLLECTING,
        spec=(REPEATED_DELTA, REJECT_OR_REASSEMBLE, BYTE_LIMIT, STOPS_ARE_INERT),
        own="a position received again with other bytes fails the call",
    ),
    Guard(
        "terminal",
        "call_terminal",
        classify_terminal,
        (NEW_TERMINAL_ID, COMPLETED),
        (E.TERMINAL_COMPLETED, E.TERMINAL_STOPPED, E.TERMINAL_REPEAT),
        State.COLLECTING,
        spec=(TERMINAL_ID, TERMINAL_PERMITS_PARSING, ENDED_UNDER_PROTOCOL),
        own="only the stop reason completed makes a candidate; length, content_filter and error fail the call",
    ),
    Guard(
        "dispatch",
        "validation passed, or confirm",
        classify_dispatch,
        (PERMITTED, TURN_LIVE, NOT_QUARANTINED, TOOL_AS_VALIDATED, CONFIRMED_IF_NEEDED),
        (E.DISPATCH, E.AWAIT_CONFIRMATION, E.DISPATCH_BLOCKED),
        State.VALIDATED,
        spec=(DISPATCHER_RECHECK, PERMISSION_BOUNDARY, BIND_TURN),
    ),
)

# What a restart keeps, per field of SystemState (the model keeps all of it; unfinished
# calls were failed by the restart broadcast before). A new field must say whether it is
# durable: tests/test_render.py compares these keys with the fields.
RESTART_KEEPS: Final[dict[str, str]] = {
    "tools": "the tool catalog as it stands",
    "limits": "the byte caps",
    "turns": "every turn's binding (actor, tenant) and status",
    "current": "the current turn of each conversation",
    "calls": "every call that ended, and how",
    "turn_bytes": "bytes received per turn",
    "terminal_ids": "terminal event ids already seen",
    "quarantined": "quarantined responses",
    "disabled_tools": "disabled tools",
    "ended_responses": "responses that ended",
}


# --------------------------------------------------------------------------------------
# Parsing and validation, as the spec defines them
# --------------------------------------------------------------------------------------


class ParseFailure(ValueError):
    """The assembled arguments are not one strict JSON object."""


def _reject_constant(name: str) -> Any:
    raise ParseFailure(f"non-standard JSON constant {name}")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Called by json for every object: built by ``dict`` in C, and a duplicate key is a
    # shorter dict than its list of pairs (one comparison instead of a Python loop).
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ParseFailure("duplicate key in object")
    return out


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


# The only way parsing can put a surrogate into a value whose text has none is an escape
# ``\uD800``..``\uDFFF`` that json.loads does not pair up. Text without such an escape (the
# common case) cannot yield one, so the walk over the parsed value is skipped; text with
# one (or with an escaped backslash before ``uD8..``: a false alarm, only slower) is walked.
# So is text with many containers: the walk recurses per level and runs out of stack on
# values nested a few hundred deep (a RecursionError, not a ParseFailure), and skipping it
# there would change that outcome; 64 containers nest at most 64 deep, far from any limit.
# A call whose stream carried no argument bytes at all ("" is no JSON text, RFC 8259 section
# 2): what the model's parse records. An executor input for it has arguments the stream never
# carried (a library that makes up {} for it), which INV-EXACT-ARGS reports.
NO_ARGUMENTS: Final = "malformed: no argument bytes"
LONE_SURROGATE: Final = "lone surrogate in arguments"  # the parse failure (the oracle's readings key on it)
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_WALK_FREE_CONTAINERS: Final = 64

# One decoder for every parse: ``json.loads`` with hooks builds a new JSONDecoder (and its
# C scanner) per call, which costs as much as parsing a small call's arguments. A decoder
# keeps no state between parses, so sharing one is what ``json.loads`` itself does.
_DECODER: Final = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
# What ``_DECODER.decode`` runs, called directly (two Python frames fewer a parse): skip
# whitespace, ``scan_once`` (the C scanner), skip whitespace, nothing may follow.
_SCAN_ONCE: Final[Callable[[str, int], tuple[Any, int]]] = _DECODER.scan_once  # type: ignore[attr-defined]  # set by __init__, not in typeshed
# json.decoder's WHITESPACE (what JSON skips); its match never fails (``*``), so it is typed
# as always giving a match.
_SKIP_WHITESPACE: Final[Callable[[str, int], re.Match[str]]] = re.compile(r"[ \t\n\r]*").match  # type: ignore[assignment]


def _decode(text: str) -> Any:
    """``_DECODER.decode(text)``: the same value, and the same errors with the same messages."""
    try:
        value, end = _SCAN_ONCE(text, _SKIP_WHITESPACE(text, 0).end())
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _SKIP_WHITESPACE(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def strict_parse(text: str, *, lone_surrogate_escapes: bool = False) -> dict[str, Any]:
    """One strict parse: a single JSON object and nothing else. Trailing data (``}{``),
    truncation, duplicate keys, NaN/Infinity and lone surrogates are all failures; the
    parser never repairs. ``lone_surrogate_escapes``: an escape ``\\uD800``..``\\uDFFF``
    that pairs with nothing is taken as the code point it names (the reading
    :attr:`Reading.lone_surrogate_escapes`); a raw lone surrogate in the text (what no
    UTF-8 stream can carry) still fails.

    Cost: the C decoder plus work in C proportional to the text (ASCII text needs no
    surrogate check at all); Python runs once per JSON object (the duplicate-key hook),
    and walks the parsed value only when the text holds a surrogate escape or many
    containers."""
    if not text.isascii() and _has_lone_surrogate(text):
        raise ParseFailure(LONE_SURROGATE)
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            value = _decode(text)
        else:  # what json.loads checks before decoding: a byte-order mark, or bytes
            value = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except ParseFailure:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, an integer past the digit limit, depth
        raise ParseFailure(type(exc).__name__ + ": " + (getattr(exc, "msg", None) or str(exc)[:80])) from None
    if not isinstance(value, dict):
        raise ParseFailure("arguments must be a JSON object")
    walk = not lone_surrogate_escapes and (
        not isinstance(text, str)
        or ("\\u" in text and _SURROGATE_ESCAPE.search(text) is not None)
        or text.count("{") + text.count("[") > _WALK_FREE_CONTAINERS
    )
    try:
        lone = walk and _has_lone_surrogate(value)
    except RecursionError:
        raise ParseFailure("arguments nested too deep") from None
    if lone:
        raise ParseFailure(LONE_SURROGATE)
    return value


def join_surrogate_pairs(text: str) -> str:
    """``text`` with every high surrogate followed by a low one replaced by the character
    the pair encodes (a lone surrogate stays as it is): what a UTF-16 string holds once two
    halves of a pair that arrived apart are put side by side."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def utf8_len(text: str) -> int:
    """Bytes a fragment costs against the caps: its UTF-8 length (lone surrogates counted
    as 3 bytes), and at least 1.

    Why at least 1: an empty fragment still takes a position (a gap before it must be
    filled for the call to assemble), so an implementation keeps something for it. Costing
    nothing, a stream of empty fragments at new positions grew a buffer with no cap
    (found by the flood tests); costing one byte, a call holds at most ``call_bytes``
    positions. Real streams send at most an empty opening delta per call."""
    if text.isascii():  # one byte a character: no need to encode (the common case)
        return len(text) or 1
    return len(text.encode("utf-8", "surrogatepass"))


def apply_tool_change(tools: MutableMapping[str, ToolSpec], ev: ToolChanged) -> None:
    """A catalog change, as the model and the harness's live catalog both apply it (one
    function, so the two cannot drift): a rename moves the declaration, a removal drops it,
    a schema change replaces only the schema (confirmation, business rules and the
    permission list stay)."""
    spec = tools.pop(ev.tool, None)
    if spec is None:
        return
    if ev.change == "rename" and ev.new_name:
        tools[ev.new_name] = spec
    elif ev.change == "schema":
        tools[ev.tool] = dataclasses.replace(spec, schema=dict(ev.schema or {}))


def business_check(spec: ToolSpec, arguments: Mapping[str, Any]) -> str | None:
    """The harness's business rules: ``max`` (numeric upper bounds) and ``forbid`` (values
    a field must not take). Returns the failure, or None when the call passes."""
    for name, bound in spec.business.get("max", {}).items():
        value = arguments.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > bound:
            return f"business rule: {name} over {bound}"
    for name, values in spec.business.get("forbid", {}).items():
        if name in arguments and arguments[name] in values:
            return f"business rule: {name} has a forbidden value"
    return None


# Validators by schema object. Building one (resolving the schema as a resource) costs
# more than most validations, and the oracle validates every final call. Keyed by the
# schema's identity, holding the schema so that its id cannot be reused while the entry
# lives; a schema is a declaration, never changed in place (a schema change is a new
# ToolSpec with a new schema, as ToolChanged makes). Bounded: cleared when full.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}
_VALIDATORS_MAX: Final = 256


def _validator(schema: Mapping[str, Any]) -> Any:
    entry = _VALIDATORS.get(id(schema))
    if entry is None or entry[0] is not schema:
        if len(_VALIDATORS) >= _VALIDATORS_MAX:
            _VALIDATORS.clear()
        entry = (schema, validator_class(schema)(schema))
        _VALIDATORS[id(schema)] = entry
    return entry[1]


def schema_errors(spec: ToolSpec, arguments: Any) -> str | None:
    """JSON Schema validation with a maintained validator (jsonschema), built once per
    schema."""
    error = jsonschema.exceptions.best_match(_validator(spec.schema).iter_errors(arguments))
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"schema: {error.validator} at {path}"


# --------------------------------------------------------------------------------------
# The system state and the executable semantics of a trace
# --------------------------------------------------------------------------------------


@dataclass
class SystemState:
    """Everything the model knows between two events."""

    tools: dict[str, ToolSpec]
    limits: Limits
    turns: dict[str, TurnRecord] = field(default_factory=dict)
    current: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, conversation) -> turn
    calls: dict[tuple[str, str, str, str], CallRecord] = field(default_factory=dict)
    turn_bytes: dict[str, int] = field(default_factory=dict)
    terminal_ids: set[str] = field(default_factory=set)
    quarantined: set[str] = field(default_factory=set)
    disabled_tools: set[str] = field(default_factory=set)
    ended_responses: set[tuple[str, str]] = field(default_factory=set)

    def turn_live(self, turn: str) -> bool:
        record = self.turns.get(turn)
        return (
            record is not None
            and record.status == "live"
            and self.current.get((record.tenant, record.conversation)) == turn
        )

    def tenant_of(self, turn: str) -> str:
        record = self.turns.get(turn)
        return record.tenant if record is not None else ""

    def tool_spec(self, name: str | None) -> ToolSpec | None:
        if name is None or name in self.disabled_tools:
            return None
        return self.tools.get(name)


@dataclass(frozen=True)
class Reading:
    """Where the spec is silent, which defensible reading a run of the model takes. The
    model's own reading is the default; the oracle runs the others where they could judge
    a trace otherwise, and allows whatever any of them allows (``may``).

    * ``reject_out_of_order``: "reject or reassemble by its documented position": a
      fragment at a position below one already received fails the call, instead of being
      reassembled in position order.
    * ``count_after_end``: bytes that arrive for a call after it failed or was cancelled
      count against its turn's cap (the model counts only the bytes a live call kept).
    * ``lone_surrogate_escapes``: an escape ``\\uD800``..``\\uDFFF`` that pairs with
      nothing is a string's code point, not malformed data. The JSON grammar admits it, and
      RFC 8259 section 8.2 calls the behaviour of receivers "unpredictable" (RFC 7493, I-JSON,
      forbids it); the spec says only that malformed data never runs. The model refuses it.
    * ``join_split_surrogates``: a UTF-16 surrogate pair split across two fragments (a
      ``\\ud83d`` escape at the end of one stream event's JSON, its ``\\ude00`` at the start of
      the next) is joined into the character it encodes once the fragments are assembled.
      Each event's JSON is valid on its own and the pair is valid once joined; UTF-8 cannot
      carry half of it, so the model refuses such arguments as holding lone surrogates. A
      client that joins the escapes it decoded (a JavaScript string does so by itself) reads
      the character; the spec is silent on what a fragment boundary inside a character means.
    * ``store_fault_rolls_back``: an input met by a lasting store fault
      (:class:`~callsafe.model.vocabulary.StoreFault`) is rolled back cleanly and taken
      again as if nothing had happened. The spec says nothing of store failure; the model
      fails closed as a crash would: what was in flight when the store failed fails (the
      restart broadcast), and the input is then taken again.
    * ``reject_repeats``: "reject or reassemble by its documented position": a fragment at
      a position already received fails the call even when its bytes are the same (the
      model drops it as "a delivery condition"). Either way a repeat runs nothing twice.
    * ``refuse_unknown_at_open``: a call opened for a tool that is unknown or disabled at
      that moment is refused at its opening (cancelled there: "unknown tool name ... move
      the buffer to a non-dispatching terminal state"), not at its validation as the model
      does. Both are inert; only the moment and the word differ.
    * ``keep_calls_across_catalog_change``: a catalog change does not stop the calls of
      its tool that are in flight; each is validated against the catalog as it stands at
      its terminal event ("validate each call against its own tool declaration"; the spec
      names "a tool renamed mid-release" as a fixture but never says a catalog update
      cancels a call in flight), and the dispatcher's re-check still refuses a call whose
      tool changed after it was validated. The model cancels them at the change. A change
      that leaves the tool as it was (a byte-identical re-declaration) then changes
      nothing."""

    reject_out_of_order: bool = False
    count_after_end: bool = False
    lone_surrogate_escapes: bool = False
    join_split_surrogates: bool = False
    store_fault_rolls_back: bool = False
    reject_repeats: bool = False
    refuse_unknown_at_open: bool = False
    keep_calls_across_catalog_change: bool = False

    def describe(self) -> str:
        parts = []
        if self.reject_out_of_order:
            parts.append("out-of-order fragments rejected")
        if self.count_after_end:
            parts.append("bytes after a call ended counted against the turn cap")
        if self.lone_surrogate_escapes:
            parts.append("lone surrogate escapes accepted")
        if self.join_split_surrogates:
            parts.append("a surrogate pair split across fragments joined")
        if self.store_fault_rolls_back:
            parts.append("an input met by a lasting store fault rolled back, not failed closed")
        if self.reject_repeats:
            parts.append("a repeated position fails the call")
        if self.refuse_unknown_at_open:
            parts.append("a call for an unknown or disabled tool refused at its opening")
        if self.keep_calls_across_catalog_change:
            parts.append("calls in flight kept across a catalog change, validated against the catalog as it stands")
        return ", ".join(parts) or "the model's reading"


MODEL_READING: Final = Reading()

# Each reading the oracle allows: the spec sentences that leave the choice open (verbatim),
# and the choice in words. tests/test_spec_traceability.py keeps the keys equal to the
# fields of Reading.
READING_SPEC: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "reject_out_of_order": ((REJECT_OR_REASSEMBLE,), "a fragment below a position already received fails the call"),
    "count_after_end": ((BYTE_LIMIT,), "bytes that arrive for a call that ended count against its turn's cap"),
    "lone_surrogate_escapes": ((STOPS_ARE_INERT,), "a lone surrogate escape is a code point, not malformed data"),
    "join_split_surrogates": ((STOPS_ARE_INERT,), "a surrogate pair split across two fragments is one character"),
    "store_fault_rolls_back": ((), "an input met by a lasting store fault is rolled back, not failed closed"),
    "reject_repeats": ((REJECT_OR_REASSEMBLE, REPEATED_DELTA), "a repeated position fails the call"),
    "refuse_unknown_at_open": (
        (STOPS_ARE_INERT,),
        "a call for an unknown or disabled tool is cancelled at its opening",
    ),
    "keep_calls_across_catalog_change": (
        (OWN_DECLARATION, RENAMED_MID_RELEASE),
        "a catalog change stops no call; each validates against the catalog as it stands",
    ),
}


@dataclass(frozen=True)
class Step:
    """One thing the model did: a lifecycle event applied to a call, at a delivered step.
    ``before``/``after`` show the change; ``note`` says what was refused or ignored."""

    step: int
    key: CallKey
    event: CallEvent
    before: State
    after: State
    note: str = ""


@dataclass(frozen=True)
class Expected:
    """An effect a correct implementation produces, in the order the model produces it."""

    step: int
    what: str  # "execute" | "confirm" | "validate"
    key: CallKey
    tool: str
    arguments: Any = None


class Semantics:
    """Runs a trace through the model. Internal steps run eagerly, right after the input
    that enables them, as a synchronous implementation would; events marked
    ``during_validation`` are applied while the business validation of the call whose
    terminal event precedes them is in progress, i.e. between validation and dispatch."""

    def __init__(self, trace: Trace, reading: Reading | None = None) -> None:
        self.trace = trace
        self.reading = reading or MODEL_READING
        self.state = SystemState(tools=dict(trace.tools), limits=trace.limits)
        self.steps: list[Step] = []
        self.expected: list[Expected] = []
        self.step_index = 0
        self._pending_during: list[tuple[int, Event]] = []
        # What tells the oracle whether another reading could judge this trace otherwise:
        # bytes that arrived for calls already over (per turn), and every fragment's bytes
        # (per turn). A turn whose fragments all together fit its cap cannot be judged
        # otherwise by counting more of them.
        self.late_bytes: dict[str, int] = {}
        self.offered_bytes: dict[str, int] = {}
        # A lasting store fault was announced: the next input meets it (StoreFault).
        self._store_down: StoreFault | None = None
        self.lasting_store_faults = 0
        # What tells the oracle whether the readings below could judge this trace
        # otherwise: a repeated position delivered to a call still collecting, a call
        # opened for a tool unknown or disabled at the time.
        self.repeats_while_collecting = 0
        self.opened_unknown_tool = 0

    # -- driving -------------------------------------------------------------------

    def run(self) -> Semantics:
        delivered = self.trace.delivered()
        i = 0
        while i < len(delivered):
            j = i + 1
            while j < len(delivered) and getattr(delivered[j], "during_validation", False):
                j += 1
            self._pending_during = [(k, delivered[k]) for k in range(i + 1, j)]
            self.step_index = i
            self.apply(delivered[i])
            # whatever no validation consumed arrives right after the event
            self._apply_pending()
            i = j
        return self

    def _apply_pending(self) -> None:
        """Apply the held during-validation events. Like the harness, the step stays at the
        most recently started delivery, so what follows is observed after them."""
        pending, self._pending_during = self._pending_during, []
        for index, late in pending:
            self.step_index = index
            self.apply(late)

    def call(self, ev: CallAddressed) -> CallRecord:
        ident = (ev.turn, ev.response, ev.item, ev.call)
        record = self.state.calls.get(ident)
        if record is None:
            record = CallRecord(key=ev.key(self.state.tenant_of(ev.turn)))
            self.state.calls[ident] = record
        return record

    def fire(self, call: CallRecord, event: CallEvent, why: str = "") -> bool:
        """Apply one lifecycle event to one call; True when the state changed or the
        transition is a self-loop of the table (i.e. it was not ignored or rejected)."""
        before = call.state
        result = outcome(before, event)
        if isinstance(result, State):
            call.state = result
            if result in TERMINAL_STATES and before not in TERMINAL_STATES:
                call.why = why or str(event)
                call.ended_by = event
                call.ended_at = self.step_index
            self.steps.append(Step(self.step_index, call.key, event, before, result))
            return True
        note = ("rejected: " if isinstance(result, Rejected) else "ignored: ") + result.why
        self.steps.append(Step(self.step_index, call.key, event, before, before, note))
        return False

    # -- events --------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        fault = self._store_down
        if fault is not None and not isinstance(event, StoreFault):
            self._store_down = None
            # the input the store failed on (a restart there is a crash anyway): failed
            # closed, it is as a crash, and then the input again
            if not self.reading.store_fault_rolls_back and not isinstance(event, Restart):
                self._broadcast(fault, deferred=True)
        self._broadcast(event, deferred=False)
        handler = getattr(self, "_on_" + event.kind)
        handler(event)

    def _broadcast(self, event: Event, *, deferred: bool) -> None:
        """The :data:`BROADCASTS` rules for ``event`` that fire now (``deferred``: those
        that reach the calls at the next input instead), over every unfinished call."""
        s = self.state
        for rule in BROADCASTS:
            if rule.event_type is ToolChanged and self.reading.keep_calls_across_catalog_change:
                continue
            if rule.deferred is deferred and isinstance(event, rule.event_type):
                for call in list(s.calls.values()):
                    if call.state not in TERMINAL_STATES and rule.selects(event, call, s):
                        self.fire(call, rule.call_event, rule.why)

    def _on_turn_started(self, ev: TurnStarted) -> None:
        s = self.state
        if ev.turn in s.turns:
            return  # a repeated turn start (replay) changes nothing; the binding is fixed
        previous = s.current.get((ev.tenant, ev.conversation))
        if previous is not None and s.turns[previous].status == "live":
            s.turns[previous].status = "superseded"
        s.turns[ev.turn] = TurnRecord(ev.turn, ev.actor, ev.tenant, ev.conversation, ev.traceparent)
        s.current[(ev.tenant, ev.conversation)] = ev.turn

    def _on_call_opened(self, ev: CallOpened) -> None:
        s = self.state
        if ev.turn not in s.turns:
            return  # no turn binding: no tenant, no key; the call never exists
        call = self.call(ev)
        if call.state is State.ABSENT:
            call.tool = ev.tool
        event = classify_open(
            s.turn_live(ev.turn),
            (ev.turn, ev.response) not in s.ended_responses,
            ev.response in s.quarantined,
        )
        why = "opened after its turn, response or tenant was stopped"
        if call.state is not State.ABSENT and ev.tool != call.tool:
            # the same call id announced with another tool name: id and name are set once
            self.fire(call, E.FRAGMENT_CONFLICT, "call id re-announced with another tool")
            return
        if event is E.OPEN and call.state is State.ABSENT and s.tool_spec(ev.tool) is None:
            self.opened_unknown_tool += 1
            if self.reading.refuse_unknown_at_open:
                event, why = E.OPEN_BLOCKED, "opened for a tool that is unknown or disabled: refused at its opening"
        self.fire(call, event, why)

    def _on_fragment(self, ev: Fragment) -> None:
        s = self.state
        if ev.turn not in s.turns:
            return
        call = self.call(ev)
        previous = call.fragments.get(ev.position)
        size = utf8_len(ev.text)
        self.offered_bytes[ev.turn] = self.offered_bytes.get(ev.turn, 0) + size
        if call.state in NON_DISPATCHING:
            self.late_bytes[ev.turn] = self.late_bytes.get(ev.turn, 0) + size
            if self.reading.count_after_end:
                s.turn_bytes[ev.turn] = s.turn_bytes.get(ev.turn, 0) + size
        event = classify_fragment(
            previous is not None and previous == ev.text,
            previous is not None and previous != ev.text,
            call.bytes + size,
            s.turn_bytes.get(ev.turn, 0) + size,
            s.limits,
        )
        if ev.position < 0:
            event = E.FRAGMENT_CONFLICT
        if event is E.FRAGMENT_REPEAT and call.state is State.COLLECTING:
            self.repeats_while_collecting += 1
            if self.reading.reject_repeats:
                event = E.FRAGMENT_CONFLICT
        why = {
            E.FRAGMENT_CONFLICT: (
                "repeated fragment at a position already received: rejected"
                if previous is not None and previous == ev.text
                else "conflicting fragment at a position already received"
            ),
            E.OVER_LIMIT: "byte limit exceeded",
            E.FRAGMENT: "fragment after the terminal event" if call.state is not State.COLLECTING else "",
        }.get(event, "")
        if (
            self.reading.reject_out_of_order
            and event is E.FRAGMENT
            and call.state is State.COLLECTING
            and ev.position < call.max_position_seen
        ):
            call.out_of_order = True
            event, why = E.FRAGMENT_CONFLICT, "fragment out of position order: rejected"
        if call.state is State.ABSENT:
            why = "fragment for a call that was never opened"
        accepted = self.fire(call, event, why)
        if accepted and event is E.FRAGMENT and call.state is State.COLLECTING:
            if ev.position < call.max_position_seen:
                call.out_of_order = True
            call.max_position_seen = max(call.max_position_seen, ev.position)
            call.fragments[ev.position] = ev.text
            call.bytes += size
            s.turn_bytes[ev.turn] = s.turn_bytes.get(ev.turn, 0) + size

    def _on_text_fragment(self, ev: TextFragment) -> None:
        """Text output never touches argument buffers."""

    def _on_call_terminal(self, ev: CallTerminal) -> None:
        s = self.state
        if ev.turn not in s.turns:
            return
        call = self.call(ev)
        event = classify_terminal(ev.event_id in s.terminal_ids, ev.reason)
        s.terminal_ids.add(ev.event_id)
        if call.state is State.ABSENT:
            why = "terminal event for a call that was never opened"
        else:
            why = f"stopped: {ev.reason}"
        changed = self.fire(call, event, why)
        if changed and event is E.TERMINAL_COMPLETED:
            call.terminal_event_id = ev.event_id
            call.terminal_reason = ev.reason
            self._assemble(call)
        elif changed and event is E.TERMINAL_STOPPED:
            call.terminal_reason = ev.reason

    def _on_response_terminal(self, ev: ResponseTerminal) -> None:
        self.state.ended_responses.add((ev.turn, ev.response))

    def _on_cancel_turn(self, ev: CancelTurn) -> None:
        turn = self.state.turns.get(ev.turn)
        if turn is not None and turn.status == "live":
            turn.status = "cancelled"

    def _on_disconnect(self, ev: Disconnect) -> None:
        self.state.ended_responses.add((ev.turn, ev.response))

    def _on_replay(self, ev: Event) -> None:  # expanded before delivery
        raise AssertionError("replay events are expanded by Trace.delivered()")

    def _on_tool_changed(self, ev: ToolChanged) -> None:
        apply_tool_change(self.state.tools, ev)

    def _on_confirm(self, ev: Confirm) -> None:
        s = self.state
        if ev.turn not in s.turns:
            return
        call = self.call(ev)
        if ev.approved:
            if self.fire(call, E.CONFIRMED):
                call.confirmed = True
                self._dispatch(call)
        else:
            self.fire(call, E.DENIED, "denied by the user")

    def _on_quarantine_response(self, ev: QuarantineResponse) -> None:
        self.state.quarantined.add(ev.response)

    def _on_disable_tool(self, ev: DisableTool) -> None:
        self.state.disabled_tools.add(ev.tool)

    def _on_stop_tenant(self, ev: StopTenant) -> None:
        for turn in self.state.turns.values():
            if turn.tenant == ev.tenant and turn.status == "live":
                turn.status = "stopped"

    def _on_restart(self, ev: Restart) -> None:
        """Everything durable stays; unfinished buffers were failed by the broadcast."""

    def _on_store_fault(self, ev: StoreFault) -> None:
        """A transient fault changes nothing; a lasting one meets the next input (see
        :meth:`apply` and :attr:`Reading.store_fault_rolls_back`)."""
        if ev.lasting:
            self._store_down = ev
            self.lasting_store_faults += 1

    # -- internal steps ------------------------------------------------------------

    def _assemble(self, call: CallRecord) -> None:
        positions = sorted(call.fragments)
        if positions != list(range(len(positions))):
            call.parse = "missing fragment"
            self.fire(call, E.PARSE_FAILED, "missing fragment before the terminal event")
            return
        text = "".join(call.fragments[p] for p in positions)
        if not text:
            call.parse = NO_ARGUMENTS
            self.fire(call, E.PARSE_FAILED, "no argument bytes: nothing to parse")
            return
        if self.reading.join_split_surrogates and not text.isascii():
            text = join_surrogate_pairs(text)
        try:
            call.arguments = strict_parse(text, lone_surrogate_escapes=self.reading.lone_surrogate_escapes)
        except ParseFailure as exc:
            call.parse = f"malformed: {exc}"
            self.fire(call, E.PARSE_FAILED, "malformed arguments")
            return
        call.parse = "ok"
        self.fire(call, E.PARSE_OK)
        self._validate(call)

    def _validate(self, call: CallRecord) -> None:
        s = self.state
        spec = s.tool_spec(call.tool)
        if spec is None:
            call.validation = "unknown or disabled tool"
            self.fire(call, E.INVALID, "unknown, removed, renamed or disabled tool")
            return
        problem = schema_errors(spec, call.arguments)
        if problem is not None:
            call.validation = problem
            self.fire(call, E.INVALID, "arguments do not match the tool's schema")
            return
        # The business validator runs once per final call; whatever arrives while it runs
        # is applied before its answer is used.
        self.expected.append(Expected(self.step_index, "validate", call.key, call.tool or ""))
        self._apply_pending()
        problem = business_check(spec, call.arguments)
        call.validated_catalog = spec
        if call.state is not State.TERMINAL_CANDIDATE:
            return  # stopped while validating: nothing revives it
        if problem is not None:
            call.validation = problem
            self.fire(call, E.INVALID, "business rule rejected the call")
            return
        call.validation = "ok"
        self.fire(call, E.VALID)
        self._dispatch(call)

    def _dispatch(self, call: CallRecord) -> None:
        s = self.state
        spec = s.tool_spec(call.tool)
        turn = s.turns.get(call.key.turn)
        event = classify_dispatch(
            needs_confirmation=bool(spec and spec.confirm),
            confirmed=call.confirmed,
            turn_live=s.turn_live(call.key.turn),
            quarantined=call.key.response in s.quarantined,
            tool_unchanged=spec is not None and spec == call.validated_catalog,
            permitted=spec is not None and turn is not None and spec.permits(turn.actor),
        )
        if event is E.AWAIT_CONFIRMATION:
            if not call.confirmation_requested:
                call.confirmation_requested = True
                self.expected.append(Expected(self.step_index, "confirm", call.key, call.tool or ""))
            self.fire(call, event)
            return
        if event is E.DISPATCH_BLOCKED:
            self.fire(call, event, "refused at execution time: permission, turn, tool or controls")
            return
        self.fire(call, event)
        self.expected.append(Expected(self.step_index, "execute", call.key, call.tool or "", call.arguments))


def run_semantics(trace: Trace, reading: Reading | None = None) -> Semantics:
    """The model's run of ``trace`` (under ``reading``; the model's own by default)."""
    return Semantics(trace, reading).run()
