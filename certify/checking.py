"""One trace checked against one target, and a partition's traces run one by one: the
small core that the planner (:mod:`~callsafe.certify.harness`), minimisation
(:mod:`~callsafe.certify.minimize`) and every executor (:mod:`~callsafe.certify.local`,
:mod:`~callsafe.certify.distributed`) share.

Why a module of its own: each of those needs "run this trace on a fresh target and judge
it", and none of them should need the others; before, minimisation and the executors took
it from the harness, which imported them back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from callsafe.certify.execution import PartitionResult, TraceResult
from callsafe.certify.judge import Finding, Judgement, judge_observations
from callsafe.certify.partitions import Partition
from callsafe.certify.runner import Call, Run, RunStopped, run_trace
from callsafe.certify.target_errors import TargetError, TraceTimeout, error_from_exception
from callsafe.certify.targets import TargetFactory, describe, resolve_target
from callsafe.certify.watchdog import DEFAULT_TRACE_TIMEOUT, first_trace_allowance, trace_deadline
from callsafe.certify.wire import (
    ABSTRACT,
    NotRepresentable,
    align_responses,
    not_applicable_reason,
    prepare,
    reconnects,
)
from callsafe.certify.wire_readings import judge_rendered_readings, judge_wire, judge_wire_readings
from callsafe.contract.target import Target
from callsafe.generators.coverage import reached_by_steps
from callsafe.generators.domain import features
from callsafe.generators.exhaustive import ExhaustiveStats
from callsafe.generators.needs import needed_capabilities
from callsafe.model.invariants import INVARIANTS
from callsafe.model.lifecycle import CallEvent
from callsafe.model.oracle import Oracle, judge
from callsafe.model.record_words import record_words_of
from callsafe.model.vocabulary import Disconnect, Observation, Trace
from callsafe.providers.adversities import WireTrace

__all__ = [
    "BYTE_CAPS",
    "HANG_LIMIT",
    "Checked",
    "Counterexample",
    "Example",
    "check_trace",
    "hung",
    "run_checked",
    "run_partition",
    "run_pieces",
]

# Consecutive hangs after which a run stops (``--max-hangs``): a target that hangs on every
# trace would otherwise cost the per-trace timeout on each of thousands of traces, and three
# in a row (each a fresh target) is evidence enough that the next one will hang too.
HANG_LIMIT: Final = 3


def hung(result: TraceResult) -> bool:
    """Whether the target hung on this trace (a hang that broke the run); a trace that was
    not applicable never ran and is neither a hang nor evidence against one."""
    judgement = result.judgement
    return judgement is not None and any(e.kind == "hang" and e.breaks_run for e in judgement.errors)


@dataclass
class Checked:
    """One trace checked against one target: the run, the oracle and the judgement."""

    trace: Trace
    missing: tuple[str, ...]
    run: Run | None
    oracle: Oracle
    judgement: Judgement
    note: str = ""  # why the trace is not applicable, beyond the missing capabilities

    @property
    def violated(self) -> set[str]:
        return self.judgement.violated

    def explain(self, invariant: str | None = None) -> str:
        return self.judgement.explain(invariant)


def _not_applicable_judgement() -> Judgement:
    return Judgement({inv.id: None for inv in INVARIANTS})


def _needs(trace: Trace) -> frozenset[str]:
    """The capabilities ``trace`` needs. In a :class:`WireTrace` a disconnect is what the
    wire did (the connection dropped, or the parser refused a payload and reads the stream
    as broken), not an application's cancellation: a library is given the wire as it came,
    so it needs no capability for it; what it then runs is judged as for any stop."""
    if isinstance(trace, WireTrace):
        trace = Trace(events=tuple(e for e in trace.events if not isinstance(e, Disconnect)), tools=trace.tools)
    return needed_capabilities(trace)


def run_checked(
    factory: TargetFactory,
    capabilities: frozenset[str],
    trace: Trace,
    timeout: float | None = DEFAULT_TRACE_TIMEOUT,
    cap: float | None = None,
) -> Checked:
    """Run ``trace`` on a fresh target from ``factory`` and judge it; the target is stopped
    after ``timeout`` seconds (:mod:`~callsafe.certify.watchdog`), and whatever it raised
    or hung on is on ``checked.judgement.errors`` (:class:`TargetError`). ``cap`` bounds
    a first trace's warm-up allowance (what is left of a budget)."""
    missing = tuple(sorted(_needs(trace) - capabilities))
    if missing:
        return Checked(trace, missing, None, judge(trace), _not_applicable_judgement())
    allowance = first_trace_allowance(_name_of(factory), timeout)
    if allowance is not None and cap is not None:
        allowance = min(allowance, cap)
    try:
        with trace_deadline(allowance):
            try:
                target: Target = factory()
            except Exception as exc:  # a target that cannot even be built: recorded, judged on nothing
                return _stopped(Run(trace, errors=[error_from_exception(exc, "factory")]), capabilities)
            if target.protocol != ABSTRACT:
                return _run_checked_wire(target, capabilities, trace)
            run = run_trace(target, trace)
    except RunStopped as stopped:
        return _stopped(stopped.run, capabilities)
    except TraceTimeout as timeout_in_factory:  # the factory itself did not return
        hang = TargetError("hang", "factory", str(timeout_in_factory), None, timeout_in_factory.stack)
        return _stopped(Run(trace, errors=[hang]), capabilities)
    oracle = judge(trace)
    judgement = judge_observations(trace, run.observations, capabilities, run.errors, oracle, record_words_of(target))
    return Checked(trace, missing, run, oracle, judgement)


def _name_of(factory: TargetFactory) -> str:
    """The factory's name (its spec when it came from a target name, so the warm-up of a
    target is counted once per process however often its name is resolved)."""
    return str(getattr(factory, "__qualname__", None) or id(factory))


def _stopped(run: Run, capabilities: frozenset[str]) -> Checked:
    """A run the target broke off (a hang, or a factory or ``start`` that raised): judged on
    the events it was given, the trace cut after the event it hung on (its minimal prefix:
    the events before it did not hang), so that what it did do is still judged."""
    trace = run.trace
    last = run.errors[-1] if run.errors else None
    if last is not None and last.kind == "hang" and last.step is not None:
        trace = hang_prefix(trace, last.step)
    elif last is not None and last.where in ("factory", "start"):
        trace = Trace(events=(), tools=trace.tools, limits=trace.limits, name=trace.name, source=trace.source)
    oracle = judge(trace)
    judgement = judge_observations(trace, run.observations, capabilities, run.errors, oracle)
    run.trace = trace
    return Checked(trace, (), run, oracle, judgement)


def hang_prefix(trace: Trace, step: int) -> Trace:
    """The events delivered up to and including ``step`` (replays expanded): a trace that
    hangs where ``trace`` hung, and is named so."""
    events = tuple(trace.delivered()[: step + 1])
    name = f"hang at step {step}" + (f" ({trace.name})" if trace.name else "")
    return Trace(events=events, tools=trace.tools, limits=trace.limits, name=name[:200], source=trace.source)


BYTE_CAPS: Final = "byte caps"


def _run_checked_wire(target: Target, capabilities: frozenset[str], trace: Trace) -> Checked:
    """One trace against a provider-protocol target: relabelled, rendered, run, judged (see
    :mod:`callsafe.certify.wire` for the rules).

    A :class:`WireTrace` whose stream defensible readings read differently is judged under
    each of them when callsafe's own reading finds a violation
    (:mod:`callsafe.certify.wire_readings`).

    A trace whose verdicts turn on a byte cap (the model refuses a call for exceeding
    it) is not applicable, counted under :data:`BYTE_CAPS`: the caps in ``env.limits`` are
    the application's configuration, no provider's wire carries them, and a client library
    has no setting for them, so a library that runs such a call has broken no promise of
    its own. (A capability for caps would let a wire target that enforces them opt in.)"""
    try:
        trace, plan = prepare(trace, target.protocol, reconnects(target))
    except NotRepresentable as exc:
        reason = not_applicable_reason(target.protocol)
        return Checked(trace, (reason,), None, judge(trace), _not_applicable_judgement(), str(exc))
    oracle = judge(trace)
    if any(step.event is CallEvent.OVER_LIMIT for step in oracle.steps):
        note = "the model refuses a call for a byte cap, which is the application's setting, not the wire's"
        return Checked(trace, (BYTE_CAPS,), None, oracle, _not_applicable_judgement(), note)
    run = run_trace(target, trace, plan=plan)  # RunStopped: the caller judges what ran
    run.observations = align_responses(trace, target.protocol, run.observations)  # a wire without response ids
    judgement = judge_wire(trace, run.observations, capabilities, run, oracle)
    if isinstance(trace, WireTrace):  # where defensible readings of the stream differ, any of them
        judgement = judge_wire_readings(trace, run, capabilities, judgement, oracle)
    else:  # a rendered stream: readings that end its events at other payloads
        judgement = judge_rendered_readings(trace, plan, run, capabilities, judgement, oracle, reconnects(target))
    return Checked(trace, (), run, oracle, judgement)


def check_trace(target: str | TargetFactory, trace: Trace, timeout: float | None = DEFAULT_TRACE_TIMEOUT) -> Checked:
    """Run one trace against a fresh target and judge it (``callsafe replay``, and the
    pytest files written for counterexamples); ``timeout`` is the per-trace timeout."""
    factory = resolve_target(target) if isinstance(target, str) else target
    info = describe(factory, target if isinstance(target, str) else None)
    return run_checked(factory, info.capabilities, trace, timeout)


def _result(generator: str, index: int, name: str, checked: Checked, seconds: float) -> TraceResult:
    """``name`` is the trace's own (a hang's trace is cut and renamed; the scenario keeps its name)."""
    if checked.missing:
        return TraceResult(generator, index, name, checked.missing, None, seconds)
    got = reached_by_steps(checked.oracle.steps)
    return TraceResult(
        generator,
        index,
        name,
        (),
        checked.judgement,
        seconds,
        frozenset(got.transitions),
        frozenset(got.pairs),
        checked.trace if checked.judgement.violated or checked.judgement.broken else None,
        features(checked.trace),
    )


def _run_one(
    factory: TargetFactory,
    capabilities: frozenset[str],
    generator: str,
    index: int,
    trace: Trace,
    timeout: float | None,
    cap: float | None = None,
) -> TraceResult:
    started = time.perf_counter()
    checked = run_checked(factory, capabilities, trace, timeout, cap)
    return _result(generator, index, trace.name, checked, time.perf_counter() - started)


def run_pieces(
    factory: TargetFactory,
    capabilities: frozenset[str],
    partition: Partition,
    deadline: float | None,
    worker: str = "",
    timeout: float | None = DEFAULT_TRACE_TIMEOUT,
    max_hangs: int = 0,
) -> Iterator[PartitionResult]:
    """Make a partition's traces here and run each against a fresh target, handing the
    results back one trace at a time; the last piece has what the enumeration skipped after
    the last trace, and ``complete=False`` when ``deadline`` stopped the partition.
    ``max_hangs`` (0: never) ends the partition after that many consecutive hangs: its
    results then end with them, and the harness, counting the same way, stops the run."""
    stats = ExhaustiveStats()
    skipped = 0
    hangs = 0
    for offset, trace in enumerate(partition.traces(stats)):
        if deadline is not None and time.time() > deadline:
            yield PartitionResult(partition, [], stats.skipped - skipped, False, worker)
            return
        # what is left of the budget bounds a first trace's warm-up, never the timeout itself
        cap = None if deadline is None or timeout is None else max(timeout, deadline - time.time())
        result = _run_one(factory, capabilities, partition.generator, partition.start + offset, trace, timeout, cap)
        yield PartitionResult(partition, [result], stats.skipped - skipped, worker=worker)
        skipped = stats.skipped
        if result.applicable:
            hangs = hangs + 1 if hung(result) else 0
        if max_hangs and hangs >= max_hangs:
            break
    yield PartitionResult(partition, [], stats.skipped - skipped, worker=worker)


def run_partition(
    factory: TargetFactory,
    capabilities: frozenset[str],
    partition: Partition,
    deadline: float | None = None,
    worker: str = "",
    timeout: float | None = DEFAULT_TRACE_TIMEOUT,
    max_hangs: int = 0,
) -> PartitionResult:
    """A partition's results in one piece (as a worker sends them back), until ``deadline``
    (a :func:`time.time` value: comparable across the processes of a machine, and across
    machines as far as their clocks agree)."""
    results: list[TraceResult] = []
    skipped = 0
    complete = True
    for piece in run_pieces(factory, capabilities, partition, deadline, worker, timeout, max_hangs):
        results += piece.results
        skipped += piece.skipped
        complete = piece.complete
    return PartitionResult(partition, results, skipped, complete, worker)


@dataclass
class Example:
    """A violating trace kept for minimisation."""

    generator: str
    trace: Trace
    findings: list[Finding]
    cause: str = ""  # the cause it was kept for (Finding.cause); "" for any finding of the invariant
    traces: int = 1  # violating traces with this cause, this one included


@dataclass
class Counterexample:
    """A minimal trace that still violates ``invariant``, with its run on the target."""

    invariant: str
    generator: str
    original: Trace
    minimal: Trace
    findings: list[Finding]
    observations: list[Observation]
    errors: list[TargetError]
    explanation: list[str]
    tests_run: int
    files: dict[str, str] = field(default_factory=dict)  # kind -> path (set by the report)
    calls: list[Call] = field(default_factory=list)  # what the validator and executor got and answered
    merged: int = 1  # counterexamples with this finding on these decisive events, shown as this one
    reading: str = ""  # a wire run judged under another defensible reading of its stream (wire_readings)
    cause: str = ""  # the distinct cause it shows (Finding.cause): one counterexample per cause
    traces: int = 1  # violating traces with that cause

    @property
    def about(self) -> str:
        """ "action" or "records": the section of the finding it was kept for."""
        for f in self.findings:
            if not self.cause or f.cause == self.cause:
                return f.about
        return "action"
