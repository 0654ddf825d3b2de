"""A hypothesis rule-based state machine that writes a trace one event at a time.

Why a state machine next to the strategies: a strategy draws a whole trace up front; the
machine chooses each next event after seeing the state so far (which calls are open,
which pieces were sent), hypothesis checks the invariants after every event, and a
failure shrinks to a short sequence of rules. The failure message carries the trace as
JSON, replayable with ``callsafe replay``.

The machine drives anything that can take events (a :class:`Driver`); it does not know
about targets, which belong to the harness (``generators`` never imports ``certify``).
:func:`callsafe.certify.machine.certify_machine` binds it to a target:

    from callsafe.certify.machine import certify_machine

    TestMyAssembler = certify_machine("mypkg.adapter:factory").TestCase
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from callsafe.model.invariants import check_all
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    Disconnect,
    Event,
    Fragment,
    Limits,
    Observation,
    QuarantineResponse,
    Replay,
    Restart,
    StopTenant,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = ["Driver", "trace_machine"]


class Driver(Protocol):
    """What the machine sends events to: a started target behind the harness's spies."""

    @property
    def observations(self) -> Sequence[Observation]: ...

    def send(self, event: Event, during: Sequence[Event] = ()) -> None: ...

    def close(self) -> None: ...


OpenDriver = Callable[[Mapping[str, ToolSpec], Limits], Driver]


@dataclass
class _Call:
    turn: str
    response: str
    pieces: list[str]
    tool: str = ""
    sent: int = 0
    terminals: int = 0


def _document(call: str, turn: str) -> str:
    # Multi-byte characters, an escape and a number whose value a repeated piece changes.
    doc = {"call": f"{call}-{turn}", "note": "café €5 😀", "tab": "\t", "n": 1200}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _split(text: str, pieces: int) -> list[str]:
    cuts = [round(k * len(text) / pieces) for k in range(pieces + 1)]
    return [text[cuts[k] : cuts[k + 1]] for k in range(pieces)]


def trace_machine(
    open_driver: OpenDriver,
    capabilities: frozenset[str],
    tools: Mapping[str, ToolSpec] | None = None,
    limits: Limits | None = None,
    name: str = "TraceMachine",
    shrink: Callable[[Trace, str], Trace] | None = None,
) -> type[RuleBasedStateMachine]:
    """A state machine class whose rules send events through a fresh driver per run and
    whose invariant is every applicable invariant of :mod:`callsafe.model.invariants`.

    Rules that need a capability the target lacks (cancel, operator stops, restart,
    confirmation, stops during validation) are never enabled."""
    catalog: dict[str, ToolSpec] = dict(tools or {"note": ToolSpec(schema={"type": "object"})})
    if "confirmation" in capabilities and not any(spec.confirm for spec in catalog.values()):
        catalog["approve"] = ToolSpec(schema={"type": "object"}, confirm=True)
    run_limits = limits or Limits()
    caps = frozenset(capabilities)

    def has(capability: str) -> Callable[[Any], bool]:
        return lambda self: capability in caps

    controls = [
        name
        for name, need in (
            ("new_turn", "cancellation"),
            ("cancel", "cancellation"),
            ("disconnect", "cancellation"),
            ("stop_tenant", "operator_controls"),
            ("quarantine", "operator_controls"),
            ("restart", "restart"),
        )
        if need in caps
    ]

    class Machine(RuleBasedStateMachine):
        calls = Bundle("calls")

        def __init__(self) -> None:
            super().__init__()
            self.driver = open_driver(catalog, run_limits)
            self.events: list[Event] = []
            self.turn_no = 0
            self.opened = 0
            self.state: dict[str, _Call] = {}

        # -- helpers ---------------------------------------------------------------

        def _send(self, event: Event, during: Sequence[Event] = ()) -> None:
            self.events.append(event)
            self.events.extend(during)
            self.driver.send(event, during)

        def _turn(self) -> str:
            return f"t{self.turn_no}"

        def _fragment(self, call: str, position: int, text: str) -> None:
            c = self.state[call]
            self._send(Fragment(c.turn, c.response, f"i-{call}", call, position, text))

        def _terminal(self, call: str, reason: str = "completed") -> CallTerminal:
            c = self.state[call]
            c.terminals += 1
            return CallTerminal(c.turn, c.response, f"i-{call}", call, f"end-{call}-{c.terminals}", reason)  # type: ignore[arg-type]

        def trace(self) -> Trace:
            return Trace(
                events=tuple(self.events),
                tools=catalog,
                limits=run_limits,
                name="hypothesis state machine",
                source="callsafe.generators.machine",
            )

        # -- rules ---------------------------------------------------------------

        @initialize()
        def start(self) -> None:
            self.turn_no = 1
            self._send(TurnStarted(self._turn(), "u1", "acme"))

        @rule(target=calls, tool=st.sampled_from(sorted(catalog)), pieces=st.integers(1, 4))
        def open_call(self, tool: str, pieces: int) -> str:
            """A new call in the current turn, its document cut in ``pieces``."""
            self.opened += 1
            call = f"c{self.opened}"
            turn = self._turn()
            self.state[call] = _Call(turn, f"r-{turn}", _split(_document(call, turn), pieces), tool=tool)
            self._send(CallOpened(turn, f"r-{turn}", f"i-{call}", call, tool))
            return call

        @rule(call=calls, tool=st.sampled_from(sorted(catalog)))
        def announce_again(self, call: str, tool: str) -> None:
            """The call's open event again, with the same or another tool name."""
            c = self.state[call]
            self._send(CallOpened(c.turn, c.response, f"i-{call}", call, tool))

        @rule(call=calls)
        def send_fragment(self, call: str) -> None:
            c = self.state[call]
            position = c.sent
            c.sent += 1
            self._fragment(call, position, c.pieces[position] if position < len(c.pieces) else " ")

        @rule(call=calls)
        def finish(self, call: str) -> None:
            """The rest of the call's pieces, then its completed terminal event."""
            c = self.state[call]
            while c.sent < len(c.pieces):
                c.sent += 1
                self._fragment(call, c.sent - 1, c.pieces[c.sent - 1])
            self._send(self._terminal(call))

        @rule(call=calls)
        def repeat_fragment(self, call: str) -> None:
            c = self.state[call]
            if c.sent:
                position = c.sent - 1
                self._fragment(call, position, c.pieces[position] if position < len(c.pieces) else " ")

        @rule(call=calls)
        def conflicting_fragment(self, call: str) -> None:
            if self.state[call].sent:
                self._fragment(call, 0, "{")

        @rule(call=calls, reason=st.sampled_from(["completed", "length"]))
        def terminal(self, call: str, reason: str) -> None:
            self._send(self._terminal(call, reason))

        @precondition(lambda self: "operator_controls" in caps and "business_validation" in caps)
        @rule(call=calls)
        def finish_then_stop_during_validation(self, call: str) -> None:
            c = self.state[call]
            while c.sent < len(c.pieces):
                c.sent += 1
                self._fragment(call, c.sent - 1, c.pieces[c.sent - 1])
            self._send(self._terminal(call), [StopTenant("acme", during_validation=True)])

        @precondition(lambda self: bool(controls))
        @rule(kind=st.sampled_from(controls or ["none"]))
        def control(self, kind: str) -> None:
            """A user, connection or operator stop, a new turn, or a restart."""
            turn = self._turn()
            if kind == "new_turn":
                self.turn_no += 1
                self._send(TurnStarted(self._turn(), "u1", "acme"))
            elif kind == "cancel":
                self._send(CancelTurn(turn))
            elif kind == "disconnect":
                self._send(Disconnect(turn, f"r-{turn}"))
            elif kind == "stop_tenant":
                self._send(StopTenant("acme"))
            elif kind == "quarantine":
                self._send(QuarantineResponse(f"r-{turn}"))
            elif kind == "restart":
                self._send(Restart())

        @precondition(has("confirmation"))
        @rule(call=calls, approved=st.booleans())
        def confirm(self, call: str, approved: bool) -> None:
            c = self.state[call]
            self._send(Confirm(c.turn, c.response, f"i-{call}", call, approved))

        @precondition(lambda self: len(self.events) > 1)
        @rule(back=st.integers(1, 6))
        def replay(self, back: int) -> None:
            """A reconnect re-delivers the last ``back`` events."""
            stop = len(self.events)
            start = max(0, stop - back)
            while start > 0 and getattr(self.events[start], "during_validation", False):
                start -= 1  # replay a during-validation event together with what it arrived during
            self.events.append(Replay(start, stop))
            again = [e for e in self.events[start:stop] if not isinstance(e, Replay)]
            i = 0
            while i < len(again):  # grouped as the runner groups a whole trace
                j = i + 1
                while j < len(again) and getattr(again[j], "during_validation", False):
                    j += 1
                self.driver.send(again[i], again[i + 1 : j])
                i = j

        # -- the invariant -------------------------------------------------------

        @invariant()
        def every_invariant_holds(self) -> None:
            if not self.events:
                return
            trace = self.trace()
            problems = [
                f"{v.invariant} ({v.kind}): {v.message}" + (f" [{v.key.short()}]" if v.key else "")
                for found in check_all(trace, list(self.driver.observations), caps).values()
                if found
                for v in found
            ]
            if problems:
                if shrink is not None:
                    # Hypothesis shrinks rules; delta debugging then drops every event the
                    # violation does not need, so the trace printed is minimal.
                    trace = shrink(trace, problems[0].split(" ", 1)[0])
                raise AssertionError(
                    "\n".join(problems)
                    + "\n\nReplayable trace (save as JSON, run `callsafe replay FILE TARGET`):\n"
                    + trace.dumps()
                )

        def teardown(self) -> None:
            self.driver.close()

    Machine.__name__ = Machine.__qualname__ = name
    return Machine
