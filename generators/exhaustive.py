"""Every trace up to a bound, with call identities treated as symmetric.

Why: the catalog holds the orders people thought of; this holds all of them, up to a
bound. A trace is a turn start followed by up to ``length`` *template* events. A template
is a concrete event with a hole for a call id (``open``, ``fragment k``, ``terminal``,
``confirm``...) or a global event (a new turn, a cancel, an operator stop, a restart, a
replay of everything so far). The call ids ``c0, c1, ...`` are interchangeable: renaming
them consistently gives an equivalent trace (each id carries its own document, so a
renaming maps documents too). The enumeration therefore keeps only the *canonical* member
of each class, the one whose ids appear in first-use order ``c0, c1, ...``; every other
member is counted as skipped as equivalent. Because a prefix that is not canonical has no
canonical extension, whole subtrees are skipped at once and counted arithmetically.

The stream is lazy (a depth-first walk; nothing is materialised) and deterministic (the
templates are walked in a fixed order). :class:`ExhaustiveStats` says how many traces were
produced and how many skipped so far. The enumeration can be cut into parts by prefix
(:func:`exhaustive_parts`, :func:`exhaustive_subtree`), each enumerated on its own, so that
workers share it without one enumerating what another runs.

Data, fixed per call id so that fragments of one call never fit another: call ``c<i>``
carries ``{"v":<100*(i+1)>}`` split into ``fragments`` pieces (``fragment k`` sends piece
``k`` at position ``k``, so a repeated template is a duplicate delta and a reordering is an
out-of-order delivery).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from callsafe.generators.domain import (
    OTHER_TENANT,
    PLAIN,
    Domain,
    Variant,
    place_limits,
    split_pieces,
    tool_specs,
)
from callsafe.generators.domain import document as rich_document
from callsafe.model.system import utf8_len
from callsafe.model.vocabulary import (
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
    Replay,
    ResponseTerminal,
    Restart,
    StopTenant,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = [
    "CONTROLS",
    "Bound",
    "ExhaustivePart",
    "ExhaustiveStats",
    "build_trace",
    "canonical",
    "exhaustive_count",
    "exhaustive_parts",
    "exhaustive_subtree",
    "exhaustive_traces",
    "piece",
    "split_document",
]

# Controls that add templates. ``during_validation`` adds a tenant stop delivered while the
# preceding call is being validated.
CONTROLS: Final = (
    "cancel",
    "disconnect",
    "response_end",
    "quarantine",
    "disable_tool",
    "stop_tenant",
    "catalog_change",
    "restart",
    "confirmation",
    "replay",
    "conflict",
    "limits",
    "malformed",
    "during_validation",
)

_GLOBAL_BY_CONTROL: Final = {
    "cancel": "cancel",
    "disconnect": "disconnect",
    "response_end": "response_end",
    "quarantine": "quarantine",
    "disable_tool": "disable_tool",
    "stop_tenant": "stop_tenant",
    "catalog_change": "catalog_change",
    "replay": "replay",
    "during_validation": "stop_during_validation",
}
_CALL_BY_CONTROL: Final = {
    "confirmation": ("open_confirm", "confirm", "deny"),
    "conflict": ("fragment_conflict",),
    "limits": ("fragment_over_limit",),
    "malformed": ("terminal_length",),
}

SCHEMA: Final = {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}}
LIMITS: Final = Limits(call_bytes=64, turn_bytes=4096)


@dataclass(frozen=True)
class Bound:
    """How far to enumerate: call ids, turns (one conversation), pieces per document, the
    enabled controls, restarts, and ``length`` template events after the first turn start."""

    calls: int = 2
    turns: int = 1
    fragments: int = 1
    controls: frozenset[str] = field(default_factory=frozenset)
    restarts: int = 0
    length: int = 3
    # The concrete domain each trace draws its data, identities and caps from (a variant
    # per trace, drawn from a hash of its label); the plain domain by default.
    domain: Domain = field(default_factory=lambda: Domain.for_capabilities(frozenset(), rich=False))

    def __post_init__(self) -> None:
        unknown = set(self.controls) - set(CONTROLS)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; known: {list(CONTROLS)}")
        if not (1 <= self.calls <= 4 and 1 <= self.turns <= 4 and 1 <= self.fragments <= 4 and self.length >= 0):
            raise ValueError("bounds: 1-4 calls, 1-4 turns, 1-4 fragments, length >= 0")
        if self.restarts < 0:
            raise ValueError("restarts must be >= 0")

    def call_templates(self) -> tuple[str, ...]:
        base = ["open", *(f"fragment{k}" for k in range(self.fragments)), "terminal"]
        for control, names in _CALL_BY_CONTROL.items():
            if control in self.controls:
                base.extend(names)
        return tuple(base)

    def global_templates(self) -> tuple[str, ...]:
        return tuple(name for control, name in _GLOBAL_BY_CONTROL.items() if control in self.controls)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "calls": self.calls,
            "turns": self.turns,
            "fragments": self.fragments,
            "controls": sorted(self.controls),
            "restarts": self.restarts,
            "length": self.length,
        }
        if self.domain.rich:
            out["domain"] = self.domain.to_json()
        return out


@dataclass
class ExhaustiveStats:
    """Counts so far: traces produced (canonical) and skipped as equivalent."""

    produced: int = 0
    skipped: int = 0


def document(call_index: int) -> str:
    return json.dumps({"v": 100 * (call_index + 1)}, separators=(",", ":"))


def split_document(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` contiguous parts of (nearly) equal length."""
    cuts = [round(k * len(text) / pieces) for k in range(pieces + 1)]
    return [text[cuts[k] : cuts[k + 1]] for k in range(pieces)]


def piece(call_index: int, k: int, pieces: int) -> str:
    return split_document(document(call_index), pieces)[k]


Instance = tuple[str, int]  # (template, call index or -1)


@dataclass
class _Concretiser:
    """Turns a sequence of template instances into events (the call ids bind to the turn
    current at their first mention, as in :class:`~callsafe.model.builder.TraceBuilder`)."""

    bound: Bound
    variant: Variant = PLAIN
    events: list[Event] = field(default_factory=list)
    turn_no: int = 1
    binding: dict[int, str] = field(default_factory=dict)
    limits: Limits = LIMITS

    def __post_init__(self) -> None:
        if not self.variant.plain:
            sizes = [utf8_len(rich_document(i, self.variant)) for i in range(self.bound.calls)]
            self.limits = place_limits(self.variant, sizes, [sum(sizes)])

    def turn(self) -> str:
        return f"t{self.turn_no}"

    def tenant(self, turn_no: int | None = None) -> str:
        """Under the ``tenants`` identities, even turns belong to another tenant (in a
        conversation of the same name, with the same response, item and call ids)."""
        n = self.turn_no if turn_no is None else turn_no
        return OTHER_TENANT if self.variant.identities == "tenants" and n % 2 == 0 else "acme"

    def call(self, i: int) -> tuple[str, str, str, str]:
        turn = self.binding.setdefault(i, self.turn())
        ids = self.variant.identities
        if ids in ("shared-ids", "tenants"):
            return turn, "resp", str(i), f"call_{i}"
        if ids == "agent-loop":
            return turn, f"r-{turn}-{i}", "0", "call_0"
        return turn, f"r-{turn}", f"i-c{i}", f"c{i}"

    def responses(self) -> list[str]:
        """The current turn's responses (an agent loop has one per call)."""
        turn, ids = self.turn(), self.variant.identities
        if ids in ("shared-ids", "tenants"):
            return ["resp"]
        if ids == "agent-loop":
            return [f"r-{turn}-{i}" for i, t in sorted(self.binding.items()) if t == turn] or [f"r-{turn}-0"]
        return [f"r-{turn}"]

    def tool(self, name: str, i: int) -> str:
        if self.variant.plain or self.variant.tools == "one":
            return "op" if name == "open" else "op_confirm"
        if name == "open":
            return "pay" if i % 2 else "op"
        return "refund" if i % 2 else "wire"

    def piece(self, i: int, k: int) -> str:
        if self.variant.plain:
            return piece(i, k, self.bound.fragments)
        return split_pieces(rich_document(i, self.variant), self.bound.fragments, self.variant)[k]

    def add(self, inst: Instance) -> None:
        for event in self.events_of(inst):
            self.events.append(event)

    def events_of(self, inst: Instance) -> list[Event]:
        name, i = inst
        b = self.bound
        event: Event
        if name == "turn":
            self.turn_no += 1
            event = TurnStarted(self.turn(), "u1", self.tenant())
        elif name == "cancel":
            event = CancelTurn(self.turn())
        elif name == "disconnect":
            return [Disconnect(self.turn(), r) for r in self._responses(lambda: [f"r-{self.turn()}"])]
        elif name == "response_end":
            return [ResponseTerminal(self.turn(), r) for r in self._responses(lambda: [f"r-{self.turn()}"])]
        elif name == "quarantine":
            return [QuarantineResponse(r) for r in self._responses(lambda: [f"r-{self.turn()}"])]
        elif name == "disable_tool":
            return [DisableTool(t) for t in self.tool_names()]
        elif name == "stop_tenant":
            event = StopTenant("acme")
        elif name == "stop_during_validation":
            event = StopTenant("acme", during_validation=True)
        elif name == "catalog_change":
            return [ToolChanged(t, "rename", f"{t}_v2") for t in self.tool_names()]
        elif name == "restart":
            event = Restart()
        elif name == "replay":
            event = Replay(0, len(self.events))
        else:
            turn, response, item, call = self.call(i)
            if name in ("open", "open_confirm"):
                event = CallOpened(turn, response, item, call, self.tool(name, i))
            elif name.startswith("fragment") and name[len("fragment") :].isdigit():
                k = int(name[len("fragment") :])
                event = Fragment(turn, response, item, call, k, self.piece(i, k))
            elif name == "fragment_conflict":
                event = Fragment(turn, response, item, call, 0, "[")
            elif name == "fragment_over_limit":
                event = Fragment(turn, response, item, call, b.fragments, " " * (self.limits.call_bytes + 1))
            elif name == "terminal":
                event = CallTerminal(turn, response, item, call, f"end-{turn}-{call}")
            elif name == "terminal_length":
                event = CallTerminal(turn, response, item, call, f"len-{turn}-{call}", "length")
            elif name in ("confirm", "deny"):
                event = Confirm(turn, response, item, call, name == "confirm")
            else:  # pragma: no cover - the templates are the names above
                raise ValueError(f"unknown template {name!r}")
        return [event]

    def _responses(self, plain: Callable[[], list[str]]) -> list[str]:
        return plain() if self.variant.plain else self.responses()

    def tool_names(self) -> list[str]:
        return list(_tools(self.bound, self.variant))


def _tools(bound: Bound, variant: Variant = PLAIN) -> dict[str, ToolSpec]:
    if variant.plain:
        tools = {"op": ToolSpec(schema=SCHEMA)}
        if "confirmation" in bound.controls:
            tools["op_confirm"] = ToolSpec(schema=SCHEMA, confirm=True)
        return tools
    names = ["op", "pay"] if variant.tools == "mixed" else ["op"]
    if "confirmation" in bound.controls:
        names += ["wire", "refund"] if variant.tools == "mixed" else ["op_confirm"]
    return tool_specs(names)


def _label(inst: Instance) -> str:
    name, i = inst
    return name if i < 0 else f"{name}(c{i})"


@functools.lru_cache(maxsize=1024)
def _data_axes(variant: Variant) -> Variant:
    """``variant`` on the data axes only: the enumeration already holds every order and
    repetition of events."""
    return dataclasses.replace(variant, order="in-order", events="once")


@functools.lru_cache(maxsize=64)
def _bound_label(bound: Bound) -> str:
    return str(bound.to_json())


def build_trace(bound: Bound, instances: list[Instance]) -> Trace:
    """The trace of a template sequence (after the first turn start)."""
    name = "exhaustive: " + " ".join(_label(x) for x in instances)
    variant = _data_axes(bound.domain.hashed(name)) if bound.domain.rich else PLAIN
    c = _Concretiser(bound, variant)
    c.events.append(TurnStarted("t1", "u1", "acme"))
    for inst in instances:
        c.add(inst)
    where = "" if variant.plain else f", domain {variant.describe()}"
    return Trace(
        events=tuple(c.events),
        tools=_tools(bound, variant),
        limits=c.limits,
        name=name,
        source=f"exhaustive enumeration, bound {_bound_label(bound)}{where}",
    )


@functools.lru_cache(maxsize=1024)
def _alphabet(bound: Bound, turns_used: int, restarts_used: int) -> tuple[Instance, ...]:
    """The template instances that may come next, in the enumeration's fixed order."""
    out: list[Instance] = []
    if turns_used < bound.turns:
        out.append(("turn", -1))
    out.extend((name, -1) for name in bound.global_templates())
    if "restart" in bound.controls and restarts_used < bound.restarts:
        out.append(("restart", -1))
    out.extend((name, i) for i in range(bound.calls) for name in bound.call_templates())
    return tuple(out)


def _after(inst: Instance, turns_used: int, restarts_used: int, ids_used: int) -> tuple[int, int, int]:
    name, i = inst
    return turns_used + (name == "turn"), restarts_used + (name == "restart"), max(ids_used, i + 1)


@functools.lru_cache(maxsize=4096)
def _subtree(bound: Bound, remaining: int, turns_used: int, restarts_used: int) -> int:
    """Sequences of 0..remaining more instances after a prefix (the prefix included)."""
    if remaining == 0:
        return 1
    total = 1
    for name, _ in _alphabet(bound, turns_used, restarts_used):
        total += _subtree(bound, remaining - 1, turns_used + (name == "turn"), restarts_used + (name == "restart"))
    return total


@functools.lru_cache(maxsize=4096)
def _canonical_below(bound: Bound, remaining: int, turns_used: int, restarts_used: int, ids_used: int) -> int:
    """Canonical sequences of 1..remaining more instances after a prefix (the prefix not included)."""
    if remaining == 0:
        return 0
    total = 0
    for inst in _alphabet(bound, turns_used, restarts_used):
        if inst[1] <= ids_used:
            total += 1 + _canonical_below(bound, remaining - 1, *_after(inst, turns_used, restarts_used, ids_used))
    return total


def exhaustive_count(bound: Bound) -> int:
    """How many traces :func:`exhaustive_traces` produces (counted, not enumerated)."""
    return _canonical_below(bound, bound.length, 1, 0, 0)


def _prefix_state(bound: Bound, prefix: tuple[Instance, ...]) -> tuple[int, int, int]:
    if len(prefix) > bound.length or canonical(list(prefix)) != list(prefix):
        raise ValueError(f"not a canonical prefix within the bound: {[_label(x) for x in prefix]}")
    state = (1, 0, 0)
    for inst in prefix:
        if inst not in _alphabet(bound, state[0], state[1]):
            raise ValueError(f"{_label(inst)} cannot follow {[_label(x) for x in prefix]} within the bound")
        state = _after(inst, *state)
    return state


def exhaustive_traces(bound: Bound, stats: ExhaustiveStats | None = None) -> Iterator[Trace]:
    """Every canonical trace of 1..``bound.length`` template events, lazily, depth first.

    ``stats`` (updated as the stream is consumed) counts the traces produced and those
    skipped because a renaming of call ids makes them equal to a produced one."""
    return exhaustive_subtree(bound, (), stats)


def exhaustive_subtree(
    bound: Bound, prefix: tuple[Instance, ...] = (), stats: ExhaustiveStats | None = None, descend: bool = True
) -> Iterator[Trace]:
    """The trace of the canonical ``prefix`` (none for the empty one), then, with
    ``descend``, every canonical extension of it, in the order of :func:`exhaustive_traces`.

    Without ``descend`` only the prefix's own trace comes out, and ``stats`` counts the
    extensions skipped at the very next position (the rest of the subtree is some other
    part's: :func:`exhaustive_parts`)."""
    stats = stats if stats is not None else ExhaustiveStats()
    path = list(prefix)

    def walk(turns_used: int, restarts_used: int, ids_used: int, deeper: bool) -> Iterator[Trace]:
        if len(path) == bound.length:
            return
        for inst in _alphabet(bound, turns_used, restarts_used):
            turns_next, restarts_next, ids_next = _after(inst, turns_used, restarts_used, ids_used)
            if inst[1] > ids_used:  # an id used before the ids below it: not canonical, nor any extension
                stats.skipped += _subtree(bound, bound.length - len(path) - 1, turns_next, restarts_next)
                continue
            if not deeper:
                continue
            path.append(inst)
            stats.produced += 1
            yield build_trace(bound, path)
            yield from walk(turns_next, restarts_next, ids_next, True)
            path.pop()

    def run() -> Iterator[Trace]:
        state = _prefix_state(bound, prefix)
        if path:
            stats.produced += 1
            yield build_trace(bound, path)
        yield from walk(*state, descend)

    return run()


@dataclass(frozen=True)
class ExhaustivePart:
    """A run of consecutive traces of the enumeration: the trace of ``prefix`` and, with
    ``descend``, all of its canonical extensions; ``traces`` of them."""

    prefix: tuple[Instance, ...]
    descend: bool
    traces: int

    def describe(self) -> str:
        label = " ".join(_label(x) for x in self.prefix) or "(start)"
        return label + (" ..." if self.descend else "")


def exhaustive_parts(bound: Bound, size: int) -> Iterator[ExhaustivePart]:
    """The enumeration cut into parts of at most ``size`` traces, in enumeration order, so
    that the parts' traces (:func:`exhaustive_subtree`), one part after another, are exactly
    :func:`exhaustive_traces`, and their skipped counts add up to its count.

    Why by prefix: a worker given a prefix enumerates its subtree without enumerating what
    comes before it. A prefix whose subtree holds at most ``size`` traces is one part; a
    larger one is split into a part of its own trace alone and the parts of its extensions.
    Sizes are counted, not enumerated, so planning costs nothing next to the run."""
    if size < 1:
        raise ValueError("a part holds at least one trace")

    def split(prefix: tuple[Instance, ...], state: tuple[int, int, int]) -> Iterator[ExhaustivePart]:
        own = 1 if prefix else 0
        below = _canonical_below(bound, bound.length - len(prefix), *state)
        if own + below <= size:
            yield ExhaustivePart(prefix, True, own + below)
            return
        yield ExhaustivePart(prefix, False, own)
        if len(prefix) == bound.length:
            return
        for inst in _alphabet(bound, state[0], state[1]):
            if inst[1] <= state[2]:
                yield from split((*prefix, inst), _after(inst, *state))

    return split((), (1, 0, 0))


def canonical(instances: list[Instance]) -> list[Instance]:
    """Rename call ids in order of first appearance (the canonical member of the class)."""
    names: dict[int, int] = {}
    out: list[Instance] = []
    for name, i in instances:
        if i >= 0:
            i = names.setdefault(i, len(names))
        out.append((name, i))
    return out
