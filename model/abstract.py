"""The system as a finite transition system, for exploration and proof.

In the style of Stateright: a model is its initial states, the actions possible in a
state, and the next state for an action (:class:`SystemModel`). The state graph
(:mod:`callsafe.model.graph`), the exhaustive trace generator and the z3 encoding are
built on it; none of them re-states a rule.

The abstraction keeps what decides safety and drops what does not: a call keeps its
lifecycle state, how many of its fragments arrived (not their bytes), whether its terminal
event was seen, whether it was parsed, validated, confirmed, executed; a turn keeps
whether it is live. Data values become nondeterministic choices (a complete buffer may
still be malformed, a parsed call may fail validation). Internal steps (parse, validate,
dispatch) interleave freely with inputs, which covers every "during validation" window.

Every lifecycle step goes through :func:`callsafe.model.lifecycle.outcome` and the guards
of :mod:`callsafe.model.system`, so the explored machine is the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, Outcome, State, outcome
from callsafe.model.system import classify_dispatch, classify_open

E = CallEvent
S = State

__all__ = ["CONTROLS", "AbsCall", "AbsState", "Action", "Config", "SystemModel", "TableEntry"]

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


class TableEntry(NamedTuple):
    """A lifecycle table entry exercised by a step: ``(state, event) -> outcome``."""

    state: State
    event: CallEvent
    outcome: Outcome


# Inputs that address one call, and the controls that enable them.
_CALL_INPUTS: Final[dict[str, str | None]] = {
    "open": None,
    "fragment": None,
    "fragment_repeat": "replay",
    "fragment_conflict": "conflict",
    "fragment_over_limit": "limits",
    "terminal_completed": None,
    "terminal_stopped": "malformed",
    "terminal_repeat": "replay",
    "confirm": "confirmation",
    "deny": "confirmation",
}
_TURN_INPUTS: Final[dict[str, str | None]] = {
    "start_turn": None,
    "cancel": "cancel",
    "disconnect": "disconnect",
    "response_end": "response_end",
    "quarantine": "quarantine",
}
_GLOBAL_INPUTS: Final[dict[str, str]] = {
    "disable_tool": "disable_tool",
    "catalog_change": "catalog_change",
    "stop_tenant": "stop_tenant",
    "restart": "restart",
}
INTERNAL: Final = frozenset({"parse_ok", "parse_failed", "valid", "invalid", "dispatch", "dispatch_denied"})


def _turn_input_enabled(name: str, s: AbsState, t: int) -> bool:
    """A response ends or drops once, is quarantined once; only a live turn is cancelled."""
    if name in ("disconnect", "response_end"):
        return not s.ended[t]
    if name == "quarantine":
        return not s.quarantined[t]
    if name == "cancel":
        return s.turns[t] == "live"
    return True


class SystemModel:
    """initial states, actions, next state (Stateright's three functions)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()

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
        c = self.config
        on = c.controls
        for name, control in _TURN_INPUTS.items():
            if control is not None and control not in on:
                continue
            for t in range(c.turns):
                if name == "start_turn":
                    if s.turns[t] == "unstarted" and all(x != "unstarted" for x in s.turns[:t]):
                        yield Action(name, t)
                elif s.turns[t] != "unstarted" and _turn_input_enabled(name, s, t):
                    yield Action(name, t)
        for i, call in enumerate(s.calls):
            if s.turns[c.turn_of(i)] == "unstarted":
                continue
            for name, control in _CALL_INPUTS.items():
                if control is not None and control not in on:
                    continue
                if name == "fragment" and call.frags >= c.fragments and call.state in (S.ABSENT, S.COLLECTING):
                    continue  # after the terminal event, a new position is late data
                if name in ("fragment_repeat", "fragment_conflict") and call.frags == 0:
                    continue
                if name in ("terminal_completed", "terminal_stopped") and call.terminal_seen and "replay" not in on:
                    continue  # with replay on, a second terminal event with a new id may come
                if name == "terminal_repeat" and not call.terminal_seen:
                    continue
                if name == "open" and call.state is not S.ABSENT and "replay" not in on:
                    continue
                yield Action(name, i)
            if call.state is S.TERMINAL_CANDIDATE:
                if not call.parsed:
                    if call.frags == c.fragments:
                        yield Action("parse_ok", i)
                    if call.frags < c.fragments or "malformed" in on:
                        yield Action("parse_failed", i)
                else:
                    if not (s.tool_disabled or s.tool_changed):
                        yield Action("valid", i)
                    yield Action("invalid", i)
            elif call.state is S.VALIDATED and not (call.confirm_requested and not call.confirmed):
                yield Action("dispatch", i)
                if "permission" in on:
                    yield Action("dispatch_denied", i)
        for name, control in _GLOBAL_INPUTS.items():
            if control not in on:
                continue
            if name == "restart" and s.restarts >= c.restarts:
                continue
            if name == "disable_tool" and s.tool_disabled:
                continue
            if name == "catalog_change" and s.tool_changed:
                continue
            if name == "stop_tenant" and not any(t == "live" for t in s.turns):
                continue
            yield Action(name)

    def next_state(self, s: AbsState, a: Action) -> tuple[AbsState, tuple[TableEntry, ...]]:
        """The successor, and the lifecycle table entries the step exercised."""
        c = self.config
        calls = list(s.calls)
        turns = list(s.turns)
        ended = list(s.ended)
        quarantined = list(s.quarantined)
        tool_disabled, tool_changed, restarts = s.tool_disabled, s.tool_changed, s.restarts
        entries: list[TableEntry] = []

        def fire(i: int, event: CallEvent, **changes: object) -> bool:
            call = calls[i]
            result = outcome(call.state, event)
            entries.append(TableEntry(call.state, event, result))
            if isinstance(result, State):
                stopped = call.was_stopped or result in (S.CANCELLED, S.FAILED)
                calls[i] = call._replace(state=result, was_stopped=stopped, **changes)  # type: ignore[arg-type]
                return True
            return False

        def broadcast(event: CallEvent, selected: list[int]) -> None:
            for i in selected:
                fire(i, event)

        def live(t: int) -> bool:
            return turns[t] == "live"

        def in_turn(t: int) -> list[int]:
            return [i for i in range(c.calls) if c.turn_of(i) == t]

        name, x = a.name, a.target

        if name == "start_turn":
            older = [i for i in range(c.calls) if c.turn_of(i) < x]
            broadcast(E.SUPERSEDE, older)
            turns = ["superseded" if v == "live" else v for v in turns]
            turns[x] = "live"
        elif name == "cancel":
            broadcast(E.CANCEL, in_turn(x))
            turns[x] = "cancelled"
        elif name == "disconnect":
            broadcast(E.DISCONNECT, in_turn(x))
            ended[x] = True
        elif name == "response_end":
            broadcast(E.RESPONSE_ENDED, in_turn(x))
            ended[x] = True
        elif name == "quarantine":
            broadcast(E.QUARANTINE, in_turn(x))
            quarantined[x] = True
        elif name == "disable_tool":
            broadcast(E.DISABLE_TOOL, list(range(c.calls)))
            tool_disabled = True
        elif name == "catalog_change":
            broadcast(E.CATALOG_CHANGE, list(range(c.calls)))
            tool_changed = True
        elif name == "stop_tenant":
            broadcast(E.STOP_TENANT, list(range(c.calls)))
            turns = ["stopped" if v == "live" else v for v in turns]
        elif name == "restart":
            broadcast(E.RESTART, list(range(c.calls)))
            restarts += 1
        else:
            call = calls[x]
            t = c.turn_of(x)
            if name == "open":
                fire(x, classify_open(live(t), not ended[t], quarantined[t]))
            elif name == "fragment":
                if call.state is S.ABSENT:
                    fire(x, E.FRAGMENT)
                else:
                    grows = call.state is S.COLLECTING
                    fire(x, E.FRAGMENT, frags=call.frags + 1 if grows else call.frags)
            elif name == "fragment_repeat":
                fire(x, E.FRAGMENT_REPEAT)
            elif name == "fragment_conflict":
                fire(x, E.FRAGMENT_CONFLICT)
            elif name == "fragment_over_limit":
                fire(x, E.OVER_LIMIT)
            elif name == "terminal_completed":
                fire(x, E.TERMINAL_COMPLETED)
                calls[x] = calls[x]._replace(terminal_seen=True)
            elif name == "terminal_stopped":
                fire(x, E.TERMINAL_STOPPED)
                calls[x] = calls[x]._replace(terminal_seen=True)
            elif name == "terminal_repeat":
                fire(x, E.TERMINAL_REPEAT)
            elif name == "parse_ok":
                fire(x, E.PARSE_OK, parsed=True)
            elif name == "parse_failed":
                fire(x, E.PARSE_FAILED)
            elif name in ("valid", "invalid"):
                fire(x, E.VALID if name == "valid" else E.INVALID, validations=min(call.validations + 1, 2))
            elif name == "confirm":
                fire(x, E.CONFIRMED, confirmed=True)
            elif name == "deny":
                fire(x, E.DENIED)
            elif name in ("dispatch", "dispatch_denied"):
                needs = "confirmation" in c.controls
                event = classify_dispatch(
                    needs_confirmation=needs,
                    confirmed=call.confirmed,
                    turn_live=live(t),
                    quarantined=quarantined[t],
                    tool_unchanged=not (tool_disabled or tool_changed),
                    permitted=name == "dispatch",
                )
                if event is E.AWAIT_CONFIRMATION:
                    fire(x, event, confirm_requested=True)
                elif event is E.DISPATCH:
                    bad = _bad_dispatch(call, live(t), needs)
                    fire(x, event, executions=min(call.executions + 1, 2), bad_dispatch=call.bad_dispatch or bad)
                else:
                    fire(x, event)
            else:  # pragma: no cover - actions() yields only the names above
                raise ValueError(f"unknown action {a}")

        succ = AbsState(
            tuple(calls), tuple(turns), tuple(ended), tuple(quarantined), tool_disabled, tool_changed, restarts
        )
        return self.canonical(succ), tuple(entries)

    def canonical(self, s: AbsState) -> AbsState:
        """Forget what can no longer matter, so equivalent states are one node.

        A call in a terminal state keeps only its state and its history (validations,
        executions, what was wrong at dispatch): the rest only enables self-loops. A turn
        whose calls are all terminal no longer needs its response flags; when every call is
        terminal, the tool flags and the restart count no longer matter either."""
        c = self.config
        calls = tuple(
            AbsCall(
                state=k.state,
                frags=min(k.frags, 1),
                terminal_seen=k.terminal_seen,
                was_stopped=k.was_stopped,
                validations=k.validations,
                executions=k.executions,
                bad_dispatch=k.bad_dispatch,
            )
            if k.state in TERMINAL_STATES
            else k
            for k in s.calls
        )
        done = [
            all(calls[i].state in TERMINAL_STATES for i in range(c.calls) if c.turn_of(i) == t) for t in range(c.turns)
        ]
        ended = tuple(False if done[t] else v for t, v in enumerate(s.ended))
        quarantined = tuple(False if done[t] else v for t, v in enumerate(s.quarantined))
        if all(done):
            return AbsState(calls, s.turns, ended, quarantined, False, False, c.restarts)
        return AbsState(calls, s.turns, ended, quarantined, s.tool_disabled, s.tool_changed, s.restarts)


def _bad_dispatch(call: AbsCall, turn_live: bool, needs_confirmation: bool) -> str:
    """What, if anything, was wrong at the moment of a dispatch (history for invariants)."""
    if call.was_stopped:
        return "dispatched after the call was stopped"
    if not (call.terminal_seen and call.parsed and call.validations == 1):
        return "dispatched without terminal, parse and one validation"
    if not turn_live:
        return "dispatched outside the current live turn"
    if needs_confirmation and not call.confirmed:
        return "dispatched without confirmation"
    return ""


def state_invariants(s: AbsState) -> list[tuple[str, str]]:
    """The state invariants that fail in ``s``: ``(invariant id, what is wrong)``."""
    bad: list[tuple[str, str]] = []
    for i, call in enumerate(s.calls):
        if call.executions > 1:
            bad.append(("INV-ONCE", f"call {i} executed twice"))
        if call.validations > 1:
            bad.append(("INV-VALIDATE-ONCE", f"call {i} validated twice"))
        if call.bad_dispatch:
            inv = {
                "dispatched without terminal, parse and one validation": "INV-TERMINAL",
                "dispatched outside the current live turn": "INV-TURN",
                "dispatched without confirmation": "INV-CONFIRM",
                "dispatched after the call was stopped": "INV-CANCEL",
            }[call.bad_dispatch]
            bad.append((inv, f"call {i} {call.bad_dispatch}"))
        if call.state in (S.CANCELLED, S.FAILED) and call.executions:
            bad.append(("INV-CANCEL", f"call {i} executed, yet it is {call.state.value}"))
        if (call.state is S.DISPATCHED) != (call.executions > 0):
            bad.append(("INV-CANCEL", f"call {i} is {call.state.value} with {call.executions} executions"))
    return bad
