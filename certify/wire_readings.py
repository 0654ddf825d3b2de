"""Judging a library's run on a stream that defensible readings read differently.

Why: a wire adversity's expected verdicts come from the oracle on what the protocol's own
parser reads (:mod:`callsafe.providers.adversities`), and where the parser refuses a shape
that the protocol's documentation does not settle (arguments before the Chat tool name, an
``output_index`` or item id used twice, a replayed ``response.created``, a replayed Anthropic
start), the parser's refusal ("nothing runs") is one defensible reading and a client that
assembles by the documented index is another (:mod:`callsafe.providers.readings`). The
project's rule for such silence is the oracle's ``may``: allow every defensible reading. So a
run that callsafe's reading finds violated is judged again under each other reading of the
same payloads, and a reading under which it is correct makes it correct; the judgement
records which reading that was (:attr:`~callsafe.certify.judge.Judgement.reading`) and what
it spared, and the matrix says so in the cell.

Each reading is judged whole, as its own trace: its events are what the strict parser reads
from the payloads the reading rewrote, so the invariant checkers and the oracle see one
consistent stream (a call's terminal event, its fragments, its stop reason). What the
target did is placed in that stream by where in the payloads it happened
(:attr:`~callsafe.certify.runner.Run.wire_clock`), not by the step of the other parse. What
no reading allows stays a violation: glued ``{..}{..}`` arguments, a run on a ``length``
stop, a second execution, a prefix, a call the stream never carried. When every reading
finds a violation, the run is judged under the reading whose executions it is closest to
(the fewest executions that reading does not make, with those arguments, once, and calls
it runs that never ran; then the fewest violations; callsafe's own reading on a full tie):
the story of what the library got wrong once its reading is granted.

A run the target broke (a target error that breaks runs) is judged under callsafe's reading
only: its findings are already set aside, and a broken run is no evidence either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from callsafe.certify.judge import Judgement, judge_observations
from callsafe.certify.runner import Run
from callsafe.certify.wire import WirePlan, plan_recorded, plan_wire, response_deferred_liveness
from callsafe.model.oracle import Oracle, judge
from callsafe.model.vocabulary import CallKey, Event, Executed, Observation, Trace
from callsafe.providers.adversities import WireTrace
from callsafe.providers.base import WIRE_EVENTS, NotRepresentable
from callsafe.providers.readings import WireReading, differing_readings, readings_for

__all__ = ["judge_rendered_readings", "judge_wire", "judge_wire_readings", "payload_steps", "reading_trace"]


def judge_wire(
    trace: Trace,
    observations: Sequence[Observation],
    capabilities: frozenset[str],
    run: Run,
    oracle: Oracle | None = None,
) -> Judgement:
    """The judgement of a provider-protocol run under one reading (the trace's own events),
    liveness counted only for responses that ended normally (see :mod:`callsafe.certify.wire`)."""
    judgement = judge_observations(trace, observations, capabilities, run.errors, oracle or judge(trace))
    live = judgement.results.get("LIVE-DISPATCH")
    if live:
        counts = response_deferred_liveness(trace)
        judgement.results["LIVE-DISPATCH"] = [f for f in live if counts(f.key)]
    return judgement


def payload_steps(plan: WirePlan) -> tuple[list[int], int]:
    """Per payload of a recorded stream's plan, the step at which the runner hands it over
    (the step before its delivery's for the payloads delivered early), and the step of the
    end of the body."""
    steps: list[int] = []
    for step, delivery in enumerate(plan.deliveries):
        steps += [step - 1 if k < delivery.early else step for k in range(len(delivery.payloads))]
    return steps, len(plan.deliveries) - 1


def reading_trace(trace: WireTrace, reading: WireReading, events: Sequence[Event]) -> WireTrace:
    """``trace`` with the events ``reading`` reads from its payloads."""
    head = tuple(e for e in trace.events if not isinstance(e, WIRE_EVENTS))
    return dataclasses.replace(
        trace,
        events=(*head, *events),
        name=f"{trace.name} [read as: {reading.name}]"[:400],
    )


def _placed(run: Run, plan: WirePlan) -> list[Observation] | None:
    """The run's observations with their steps in ``plan``'s parse (None: the run has no
    wire clock to place them by)."""
    if len(run.wire_clock) != len(run.observations):
        return None
    steps, end = payload_steps(plan)
    out: list[Observation] = []
    for obs, clock in zip(run.observations, run.wire_clock, strict=True):
        if clock == 0:
            out.append(obs)
            continue
        step = steps[clock - 1] if clock <= len(steps) else end
        out.append(dataclasses.replace(obs, step=step))
    return out


def _mismatch(oracle: Oracle, observations: Sequence[Observation]) -> int:
    """How far what the executor received is from what a reading runs, whenever it ran it:
    executions of calls the reading never runs, with other arguments, or repeated, and
    calls the reading must run that never ran."""
    runs: dict[CallKey, list[object]] = {}
    for obs in observations:
        if isinstance(obs, Executed):
            runs.setdefault(obs.key, []).append(obs.arguments)
    count = 0
    for key, arguments in runs.items():
        verdict = oracle.verdicts.get(key)
        if verdict is None or verdict.execute == "must_not":
            count += len(arguments)
        else:
            count += sum(1 for a in arguments if a != verdict.arguments) + len(arguments) - 1
    return count + sum(1 for k, v in oracle.verdicts.items() if v.execute == "must" and k not in runs)


def _verdicts(oracle: Oracle) -> dict[CallKey, tuple[str, object]]:
    return {k: (v.execute, v.arguments) for k, v in oracle.verdicts.items()}


def _weight(judgement: Judgement) -> tuple[int, int, int]:
    """(invariants with a safety finding, invariants violated, findings): the fewer, the
    closer a reading is to what the run did."""
    violated = judgement.violated
    safety = sum(1 for inv in violated if any(f.kind == "safety" for f in judgement.of(inv)))
    return (safety, len(violated), sum(len(judgement.of(inv)) for inv in violated))


BY_CALL_ID: Final = "calls named by their id"


def by_call_id(oracle: Oracle, observations: Sequence[Observation]) -> list[Observation]:
    """Observations whose call key the stream never carried, renamed to the one key of the
    stream with the same call id (tenant, turn and response alike), where there is exactly
    one. Why: a Chat Completions call's ``index`` is its place in the streamed deltas, and a
    library that hands over the assembled message (a ``tool_calls`` list, numbered from 0,
    or Mistral's deltas without any index) keeps the call's ``id`` and not that place; the
    call it ran is still the call of that id. Renamed, a second execution of a call is still
    a second execution, and a call that must not run still must not."""
    out: list[Observation] = []
    for obs in observations:
        key = getattr(obs, "key", None)
        if isinstance(key, CallKey) and key not in oracle.verdicts:
            same = [
                k
                for k in oracle.verdicts
                if (k.tenant, k.turn, k.response, k.call) == (key.tenant, key.turn, key.response, key.call)
            ]
            if len(same) == 1:
                obs = dataclasses.replace(obs, key=same[0])  # type: ignore[call-arg]
        out.append(obs)
    return out


def judge_wire_readings(
    trace: WireTrace,
    run: Run,
    capabilities: frozenset[str],
    primary: Judgement,
    oracle: Oracle | None = None,
) -> Judgement:
    """``primary`` (the run judged under the protocol's own parser), or the judgement under
    another defensible reading of the trace's payloads that finds the run correct, or whose
    executions the run is closest to (see the module docstring). Under each reading the run
    is also judged with its calls named by their id (:func:`by_call_id`)."""
    if not primary.violated or primary.broken:
        return primary
    turn = next((getattr(e, "turn", "") for e in trace.events if not isinstance(e, WIRE_EVENTS)), "")
    primary_events = [e for e in trace.events if isinstance(e, WIRE_EVENTS)]
    primary_oracle = oracle or judge(trace)
    # each candidate: (its name, its trace, its oracle, the run's observations placed in it)
    candidates: list[tuple[str, Trace, Oracle, Sequence[Observation]]] = [("", trace, primary_oracle, run.observations)]
    for reading, events in differing_readings(
        trace.protocol, trace.payloads, primary_events, turn=turn, response="r1", clean=trace.clean
    ):
        alternative = reading_trace(trace, reading, events)
        try:
            plan = plan_recorded(alternative, reading.parser)
        except NotRepresentable:  # pragma: no cover - the events are the reading's own parse
            continue
        placed = _placed(run, plan)
        if placed is None:
            return primary
        alt_oracle = judge(alternative)
        # a reading that judges every call alike matters only where it ends calls at other payloads
        if _verdicts(alt_oracle) != _verdicts(primary_oracle) or list(events) == primary_events:
            candidates.append((reading.name, alternative, alt_oracle, placed))
    # (how far the run is from a reading's executions, its violations, 0 for callsafe's own
    # reading so that it wins a full tie): the smallest is the reading the run is judged under
    closest = (_mismatch(primary_oracle, run.observations), *_weight(primary), 0)
    chosen: tuple[str, Judgement] | None = None
    for name, candidate, candidate_oracle, seen in candidates:
        options: list[tuple[str, Sequence[Observation]]] = [(name, seen)] if name else []
        renamed = by_call_id(candidate_oracle, seen)
        if renamed != list(seen):
            options.append((f"{name}; {BY_CALL_ID}" if name else BY_CALL_ID, renamed))
        for label, observations in options:  # callsafe's own reading as it is: the primary judgement
            judgement = judge_wire(candidate, observations, capabilities, run, candidate_oracle)
            weight = (_mismatch(candidate_oracle, observations), *_weight(judgement), 1)
            if weight < closest:
                closest, chosen = weight, (label, judgement)
    if chosen is None:
        return primary
    name, best = chosen
    best.reading = f"{name} ({trace.operator})" if trace.operator else name
    best.spared = tuple(sorted(primary.violated - best.violated))
    return best


def _replaced(run: Run, plan: WirePlan) -> list[Observation] | None:
    """The run's observations with the steps ``plan`` gives the payloads they were made at
    (None: the run did not record where in its payloads it acted)."""
    if len(run.wire_at) != len(run.observations):
        return None
    out: list[Observation] = []
    for obs, at in zip(run.observations, run.wire_at, strict=True):
        if at is not None:
            index, previous, k = at
            step = previous if k < plan.deliveries[index].early else index
            if step != obs.step:
                obs = dataclasses.replace(obs, step=step)
        out.append(obs)
    return out


def judge_rendered_readings(
    trace: Trace,
    plan: WirePlan,
    run: Run,
    capabilities: frozenset[str],
    primary: Judgement,
    oracle: Oracle,
    reconnect: bool = False,
) -> Judgement:
    """``primary`` (a rendered trace's run judged where the protocol's own parser ends each
    event), or the judgement under another defensible reading of the protocol that reads the
    same events from the rendered payloads but at other payloads of their events (the
    Responses call that ends at its arguments' done event, one payload before its
    ``output_item.done``) and finds fewer violations. The events, and so the oracle, are the
    trace's own; only the steps of what the target did while an event's payloads arrived
    move. A reading that reads other events from the rendered stream is not one of these."""
    if not primary.violated or primary.broken:
        return primary
    best, chosen = primary, ""
    for reading in readings_for(plan.protocol):
        try:
            other = plan_wire(plan.protocol, trace.delivered(), reconnect, reading.parser)
        except NotRepresentable:
            continue
        if [d.early for d in other.deliveries] == [d.early for d in plan.deliveries]:
            continue
        placed = _replaced(run, other)
        if placed is None:
            return primary
        judgement = judge_wire(trace, placed, capabilities, run, oracle)
        if _weight(judgement) < _weight(best):
            best, chosen = judgement, reading.name
    if not chosen:
        return primary
    best.reading = chosen
    best.spared = tuple(sorted(primary.violated - best.violated))
    return best
