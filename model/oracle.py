"""The executable oracle: for any concrete trace, what a correct implementation must do.

For each call key the trace mentions, the oracle gives a :class:`Verdict`:

* ``must``: execute exactly once, with exactly these arguments (after a confirmation
  request if the tool needs one);
* ``must_not``: never execute, for the stated reason;
* ``may``: the spec allows a choice: where the readings of the spec the oracle allows
  (:class:`~callsafe.model.system.Reading`) judge the call differently. Fragments that
  arrived out of position order ("reject or reassemble by documented position"), bytes
  that arrive for a call after it ended, counted against the turn's cap or not, and an
  input met by a lasting store fault, failed closed or rolled back. Execution,
  if any, must use the arguments of the reading that runs the call.

The verdicts come from :mod:`callsafe.model.system`, which applies the lifecycle table
(:mod:`callsafe.model.lifecycle`) to each call: the oracle holds no rules of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final, Literal

from callsafe.model.leaks import withhold_path
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, State
from callsafe.model.system import LONE_SURROGATE, Reading, Semantics, Step, run_semantics
from callsafe.model.vocabulary import (
    AuditRow,
    BusinessValidated,
    CallKey,
    ConfirmationRequested,
    DisableTool,
    Executed,
    LedgerRow,
    Observation,
    QuarantineResponse,
    StatusShown,
    StopTenant,
    Trace,
)

_CONTROL_EVENTS: Final = frozenset({CallEvent.QUARANTINE, CallEvent.DISABLE_TOOL, CallEvent.STOP_TENANT})

__all__ = ["STOPPING_EVENTS", "Oracle", "Verdict", "ideal_observations", "judge"]

Decision = Literal["must", "must_not", "may"]


@dataclass(frozen=True)
class Verdict:
    """What must happen to one call."""

    key: CallKey
    tool: str | None
    execute: Decision
    arguments: Any
    reason: str
    state: State  # the model's final lifecycle state for the call
    confirmation: bool = False  # a confirmation request must precede execution
    # the call ends validated, waiting for a confirmation that never came, in every
    # reading: a request for it is due (LIVE-DISPATCH)
    confirmation_due: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key.to_json(),
            "tool": self.tool,
            "execute": self.execute,
            "reason": self.reason,
            "state": self.state.value,
        }
        if self.execute != "must_not":
            out["arguments"] = self.arguments
        if self.confirmation:
            out["confirmation"] = True
        return out

    def matches_author(self, expected: dict[str, Any]) -> bool:
        """Whether this verdict agrees with a trace author's ``{"execute": bool, ...}``."""
        want = expected.get("execute")
        if want is True and self.execute == "must_not":
            return False
        if want is False and self.execute == "must":
            return False
        return not ("arguments" in expected and self.execute != "must_not" and expected["arguments"] != self.arguments)


@dataclass
class Oracle:
    """The verdicts for one trace, with the model's step-by-step account."""

    trace: Trace
    semantics: Semantics
    verdicts: dict[CallKey, Verdict]
    # The other readings the spec allows that judge this trace otherwise (each with its own
    # semantics and unmerged verdicts); ``verdicts`` above are merged over all of them.
    alternatives: tuple[Oracle, ...] = ()

    @property
    def readings(self) -> tuple[Oracle, ...]:
        """This oracle (the model's reading) and the alternatives."""
        return (self, *self.alternatives)

    def by_short_name(self) -> dict[str, Verdict]:
        """Verdicts under ``turn/call`` names (the form trace authors write)."""
        return {v.key.short(): v for v in self.verdicts.values()}

    @property
    def steps(self) -> list[Step]:
        return self.semantics.steps

    def explain(self, key: CallKey) -> list[str]:
        """Stateright-style account: "event results in <what changed>"."""
        lines = []
        for s in self.semantics.steps:
            if s.key != key:
                continue
            change = f"{s.before} -> {s.after}" if s.before != s.after else f"stays {s.before}"
            lines.append(f"[{s.step}] {s.event} results in {change}" + (f" ({s.note})" if s.note else ""))
        return lines


def _verdicts(trace: Trace, sem: Semantics) -> dict[CallKey, Verdict]:
    """One reading's verdicts."""
    executed = {e.key for e in sem.expected if e.what == "execute"}
    verdicts: dict[CallKey, Verdict] = {}
    for call in sem.state.calls.values():
        spec = trace.tools.get(call.tool) if call.tool else None
        needs_confirmation = bool(spec and spec.confirm)
        if call.key in executed:
            decision: Decision = "may" if call.out_of_order else "must"
            reason = _OUT_OF_ORDER if call.out_of_order else "completed, valid, current and permitted"
            verdicts[call.key] = Verdict(
                call.key, call.tool, decision, call.arguments, reason, call.state, needs_confirmation
            )
            continue
        if call.state is State.VALIDATED:
            reason = "awaiting confirmation" if call.confirmation_requested else "validated, not dispatched"
        elif call.state in (State.COLLECTING, State.TERMINAL_CANDIDATE):
            reason = "no terminal event: the call never ended"
        elif call.state is State.ABSENT:
            reason = "never opened"
        else:
            reason = call.why or call.state.value
        verdicts[call.key] = Verdict(
            call.key,
            call.tool,
            "must_not",
            None,
            reason,
            call.state,
            needs_confirmation,
            confirmation_due=call.state is State.VALIDATED and needs_confirmation,
        )
    return verdicts


_OUT_OF_ORDER: Final = "fragments arrived out of position order: reassembling by position or rejecting are both allowed"


def _merge(
    primary: dict[CallKey, Verdict], others: list[tuple[Reading, dict[CallKey, Verdict]]]
) -> dict[CallKey, Verdict]:
    """Verdicts every reading agrees on stay; where readings differ (execute or not, or
    whether a confirmation request is due), the verdict is ``may``: any reading's
    behaviour is allowed, an execution with the arguments of the reading that runs it."""
    merged: dict[CallKey, Verdict] = {}
    for key, verdict in primary.items():
        alternatives = [(r, v[key]) for r, v in others if key in v]
        differ = [r for r, v in alternatives if v.execute != verdict.execute]
        due = verdict.confirmation_due and all(v.confirmation_due for _, v in alternatives)
        if not differ:
            merged[key] = dataclasses.replace(verdict, confirmation_due=due)
            continue
        runs = [verdict] + [v for _, v in alternatives]
        arguments = next((v.arguments for v in runs if v.execute != "must_not"), None)
        reason = "the spec is silent here; readings differ (" + "; ".join(r.describe() for r in differ) + ")"
        if verdict.reason == _OUT_OF_ORDER or any(v.reason == _OUT_OF_ORDER for v in runs):
            reason = _OUT_OF_ORDER
        merged[key] = dataclasses.replace(
            verdict, execute="may", arguments=arguments, reason=reason, confirmation_due=False
        )
    return merged


# What the model's parse records for a call refused for a lone surrogate alone.
_LONE_SURROGATE: Final = f"malformed: {LONE_SURROGATE}"


def _readings(trace: Trace, primary: Semantics) -> list[Semantics]:
    """The other readings that could judge ``trace`` otherwise, run: rejecting
    out-of-order fragments when a call received some, counting bytes that arrive for
    ended calls when such bytes could tip a turn over its cap, taking lone surrogate
    escapes as code points when a call was refused for one, and rolling back an input met
    by a lasting store fault when the trace has one."""
    runs = [primary]
    if any(c.out_of_order for c in primary.state.calls.values()):
        runs.append(run_semantics(trace, Reading(reject_out_of_order=True)))
    if any(sem.repeats_while_collecting for sem in runs):
        runs += [run_semantics(trace, dataclasses.replace(sem.reading, reject_repeats=True)) for sem in list(runs)]
    if primary.opened_unknown_tool:
        runs += [
            run_semantics(trace, dataclasses.replace(sem.reading, refuse_unknown_at_open=True)) for sem in list(runs)
        ]
    if any(s.event is CallEvent.CATALOG_CHANGE and not s.note for s in primary.steps):
        runs += [
            run_semantics(trace, dataclasses.replace(sem.reading, keep_calls_across_catalog_change=True))
            for sem in list(runs)
        ]
    cap = trace.limits.turn_bytes
    if any(sem.late_bytes and any(b > cap for b in sem.offered_bytes.values()) for sem in runs):
        runs += [run_semantics(trace, dataclasses.replace(sem.reading, count_after_end=True)) for sem in list(runs)]
    if any(c.parse == _LONE_SURROGATE for sem in runs for c in sem.state.calls.values()):
        runs += [
            run_semantics(trace, dataclasses.replace(sem.reading, lone_surrogate_escapes=True)) for sem in list(runs)
        ]
        runs += [
            run_semantics(trace, dataclasses.replace(sem.reading, join_split_surrogates=True)) for sem in list(runs)
        ]
    if primary.lasting_store_faults:
        runs += [
            run_semantics(trace, dataclasses.replace(sem.reading, store_fault_rolls_back=True)) for sem in list(runs)
        ]
    return runs[1:]


def judge(trace: Trace) -> Oracle:
    """Run the model over ``trace`` and derive a verdict for every call key in it; where
    the spec allows more than one reading (:class:`~callsafe.model.system.Reading`) and
    they differ, the verdict is ``may``."""
    sem = run_semantics(trace)
    own = _verdicts(trace, sem)
    alternatives = [Oracle(trace, alt, _verdicts(trace, alt)) for alt in _readings(trace, sem)]
    if not alternatives:
        return Oracle(trace, sem, own)
    merged = _merge(own, [(alt.semantics.reading, alt.verdicts) for alt in alternatives])
    return Oracle(trace, sem, merged, tuple(alternatives))


def _ledger_validation(oracle: Oracle, record: Any) -> str:
    """The call's validation as a correct ledger writes it: a schema path of keys nobody
    declared withheld (:func:`callsafe.model.leaks.withhold_path`)."""
    text: str = record.validation
    if not text.startswith("schema: ") or record.tool is None:
        return text
    spec = oracle.semantics.state.tools.get(record.tool) or oracle.trace.tools.get(record.tool)
    return withhold_path(text, spec.schema) if spec is not None else text


def ideal_observations(oracle: Oracle) -> list[Observation]:
    """What a correct implementation with every capability shows at its boundary for the
    oracle's trace, in order: validations, confirmation requests, executions, ledger rows
    and status. Used to test the invariant checkers against a known-good run (and, by
    mutating it, against known-bad ones)."""
    sem = oracle.semantics
    turns = sem.state.turns
    events: list[tuple[int, int, Observation]] = []  # (step, order, observation)
    order = 0

    def add(step: int, obs: Observation) -> None:
        nonlocal order
        events.append((step, order, obs))
        order += 1

    stopped_by: dict[int, list[CallKey]] = {}
    for s in sem.steps:
        if s.event in _CONTROL_EVENTS and not s.note:
            stopped_by.setdefault(s.step, []).append(s.key)
    for i, event in enumerate(oracle.trace.delivered()):
        if isinstance(event, (QuarantineResponse, DisableTool, StopTenant)):
            add(i, AuditRow(i, event.kind, event.reason, tuple(stopped_by.get(i, ()))))
    opened_turns: set[str] = set()
    for s in sem.steps:
        if s.event is CallEvent.OPEN and not s.note and s.key.turn not in opened_turns:
            opened_turns.add(s.key.turn)
            add(s.step, StatusShown(s.step, s.key.turn, "preparing"))
    for e in sem.expected:
        if e.what == "validate":
            add(e.step, BusinessValidated(e.step, e.key, e.tool))
        elif e.what == "confirm":
            add(e.step, ConfirmationRequested(e.step, e.key, e.tool))
            add(e.step, StatusShown(e.step, e.key.turn, "awaiting_confirmation"))
        else:
            turn = turns[e.key.turn]
            add(e.step, Executed(e.step, e.key, turn.actor, e.tool, e.arguments, turn.traceparent))
    for record in sem.state.calls.values():
        bound = turns.get(record.key.turn)
        traceparent = bound.traceparent if bound else None
        step = record.ended_at if record.ended_at is not None else len(sem.steps)
        if record.state in TERMINAL_STATES or (record.state is State.VALIDATED and record.confirmation_requested):
            decision = record.state.value if record.state is not State.VALIDATED else "awaiting_confirmation"
            add(
                step,
                LedgerRow(
                    step,
                    record.key,
                    len(record.fragments),
                    record.terminal_reason,
                    record.parse,
                    _ledger_validation(oracle, record),
                    decision,
                    traceparent,
                ),
            )
    events.sort(key=lambda t: (t[0], t[1]))
    out = [obs for _, _, obs in events]
    executed_turns = {o.key.turn for o in out if isinstance(o, Executed)}
    for e in sem.expected:
        if e.what == "execute":
            out.insert(
                next(i for i, o in enumerate(out) if isinstance(o, Executed) and o.key == e.key) + 1,
                StatusShown(e.step, e.key.turn, "done"),
            )
    last = max((o.step for o in out), default=0)
    stopped = sorted({r.key.turn for r in sem.state.calls.values() if r.ended_by in STOPPING_EVENTS} - executed_turns)
    out.extend(StatusShown(last, turn, "retry") for turn in stopped)
    return out


# Lifecycle events that stop a call for reasons outside the call's own data: after one,
# the user must be offered retry or hand-off (INV-STATUS).
STOPPING_EVENTS = frozenset(
    {
        CallEvent.CANCEL,
        CallEvent.DISCONNECT,
        CallEvent.QUARANTINE,
        CallEvent.DISABLE_TOOL,
        CallEvent.STOP_TENANT,
        CallEvent.CATALOG_CHANGE,
        CallEvent.RESTART,
        CallEvent.RESPONSE_ENDED,
        CallEvent.TERMINAL_STOPPED,
        CallEvent.OVER_LIMIT,
    }
)
