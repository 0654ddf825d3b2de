"""The system as a finite transition system, for exploration and proof.

In the style of Stateright: a model is its initial states, the actions possible in a
state, and the next state for an action (:class:`SystemModel`). The state graph
(:mod:`callsafe.formal.graph`), the exhaustive trace generator, the z3 encoding
(:mod:`callsafe.formal.z3_encoding`) and the TLA+ export (:mod:`callsafe.formal.tla`) are
built on it; none of them re-states a rule.

The abstraction keeps what decides safety and drops what does not: a call keeps its
lifecycle state, how many of its fragments arrived (not their bytes), whether its terminal
event was seen, whether it was parsed, validated, confirmed, executed; a turn keeps
whether it is live. Data values become nondeterministic choices (a complete buffer may
still be malformed, a parsed call may fail validation). Internal steps (parse, validate,
dispatch) interleave freely with inputs, which covers every "during validation" window.

How the rules are written, so that one text serves every reader:

* :data:`ACTION_KINDS` is the action catalogue as data: each action's scope (a turn, a
  call, an internal step, the whole system), the control that enables it, and the
  lifecycle event it sends to which calls (``reach``), or ``None`` where a guard of
  :mod:`callsafe.model.system` decides the event (open, dispatch).
* :func:`enabled`, :func:`successor`, :func:`canonical` and :data:`CALL_CHECKS` are
  written against :class:`callsafe.formal.ops.Ops`: they branch in Python only on what a
  configuration fixes, never on the state. :class:`SystemModel` evaluates them over
  values; the explorer's compiled rules (:mod:`callsafe.formal.compiled`), the z3 encoding
  and the TLA+ export evaluate the very same functions over terms.
* An internal step (parse, validate, dispatch) is enabled where the lifecycle table gives
  its event a transition from the call's state, so a mutant table that, say, lets a
  terminal candidate dispatch is explored without touching this file.

Every lifecycle step goes through the table (:meth:`Ops.outcome`) and the guards, so the
explored machine is the table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from callsafe.formal.ops import Concrete, Guards, Ops, Table, TableEntry, Val
from callsafe.model import lifecycle
from callsafe.model.lifecycle import NON_DISPATCHING, TERMINAL_STATES, CallEvent, State

E = CallEvent
S = State

__all__ = [
    "ACTION_KINDS",
    "BAD_DISPATCH",
    "CALL_CHECKS",
    "CONTROLS",
    "INVARIANT_IDS",
    "STRINGS",
    "TURN_STATUSES",
    "AbsCall",
    "AbsState",
    "Action",
    "ActionKind",
    "CallCheck",
    "Config",
    "SystemModel",
    "TableEntry",
    "all_actions",
    "call_key",
    "canonical",
    "enabled",
    "invariant_holds",
    "state_invariants",
    "successor",
    "symmetric",
]

CONTROLS: Final = (
    "cancel",  # the user cancels a turn
    "disconnect",  # a response's connection drops
    "response_end",  # a response ends without a call's terminal event
    "quarantine",  # operator quarantines a response
    "disable_tool",  # operator disables the tool
    "stop_tenant",  # operator stops the tenant
    "catalog_change",  # the tool is renamed/removed/changed mid-release
    "restart",  # the process restarts
    "confirmation",  # the tool needs confirmation (and users confirm or deny)
    "replay",  # repeated fragments and terminal events
    "conflict",  # a repeated position with different bytes
    "limits",  # a fragment breaks the byte cap
    "malformed",  # a complete buffer that does not parse, a terminal with a bad stop reason
    "permission",  # the actor may be refused at the permission boundary
)


@dataclass(frozen=True)
class Config:
    """The bounds of one exploration. Call ``c`` belongs to turn ``c * turns // calls``;
    all turns are in one conversation of one tenant, one response per turn, one tool."""

    calls: int = 2
    turns: int = 2
    fragments: int = 2
    controls: frozenset[str] = field(default_factory=lambda: frozenset(CONTROLS))
    restarts: int = 1

    def __post_init__(self) -> None:
        unknown = set(self.controls) - set(CONTROLS)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; known: {list(CONTROLS)}")
        if not (1 <= self.calls <= 4 and 1 <= self.turns <= 3 and 1 <= self.fragments <= 4):
            raise ValueError("bounds: 1-4 calls, 1-3 turns, 1-4 fragments per call")

    def turn_of(self, call: int) -> int:
        return call * self.turns // self.calls

    @functools.cached_property
    def calls_of_turn(self) -> tuple[tuple[int, ...], ...]:
        """The calls of each turn (call ``c`` belongs to turn :meth:`turn_of` ``(c)``)."""
        return tuple(tuple(i for i in range(self.calls) if self.turn_of(i) == t) for t in range(self.turns))

    def to_json(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "turns": self.turns,
            "fragments": self.fragments,
            "controls": sorted(self.controls),
            "restarts": self.restarts,
        }


class AbsCall(NamedTuple):
    state: State = S.ABSENT
    frags: int = 0  # distinct positions received while collecting
    terminal_seen: bool = False
    parsed: bool = False
    confirm_requested: bool = False
    confirmed: bool = False
    validations: int = 0  # capped at 2
    executions: int = 0  # capped at 2
    # history, for the state invariants
    was_stopped: bool = False  # ever entered cancelled or failed
    bad_dispatch: str = ""  # what was wrong at the moment of a dispatch


class AbsState(NamedTuple):
    calls: tuple[AbsCall, ...]
    turns: tuple[str, ...]  # unstarted | live | cancelled | superseded | stopped
    ended: tuple[bool, ...]  # per turn's response: ended or disconnected
    quarantined: tuple[bool, ...]  # per turn's response
    tool_disabled: bool = False
    tool_changed: bool = False
    restarts: int = 0


class Action(NamedTuple):
    """An input event or internal step; ``target`` is a call or turn index (or -1)."""

    name: str
    target: int = -1

    def __str__(self) -> str:
        return f"{self.name}({self.target})" if self.target >= 0 else self.name


TURN_STATUSES: Final = ("unstarted", "live", "cancelled", "superseded", "stopped")

# What can be wrong at the moment of a dispatch (history kept for the state invariants),
# and the invariant each breaks.
BAD_DISPATCH: Final[dict[str, str]] = {
    "dispatched after the call was stopped": "INV-CANCEL",
    "dispatched without terminal, parse and one validation": "INV-TERMINAL",
    "dispatched outside the current live turn": "INV-TURN",
    "dispatched without confirmation": "INV-CONFIRM",
}
_STOPPED, _UNFINISHED, _NOT_CURRENT, _UNCONFIRMED = BAD_DISPATCH
# Every string a state field holds (a turn's status, what was wrong at a dispatch), so that
# a state can be written as small integers (:func:`call_key`, the explorer's byte states).
STRINGS: Final[tuple[str, ...]] = ("", *BAD_DISPATCH, *TURN_STATUSES)


# --------------------------------------------------------------------------------------
# The action catalogue, as data
# --------------------------------------------------------------------------------------


class ActionKind(NamedTuple):
    """One kind of action. ``event`` is what the calls it reaches receive (``None``: a
    guard decides); ``reach`` says which calls: ``self`` (the target call), ``turn`` (the
    target turn's calls), ``older`` (calls of earlier turns), ``all``."""

    name: str
    scope: str  # turn | call | internal | global
    control: str | None  # the control that enables it (None: always on)
    event: CallEvent | None
    reach: str


ACTION_KINDS: Final[tuple[ActionKind, ...]] = (
    # inputs addressed to a turn (or its response)
    ActionKind("start_turn", "turn", None, E.SUPERSEDE, "older"),
    ActionKind("cancel", "turn", "cancel", E.CANCEL, "turn"),
    ActionKind("disconnect", "turn", "disconnect", E.DISCONNECT, "turn"),
    ActionKind("response_end", "turn", "response_end", E.RESPONSE_ENDED, "turn"),
    ActionKind("quarantine", "turn", "quarantine", E.QUARANTINE, "turn"),
    # inputs addressed to one call
    ActionKind("open", "call", None, None, "self"),  # classify_open
    ActionKind("fragment", "call", None, E.FRAGMENT, "self"),
    ActionKind("fragment_repeat", "call", "replay", E.FRAGMENT_REPEAT, "self"),
    ActionKind("fragment_conflict", "call", "conflict", E.FRAGMENT_CONFLICT, "self"),
    ActionKind("fragment_over_limit", "call", "limits", E.OVER_LIMIT, "self"),
    ActionKind("terminal_completed", "call", None, E.TERMINAL_COMPLETED, "self"),
    ActionKind("terminal_stopped", "call", "malformed", E.TERMINAL_STOPPED, "self"),
    ActionKind("terminal_repeat", "call", "replay", E.TERMINAL_REPEAT, "self"),
    ActionKind("confirm", "call", "confirmation", E.CONFIRMED, "self"),
    ActionKind("deny", "call", "confirmation", E.DENIED, "self"),
    # internal steps of the assembler, enabled where the table gives their event a move
    ActionKind("parse_ok", "internal", None, E.PARSE_OK, "self"),
    ActionKind("parse_failed", "internal", None, E.PARSE_FAILED, "self"),
    ActionKind("valid", "internal", None, E.VALID, "self"),
    ActionKind("invalid", "internal", None, E.INVALID, "self"),
    ActionKind("dispatch", "internal", None, None, "self"),  # classify_dispatch
    ActionKind("dispatch_denied", "internal", "permission", None, "self"),  # classify_dispatch, not permitted
    # inputs addressed to the whole system (one tenant, one tool)
    ActionKind("disable_tool", "global", "disable_tool", E.DISABLE_TOOL, "all"),
    ActionKind("catalog_change", "global", "catalog_change", E.CATALOG_CHANGE, "all"),
    ActionKind("stop_tenant", "global", "stop_tenant", E.STOP_TENANT, "all"),
    ActionKind("restart", "global", "restart", E.RESTART, "all"),
)
KINDS: Final[dict[str, ActionKind]] = {k.name: k for k in ACTION_KINDS}
INTERNAL: Final = frozenset(k.name for k in ACTION_KINDS if k.scope == "internal")
# The internal step whose table entry says where it may run (dispatch runs where the table
# gives DISPATCH a move, whatever the guard then decides).
_STAGE_EVENT: Final[dict[str, CallEvent]] = {
    "parse_ok": E.PARSE_OK,
    "parse_failed": E.PARSE_FAILED,
    "valid": E.VALID,
    "invalid": E.INVALID,
    "dispatch": E.DISPATCH,
    "dispatch_denied": E.DISPATCH,
}


def all_actions(config: Config) -> tuple[Action, ...]:
    """Every action the configuration's controls allow, in the explorer's order: turn
    inputs (by kind, then turn), then per call its inputs and internal steps, then the
    system-wide inputs. :func:`enabled` decides which apply in a state."""
    c = config
    on = c.controls

    def allowed(kind: ActionKind) -> bool:
        return kind.control is None or kind.control in on

    out = [Action(k.name, t) for k in ACTION_KINDS if k.scope == "turn" and allowed(k) for t in range(c.turns)]
    for i in range(c.calls):
        out += [Action(k.name, i) for k in ACTION_KINDS if k.scope in ("call", "internal") and allowed(k)]
    out += [Action(k.name) for k in ACTION_KINDS if k.scope == "global" and allowed(k)]
    return tuple(out)


# --------------------------------------------------------------------------------------
# The rules, once, over Ops
# --------------------------------------------------------------------------------------


def enabled(o: Ops, c: Config, s: AbsState, a: Action) -> Val:
    """Whether ``a`` may happen in ``s`` (``a`` among :func:`all_actions`)."""
    name, x = a
    kind = KINDS[name]
    if kind.scope == "turn":
        turn = s.turns[x]
        if name == "start_turn":  # turns start in order
            return o.and_(o.eq(turn, "unstarted"), *(o.not_(o.eq(u, "unstarted")) for u in s.turns[:x]))
        started = o.not_(o.eq(turn, "unstarted"))
        if name in ("disconnect", "response_end"):  # a response ends or drops once
            return o.and_(started, o.not_(s.ended[x]))
        if name == "quarantine":
            return o.and_(started, o.not_(s.quarantined[x]))
        return o.and_(started, o.eq(turn, "live"))  # only a live turn is cancelled
    if kind.scope == "global":
        if name == "restart":
            return o.lt(s.restarts, c.restarts)
        if name == "disable_tool":
            return o.not_(s.tool_disabled)
        if name == "catalog_change":
            return o.not_(s.tool_changed)
        return o.or_(*(o.eq(t, "live") for t in s.turns))  # stop_tenant
    call = s.calls[x]
    started = o.not_(o.eq(s.turns[c.turn_of(x)], "unstarted"))
    replay = "replay" in c.controls
    if name == "fragment":  # after the terminal event, a new position is late data
        return o.and_(started, o.not_(o.and_(o.ge(call.frags, c.fragments), o.is_in(call.state, _OPEN_BUFFER))))
    if name in ("fragment_repeat", "fragment_conflict"):
        return o.and_(started, o.gt(call.frags, 0))
    if name in ("terminal_completed", "terminal_stopped"):
        # with replay on, a second terminal event with a new id may come
        return started if replay else o.and_(started, o.not_(call.terminal_seen))
    if name == "terminal_repeat":
        return o.and_(started, call.terminal_seen)
    if name == "open":
        return started if replay else o.and_(started, o.eq(call.state, S.ABSENT))
    if kind.scope == "internal":
        stage = o.moves(call.state, _STAGE_EVENT[name])
        if name == "parse_ok":
            return o.and_(started, stage, o.not_(call.parsed), o.eq(call.frags, c.fragments))
        if name == "parse_failed":
            malformed = "malformed" in c.controls
            return o.and_(started, stage, o.not_(call.parsed), o.or_(o.lt(call.frags, c.fragments), malformed))
        if name == "valid":
            return o.and_(started, stage, call.parsed, o.not_(o.or_(s.tool_disabled, s.tool_changed)))
        if name == "invalid":
            return o.and_(started, stage, call.parsed)
        # dispatch, dispatch_denied: not while a confirmation is outstanding
        return o.and_(started, stage, o.not_(o.and_(call.confirm_requested, o.not_(call.confirmed))))
    return started


_OPEN_BUFFER: Final = (S.ABSENT, S.COLLECTING)
_FORGET: Final[dict[str, Val]] = {
    "frags": 0,
    "terminal_seen": False,
    "parsed": False,
    "confirm_requested": False,
    "confirmed": False,
}


def successor(o: Ops, c: Config, s: AbsState, a: Action) -> AbsState:
    """The state after ``a`` (before canonicalisation)."""
    calls = list(s.calls)
    turns = list(s.turns)
    ended = list(s.ended)
    quarantined = list(s.quarantined)
    tool_disabled, tool_changed, restarts = s.tool_disabled, s.tool_changed, s.restarts
    name, x = a
    kind = KINDS[name]

    def fire(i: int, event: Val, **changes: Val) -> None:
        """Apply one lifecycle event to call ``i``; ``changes`` take effect only when the
        table moves the call (as the table's target, not when ignored or rejected)."""
        call = calls[i]
        moved, new = o.outcome(call.state, event)
        new = o.share(new)
        stopped = o.or_(call.was_stopped, o.is_in(new, NON_DISPATCHING))
        after = o.pick_lazy(moved, lambda: call._replace(state=new, was_stopped=stopped, **changes), call)
        # A move into ``absent`` or ``collecting`` from another state starts a fresh buffer
        # (the history, validations and executions, is kept). In the table, only ``open``
        # moves there, from ``absent``, where the buffer is fresh anyway; a mutant table
        # that forgets a call or reopens it gets an empty buffer, not a stale one.
        fresh = o.and_(moved, o.is_in(new, _OPEN_BUFFER), o.not_(o.eq(new, call.state)))
        calls[i] = o.pick_lazy(fresh, lambda: after._replace(**_FORGET), after)

    if kind.scope in ("turn", "global"):
        if kind.reach == "turn":
            reached: Sequence[int] = c.calls_of_turn[x]
        elif kind.reach == "older":
            reached = [i for t in range(x) for i in c.calls_of_turn[t]]
        else:
            reached = range(c.calls)
        for i in reached:
            fire(i, kind.event)
        if name == "start_turn":
            turns = [o.ite(o.eq(v, "live"), "superseded", v) for v in turns]
            turns[x] = "live"
        elif name == "cancel":
            turns[x] = "cancelled"
        elif name in ("disconnect", "response_end"):
            ended[x] = True
        elif name == "quarantine":
            quarantined[x] = True
        elif name == "disable_tool":
            tool_disabled = True
        elif name == "catalog_change":
            tool_changed = True
        elif name == "stop_tenant":
            turns = [o.ite(o.eq(v, "live"), "stopped", v) for v in turns]
        elif name == "restart":
            restarts = o.add(restarts, 1)
    else:
        call = calls[x]
        t = c.turn_of(x)
        live = o.eq(turns[t], "live")
        if name == "open":
            fire(x, o.classify_open(live, o.not_(ended[t]), quarantined[t]))
        elif name == "fragment":
            fire(x, E.FRAGMENT, frags=o.ite(o.eq(call.state, S.COLLECTING), o.add(call.frags, 1), call.frags))
        elif name in ("terminal_completed", "terminal_stopped"):
            fire(x, kind.event)
            calls[x] = calls[x]._replace(terminal_seen=True)
        elif name == "parse_ok":
            fire(x, E.PARSE_OK, parsed=True)
        elif name in ("valid", "invalid"):
            fire(x, kind.event, validations=o.inc(call.validations, 2))
        elif name == "confirm":
            fire(x, E.CONFIRMED, confirmed=True)
        elif name in ("dispatch", "dispatch_denied"):
            needs = "confirmation" in c.controls
            event = o.share(
                o.classify_dispatch(
                    needs,
                    call.confirmed,
                    live,
                    quarantined[t],
                    o.not_(o.or_(tool_disabled, tool_changed)),
                    name == "dispatch",
                )
            )
            runs = o.event_is(event, E.DISPATCH)
            fire(
                x,
                event,
                confirm_requested=o.or_(call.confirm_requested, o.event_is(event, E.AWAIT_CONFIRMATION)),
                executions=o.ite(runs, o.inc(call.executions, 2), call.executions),
                bad_dispatch=o.ite(
                    o.and_(runs, o.eq(call.bad_dispatch, "")), _bad_dispatch(o, call, live, needs), call.bad_dispatch
                ),
            )
        else:  # the other call inputs and internal steps send their event, nothing more
            assert kind.event is not None, a
            fire(x, kind.event)
    return AbsState(tuple(calls), tuple(turns), tuple(ended), tuple(quarantined), tool_disabled, tool_changed, restarts)


def _bad_dispatch(o: Ops, call: AbsCall, turn_live: Val, needs_confirmation: bool) -> Val:
    """What, if anything, was wrong at the moment of a dispatch (history for invariants)."""
    return o.ite(
        call.was_stopped,
        _STOPPED,
        o.ite(
            o.not_(o.and_(call.terminal_seen, call.parsed, o.eq(call.validations, 1))),
            _UNFINISHED,
            o.ite(
                o.not_(turn_live),
                _NOT_CURRENT,
                o.ite(o.and_(needs_confirmation, o.not_(call.confirmed)), _UNCONFIRMED, ""),
            ),
        ),
    )


def _reduced(o: Ops, k: AbsCall) -> AbsCall:
    """What :func:`canonical` keeps of a call in a terminal state."""
    return AbsCall(
        state=k.state,
        frags=o.ite(o.lt(k.frags, 1), k.frags, 1),
        terminal_seen=k.terminal_seen,
        was_stopped=k.was_stopped,
        validations=k.validations,
        executions=k.executions,
        bad_dispatch=k.bad_dispatch,
    )


def canonical(o: Ops, c: Config, s: AbsState) -> AbsState:
    """Forget what can no longer matter, so equivalent states are one node.

    A call in a terminal state keeps only its state and its history (validations,
    executions, what was wrong at dispatch): the rest only enables self-loops. A turn
    whose calls are all terminal no longer needs its response flags; when every call is
    terminal, the tool flags and the restart count no longer matter either.

    Sound because terminal states have no way out (``tests/test_lifecycle.py``); a mutant
    table that revives a terminal call is explored without it (``SystemModel(...,
    canonicalise=False)``)."""
    calls = []
    over = []
    for k in s.calls:
        done = o.share(o.is_in(k.state, TERMINAL_STATES))
        over.append(done)
        calls.append(o.pick_lazy(done, functools.partial(_reduced, o, k), k))
    done_turn = [o.and_(*(over[i] for i in members)) for members in c.calls_of_turn]
    all_done = o.share(o.and_(*done_turn))
    return AbsState(
        tuple(calls),
        s.turns,
        tuple(o.and_(o.not_(d), v) for d, v in zip(done_turn, s.ended, strict=True)),
        tuple(o.and_(o.not_(d), v) for d, v in zip(done_turn, s.quarantined, strict=True)),
        o.and_(o.not_(all_done), s.tool_disabled),
        o.and_(o.not_(all_done), s.tool_changed),
        o.ite(all_done, c.restarts, s.restarts),
    )


_STATE_CODE: Final = {st: n for n, st in enumerate(State)}
_STRING_CODE: Final = {text: n for n, text in enumerate(STRINGS)}


def call_key(k: AbsCall) -> tuple[int, ...]:
    """A call as small integers, field by field (a lifecycle state as its index in
    :class:`State`, a string as its index in :data:`STRINGS`): the order in which
    :func:`symmetric` sorts the calls of a turn, and the bytes the compiled explorer stores."""
    return tuple(
        _STATE_CODE[v] if isinstance(v, State) else _STRING_CODE[v] if isinstance(v, str) else int(v) for v in k
    )


def symmetric(c: Config, s: AbsState) -> AbsState:
    """The representative of ``s`` among the states that differ from it only by which call of
    a turn is which: each turn's calls sorted by :func:`call_key`.

    Why it is sound: the calls of one turn are interchangeable. An action on call ``i``
    reads only call ``i``, its turn's fields and the system's; every broadcast reaches
    all the calls of a turn, of the older turns or of the system alike; :func:`canonical`
    and :data:`CALL_CHECKS` treat each call on its own; the table and the guards never
    name a call. So permuting a turn's calls maps the successors of a state to the
    successors of the permuted state and keeps every invariant's verdict (checked on the
    whole reachable space in ``tests/test_model_symmetry.py``). Turns are not
    interchangeable (they start in order and a start supersedes the older ones), nor are
    calls of different turns; the model has no other symmetry. A path through the reduced
    graph names each call by its place in the representative: :meth:`Exploration.concrete_path
    <callsafe.formal.graph.Exploration.concrete_path>` maps it back to the calls of the
    unreduced system."""
    calls = list(s.calls)
    for members in c.calls_of_turn:
        if len(members) > 1:
            ordered = sorted((calls[i] for i in members), key=call_key)
            for i, k in zip(members, ordered, strict=True):
                calls[i] = k
    return s._replace(calls=tuple(calls))


# --------------------------------------------------------------------------------------
# The state invariants, as data over Ops
# --------------------------------------------------------------------------------------


class CallCheck(NamedTuple):
    """One way a call can break an invariant: ``broken(ops, call)`` is the condition,
    ``message(i, call)`` says what is wrong (concretely)."""

    invariant: str
    broken: Callable[[Ops, AbsCall], Val]
    message: Callable[[int, AbsCall], str]


def _bad_is(text: str) -> Callable[[Ops, AbsCall], Val]:
    return lambda o, k: o.eq(k.bad_dispatch, text)


CALL_CHECKS: Final[tuple[CallCheck, ...]] = (
    CallCheck("INV-ONCE", lambda o, k: o.gt(k.executions, 1), lambda i, k: f"call {i} executed twice"),
    CallCheck("INV-VALIDATE-ONCE", lambda o, k: o.gt(k.validations, 1), lambda i, k: f"call {i} validated twice"),
    *(CallCheck(inv, _bad_is(text), lambda i, k: f"call {i} {k.bad_dispatch}") for text, inv in BAD_DISPATCH.items()),
    CallCheck(
        "INV-CANCEL",
        lambda o, k: o.and_(o.is_in(k.state, NON_DISPATCHING), o.gt(k.executions, 0)),
        lambda i, k: f"call {i} executed, yet it is {k.state.value}",
    ),
    CallCheck(
        "INV-CANCEL",
        lambda o, k: o.not_(o.eq(o.eq(k.state, S.DISPATCHED), o.gt(k.executions, 0))),
        lambda i, k: f"call {i} is {k.state.value} with {k.executions} executions",
    ),
)
INVARIANT_IDS: Final = tuple(dict.fromkeys(check.invariant for check in CALL_CHECKS))


def invariant_holds(o: Ops, s: AbsState, invariant: str) -> Val:
    """Whether ``s`` satisfies ``invariant`` (one of :data:`INVARIANT_IDS`)."""
    return o.and_(
        *(o.not_(check.broken(o, call)) for call in s.calls for check in CALL_CHECKS if check.invariant == invariant)
    )


_VALUES = Concrete(lifecycle.TRANSITIONS, Guards.default())


def state_invariants(s: AbsState) -> list[tuple[str, str]]:
    """The state invariants that fail in ``s``: ``(invariant id, what is wrong)``."""
    return [
        (check.invariant, check.message(i, call))
        for i, call in enumerate(s.calls)
        for check in CALL_CHECKS
        if check.broken(_VALUES, call)
    ]


# --------------------------------------------------------------------------------------
# The model: Stateright's three functions
# --------------------------------------------------------------------------------------


class SystemModel:
    """initial states, actions, next state (Stateright's three functions).

    ``table`` and ``guards`` default to the lifecycle table and the guards of
    :mod:`callsafe.model.system`; a model mutant (:mod:`callsafe.formal.mutants`) passes
    its own. ``canonicalise=False`` explores every distinct state, without forgetting."""

    def __init__(
        self,
        config: Config | None = None,
        table: Table | None = None,
        guards: Guards | None = None,
        canonicalise: bool = True,
    ) -> None:
        self.config = config or Config()
        self.table: Table = lifecycle.TRANSITIONS if table is None else table
        self.guards = guards or Guards.default()
        self.canonicalise = canonicalise
        self.all_actions = all_actions(self.config)
        self._ops = Concrete(self.table, self.guards)

    # -- the three functions ---------------------------------------------------------

    def init_states(self) -> list[AbsState]:
        c = self.config
        return [
            AbsState(
                calls=tuple(AbsCall() for _ in range(c.calls)),
                turns=tuple("unstarted" for _ in range(c.turns)),
                ended=tuple(False for _ in range(c.turns)),
                quarantined=tuple(False for _ in range(c.turns)),
            )
        ]

    def actions(self, s: AbsState) -> Iterator[Action]:
        for a in self.all_actions:
            if enabled(self._ops, self.config, s, a):
                yield a

    def next_state(self, s: AbsState, a: Action) -> tuple[AbsState, tuple[TableEntry, ...]]:
        """The successor, and the lifecycle table entries the step exercised."""
        ops = self._ops
        ops.entries = []
        succ = successor(ops, self.config, s, a)
        if self.canonicalise:
            succ = canonical(ops, self.config, succ)
        return succ, tuple(ops.entries)

    def canonical(self, s: AbsState) -> AbsState:
        """Forget what can no longer matter (see :func:`canonical`)."""
        return canonical(self._ops, self.config, s)
