"""From a path of abstract actions (:mod:`callsafe.formal.abstract`) to a concrete trace.

Why a separate step: the state graph makes data a nondeterministic choice ("this buffer
turns out malformed", "this call fails validation", "this actor is refused") and lets
internal steps (parse, validate, dispatch) interleave freely with inputs. A concrete trace
has to commit to data, and its internal steps happen when a synchronous implementation
would run them: right after the input that enables them. So the mapping

* looks ahead along the path for each call's internal choices and picks its data:
  ``parse_failed`` -> a malformed document, ``invalid`` -> a document violating the
  schema, ``dispatch_denied`` -> a turn whose actor the tool does not permit;
* maps each input action to its event: ``start_turn`` -> :class:`TurnStarted`, ``open``
  -> :class:`CallOpened`, ``fragment`` -> the next piece of the call's document,
  ``terminal_completed`` -> :class:`CallTerminal` with a new event id,
  ``fragment_repeat``/``terminal_repeat`` -> a :class:`Replay` of the earlier event, and so on;
* marks an input ``during_validation`` when it arrives while a call has been parsed and
  not yet validated, which is the only window in which the harness can put an input
  between a call's terminal event and its validation.

:func:`concretisable` says which abstract steps a concrete trace can reproduce at all; the
coverage generator walks only those, and measures what the concrete traces really reach
with the oracle (:func:`callsafe.generators.coverage.reached`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from callsafe.formal.abstract import AbsState, Action, Config
from callsafe.model.lifecycle import State
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
    StopReason,
    StopTenant,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = ["DURING_CAPABLE", "INTERNAL_ACTIONS", "concretisable", "concretise"]

INTERNAL_ACTIONS: Final = frozenset({"parse_ok", "parse_failed", "valid", "invalid", "dispatch", "dispatch_denied"})

# The event each input action becomes (for the ``during_validation`` question below).
_EVENT_OF_ACTION: Final[dict[str, type[Event]]] = {
    "start_turn": TurnStarted,
    "cancel": CancelTurn,
    "disconnect": Disconnect,
    "response_end": ResponseTerminal,
    "quarantine": QuarantineResponse,
    "disable_tool": DisableTool,
    "catalog_change": ToolChanged,
    "stop_tenant": StopTenant,
    "restart": Restart,
    "open": CallOpened,
    "fragment": Fragment,
    "fragment_conflict": Fragment,
    "fragment_over_limit": Fragment,
    "terminal_completed": CallTerminal,
    "terminal_stopped": CallTerminal,
    "confirm": Confirm,
    "deny": Confirm,
}
# Inputs whose events carry ``during_validation`` in the vocabulary: the harness can
# deliver them from inside the business validator. Read from the event classes, so that a
# vocabulary that lets more events arrive during validation widens coverage by itself.
DURING_CAPABLE: Final = frozenset(
    name for name, cls in _EVENT_OF_ACTION.items() if "during_validation" in {f.name for f in dataclasses.fields(cls)}
)
SCHEMA: Final = {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}}
LIMITS: Final = Limits(call_bytes=64, turn_bytes=4096)


def concretisable(state: AbsState, action: Action, during: bool = True) -> bool:
    """Whether a synchronous implementation can take ``action`` in ``state``.

    A call between its terminal event and its dispatch decision is being processed: only
    internal steps happen then, except that (with ``during``: the target calls the
    harness's business validator) an input able to arrive during validation may arrive
    once the call is parsed. A validated call waiting for its confirmation is at rest,
    like a collecting one."""
    if action.name in INTERNAL_ACTIONS:
        return True
    for call in state.calls:
        if call.state is State.TERMINAL_CANDIDATE:
            if not (during and call.parsed and action.name in DURING_CAPABLE):
                return False
        elif call.state is State.VALIDATED and not (call.confirm_requested and not call.confirmed):
            return False
    return True


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _split(text: str, pieces: int) -> list[str]:
    cuts = [round(k * len(text) / pieces) for k in range(pieces + 1)]
    return [text[cuts[k] : cuts[k + 1]] for k in range(pieces)]


@dataclass
class _Call:
    pieces: list[str]
    sent: int = 0  # pieces of the document sent
    late: int = 0  # positions sent after the document
    first_fragment: int | None = None  # event index of position 0, for replays
    terminals: int = 0
    last_terminal: int | None = None


@dataclass
class _Builder:
    config: Config
    path: Sequence[tuple[Action, AbsState]]
    initial: AbsState
    events: list[Event] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    actors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.config
        chosen = {(a.name, a.target) for a, _ in self.path}
        self.actors = ["u1"] * c.turns
        for i in range(c.calls):
            value = 100 * (i + 1)
            if ("parse_failed", i) in chosen:
                doc = _compact({"v": value}) + "}"  # trailing data: a complete buffer that does not parse
            elif ("invalid", i) in chosen:
                doc = _compact({"v": str(value)})  # parses, violates the schema
            else:
                doc = _compact({"v": value})
            self.calls.append(_Call(_split(doc, c.fragments)))
            if ("dispatch_denied", i) in chosen:
                self.actors[c.turn_of(i)] = "u2"

    @staticmethod
    def turn(t: int) -> str:
        return f"t{t + 1}"

    def ident(self, i: int) -> tuple[str, str, str, str]:
        t = self.config.turn_of(i)
        return self.turn(t), f"r{t + 1}", f"i{i}", f"c{i}"

    def build(self) -> Trace:
        before = self.initial
        for action, after in self.path:
            during = action.name in DURING_CAPABLE and any(
                k.state is State.TERMINAL_CANDIDATE and k.parsed for k in before.calls
            )
            event = self.event(action, during)
            if event is not None:
                self.events.append(event)
            before = after
        tools = {
            "op": ToolSpec(
                schema=SCHEMA,
                confirm="confirmation" in self.config.controls,
                actors=("u1",) if "permission" in self.config.controls else None,
            )
        }
        labels = " ".join(str(a) for a, _ in self.path)
        return Trace(
            events=tuple(self.events),
            tools=tools,
            limits=LIMITS,
            name=f"path: {labels}",
            source=f"state graph path, config {self.config.to_json()}",
        )

    def event(self, action: Action, during: bool) -> Event | None:
        event = self._event(action)
        if during and event is not None and hasattr(event, "during_validation"):
            event = dataclasses.replace(event, during_validation=True)  # type: ignore[call-arg]
        return event

    def _event(self, action: Action) -> Event | None:
        name, x = action.name, action.target
        if name in INTERNAL_ACTIONS:
            return None
        if name == "start_turn":
            return TurnStarted(self.turn(x), self.actors[x], "acme")
        if name == "cancel":
            return CancelTurn(self.turn(x))
        if name == "disconnect":
            return Disconnect(self.turn(x), f"r{x + 1}")
        if name == "response_end":
            return ResponseTerminal(self.turn(x), f"r{x + 1}")
        if name == "quarantine":
            return QuarantineResponse(f"r{x + 1}")
        if name == "disable_tool":
            return DisableTool("op")
        if name == "catalog_change":
            return ToolChanged("op", "rename", "op_v2")
        if name == "stop_tenant":
            return StopTenant("acme")
        if name == "restart":
            return Restart()
        turn, response, item, call_id = self.ident(x)
        call = self.calls[x]
        if name == "open":
            return CallOpened(turn, response, item, call_id, "op")
        if name == "fragment":
            if call.sent < len(call.pieces):
                position, text = call.sent, call.pieces[call.sent]
                call.sent += 1
            else:  # data after the document: a new position
                position, text = len(call.pieces) + call.late, " "
                call.late += 1
            if position == 0:
                call.first_fragment = len(self.events)
            return Fragment(turn, response, item, call_id, position, text)
        if name == "fragment_repeat":
            if call.first_fragment is None:
                return Fragment(turn, response, item, call_id, 0, call.pieces[0])
            return Replay(call.first_fragment, call.first_fragment + 1)
        if name == "fragment_conflict":
            return Fragment(turn, response, item, call_id, 0, "[")
        if name == "fragment_over_limit":
            position = len(call.pieces) + call.late
            call.late += 1
            return Fragment(turn, response, item, call_id, position, " " * (LIMITS.call_bytes + 1))
        if name in ("terminal_completed", "terminal_stopped"):
            call.terminals += 1
            call.last_terminal = len(self.events)
            reason: StopReason = "completed" if name == "terminal_completed" else "length"
            return CallTerminal(turn, response, item, call_id, f"e{x}-{call.terminals}", reason)
        if name == "terminal_repeat":
            if call.last_terminal is None:  # pragma: no cover - the model requires a terminal first
                return None
            return Replay(call.last_terminal, call.last_terminal + 1)
        if name in ("confirm", "deny"):
            return Confirm(turn, response, item, call_id, name == "confirm")
        raise ValueError(f"no concrete event for action {action}")


def concretise(config: Config, initial: AbsState, path: Sequence[tuple[Action, AbsState]]) -> Trace:
    """The concrete trace of an abstract path (``(action, state after)`` pairs, as
    :meth:`~callsafe.formal.graph.Exploration.path_to` returns them) starting at ``initial``."""
    return _Builder(config, path, initial).build()
