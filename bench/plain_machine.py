"""The baseline of the bug-finding benchmark: a plain hypothesis stateful test.

Why it exists: "callsafe finds bugs" means little without the alternative a careful
developer would write instead, a :class:`~hypothesis.stateful.RuleBasedStateMachine`
that throws random events at the implementation and checks the invariants after each
one. This is that test, written the plain way on purpose:

* **one rule per event kind**, every one of them (turn started, call opened, argument
  fragment, text fragment, call terminal, response terminal, cancel, disconnect, replay,
  tool catalog change, confirm, quarantine, disable tool, stop tenant, restart), picked by
  hypothesis with no preconditions beyond "there is something to replay";
* **random arguments from small pools** (two turns, responses, items and calls, two
  tenants and actors, the catalog's tools plus an unknown one, positions 0-3, any stop
  reason), with no knowledge of which combinations matter: a fragment may name a call
  that was never opened, a turn may start twice;
* **fragment text** from a handful of JSON pieces (``{``, ``"n"``, ``:``, ``1``,
  ``{"n":1}``, ...) or short random text. Random text alone would almost never make a JSON
  object, so nothing would ever execute and the baseline would miss every mutant for a
  reason no developer would accept; knowing that arguments are JSON is not knowing the
  scenarios;
* **none of callsafe's generators** (no catalog, no coverage suite, no z3, no walks, not
  :mod:`callsafe.generators.machine`, whose rules know which calls are open and cut real
  documents), and no ``during_validation`` events (a plain test has no hook into the
  window in which the validator runs).

After every event the trace so far is judged exactly as the harness judges a run
(:func:`callsafe.certify.judge.judge_observations`: the invariant checkers and the
oracle), on what the harness's spies observed from the target
(:class:`callsafe.certify.runner.Session`). The first violation fails the test and
hypothesis shrinks it.

The run is bounded by wall-clock time (hypothesis has no such setting): a
:class:`PlainProbe` raises :class:`BudgetSpent` (a ``BaseException``, which hypothesis
does not treat as a test failure and lets through) when the budget is spent before any
violation, or when shrinking outlasts its own budget; the probe keeps the time of the
first violation and the shortest violating event sequence seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from callsafe.certify.judge import judge_observations
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
    Limits,
    QuarantineResponse,
    Replay,
    ResponseTerminal,
    Restart,
    StopTenant,
    TextFragment,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = ["BudgetSpent", "MachineBuilder", "PlainOutcome", "PlainProbe", "plain_machine", "run_machine", "run_plain"]

TOOLS: dict[str, ToolSpec] = {
    "note": ToolSpec(schema={"type": "object"}),
    "approve": ToolSpec(schema={"type": "object"}, confirm=True),
}
LIMITS = Limits()

turns = st.sampled_from(("t1", "t2"))
responses = st.sampled_from(("r1", "r2"))
items = st.sampled_from(("i1", "i2"))
calls = st.sampled_from(("c1", "c2"))
tenants = st.sampled_from(("acme", "beta"))
actors = st.sampled_from(("u1", "u2"))
tool_names = st.sampled_from((*TOOLS, "unknown"))
reasons = st.sampled_from(STOP_REASONS)
JSON_PIECES = ("{", "}", "{}", '"n"', ":", "1", "0", ",", '"a"', '{"n":1}', '{"n":10}')
texts = st.one_of(st.sampled_from(JSON_PIECES), st.text(max_size=3))


class BudgetSpent(KeyboardInterrupt):
    """The wall-clock budget ran out (a ``BaseException``: hypothesis lets it through
    instead of shrinking it as a failure)."""


@dataclass
class PlainProbe:
    """What one bounded run of the machine saw, across hypothesis's examples."""

    factory: TargetFactory
    capabilities: frozenset[str]
    budget: float  # seconds to find a first violation
    shrink_budget: float = 30.0  # seconds for hypothesis to shrink it
    started: float = field(default_factory=time.perf_counter)
    examples: int = 0
    steps: int = 0
    executing: int = 0  # examples in which the target executed at least one call
    first_failure: float | None = None  # seconds from the start to the first violation
    first_violated: frozenset[str] = frozenset()
    smallest: tuple[Event, ...] | None = None  # the shortest violating event sequence seen
    smallest_violated: frozenset[str] = frozenset()
    last: tuple[Event, ...] | None = None  # the last violating sequence (hypothesis's final replay)
    last_violated: frozenset[str] = frozenset()
    expect: frozenset[str] = frozenset()  # the invariants that fail the test (empty: any)
    others: frozenset[str] = frozenset()  # invariants violated that do not (seen, not failed on)

    def counts(self, violated: frozenset[str]) -> bool:
        """Whether a violation fails the test: scored as callsafe is, by the mutant's own
        invariants (any, for a mutant that names none); another is noted and the run goes on."""
        if not violated:
            return False
        if not self.expect or violated & self.expect:
            return True
        self.others |= violated
        return False

    def tick(self) -> None:
        """Stop the run when its budget is spent (finding, or shrinking)."""
        now = time.perf_counter() - self.started
        if self.first_failure is None and now > self.budget:
            raise BudgetSpent(f"no violation in {self.budget:.1f} s")
        if self.first_failure is not None and now > self.first_failure + self.shrink_budget:
            raise BudgetSpent(f"shrinking took more than {self.shrink_budget:.0f} s")

    def failed(self, events: tuple[Event, ...], violated: frozenset[str]) -> None:
        if self.first_failure is None:
            self.first_failure = time.perf_counter() - self.started
            self.first_violated = violated
        if self.smallest is None or len(events) < len(self.smallest):
            self.smallest, self.smallest_violated = events, violated
        self.last, self.last_violated = events, violated


def plain_machine(probe: PlainProbe) -> type[RuleBasedStateMachine]:
    """The machine class, bound to ``probe`` (its target factory, budget and record)."""

    class PlainMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            probe.tick()
            probe.examples += 1
            self.session = Session(probe.factory(), TOOLS, LIMITS).open()
            self.events: list[Event] = []

        def _send(self, event: Event) -> None:
            self.events.append(event)
            self.session.send(event)

        @rule(turn=turns, actor=actors, tenant=tenants)
        def turn_started(self, turn: str, actor: str, tenant: str) -> None:
            self._send(TurnStarted(turn, actor, tenant))

        @rule(turn=turns, response=responses, item=items, call=calls, tool=tool_names)
        def call_opened(self, turn: str, response: str, item: str, call: str, tool: str) -> None:
            self._send(CallOpened(turn, response, item, call, tool))

        @rule(turn=turns, response=responses, item=items, call=calls, position=st.integers(0, 3), text=texts)
        def fragment(self, turn: str, response: str, item: str, call: str, position: int, text: str) -> None:
            self._send(Fragment(turn, response, item, call, position, text))

        @rule(turn=turns, response=responses, item=items, text=texts)
        def text_fragment(self, turn: str, response: str, item: str, text: str) -> None:
            self._send(TextFragment(turn, response, item, text))

        @rule(
            turn=turns,
            response=responses,
            item=items,
            call=calls,
            event_id=st.sampled_from(("e1", "e2", "e3")),
            reason=reasons,
        )
        def call_terminal(self, turn: str, response: str, item: str, call: str, event_id: str, reason: str) -> None:
            self._send(CallTerminal(turn, response, item, call, event_id, reason))  # type: ignore[arg-type]

        @rule(turn=turns, response=responses, reason=reasons)
        def response_terminal(self, turn: str, response: str, reason: str) -> None:
            self._send(ResponseTerminal(turn, response, reason))  # type: ignore[arg-type]

        @rule(turn=turns)
        def cancel_turn(self, turn: str) -> None:
            self._send(CancelTurn(turn))

        @rule(turn=turns, response=responses)
        def disconnect(self, turn: str, response: str) -> None:
            self._send(Disconnect(turn, response))

        @precondition(lambda self: bool(self.events))
        @rule(start=st.integers(0, 49), length=st.integers(1, 6))
        def replay(self, start: int, length: int) -> None:
            """A reconnect re-delivers ``length`` earlier events from ``start`` (wrapped)."""
            first = start % len(self.events)
            stop = min(len(self.events), first + length)
            again = [e for e in self.events[first:stop] if not isinstance(e, Replay)]
            self.events.append(Replay(first, stop))
            for event in again:  # what Trace.delivered() expands the replay into
                self.session.send(event)

        @rule(tool=tool_names, change=st.sampled_from(("rename", "remove", "schema")))
        def tool_changed(self, tool: str, change: str) -> None:
            schema = {"type": "object", "required": ["n"]} if change == "schema" else None
            new_name = "renamed" if change == "rename" else None
            self._send(ToolChanged(tool, change, new_name, schema))  # type: ignore[arg-type]

        @rule(turn=turns, response=responses, item=items, call=calls, approved=st.booleans())
        def confirm(self, turn: str, response: str, item: str, call: str, approved: bool) -> None:
            self._send(Confirm(turn, response, item, call, approved))

        @rule(response=responses)
        def quarantine(self, response: str) -> None:
            self._send(QuarantineResponse(response))

        @rule(tool=tool_names)
        def disable_tool(self, tool: str) -> None:
            self._send(DisableTool(tool))

        @rule(tenant=tenants)
        def stop_tenant(self, tenant: str) -> None:
            self._send(StopTenant(tenant))

        @rule()
        def restart(self) -> None:
            self._send(Restart())

        @invariant()
        def every_invariant_holds(self) -> None:
            probe.tick()
            probe.steps += 1
            if not self.events:
                return
            trace = Trace(tuple(self.events), TOOLS, LIMITS)
            run = self.session.run
            judgement = judge_observations(trace, self.session.observations, probe.capabilities, run.errors)
            if probe.counts(frozenset(judgement.violated)):
                probe.failed(trace.events, frozenset(judgement.violated))
                raise AssertionError(f"violated {sorted(judgement.violated)} after {len(trace.events)} events")

        def teardown(self) -> None:
            if any(isinstance(o, Executed) for o in self.session.observations):
                probe.executing += 1
            self.session.close()

    return PlainMachine


@dataclass(frozen=True)
class PlainOutcome:
    """One bounded run: whether and when it found a violation, and how small hypothesis
    made it (in events, a replay counting as one, as in callsafe's traces)."""

    budget: float
    seconds: float
    examples: int
    steps: int
    executing: int
    first_failure: float | None
    first_violated: frozenset[str]
    shrunk_events: int | None
    shrunk_violated: frozenset[str]
    shrink_finished: bool
    others: frozenset[str] = frozenset()  # other invariants violated on the way

    @property
    def found(self) -> bool:
        return self.first_failure is not None


MachineBuilder = Callable[[PlainProbe], type[RuleBasedStateMachine]]


def run_plain(
    factory: TargetFactory,
    capabilities: frozenset[str],
    budget: float,
    shrink_budget: float = 30.0,
    expect: frozenset[str] = frozenset(),
) -> PlainOutcome:
    """Run the plain machine against ``factory`` for at most ``budget`` seconds before a
    first violation of one of ``expect`` (any, when empty; and ``shrink_budget`` after it).
    Deterministic choices (``derandomize``), no example database, no per-example deadline."""
    return run_machine(plain_machine, factory, capabilities, budget, shrink_budget, expect)


def run_machine(
    build: MachineBuilder,
    factory: TargetFactory,
    capabilities: frozenset[str],
    budget: float,
    shrink_budget: float = 30.0,
    expect: frozenset[str] = frozenset(),
) -> PlainOutcome:
    """Run the machine ``build`` makes (bound to a :class:`PlainProbe`) as :func:`run_plain`
    runs the plain one: the same settings, budgets, scoring and record, for every baseline."""
    probe = PlainProbe(factory, capabilities, budget, shrink_budget, expect=expect)
    config = settings(
        max_examples=1_000_000,
        stateful_step_count=50,
        deadline=None,
        database=None,
        derandomize=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    finished = False
    probe.started = time.perf_counter()
    try:
        run_state_machine_as_test(build(probe), settings=config)
    except BudgetSpent:
        pass
    except Exception:
        if probe.first_failure is None:
            raise  # not a violation: the machine or the target itself broke
        finished = True  # hypothesis shrank the failure and replayed the smallest example
    seconds = time.perf_counter() - probe.started
    shrunk = probe.last if finished else probe.smallest
    violated = probe.last_violated if finished else probe.smallest_violated
    return PlainOutcome(
        budget=budget,
        seconds=seconds,
        examples=probe.examples,
        steps=probe.steps,
        executing=probe.executing,
        first_failure=probe.first_failure,
        first_violated=probe.first_violated,
        shrunk_events=len(shrunk) if shrunk is not None else None,
        shrunk_violated=violated if shrunk is not None else frozenset(),
        shrink_finished=finished,
        others=probe.others,
    )
