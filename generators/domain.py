"""The concrete domain the generated traces draw their data, identities and limits from.

Why: the state graph (:mod:`callsafe.formal.abstract`) decides *which* events happen in
which order; it says nothing about which bytes a fragment holds, whose call it is, which
tool it names or where the byte caps sit. A trace has to commit to those, and a bug that
lives there (a buffer keyed without the tenant, a repeated digit taken for a repeated
delta, bytes counted as characters, a quarantine forgotten on restart) is invisible
unless the committed data holds it. So every generated trace is concretised under a
:class:`Variant`: one value on each axis of :data:`AXES`.

* ``identities``: ``plain`` (one tenant, a response per turn, ids unique per trace);
  ``shared-ids`` (every turn's response, item indexes and call ids are the same strings);
  ``agent-loop`` (each call its own response in its turn, all reusing item ``0`` and call
  id ``call_0``); ``tenants`` (a second tenant's turn in a conversation of the same name
  carries a twin of the first call: same response, item and call id, its own value).
* ``tools``: ``one`` (a tool without business rules) or ``mixed`` (calls alternate
  between a tool with a business rule and one without; with confirmation, between a tool
  that needs confirmation and one that needs confirmation *and* has a business rule).
* ``values``: ``plain`` (``{"v":100}``), ``repeated`` (numbers of one repeated digit and
  a memo of a repeated substring), ``utf8`` (2-, 3- and 4-byte characters), ``escapes``
  (``\\"``, ``\\\\``, ``\\n`` and ``\\u`` escapes, a surrogate pair among them).
* ``order``: ``in-order`` or ``out-of-order`` (a call's positions are sent middle ones
  reversed; with four or more pieces the middle pieces are digits of one number, so that
  every order of them still parses, to a different number).
* ``limits``: ``roomy``, or the per-call or per-turn cap placed by the trace's own sizes:
  the chosen call's (turn's) bytes just ``under``, ``at`` or just ``over`` it.
* ``events``: ``once``; ``repeated`` (every application and operator event delivered
  twice); ``rebound`` (every turn start re-announced with another actor and tenant, every
  confirmation preceded by one for the same ids in another turn); ``restart-reuse`` (the
  trace ends with a restart and a new call of the first call's turn, response and tool,
  so that the turn's bytes are spread over the restart); ``reuse`` (the trace ends with a
  new turn of the first call's tenant and conversation whose call reuses that call's
  tool, response, item and call id); ``continue`` (after the path, every opened call's
  stream goes on: its pieces not yet sent, a terminal event, a confirmation, whatever
  stopped it: an implementation that did not honour a stop then runs the call).

What is enumerated and what is sampled: the exhaustive enumeration enumerates event
orders and draws the data axes (identities, tools, values, limits) per trace from a hash
of its own label; the random walks draw a variant from their seeded random source; the
coverage suite's paths are concretised once plainly and once under the ``n``-th variant of
a deterministic round robin (:meth:`Domain.nth`, every value of every axis within the
first few traces) restricted to variants that keep the path's verdicts (no cap placed
over a size). Expected verdicts are never set here: the oracle judges every trace.

:func:`features` reads back, from a trace itself, which part of the domain it holds; the
report counts them per generator.
"""

from __future__ import annotations

import functools
import json
import random
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from callsafe.model.system import utf8_len
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Event,
    Fragment,
    Limits,
    QuarantineResponse,
    Restart,
    StopTenant,
    StoreFault,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = [
    "AXES",
    "PLAIN",
    "PLAIN_LIMITS",
    "SCHEMA",
    "Domain",
    "Variant",
    "document",
    "features",
    "invalid_document",
    "place_limits",
    "reuse_epilogue",
    "split_pieces",
    "tool_names",
    "tool_specs",
]

AXES: Final[dict[str, tuple[str, ...]]] = {
    "identities": ("plain", "shared-ids", "agent-loop", "tenants"),
    "tools": ("one", "mixed"),
    "values": ("plain", "repeated", "utf8", "escapes"),
    "order": ("in-order", "out-of-order"),
    "limits": ("roomy", "call-under", "call-at", "call-over", "turn-under", "turn-at", "turn-over"),
    "events": ("once", "repeated", "rebound", "restart-reuse", "reuse", "continue"),
}
# Values that can change a path's verdicts (the oracle still judges them): left out where
# a generator's traces must keep their path's verdicts (the coverage suite).
_UNFAITHFUL: Final = frozenset({("limits", "call-over"), ("limits", "turn-over")})

SCHEMA: Final = {
    "type": "object",
    "required": ["v"],
    "properties": {"v": {"type": "integer"}, "memo": {"type": "string"}},
}
PLAIN_SCHEMA: Final = {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}}
PLAIN_LIMITS: Final = Limits(call_bytes=64, turn_bytes=4096)
BUSINESS_MAX: Final = 999_999  # ``v`` above it fails the business rule
OTHER_TENANT: Final = "globex"


@dataclass(frozen=True)
class Variant:
    """One value on each axis of :data:`AXES`."""

    identities: str = "plain"
    tools: str = "one"
    values: str = "plain"
    order: str = "in-order"
    limits: str = "roomy"
    events: str = "once"

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) not in AXES[f.name]:
                raise ValueError(f"{f.name}={getattr(self, f.name)!r}; known: {AXES[f.name]}")

    @property
    def plain(self) -> bool:
        return self == PLAIN

    def labels(self) -> tuple[str, ...]:
        return tuple(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    @functools.cached_property
    def _description(self) -> str:
        return " ".join(self.labels())

    def describe(self) -> str:
        return self._description


PLAIN: Final = Variant()


@dataclass(frozen=True)
class Domain:
    """The values of each axis a target can take (from its capabilities). ``rich=False``
    is the single plain variant: the domain of the generators before it existed (kept for
    the throughput benchmark's side-by-side figure and for ``--domain plain``)."""

    choices: tuple[tuple[str, tuple[str, ...]], ...] = tuple(AXES.items())

    @classmethod
    def for_capabilities(cls, capabilities: frozenset[str], rich: bool = True) -> Domain:
        if not rich:
            return cls(tuple((axis, (values[0],)) for axis, values in AXES.items()))
        out: dict[str, tuple[str, ...]] = {}
        for axis, values in AXES.items():
            keep = list(values)
            if "turn_binding" not in capabilities:
                keep = [v for v in keep if v not in ("tenants", "rebound")]
            if axis == "tools" and "business_validation" not in capabilities:
                keep = ["one"]
            if axis == "events" and "restart" not in capabilities:
                keep = [v for v in keep if v != "restart-reuse"]
            if axis == "events" and "cancellation" not in capabilities:  # a new turn supersedes
                keep = [v for v in keep if v != "reuse"]
            out[axis] = tuple(keep)
        return cls(tuple(out.items()))

    @property
    def rich(self) -> bool:
        return any(len(values) > 1 for _, values in self.choices)

    def sample(self, rng: random.Random) -> Variant:
        """A variant drawn from ``rng`` (one draw per axis, always the same number)."""
        return Variant(**{axis: values[rng.randrange(len(values))] for axis, values in self.choices})

    def nth(self, n: int, faithful: bool = False) -> Variant:
        """The ``n``-th variant of a round robin: axis ``k`` takes value ``(n + k) mod``
        its count, so every value of every axis appears within the first few ``n``.
        ``faithful`` leaves out values that can change a path's verdicts."""
        chosen: dict[str, str] = {}
        for k, (axis, values) in enumerate(self.choices):
            pool = [v for v in values if not (faithful and (axis, v) in _UNFAITHFUL)] or [values[0]]
            chosen[axis] = pool[(n + k) % len(pool)]
        return Variant(**chosen)

    def hashed(self, label: str) -> Variant:
        """The variant of a trace known by its label (the exhaustive enumeration's): each
        axis's value read from its own bits of the label's CRC-32, the same in every
        process (a random source per trace cost more than the trace's own events)."""
        h = zlib.crc32(label.encode())
        picks: list[int] = []
        for _, values in self.choices:
            picks.append(h % len(values))
            h //= len(values)
        return self._pick(tuple(picks))

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (domains are few, frozen and small)
    def _pick(self, picks: tuple[int, ...]) -> Variant:
        return Variant(**{axis: values[k] for (axis, values), k in zip(self.choices, picks, strict=True)})

    def to_json(self) -> dict[str, list[str]]:
        return {axis: list(values) for axis, values in self.choices}


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


def tool_names(variant: Variant, confirmation: bool, count: int) -> list[str]:
    """The tool of each of ``count`` calls. ``confirmation``: the tools need it."""
    if variant.plain:
        return ["op_confirm" if confirmation else "op"] * count
    if variant.tools == "one":
        pool = ["wire"] if confirmation else ["op"]
    else:
        pool = ["wire", "refund"] if confirmation else ["op", "pay"]
    return [pool[i % len(pool)] for i in range(count)]


def tool_specs(names: Iterable[str], actors: tuple[str, ...] | None = None, plain: bool = False) -> dict[str, ToolSpec]:
    """The catalog of the named tools (``op``, ``pay``: business rule, ``wire``:
    confirmation, ``refund``: both; ``op_confirm``: the plain domain's confirmed tool)."""
    return dict(_tool_specs(tuple(dict.fromkeys(names)), actors, plain))


@functools.lru_cache(maxsize=256)
def _tool_specs(names: tuple[str, ...], actors: tuple[str, ...] | None, plain: bool) -> dict[str, ToolSpec]:
    schema = PLAIN_SCHEMA if plain else SCHEMA
    rule = {"max": {"v": BUSINESS_MAX}}
    specs = {
        "op": ToolSpec(schema=schema, actors=actors),
        "op_confirm": ToolSpec(schema=schema, confirm=True, actors=actors),
        "pay": ToolSpec(schema=schema, business=rule, actors=actors),
        "wire": ToolSpec(schema=schema, confirm=True, actors=actors),
        "refund": ToolSpec(schema=schema, confirm=True, business=rule, actors=actors),
    }
    return {name: specs[name] for name in names}


# --------------------------------------------------------------------------------------
# Values and their fragmentation
# --------------------------------------------------------------------------------------


def _compact(value: object, ascii_only: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)


def _value(i: int, variant: Variant) -> dict[str, Any]:
    if variant.values == "repeated":
        digit = str(i % 9 + 1)
        return {"v": int(digit * 6), "memo": "ab" * 3 + " ab"}
    if variant.values == "utf8":
        return {"v": 200 + i, "memo": "é€🦄" + "ü" * (i + 1)}
    if variant.values == "escapes":
        return {"v": 300 + i, "memo": 'q"\\\n\t/é🦄' + str(i)}
    if variant.order == "out-of-order":  # digits that differ, so a reordering shows
        return {"v": 123456 + i * 111111}
    return {"v": 100 * (i + 1)}


@functools.lru_cache(maxsize=4096)
def document(i: int, variant: Variant) -> str:
    """Call ``i``'s well-formed document under ``variant``."""
    value = _value(i, variant)
    return _compact(value, ascii_only=variant.values == "escapes")


def invalid_document(i: int, variant: Variant, business: bool) -> str:
    """A document that parses and fails validation: over the business rule when the tool
    has one, else against the schema (``v`` a string)."""
    value = _value(i, variant)
    if business:
        value["v"] = BUSINESS_MAX + 1
    else:
        value["v"] = str(value["v"])
    return _compact(value, ascii_only=variant.values == "escapes")


def _even(text: str, pieces: int) -> list[str]:
    cuts = [round(k * len(text) / pieces) for k in range(pieces + 1)]
    return [text[cuts[k] : cuts[k + 1]] for k in range(pieces)]


_HEAD: Final = re.compile(r'^\{"v":(\d+)')


def split_pieces(text: str, pieces: int, variant: Variant) -> list[str]:
    """``text`` in ``pieces`` parts. With four or more, under a rich variant, the middle
    parts are the digits of the leading number (so they may be sent in any order and the
    text still parses; a repeated digit gives equal pieces at different positions)."""
    return list(_split_pieces(text, pieces, variant.plain))


@functools.lru_cache(maxsize=4096)
def _split_pieces(text: str, pieces: int, plain: bool) -> tuple[str, ...]:
    m = _HEAD.match(text)
    if plain or pieces < 4 or m is None or len(m.group(1)) < pieces - 2:
        return tuple(_even(text, pieces))
    head, digits, tail = '{"v":', m.group(1), text[m.end() :]
    return (head, *_even(digits, pieces - 2), tail)


def send_order(pieces: int, variant: Variant) -> list[int]:
    """The positions in the order a call's fragments send them."""
    order = list(range(pieces))
    if variant.order == "out-of-order" and pieces >= 2:
        if pieces == 2:
            return [1, 0]
        if pieces == 3:
            return [0, 2, 1]
        order[1:-1] = reversed(order[1:-1])
    return order


# --------------------------------------------------------------------------------------
# Limits placed by the trace's own sizes
# --------------------------------------------------------------------------------------


def place_limits(variant: Variant, call_sizes: Sequence[int], turn_sizes: Sequence[int]) -> Limits:
    """The caps of a trace whose calls' documents have ``call_sizes`` bytes and whose
    turns carry ``turn_sizes`` bytes: the largest call (turn) just under, at or just over
    its cap, the other cap roomy."""
    if variant.plain:
        return PLAIN_LIMITS
    biggest_call = max(call_sizes, default=1)
    roomy = Limits(call_bytes=max(64, 2 * biggest_call), turn_bytes=max(4096, 4 * sum(turn_sizes)))
    kind, _, where = variant.limits.partition("-")
    delta = {"under": 1, "at": 0, "over": -1}.get(where)
    if delta is None:
        return roomy
    if kind == "call":
        return Limits(call_bytes=max(1, biggest_call + delta), turn_bytes=roomy.turn_bytes)
    return Limits(call_bytes=roomy.call_bytes, turn_bytes=max(1, max(turn_sizes, default=1) + delta))


# --------------------------------------------------------------------------------------
# Event-level dressing: repeats, re-announcements, the restart epilogue
# --------------------------------------------------------------------------------------

_REPEATABLE: Final = (TurnStarted, CancelTurn, Confirm, QuarantineResponse, DisableTool, StopTenant, ToolChanged)
_REPEATABLE_TYPES: Final = frozenset(_REPEATABLE)


@dataclass
class Dresser:
    """Expands each event of a trace under ``variant.events`` as it is built. The builder
    appends through :meth:`emit` so that indices it keeps for replays stay right."""

    variant: Variant
    events: list[Event] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)

    def emit(self, event: Event) -> int:
        """Append ``event`` (and what the variant adds around it); the index of ``event``."""
        mode = self.variant.events
        if mode == "rebound" and isinstance(event, Confirm):
            other = [t for t in self.turns if t != event.turn]
            if other:
                self.events.append(Confirm(other[-1], event.response, event.item, event.call, True))
        index = len(self.events)
        self.events.append(event)
        if isinstance(event, TurnStarted) and event.turn not in self.turns:
            self.turns.append(event.turn)
            if mode == "rebound":
                self.events.append(TurnStarted(event.turn, "u2", OTHER_TENANT, "other"))
        if mode == "repeated" and isinstance(event, _REPEATABLE):
            self.events.append(event)
        return index


def reuse_epilogue(
    events: Sequence[Event], tools: Mapping[str, ToolSpec], pieces: Sequence[str], restart: bool
) -> list[Event]:
    """After a restart (``restart``): a new call in the first call's turn and response,
    of its tool (its bytes count against the same turn's cap as before the restart).
    Without: a new turn of the first call's tenant and conversation whose call reuses that
    call's tool, response, item and call id. Either call carries a well-formed document
    (``pieces``) and is confirmed when its tool needs it."""
    first = next((e for e in events if isinstance(e, CallOpened)), None)
    start = next((e for e in events if isinstance(e, TurnStarted) and first and e.turn == first.turn), None)
    if first is None or start is None:
        return []
    out: list[Event] = []
    if restart:
        out.append(Restart())
        turn, item, call = first.turn, f"{first.item}-again", f"{first.call}-again"
    else:
        turn, item, call = f"{start.turn}-after", first.item, first.call
        out.append(TurnStarted(turn, start.actor, start.tenant, start.conversation))
    out.append(CallOpened(turn, first.response, item, call, first.tool))
    out += [Fragment(turn, first.response, item, call, k, p) for k, p in enumerate(pieces)]
    out.append(CallTerminal(turn, first.response, item, call, f"{turn}-{call}-end"))
    spec = tools.get(first.tool)
    if spec is not None and spec.confirm:
        out.append(Confirm(turn, first.response, item, call, True))
    return out


# --------------------------------------------------------------------------------------
# What a trace holds of the domain
# --------------------------------------------------------------------------------------

_REPEATED_DIGITS: Final = re.compile(r"(\d)\1")


def _width(text: str) -> set[int]:
    return {len(ch.encode("utf-8", "surrogatepass")) for ch in text if ord(ch) > 0x7F}


def features(trace: Trace) -> frozenset[str]:
    """The parts of the concrete domain ``trace`` holds, read from its events and catalog
    (so they mean the same for every generator, the catalog's hand-written traces too).
    Computed for every trace a certification runs, so written for speed: one pass, the
    event's type looked up once."""
    out: set[str] = set()
    tenants: set[str] = set()
    bindings: dict[str, tuple[str, str]] = {}
    turn_responses: dict[str, set[str]] = {}
    ids_by_turn: dict[tuple[str, str, str], set[str]] = {}
    positions: dict[tuple[str, str, str, str], int] = {}
    bytes_by_call: dict[tuple[str, str, str, str], int] = {}
    bytes_by_turn: dict[str, int] = {}
    last: Event | None = None
    restarted = False
    before_restart: set[tuple[str, str, str]] = set()
    turns_before_restart: set[str] = set()
    opened_in: dict[tuple[str, str, str], set[str]] = {}
    tools = trace.tools
    for event in trace.events:
        kind = type(event)
        if kind is Fragment:
            assert isinstance(event, Fragment)
            ident = (event.turn, event.response, event.item, event.call)
            seen = positions.get(ident, -1)
            if event.position < seen:
                out.add("order: out of position order")
            elif event.position > seen:
                positions[ident] = event.position
            text = event.text
            size = utf8_len(text)
            bytes_by_call[ident] = bytes_by_call.get(ident, 0) + size
            bytes_by_turn[event.turn] = bytes_by_turn.get(event.turn, 0) + size
            if not text.isascii():
                out.update(f"values: {w}-byte UTF-8" for w in _width(text))
            if "\\" in text:
                out.add("values: escapes")
            if _REPEATED_DIGITS.search(text):
                out.add("values: repeated digits")
            ids = ident[1:]
            ids_by_turn.setdefault(ids, set()).add(event.turn)
            turn_responses.setdefault(event.turn, set()).add(event.response)
            continue
        if kind is CallOpened:
            assert isinstance(event, CallOpened)
            ids = (event.response, event.item, event.call)
            ids_by_turn.setdefault(ids, set()).add(event.turn)
            turn_responses.setdefault(event.turn, set()).add(event.response)
            spec = tools.get(event.tool)
            if spec is not None:
                if spec.confirm and spec.business:
                    out.add("tools: confirmation and business rule")
                elif spec.confirm:
                    out.add("tools: confirmation")
                elif spec.business:
                    out.add("tools: business rule")
            if restarted:
                if ids in before_restart:
                    out.add("events: ids reused after a restart")
                if event.turn in turns_before_restart:
                    out.add("events: a turn's calls on both sides of a restart")
            else:
                before_restart.add(ids)
                turns_before_restart.add(event.turn)
            opened_in.setdefault(ids, set()).add(event.turn)
        elif kind is TurnStarted:
            assert isinstance(event, TurnStarted)
            bound = bindings.setdefault(event.turn, (event.actor, event.tenant))
            if bound != (event.actor, event.tenant):
                out.add("events: turn re-announced with another binding")
            tenants.add(bound[1])
        elif kind is Restart:
            restarted = True
        elif kind is StoreFault:
            assert isinstance(event, StoreFault)
            out.add("events: a lasting store fault" if event.lasting else "events: a transient store fault")
        if kind in _REPEATABLE_TYPES:
            if last == event:
                out.add(f"events: {event.kind} repeated")
            last = event
    if any(len(t) > 1 for t in opened_in.values()):
        out.add("events: ids reused by a later call")
    if len(tenants) > 1:
        out.add("identities: several tenants")
    if any(len(turns) > 1 for turns in ids_by_turn.values()):
        out.add("identities: ids shared across turns")
    if any(len(r) > 1 for r in turn_responses.values()):
        out.add("identities: several responses per turn")
    if len(tools) > 1:
        out.add("tools: several")
    limits = trace.limits
    for name, sizes, cap in (
        ("call", bytes_by_call.values(), limits.call_bytes),
        ("turn", bytes_by_turn.values(), limits.turn_bytes),
    ):
        for size in sizes:
            if size == cap:
                out.add(f"limits: {name} at its cap")
            elif size == cap - 1:
                out.add(f"limits: {name} just under its cap")
            elif size == cap + 1:
                out.add(f"limits: {name} just over its cap")
    return frozenset(out)
