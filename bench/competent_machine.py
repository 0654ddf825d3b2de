"""The fair baselines of the bug-finding benchmark: a competent hypothesis state machine,
and callsafe's own ``certify_machine``.

Why: :mod:`bench.plain_machine` is the strawman (uniform events to random ids: a call is
almost never opened, filled and finished, so no dispatch bug can show). A developer who
knows hypothesis well and has read the event vocabulary, but not callsafe's generators,
writes this instead:

* a :class:`~hypothesis.stateful.Bundle` of opened calls, so every later event names a
  call that exists (in the turn and response it was opened in);
* a JSON document per call (drawn: a few keys, numbers, text with non-ASCII characters),
  cut into pieces at drawn points, sent in order by ``send_piece``;
* a ``finish`` rule (the remaining pieces, then the completed terminal event), since a
  call only executes once it is complete;
* the controls a streaming assembler must survive, each a rule: a new turn, cancel,
  disconnect, the response's end, a stop reason on a call's terminal, a repeated piece,
  a conflicting piece, text between the calls, confirm or deny, quarantine, disabling,
  renaming, removing or changing the tool, stopping the tenant, a restart, and a reconnect
  that re-delivers the last few events.

It is judged exactly as the plain machine is (after every event, by the harness's judge:
the invariant checkers and the oracle, :func:`callsafe.certify.judge.judge_observations`),
and run by the same :func:`bench.plain_machine.run_machine` (same settings, budgets,
record). :func:`certify_machine_baseline` runs ``callsafe.certify.machine.certify_machine``'s
rules (which do know callsafe's scenarios) under that same judge and runner, in place of
its own check and delta-debugging shrink, so all three are scored alike.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from bench.plain_machine import LIMITS, TOOLS, PlainOutcome, PlainProbe, run_machine
from callsafe.certify.judge import judge_observations
from callsafe.certify.machine import certify_machine
from callsafe.certify.runner import Session
from callsafe.certify.targets import TargetFactory
from callsafe.model.vocabulary import (
    STOP_REASONS,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    Executed,
    Fragment,
    QuarantineResponse,
    Replay,
    ResponseTerminal,
    Restart,
    StopTenant,
    TextFragment,
    ToolChanged,
    Trace,
    TurnStarted,
)

__all__ = ["certify_machine_baseline", "competent_machine", "run_certify_machine", "run_competent"]

CONTROLS = (
    "new_turn",
    "response_ends",
    "cancel",
    "disconnect",
    "quarantine",
    "disable_tool",
    "rename",
    "remove",
    "schema",
    "stop_tenant",
    "restart",
)

documents = st.dictionaries(
    st.sampled_from(("n", "note", "city", "items")),
    st.one_of(st.integers(-5, 2000), st.text(alphabet='aé€😀\t"\\ x', max_size=6), st.booleans()),
    min_size=1,
    max_size=3,
).map(lambda d: json.dumps(d, ensure_ascii=False, separators=(",", ":")))


@dataclass
class _Call:
    turn: str
    response: str
    item: str
    call: str
    pieces: list[str] = field(default_factory=list)
    sent: int = 0
    terminals: int = 0


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a] or [text]


def competent_machine(probe: PlainProbe) -> type[RuleBasedStateMachine]:
    """The competent machine class, bound to ``probe``."""

    class CompetentMachine(RuleBasedStateMachine):
        calls = Bundle("calls")

        def __init__(self) -> None:
            super().__init__()
            probe.tick()
            probe.examples += 1
            self.session = Session(probe.factory(), TOOLS, LIMITS).open()
            self.events: list[Event] = []
            self.turn_no = 0
            self.opened = 0
            self.state: dict[str, _Call] = {}

        def _send(self, event: Event) -> None:
            self.events.append(event)
            self.session.send(event)

        def _turn(self) -> str:
            return f"t{self.turn_no}"

        def _piece(self, c: _Call, position: int, text: str) -> None:
            self._send(Fragment(c.turn, c.response, c.item, c.call, position, text))

        def _terminal(self, c: _Call, reason: str) -> None:
            c.terminals += 1
            self._send(CallTerminal(c.turn, c.response, c.item, c.call, f"e-{c.call}-{c.terminals}", reason))  # type: ignore[arg-type]

        @initialize()
        def first_turn(self) -> None:
            self.turn_no = 1
            self._send(TurnStarted(self._turn(), "u1", "acme"))

        @rule(
            target=calls,
            tool=st.sampled_from((*TOOLS, "unknown")),
            document=documents,
            cuts=st.lists(st.integers(0, 60), max_size=4),
        )
        def open_call(self, tool: str, document: str, cuts: list[int]) -> str:
            self.opened += 1
            turn = self._turn()
            c = _Call(turn, f"r-{turn}", f"i{self.opened}", f"c{self.opened}", _cut(document, cuts))
            self.state[c.call] = c
            self._send(CallOpened(turn, c.response, c.item, c.call, tool))
            return c.call

        @rule(call=calls)
        def send_piece(self, call: str) -> None:
            c = self.state[call]
            if c.sent < len(c.pieces):
                self._piece(c, c.sent, c.pieces[c.sent])
                c.sent += 1

        @rule(call=calls)
        def finish(self, call: str) -> None:
            c = self.state[call]
            while c.sent < len(c.pieces):
                self._piece(c, c.sent, c.pieces[c.sent])
                c.sent += 1
            self._terminal(c, "completed")

        @rule(call=calls, reason=st.sampled_from(STOP_REASONS))
        def terminal(self, call: str, reason: str) -> None:
            self._terminal(self.state[call], reason)

        @rule(call=calls)
        def repeat_piece(self, call: str) -> None:
            c = self.state[call]
            if c.sent:
                self._piece(c, c.sent - 1, c.pieces[c.sent - 1])

        @rule(call=calls, text=st.sampled_from(("{", "}", "x", '"')))
        def conflicting_piece(self, call: str, text: str) -> None:
            c = self.state[call]
            if c.sent and c.pieces[0] != text:
                self._piece(c, 0, text)

        @rule(text=st.text(max_size=4))
        def text_between(self, text: str) -> None:
            self._send(TextFragment(self._turn(), f"r-{self._turn()}", "text", text))

        @rule(call=calls, approved=st.booleans())
        def confirm(self, call: str, approved: bool) -> None:
            c = self.state[call]
            self._send(Confirm(c.turn, c.response, c.item, c.call, approved))

        @rule(kind=st.sampled_from(CONTROLS), tool=st.sampled_from(tuple(TOOLS)), reason=st.sampled_from(STOP_REASONS))
        def control(self, kind: str, tool: str, reason: str) -> None:
            """One rule for every stop, so that stops are one choice in ten, not half of
            them (with a rule each, few calls would live long enough to finish)."""
            turn, response = self._turn(), f"r-{self._turn()}"
            if kind == "new_turn":
                self.turn_no += 1
                self._send(TurnStarted(self._turn(), "u1", "acme"))
            elif kind == "response_ends":
                self._send(ResponseTerminal(turn, response, reason))  # type: ignore[arg-type]
            elif kind == "cancel":
                self._send(CancelTurn(turn))
            elif kind == "disconnect":
                self._send(Disconnect(turn, response))
            elif kind == "quarantine":
                self._send(QuarantineResponse(response))
            elif kind == "disable_tool":
                self._send(DisableTool(tool))
            elif kind in ("rename", "remove", "schema"):
                schema = {"type": "object", "required": ["n"]} if kind == "schema" else None
                self._send(ToolChanged(tool, kind, "renamed" if kind == "rename" else None, schema))  # type: ignore[arg-type]
            elif kind == "stop_tenant":
                self._send(StopTenant("acme"))
            else:
                self._send(Restart())

        @precondition(lambda self: len(self.events) > 1)
        @rule(back=st.integers(1, 6))
        def reconnect_replays(self, back: int) -> None:
            stop = len(self.events)
            start = max(0, stop - back)
            again = [e for e in self.events[start:stop] if not isinstance(e, Replay)]
            self.events.append(Replay(start, stop))
            for event in again:  # what Trace.delivered() expands the replay into
                self.session.send(event)

        @invariant()
        def every_invariant_holds(self) -> None:
            probe.tick()
            probe.steps += 1
            trace = Trace(tuple(self.events), TOOLS, LIMITS)
            judgement = judge_observations(
                trace, self.session.observations, probe.capabilities, self.session.run.errors
            )
            if probe.counts(frozenset(judgement.violated)):
                probe.failed(trace.events, frozenset(judgement.violated))
                raise AssertionError(f"violated {sorted(judgement.violated)} after {len(trace.events)} events")

        def teardown(self) -> None:
            if any(isinstance(o, Executed) for o in self.session.observations):
                probe.executing += 1
            self.session.close()

    return CompetentMachine


def certify_machine_baseline(probe: PlainProbe) -> type[RuleBasedStateMachine]:
    """``certify_machine``'s rules against the probe's target, judged and budgeted as the
    other baselines (its own check and its delta-debugging shrink replaced)."""
    base = certify_machine(probe.factory)

    class CertifyMachineBaseline(base):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            probe.tick()
            probe.examples += 1
            super().__init__()

        @invariant()
        def every_invariant_holds(self) -> None:
            probe.tick()
            probe.steps += 1
            if not self.events:
                return
            trace = self.trace()
            session = self.driver.session
            judgement = judge_observations(trace, session.observations, probe.capabilities, session.run.errors)
            if probe.counts(frozenset(judgement.violated)):
                probe.failed(trace.events, frozenset(judgement.violated))
                raise AssertionError(f"violated {sorted(judgement.violated)} after {len(trace.events)} events")

        def teardown(self) -> None:
            if any(isinstance(o, Executed) for o in self.driver.observations):
                probe.executing += 1
            super().teardown()

    return CertifyMachineBaseline


def run_competent(
    factory: TargetFactory,
    capabilities: frozenset[str],
    budget: float,
    shrink_budget: float = 30.0,
    expect: frozenset[str] = frozenset(),
) -> PlainOutcome:
    return run_machine(competent_machine, factory, capabilities, budget, shrink_budget, expect)


def run_certify_machine(
    factory: TargetFactory,
    capabilities: frozenset[str],
    budget: float,
    shrink_budget: float = 30.0,
    expect: frozenset[str] = frozenset(),
) -> PlainOutcome:
    return run_machine(certify_machine_baseline, factory, capabilities, budget, shrink_budget, expect)
