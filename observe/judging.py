"""Judging production records with certify's invariants and readings, and saying what the
records could establish.

Why the same judge: the records become a trace (the input events, in record order) and
observations (steps fixed by that order), and :func:`callsafe.certify.judge.judge_observations`
judges them with the oracle and every reading it allows, exactly as for a certification
run. What differs is what the records hold. Each invariant reads some kinds of record
(:data:`NEEDS`); an invariant whose kinds are not all there is **not judgeable** (never
"holds"), and its findings, if the judge made any, are dropped with it.

Records without the provider's stream (the guard's store, ``execute_tool`` spans) still
let the judge decide INV-ONCE, INV-TURN and INV-CANCEL. For that, each executed call the
records never showed streaming is given the most favourable stream they allow: its turn
bound to the executing actor (unless the records hold turns), the call opened, its
arguments as one fragment, and its own completed terminal event, all *right before it
ran*. A stop recorded before the execution then comes before the call's completion as
well, so the model refuses the call exactly when a real stream, whose terminal event can
only have come earlier, would have had it refused; these made events are listed in the
verdict (``assumed``) and never shown as records.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from callsafe.certify.judge import Finding, judge_observations
from callsafe.model.invariants import INVARIANTS
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallAddressed,
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Executed,
    Fragment,
    Observation,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.observe.records import Entry, Records

__all__ = ["NEEDS", "Observed", "ObservedFinding", "Status", "Verdict", "judge_records", "judgeable", "missing_for"]

Status = Literal["holds", "violated", "not judgeable"]
CAPABILITIES: Final = ("ledger", "status", "confirmation", "business_validation")

# What each invariant reads, as alternatives: the invariant is judgeable when every kind of
# one alternative is in the records. "calls" (an instrumentation's record of the calls the
# model completed) stands in for the stream where only the completed call matters.
NEEDS: Final[dict[str, tuple[frozenset[str], ...]]] = {
    "INV-TERMINAL": (frozenset({"executions", "stream"}),),
    "INV-EXACT-ARGS": (
        frozenset({"executions", "arguments", "stream"}),
        frozenset({"executions", "arguments", "calls"}),
    ),
    "INV-ONCE": (frozenset({"executions"}),),
    "INV-TURN": (frozenset({"executions", "turns"}),),
    "INV-CANCEL": (frozenset({"executions", "turns"}),),
    "INV-CONFIRM": (frozenset({"executions", "stream", "confirmation"}),),
    "INV-VALIDATE-ONCE": (frozenset({"executions", "stream", "business_validation"}),),
    "INV-BOUNDED": (frozenset({"executions", "stream", "ledger"}),),
    "INV-LEDGER": (frozenset({"executions", "stream", "ledger"}),),
    "INV-STATUS": (frozenset({"executions", "stream", "status"}),),
    "LIVE-DISPATCH": (
        frozenset({"executions", "turns", "stream"}),
        frozenset({"executions", "turns", "calls"}),
    ),
}
assert set(NEEDS) == {inv.id for inv in INVARIANTS}


def judgeable(invariant: str, kinds: Iterable[str]) -> bool:
    have = set(kinds)
    return any(need <= have for need in NEEDS[invariant])


def missing_for(invariant: str, kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds of record the smallest alternative still lacks (empty: judgeable)."""
    have = set(kinds)
    gaps = [tuple(sorted(need - have)) for need in NEEDS[invariant]]
    return min(gaps, key=lambda gap: len(gap))


@dataclass(frozen=True)
class ObservedFinding:
    """A finding with the records that show it (``where`` of each)."""

    finding: Finding
    evidence: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Verdict:
    """One invariant over the records: it holds, it is violated (with findings), or the
    records cannot judge it (``missing``: the kinds of record it would need)."""

    invariant: str
    status: Status
    findings: tuple[ObservedFinding, ...] = ()
    missing: tuple[str, ...] = ()
    scope: str = ""  # what a judged verdict covers, when the records hold less than a run

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "status": self.status,
            "scope": self.scope,
            "missing": list(self.missing),
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass
class Observed:
    """The records judged: one verdict per invariant, what the records hold, what the
    judge assumed, and the trace it judged."""

    source: str
    kinds: frozenset[str]
    verdicts: dict[str, Verdict]
    trace: Trace
    observations: list[Observation]
    assumed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def violated(self) -> list[str]:
        return [inv for inv, v in self.verdicts.items() if v.status == "violated"]

    @property
    def findings(self) -> list[ObservedFinding]:
        return [f for v in self.verdicts.values() for f in v.findings]

    def status(self, invariant: str) -> Status:
        return self.verdicts[invariant].status

    def to_json(self) -> dict[str, Any]:
        executions = sum(1 for o in self.observations if isinstance(o, Executed))
        return {
            "schema": 1,
            "source": self.source,
            "records": sorted(self.kinds),
            "events": len(self.trace.events),
            "executions": executions,
            "assumed": list(self.assumed),
            "notes": list(self.notes),
            "verdicts": [v.to_json() for v in self.verdicts.values()],
            "violated": self.violated,
        }


def _ident(key: CallKey) -> tuple[str, str, str, str]:
    return (key.turn, key.response, key.item, key.call)


def _arguments_text(arguments: Any) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return "{}"


def _opening(key: CallKey, tool: str) -> Entry:
    where = f"assumed for {key.short()}"
    return Entry(where, event=CallOpened(key.turn, key.response, key.item, key.call, tool=tool), made=True)


def _completion(key: CallKey, text: str) -> list[Entry]:
    where = f"assumed for {key.short()}"
    return [
        Entry(where, event=Fragment(key.turn, key.response, key.item, key.call, position=0, text=text), made=True),
        Entry(
            where,
            event=CallTerminal(key.turn, key.response, key.item, key.call, event_id=f"observe:{key}"),
            made=True,
        ),
    ]


def _ordered(records: Records) -> tuple[list[Entry], dict[str, ToolSpec]]:
    """The entries to judge: the records', and, where the records hold no stream, a made
    one for each executed call (see the module's docstring): opened when its turn started
    (so that a stop of the turn reaches it in flight, as it reached the real call), its
    arguments and its completed terminal event right before it first ran. The tools of made
    calls are declared open (no schema, business rule or confirmation): what the records do
    not show is not held against the implementation. A completed call an instrumentation
    recorded that nothing ran is made at its own place."""
    if "stream" in records.kinds:
        tools = dict(records.tools) if records.tools is not None else {}
        for entry in records.entries:
            if isinstance(entry.event, CallOpened) and records.tools is None:
                tools.setdefault(entry.event.tool, ToolSpec())
        return list(records.entries), tools
    tools = {}
    first_run: dict[tuple[str, str, str, str], Executed] = {}
    for entry in records.entries:
        if isinstance(entry.observation, Executed):
            first_run.setdefault(_ident(entry.observation.key), entry.observation)
    by_turn: dict[str, list[Executed]] = {}
    for ex in first_run.values():
        by_turn.setdefault(ex.key.turn, []).append(ex)

    def arguments_of(ex: Executed) -> tuple[str, str]:
        known = records.calls.get(_ident(ex.key))
        if known is not None:
            return known.tool, _arguments_text(known.arguments)
        return ex.tool, _arguments_text(ex.arguments) if "arguments" in records.kinds else "{}"

    opened: set[tuple[str, str, str, str]] = set()
    started: set[str] = set()
    out: list[Entry] = []

    def start(turn: str, binding: TurnStarted | None) -> None:
        if binding is not None:
            out.append(Entry(f"assumed for turn {turn}", event=binding, made=True))
        started.add(turn)
        for ex in by_turn.get(turn, []):
            tool, _ = arguments_of(ex)
            tools.setdefault(tool, ToolSpec())
            opened.add(_ident(ex.key))
            out.append(_opening(ex.key, tool))

    for index, entry in enumerate(records.entries):
        for ident, call in records.calls.items():
            if call.index == index and ident not in first_run:
                key = CallKey(call.tenant, *ident)
                tools.setdefault(call.tool, ToolSpec())
                if key.turn not in started and "turns" not in records.kinds:
                    start(key.turn, TurnStarted(key.turn, call.actor, call.tenant, conversation=f"observe:{key.turn}"))
                out += [_opening(key, call.tool), *_completion(key, _arguments_text(call.arguments))]
        event, obs = entry.event, entry.observation
        out.append(entry)
        if isinstance(event, TurnStarted) and event.turn not in started:
            start(event.turn, None)
        if isinstance(obs, Executed) and first_run.get(_ident(obs.key)) is obs:
            out.pop()
            if obs.key.turn not in started and "turns" not in records.kinds:
                binding = TurnStarted(obs.key.turn, obs.actor, obs.key.tenant, conversation=f"observe:{obs.key.turn}")
                start(obs.key.turn, binding)
            tool, text = arguments_of(obs)
            if _ident(obs.key) not in opened:
                tools.setdefault(tool, ToolSpec())
                opened.add(_ident(obs.key))
                out.append(_opening(obs.key, tool))
            out += [*_completion(obs.key, text), entry]
    return out, tools


def judge_records(records: Records, *, kinds: Iterable[str] | None = None) -> Observed:
    """Judge ``records``: every invariant of certify, over the trace and observations the
    records give, and "not judgeable" for each whose kinds of record are missing. ``kinds``
    overrides what the reader inferred (a file can say it holds a kind it has no row of)."""
    have = frozenset(records.kinds if kinds is None else kinds)
    entries, tools = _ordered(records)
    events: list[Event] = []
    observations: list[Observation] = []
    where_of_step: list[str] = []
    where_by_call: dict[tuple[str, str, str, str], list[str]] = {}
    assumed: list[str] = []
    for entry in entries:
        if entry.event is not None:
            events.append(entry.event)
            where_of_step.append(entry.where)
            if entry.made:
                assumed.append(f"{entry.where}: {entry.event.kind}")
            elif isinstance(entry.event, CallAddressed):
                e = entry.event
                where_by_call.setdefault((e.turn, e.response, e.item, e.call), []).append(f"{entry.where} ({e.kind})")
        elif entry.observation is not None:
            obs = dataclasses.replace(entry.observation, step=len(events) - 1)
            observations.append(obs)
            key = getattr(obs, "key", None)
            if isinstance(key, CallKey):
                where_by_call.setdefault(_ident(key), []).append(f"{entry.where} ({obs.kind})")
    trace = Trace(events=tuple(events), tools=tools, limits=records.limits, name=f"observe {records.source}")
    oracle = judge(trace)
    caps = [c for c in CAPABILITIES if c in have]
    judgement = judge_observations(trace, observations, caps, oracle=oracle)
    verdicts: dict[str, Verdict] = {}
    for inv in INVARIANTS:
        if not judgeable(inv.id, have):
            verdicts[inv.id] = Verdict(inv.id, "not judgeable", missing=missing_for(inv.id, have))
            continue
        found = judgement.results.get(inv.id)
        if found is None:  # a capability the records lack: NEEDS already covers it
            verdicts[inv.id] = Verdict(inv.id, "not judgeable", missing=tuple(sorted(inv.needs - have)))
            continue
        shown = tuple(ObservedFinding(f, _evidence(f, where_by_call, where_of_step)) for f in found)
        if not shown and inv.id in _ONLY_VIOLATED_FROM_CALLS and "stream" not in have:
            verdicts[inv.id] = Verdict(inv.id, "not judgeable", missing=("stream",))
            continue
        verdicts[inv.id] = Verdict(inv.id, "violated" if shown else "holds", shown, scope=_scope(inv.id, have))
    return Observed(records.source, have, verdicts, trace, observations, assumed, list(records.notes))


# Judged from an instrumentation's record of the completed calls ("calls") rather than the
# stream, these can be shown violated but never shown to hold: the record is usually the
# application's own reading of the stream (pydantic-ai's and Strands' chat spans record the
# arguments the framework assembled), so executed arguments that match it say nothing about
# the model's; a run certify found executing ``{}`` for a call whose stream carried no
# argument bytes has a chat span saying the same ``{}``.
_ONLY_VIOLATED_FROM_CALLS: Final = frozenset({"INV-EXACT-ARGS", "LIVE-DISPATCH"})

_WITHOUT_STREAM: Final = {
    "INV-ONCE": "each key's executions counted",
    "INV-TURN": "executions against the turn bindings and the turn starts and stops the records hold",
    "INV-CANCEL": "no execution after a stop the records hold (a cancel, an operator control, a tool change, a "
    "restart); a stop the stream carries (a disconnect, the response's end) and a call run before it completed "
    "are not in these records",
    "INV-EXACT-ARGS": "executed arguments against the completed calls the instrumentation recorded, not "
    "against the fragments: a difference is a violation, a match is not judgeable",
    "LIVE-DISPATCH": "the completed calls the instrumentation recorded",
}


def _scope(invariant: str, have: frozenset[str]) -> str:
    """What a judged verdict covers when the records hold no stream (empty: all of it)."""
    return "" if "stream" in have else _WITHOUT_STREAM.get(invariant, "")


def _evidence(
    finding: Finding, where_by_call: Mapping[tuple[str, str, str, str], list[str]], where_of_step: list[str]
) -> tuple[str, ...]:
    out: list[str] = []
    if finding.key is not None:  # what the executor received first: that is what a finding is about
        shown = where_by_call.get(_ident(finding.key), [])
        out += sorted(shown, key=lambda w: not w.endswith("(executed)"))[:12]
    if finding.step is not None and 0 <= finding.step < len(where_of_step):
        at = f"at step {finding.step}: {where_of_step[finding.step]}"
        out.append(at)
    return tuple(out)
