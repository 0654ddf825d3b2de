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
from callsafe.generators.domain import (
    OTHER_TENANT,
    PLAIN,
    Dresser,
    Variant,
    document,
    invalid_document,
    place_limits,
    reuse_epilogue,
    send_order,
    split_pieces,
    tool_names,
    tool_specs,
)
from callsafe.model.lifecycle import State
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
    order: list[int]  # the positions in the order the call's fragments send them
    tool: str = "op"
    opened: bool = False
    sent: int = 0  # pieces of the document sent
    late: int = 0  # positions sent after the document
    first_fragment: int | None = None  # event index of the first fragment, for replays
    terminals: int = 0
    last_terminal: int | None = None


SHADOW_TURN: Final = "s1"


@dataclass
class _Builder:
    config: Config
    path: Sequence[tuple[Action, AbsState]]
    initial: AbsState
    variant: Variant = PLAIN
    calls: list[_Call] = field(default_factory=list)
    actors: list[str] = field(default_factory=list)
    shadow: list[str] = field(default_factory=list)  # the other tenant's twin of call 0 (tenants)
    limits: Limits = LIMITS
    epilogue: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        c, v = self.config, self.variant
        chosen = {(a.name, a.target) for a, _ in self.path}
        self.actors = ["u1"] * c.turns
        confirmation = "confirmation" in c.controls
        names = ["op"] * c.calls if v.plain else tool_names(v, confirmation, c.calls)
        specs = tool_specs(names, plain=v.plain)
        sizes: list[int] = []
        for i in range(c.calls):
            business = bool(specs[names[i]].business)
            if v.plain:
                value = 100 * (i + 1)
                valid = _compact({"v": value})
                bad = _compact({"v": str(value)})
            else:
                valid = document(i, v)
                bad = invalid_document(i, v, business)
            if ("parse_failed", i) in chosen:
                doc = valid + "}"  # trailing data: a complete buffer that does not parse
            elif ("invalid", i) in chosen:
                doc = bad  # parses, violates the schema or the business rule
            else:
                doc = valid
            sizes.append(utf8_len(doc))
            self.calls.append(_Call(split_pieces(doc, c.fragments, v), send_order(c.fragments, v), names[i]))
            if ("dispatch_denied", i) in chosen:
                self.actors[c.turn_of(i)] = "u2"
        if v.identities == "tenants" and c.calls:
            self.shadow = split_pieces(document(c.calls + 1, v), c.fragments, v)
        # the restart epilogue's call carries the first call's well-formed document
        self.epilogue = split_pieces(document(0, v), c.fragments, v)
        turn_sizes = [sum(sizes[i] for i in calls) for calls in c.calls_of_turn]
        self.limits = place_limits(v, sizes, turn_sizes)
        self.dresser = Dresser(v)

    @property
    def events(self) -> list[Event]:
        return self.dresser.events

    @staticmethod
    def turn(t: int) -> str:
        return f"t{t + 1}"

    def ident(self, i: int) -> tuple[str, str, str, str]:
        c = self.config
        t = c.turn_of(i)
        k = c.calls_of_turn[t].index(i)  # the call's place in its turn
        if self.variant.identities == "shared-ids":
            return self.turn(t), "resp", str(k), f"call_{k}"
        if self.variant.identities == "agent-loop":
            return self.turn(t), f"r{t + 1}-{k}", "0", "call_0"
        return self.turn(t), f"r{t + 1}", f"i{i}", f"c{i}"

    def responses(self, t: int) -> list[str]:
        """The responses of turn ``t`` (several in an agent loop)."""
        if self.variant.identities == "shared-ids":
            return ["resp"]
        if self.variant.identities == "agent-loop":
            return [f"r{t + 1}-{k}" for k in range(max(1, len(self.config.calls_of_turn[t])))]
        return [f"r{t + 1}"]

    def tools_used(self) -> list[str]:
        return list(dict.fromkeys(call.tool for call in self.calls)) or ["op"]

    def build(self) -> Trace:
        before = self.initial
        for action, after in self.path:
            during = action.name in DURING_CAPABLE and any(
                k.state is State.TERMINAL_CANDIDATE and k.parsed for k in before.calls
            )
            for event in self.event(action, during):
                self.emit(event, action)
            before = after
        actors = ("u1",) if "permission" in self.config.controls else None
        if self.variant.plain:
            tools = {"op": ToolSpec(schema=SCHEMA, confirm="confirmation" in self.config.controls, actors=actors)}
        else:
            tools = tool_specs(self.tools_used(), actors)
        if self.variant.events == "continue":
            self.carry_on(tools)
        events = list(self.events)
        if self.variant.events in ("restart-reuse", "reuse") and self.calls:
            restart = self.variant.events == "restart-reuse" and self.config.restarts > 0
            events += reuse_epilogue(events, tools, self.epilogue, restart)
        labels = " ".join(str(a) for a, _ in self.path)
        domain = "" if self.variant.plain else f", domain {self.variant.describe()}"
        return Trace(
            events=tuple(events),
            tools=tools,
            limits=self.limits,
            name=f"path: {labels}",
            source=f"state graph path, config {self.config.to_json()}{domain}",
        )

    def carry_on(self, tools: dict[str, ToolSpec]) -> None:
        """The ``continue`` epilogue: each opened call's stream goes on after the path, in
        call order: the positions it has not sent, a terminal event (when it had none),
        and a confirmation when its tool needs one."""
        for i, call in enumerate(self.calls):
            if not call.opened:
                continue
            turn, response, item, call_id = self.ident(i)
            while call.sent < len(call.pieces):
                position = call.order[call.sent]
                call.sent += 1
                piece = Fragment(turn, response, item, call_id, position, call.pieces[position])
                self.emit(piece, Action("fragment", i))
            if not call.terminals:
                call.terminals += 1
                end = CallTerminal(turn, response, item, call_id, f"e{i}-late")
                self.emit(end, Action("terminal_completed", i))
            spec = tools.get(call.tool)
            if spec is not None and spec.confirm:
                self.emit(Confirm(turn, response, item, call_id, True), Action("confirm", i))

    def emit(self, event: Event, action: Action) -> None:
        index = self.dresser.emit(event)
        call = self.calls[action.target] if action.target >= 0 and action.name not in _TURN_ACTIONS else None
        if (
            call is not None
            and action.name == "fragment"
            and isinstance(event, Fragment)
            and event.position == call.order[0]
            and call.first_fragment is None
        ):
            call.first_fragment = index
        if call is not None and isinstance(event, CallTerminal):
            call.last_terminal = index
        if isinstance(event, TurnStarted) and self.shadow and event.turn == self.turn(self.config.turn_of(0)):
            self.dresser.emit(TurnStarted(SHADOW_TURN, "u1", OTHER_TENANT, event.conversation))
        if self.shadow and action.target == 0 and action.name not in _TURN_ACTIONS:
            twin = self.twin(event)
            if twin is not None:
                self.dresser.emit(twin)

    def twin(self, event: Event) -> Event | None:
        """The other tenant's copy of an event of call 0: same ids, its own document."""
        if isinstance(event, Fragment):
            text = self.shadow[event.position] if 0 <= event.position < len(self.shadow) else event.text
            if event.text == "[" and event.position == 0:
                text = event.text
            return Fragment(SHADOW_TURN, event.response, event.item, event.call, event.position, text)
        if isinstance(event, CallOpened):
            return dataclasses.replace(event, turn=SHADOW_TURN, during_validation=False)
        if isinstance(event, CallTerminal):
            return dataclasses.replace(
                event, turn=SHADOW_TURN, event_id=f"{event.event_id}-{OTHER_TENANT}", during_validation=False
            )
        if isinstance(event, Confirm):
            return dataclasses.replace(event, turn=SHADOW_TURN, during_validation=False)
        return None

    def event(self, action: Action, during: bool) -> list[Event]:
        events = self._events(action)
        if during:
            events = [
                dataclasses.replace(e, during_validation=True) if hasattr(e, "during_validation") else e  # type: ignore[call-arg]
                for e in events
            ]
        return events

    def _events(self, action: Action) -> list[Event]:
        name, x = action.name, action.target
        if name in INTERNAL_ACTIONS:
            return []
        if name == "start_turn":
            return [TurnStarted(self.turn(x), self.actors[x], "acme")]
        if name == "cancel":
            return [CancelTurn(self.turn(x))]
        if name == "disconnect":
            return [Disconnect(self.turn(x), r) for r in self.responses(x)]
        if name == "response_end":
            return [ResponseTerminal(self.turn(x), r) for r in self.responses(x)]
        if name == "quarantine":
            return [QuarantineResponse(r) for r in self.responses(x)]
        if name == "disable_tool":
            return [DisableTool(tool) for tool in self.tools_used()]
        if name == "catalog_change":
            return [ToolChanged(tool, "rename", f"{tool}_v2") for tool in self.tools_used()]
        if name == "stop_tenant":
            return [StopTenant("acme")]
        if name == "restart":
            return [Restart()]
        event = self._call_event(action)
        return [] if event is None else [event]

    def _call_event(self, action: Action) -> Event | None:
        name, x = action.name, action.target
        turn, response, item, call_id = self.ident(x)
        call = self.calls[x]
        if name == "open":
            call.opened = True
            return CallOpened(turn, response, item, call_id, call.tool)
        if name == "fragment":
            if call.sent < len(call.pieces):
                position = call.order[call.sent]
                text = call.pieces[position]
                call.sent += 1
            else:  # data after the document: a new position
                position, text = len(call.pieces) + call.late, " "
                call.late += 1
            return Fragment(turn, response, item, call_id, position, text)
        if name == "fragment_repeat":
            if call.first_fragment is None:
                return Fragment(turn, response, item, call_id, call.order[0], call.pieces[call.order[0]])
            return Replay(call.first_fragment, call.first_fragment + 1)
        if name == "fragment_conflict":
            return Fragment(turn, response, item, call_id, call.order[0], "[")
        if name == "fragment_over_limit":
            position = len(call.pieces) + call.late
            call.late += 1
            return Fragment(turn, response, item, call_id, position, " " * (self.limits.call_bytes + 1))
        if name in ("terminal_completed", "terminal_stopped"):
            call.terminals += 1
            reason: StopReason = "completed" if name == "terminal_completed" else "length"
            return CallTerminal(turn, response, item, call_id, f"e{x}-{call.terminals}", reason)
        if name == "terminal_repeat":
            if call.last_terminal is None:  # pragma: no cover - the model requires a terminal first
                return None
            return Replay(call.last_terminal, call.last_terminal + 1)
        if name in ("confirm", "deny"):
            return Confirm(turn, response, item, call_id, name == "confirm")
        raise ValueError(f"no concrete event for action {action}")


_TURN_ACTIONS: Final = frozenset({"start_turn", "cancel", "disconnect", "response_end", "quarantine"})


def concretise(
    config: Config, initial: AbsState, path: Sequence[tuple[Action, AbsState]], variant: Variant = PLAIN
) -> Trace:
    """The concrete trace of an abstract path (``(action, state after)`` pairs, as
    :meth:`~callsafe.formal.graph.Exploration.path_to` returns them) starting at ``initial``,
    its data, identities and caps drawn from ``variant`` of the concrete domain
    (:mod:`callsafe.generators.domain`; the plain variant is the domain of old)."""
    return _Builder(config, path, initial, variant).build()
