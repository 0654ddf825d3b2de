"""The invariants of DESIGN.md, each a named checker over ``(trace, observations)``.

A checker sees only what the harness saw at the boundary of an implementation: what the
executor received, the confirmation requests, the business-validator calls, the ledger,
audit and log lines, and the visible status. It never looks inside the implementation.
It may consult the model (:mod:`callsafe.model.oracle`), which is the spec made
executable, for facts such as "when did this call's own terminal event arrive".

Observation steps: an observation's ``step`` is the index, in the delivered event
sequence, of the most recently *started* delivery. An event at index ``j`` is therefore
in force for every observation with ``step >= j``.

Each invariant declares what it ``needs`` (``ledger``, ``status``, ``confirmation``):
a target that cannot produce those observations gets "not applicable", never "holds".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from callsafe.model.leaks import OwnWords, argument_values, leaked_value, observation_texts
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, State
from callsafe.model.oracle import STOPPING_EVENTS, Oracle, Verdict, judge
from callsafe.model.record_words import DEFAULT_WORDS, Dispatch, RecordWords, Result, StatusMeaning
from callsafe.model.system import NO_ARGUMENTS, CallRecord
from callsafe.model.vocabulary import (
    AuditRow,
    BusinessValidated,
    CallKey,
    CallTerminal,
    CancelTurn,
    Confirm,
    ConfirmationRequested,
    Executed,
    Fragment,
    LedgerRow,
    Observation,
    Restart,
    StatusShown,
    StopTenant,
    StoreFault,
    Trace,
    TurnStarted,
)

__all__ = [
    "INVARIANTS",
    "About",
    "Invariant",
    "Violation",
    "check_all",
    "invariant_for_refusal",
]

Kind = Literal["safety", "liveness"]
# What a finding is about (the spec: "Test visible status separately from action safety"):
# "action", what reached the executor, the validators and the user's confirmation prompt;
# "records", what the target wrote down (ledger rows, audit entries, logs, the status).
About = Literal["action", "records"]
E = CallEvent


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with the call and step where it shows."""

    invariant: str
    message: str
    key: CallKey | None = None
    step: int | None = None
    kind: Kind = "safety"
    about: About | None = None  # None: the invariant's own (Invariant.about)

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "kind": self.kind,
            "message": self.message,
            "key": self.key.to_json() if self.key else None,
            "step": self.step,
        }


@dataclass
class Context:
    """What every checker reads: the trace, the model's verdicts, the observations."""

    trace: Trace
    oracle: Oracle
    observations: Sequence[Observation]
    executions: list[Executed] = field(default_factory=list)
    # what the target's record words mean (its declared vocabulary over the defaults)
    words: RecordWords = DEFAULT_WORDS
    capabilities: frozenset[str] = frozenset({"ledger", "status", "confirmation", "business_validation"})
    # per reading (by id): (call, event) -> the first step it took effect
    _first_steps: dict[int, dict[tuple[CallKey, CallEvent], int]] | None = field(default=None, init=False, repr=False)
    _executed: set[CallKey] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self.executions = [o for o in self.observations if isinstance(o, Executed)]
        self._executed = {ex.key for ex in self.executions}

    def reading(self, key: CallKey) -> Oracle:
        """The reading of the spec that explains what the target did with ``key``: the
        model's own, unless the target executed the call and only another reading the
        oracle allows runs it."""
        if not self.oracle.alternatives:
            return self.oracle
        if key not in self._executed:
            return self.oracle
        for reading in self.oracle.readings:
            if any(e.key == key and e.what == "execute" for e in reading.semantics.expected):
                return reading
        return self.oracle

    def record(self, key: CallKey, reading: Oracle | None = None) -> CallRecord | None:
        ident = (key.turn, key.response, key.item, key.call)
        record = (reading or self.reading(key)).semantics.state.calls.get(ident)
        if record is None or record.key.tenant != key.tenant:
            return None
        return record

    def records_everywhere(self, holds: Callable[[CallRecord], bool]) -> Iterable[CallRecord]:
        """The model's records for which ``holds`` is true in every reading the oracle
        allows: an obligation (a ledger row, a retry offer) is due only when no allowed
        reading frees the target from it."""
        for record in self.oracle.semantics.state.calls.values():
            if holds(record) and all(
                (other := self.record(record.key, reading)) is not None and holds(other)
                for reading in self.oracle.alternatives
            ):
                yield record

    def verdict(self, key: CallKey) -> Verdict | None:
        return self.oracle.verdicts.get(key)

    def first_step(self, key: CallKey, event: CallEvent) -> int | None:
        """The delivered step at which the model applied ``event`` to ``key`` and it took
        effect (not ignored or rejected), in the reading that explains the target's run of
        the call, or else in the first reading where it took effect.

        Answered from an index of each reading's steps built on the first question: checkers
        ask once per executed call, and scanning the steps each time made judging a trace
        quadratic in its executions (a 100k-event replay took minutes)."""
        first = self.reading(key)
        for reading in (first, *(r for r in self.oracle.readings if r is not first)):
            found = self._index(reading).get((key, event))
            if found is not None:
                return found
        return None

    def _index(self, reading: Oracle) -> dict[tuple[CallKey, CallEvent], int]:
        if self._first_steps is None:
            self._first_steps = {}
        index = self._first_steps.get(id(reading))
        if index is None:
            index = {}
            for s in reading.steps:
                if not s.note:
                    index.setdefault((s.key, s.event), s.step)
            self._first_steps[id(reading)] = index
        return index


Checker = Callable[[Context], Iterable[Violation]]


@dataclass(frozen=True)
class Invariant:
    id: str
    title: str
    spec: str  # the spec sentence it enforces
    kind: Kind
    check: Checker
    needs: frozenset[str] = frozenset()
    # What its findings are about, the first unless a finding says otherwise
    # (Violation.about): INV-BOUNDED is about actions (a call over a cap ran) and, for its
    # ledger check (every buffer reaches a terminal state), records.
    about: tuple[About, ...] = ("action",)


# --------------------------------------------------------------------------------------
# Which invariant a refused call belongs to
# --------------------------------------------------------------------------------------

_REFUSAL_INVARIANT: Final[dict[CallEvent, str]] = {
    E.PARSE_FAILED: "INV-TERMINAL",
    E.INVALID: "INV-TERMINAL",
    E.FRAGMENT: "INV-TERMINAL",  # data after the terminal event, or for an unopened call
    E.FRAGMENT_REPEAT: "INV-TERMINAL",
    E.TERMINAL_COMPLETED: "INV-TERMINAL",  # terminal for a call never opened
    E.FRAGMENT_CONFLICT: "INV-EXACT-ARGS",
    E.OVER_LIMIT: "INV-BOUNDED",
    E.DENIED: "INV-CONFIRM",
    E.DISPATCH_BLOCKED: "INV-TURN",
    E.SUPERSEDE: "INV-TURN",
}


def invariant_for_refusal(verdict: Verdict, record: CallRecord | None) -> str:
    """The invariant an execution of a ``must_not`` call breaks, from how the model ended
    the call: malformed or unvalidated data is INV-TERMINAL, a stop is INV-CANCEL, and so
    on; a call that carried no argument bytes at all is INV-EXACT-ARGS (the executor's
    arguments, ``{}`` say, are ones the stream never carried: the spec's "parse the
    assembled arguments once, enforce the declared schema" has nothing to parse, and
    "malformed data" never dispatches, whatever the schema would accept)."""
    if record is None:
        return "INV-EXACT-ARGS"
    if record.state is State.VALIDATED:
        return "INV-CONFIRM"
    if record.state in (State.COLLECTING, State.TERMINAL_CANDIDATE, State.ABSENT):
        return "INV-TERMINAL"
    if record.ended_by is None:
        return "INV-CANCEL"
    if record.ended_by is E.PARSE_FAILED and record.parse == NO_ARGUMENTS:
        # the stream carried no arguments: whatever the executor got, the stream never
        # carried it (as a call key it never carried), so the arguments are the matter
        return "INV-EXACT-ARGS"
    return _REFUSAL_INVARIANT.get(record.ended_by, "INV-CANCEL")


# --------------------------------------------------------------------------------------
# Checkers
# --------------------------------------------------------------------------------------


def _refused_executions(ctx: Context, invariant: str) -> Iterable[Violation]:
    """Executions of calls the model refuses, reported under their invariant."""
    seen: set[CallKey] = set()
    for ex in ctx.executions:
        verdict = ctx.verdict(ex.key)
        if verdict is None or verdict.execute != "must_not" or ex.key in seen:
            continue
        record = ctx.record(ex.key)
        if invariant_for_refusal(verdict, record) == invariant:
            seen.add(ex.key)
            yield Violation(invariant, f"executed a call that must not run: {verdict.reason}", ex.key, ex.step)


def check_terminal(ctx: Context) -> Iterable[Violation]:
    for ex in ctx.executions:
        record = ctx.record(ex.key)
        if record is None:
            continue
        candidate_at = ctx.first_step(ex.key, E.TERMINAL_COMPLETED)
        if candidate_at is None or ex.step < candidate_at:
            yield Violation("INV-TERMINAL", _terminal_story(ctx, ex, candidate_at), ex.key, ex.step)
    yield from _refused_executions(ctx, "INV-TERMINAL")


def _terminal_story(
    ctx: Context, ex: Executed | BusinessValidated, completed_at: int | None, verb: str = "executed"
) -> str:
    """What the trace did with the call's terminal event, for an execution INV-TERMINAL
    blames: it came later, it never came, or it came but did not complete the call (a
    stop reason other than completed, or a terminal the model did not take, say after the
    response's end), so that the message is true of the trace it is shown on."""
    if completed_at is not None:
        return f"{verb} at step {ex.step}, before the call's own completed terminal event (step {completed_at})"
    key = ex.key
    own = [
        (i, e)
        for i, e in enumerate(ctx.trace.delivered())
        if isinstance(e, CallTerminal)
        and (e.turn, e.response, e.item, e.call) == (key.turn, key.response, key.item, key.call)
    ]
    verdict = ctx.verdict(key)
    why = f" (the model: {verdict.reason})" if verdict is not None and verdict.reason else ""
    if not own:
        return f"{verb}, but the call's own terminal event never arrived{why}"
    at, terminal = own[0]
    when = "after" if at < ex.step else "before"
    if terminal.reason != "completed":
        return f"{verb} {when} the call's terminal event (step {at}), whose stop reason is {terminal.reason!r}{why}"
    return f"{verb} {when} the call's terminal event (step {at}), which did not complete the call{why}"


def check_exact_args(ctx: Context) -> Iterable[Violation]:
    for ex in ctx.executions:
        record = ctx.record(ex.key)
        if record is None:
            yield Violation("INV-EXACT-ARGS", "executed a call key the stream never carried", ex.key, ex.step)
            continue
        if record.tool is not None and ex.tool != record.tool:
            yield Violation(
                "INV-EXACT-ARGS", f"executed tool {ex.tool!r}, the call named {record.tool!r}", ex.key, ex.step
            )
        if record.parse == "ok" and ex.arguments != record.arguments:
            yield Violation(
                "INV-EXACT-ARGS",
                "executed arguments differ from the call's own fragments in position order",
                ex.key,
                ex.step,
            )
    yield from _refused_executions(ctx, "INV-EXACT-ARGS")


def check_once(ctx: Context) -> Iterable[Violation]:
    counts = Counter(ex.key for ex in ctx.executions)
    for ex in ctx.executions:
        if counts[ex.key] > 1:
            counts[ex.key] = 0  # report each key once
            yield Violation("INV-ONCE", "a call key reached the executor more than once", ex.key, ex.step)


def _turn_facts(ctx: Context) -> tuple[dict[str, TurnStarted], dict[str, int]]:
    """Each turn's binding (first start) and the step at which it stopped being live."""
    starts: dict[str, TurnStarted] = {}
    ended: dict[str, int] = {}
    current: dict[tuple[str, str], str] = {}
    for i, event in enumerate(ctx.trace.delivered()):
        if isinstance(event, TurnStarted) and event.turn not in starts:
            previous = current.get((event.tenant, event.conversation))
            if previous is not None:
                ended.setdefault(previous, i)
            starts[event.turn] = event
            current[(event.tenant, event.conversation)] = event.turn
        elif isinstance(event, CancelTurn) and event.turn in starts:
            ended.setdefault(event.turn, i)
        elif isinstance(event, StopTenant):
            for turn, start in starts.items():
                if start.tenant == event.tenant:
                    ended.setdefault(turn, i)
    return starts, ended


def check_turn(ctx: Context) -> Iterable[Violation]:
    starts, ended = _turn_facts(ctx)
    for ex in ctx.executions:
        start = starts.get(ex.key.turn)
        if start is None:
            yield Violation("INV-TURN", "executed for a turn that never started", ex.key, ex.step)
            continue
        if ex.key.tenant != start.tenant or ex.actor != start.actor:
            yield Violation(
                "INV-TURN",
                f"executed for actor {ex.actor!r} / tenant {ex.key.tenant!r}; the turn is bound to "
                f"{start.actor!r} / {start.tenant!r}",
                ex.key,
                ex.step,
            )
        end = ended.get(ex.key.turn)
        if end is not None and ex.step >= end:
            yield Violation("INV-TURN", "executed after its turn stopped being current", ex.key, ex.step)
    yield from _refused_executions(ctx, "INV-TURN")


def check_cancel(ctx: Context) -> Iterable[Violation]:
    yield from _refused_executions(ctx, "INV-CANCEL")


def _confirmation_story(ctx: Context, key: CallKey, step: int, validated_at: int | None) -> str:
    """What the model did with a call put up for confirmation too early: it passed
    validation later, or never (then the model's reason says why: a refusal, a stop, a
    schema failure), so that a denied or refused call is not said to have been put up
    "before" a validation it never had."""
    if validated_at is not None:
        return (
            f"put up for confirmation at step {step}, before it completed and passed schema and business "
            f"validation (step {validated_at})"
        )
    verdict = ctx.verdict(key)
    why = f": {verdict.reason}" if verdict is not None and verdict.reason else ""
    return f"put up for confirmation, but it never passed schema and business validation in the model{why}"


def check_confirm(ctx: Context) -> Iterable[Violation]:
    requested: set[CallKey] = set()
    order: list[Observation] = list(ctx.observations)
    confirms: dict[CallKey, int] = {}
    for i, event in enumerate(ctx.trace.delivered()):
        if isinstance(event, Confirm) and event.approved:
            record = ctx.oracle.semantics.state.calls.get((event.turn, event.response, event.item, event.call))
            if record is not None:
                confirms.setdefault(record.key, i)
    for obs in order:
        if isinstance(obs, ConfirmationRequested):
            requested.add(obs.key)
            validated_at = ctx.first_step(obs.key, E.VALID)
            if validated_at is None or obs.step < validated_at:
                yield Violation(
                    "INV-CONFIRM", _confirmation_story(ctx, obs.key, obs.step, validated_at), obs.key, obs.step
                )
        elif isinstance(obs, Executed):
            record = ctx.record(obs.key)
            spec = ctx.trace.tools.get(record.tool) if record and record.tool else None
            if spec is None or not spec.confirm:
                continue
            if obs.key not in requested:
                yield Violation("INV-CONFIRM", "executed without asking for confirmation", obs.key, obs.step)
            elif obs.key not in confirms or obs.step < confirms[obs.key]:
                yield Violation("INV-CONFIRM", "executed before the user confirmed", obs.key, obs.step)
    yield from _refused_executions(ctx, "INV-CONFIRM")


def check_validate_once(ctx: Context) -> Iterable[Violation]:
    seen: Counter[CallKey] = Counter()
    for obs in ctx.observations:
        if isinstance(obs, BusinessValidated):
            seen[obs.key] += 1
            if seen[obs.key] == 2:
                yield Violation("INV-VALIDATE-ONCE", "business-validated more than once", obs.key, obs.step)
            candidate_at = ctx.first_step(obs.key, E.TERMINAL_COMPLETED)
            if candidate_at is None or obs.step < candidate_at:
                story = _terminal_story(ctx, obs, candidate_at, "validated")
                yield Violation("INV-VALIDATE-ONCE", story, obs.key, obs.step)
        elif isinstance(obs, Executed) and seen[obs.key] != 1:
            yield Violation(
                "INV-VALIDATE-ONCE",
                f"executed after {seen[obs.key]} business validations (exactly one is required)",
                obs.key,
                obs.step,
            )


def check_bounded(ctx: Context) -> Iterable[Violation]:
    yield from _refused_executions(ctx, "INV-BOUNDED")
    last: dict[CallKey, LedgerRow] = {}
    for obs in ctx.observations:
        if isinstance(obs, LedgerRow):
            last[obs.key] = obs
    for record in ctx.records_everywhere(lambda r: r.state in TERMINAL_STATES):
        if record.state in TERMINAL_STATES:
            row = last.get(record.key)
            meaning = ctx.words.decision_of(row.decision) if row is not None else None
            if meaning not in (Dispatch.DISPATCHED, Dispatch.NOT_DISPATCHED):
                yield Violation(
                    "INV-BOUNDED",
                    "the call's buffer never reached a terminal state in the ledger "
                    f"(model: {record.state.value}, ledger: {_said(row, meaning)})",
                    record.key,
                    about="records",
                )


def _said(row: LedgerRow | None, meaning: Dispatch | None) -> str:
    """A row's decision as a message names it: the word, and what it means."""
    if row is None:
        return "no row"
    return f"{row.decision!r}, " + (f"meaning {meaning.value}" if meaning else "a word with no known meaning")


def model_dispatch(record: CallRecord) -> Dispatch:
    """What the model's account of a call says its ledger decision means."""
    if record.state is State.DISPATCHED:
        return Dispatch.DISPATCHED
    if record.state in (State.CANCELLED, State.FAILED):
        return Dispatch.NOT_DISPATCHED
    if record.state is State.VALIDATED and record.confirmation_requested:
        return Dispatch.AWAITING_CONFIRMATION
    return Dispatch.PENDING


_TERMINAL_EVENTS: Final = frozenset({E.TERMINAL_COMPLETED, E.TERMINAL_STOPPED, E.TERMINAL_REPEAT, E.RESPONSE_ENDED})


def _terminal_steps(ctx: Context) -> dict[CallKey, int]:
    """The step at which each call's terminal event (or its response's end) was first
    delivered, taken or not."""
    first: dict[CallKey, int] = {}
    for s in ctx.oracle.steps:
        if s.event in _TERMINAL_EVENTS:
            first.setdefault(s.key, s.step)
    return first


def _ledger_untruth(
    row: LedgerRow, record: CallRecord, forgot: bool, accepted: int | None = None, words: RecordWords = DEFAULT_WORDS
) -> str:
    """How a call's final ledger row contradicts the model's account of the call (empty:
    it does not): the decision must mean what the model's does (dispatched, awaiting
    confirmation, or not dispatched: the spec's own example writes "reject" for a cancelled
    and a failed call alike, so which of the two is not asked), the terminal reason must be
    the model's, and the count
    at least the positions the call accepted (more is another reading of "count", every
    fragment delivered, or a protocol's own explicit fragment such as an Anthropic
    ``input: {}``). ``forgot``: a restart came between, and buffers are not durable, or the
    row was written before the call's terminal event arrived (an implementation that fails
    a doomed call early, which the spec allows: it cannot know a reason yet); such a row may
    leave the terminal reason out but not contradict it.

    The parse and validation fields are compared where the spec's purpose for them is
    plain ("It lets an operator distinguish a malformed stream from a permission
    rejection"): a call that parsed must not read as unparsed or malformed, one that passed
    validation (a permission refusal, a dispatch, a call awaiting confirmation) must read
    as validated, and one a business rule refused as refused. Not the other way round:
    behind a provider protocol the parser may hand the target other text than the abstract
    trace (an explicit ``{}``), so "malformed" in the model can honestly be "ok, schema
    failed" at the target, and JSON Schema validators differ at the edges. A row written
    after a restart, or before the call ended (``forgot``), is not asked for them.

    ``accepted``: the positions the call had accepted when the row was written, where that
    was before its terminal event (the fail-early reading: the positions that came after
    reached a call the implementation had already failed, so they are not its count)."""
    floor = len(record.fragments) if accepted is None else min(accepted, len(record.fragments))
    if row.fragments < floor:
        return f"count {row.fragments}, fewer than the {floor} positions the call accepted"
    meaning = words.decision_of(row.decision)
    want = model_dispatch(record)
    if meaning is not want:
        return f"decision {_said(row, meaning)}; the call was {want.value.replace('_', ' ')} ({record.state.value})"
    if row.terminal_reason != record.terminal_reason and not (forgot and row.terminal_reason is None):
        return f"terminal reason {row.terminal_reason!r}, the stream's {record.terminal_reason!r}"
    if forgot:
        return ""
    if record.parse == "ok" and words.result_of(row.parse) is not Result.OK:
        return f"parse result {row.parse!r} for a call whose arguments parsed"
    validation = words.result_of(row.validation)
    if record.validation == "ok" and validation is not Result.OK:
        refused = record.ended_by is E.DISPATCH_BLOCKED
        if not (refused and validation is Result.DISPATCH_REFUSED):
            why = " and was refused at the permission boundary or the dispatcher's re-check" if refused else ""
            return f"validation result {row.validation!r} for a call that passed validation{why}"
    if record.validation.startswith("business rule") and validation is not Result.FAILED:
        return f"validation result {row.validation!r} for a call a business rule refused"
    return ""


def _accepted_by(reading: Oracle, trace: Trace, key: CallKey, step: int) -> int:
    """The new positions a reading of the model accepted for ``key`` up to ``step``. A
    fragment at ``step`` itself whose position is not the next in order (a gap or an
    absurd one, such as past 2**63) is not counted: the row written there may be the one
    that refuses it at once rather than at its terminal's gap ("reject or reassemble by
    its documented position" allows both), and that row's count truthfully leaves it out."""
    before = sum(1 for s in reading.semantics.steps if s.key == key and s.event is E.FRAGMENT and s.step < step)
    here = any(s.key == key and s.event is E.FRAGMENT and s.step == step for s in reading.semantics.steps)
    delivered = trace.delivered()
    event = delivered[step] if 0 <= step < len(delivered) else None
    in_order = isinstance(event, Fragment) and event.position == before
    return before + 1 if here and in_order else before


def _crash_steps(trace: Trace) -> list[int]:
    """The steps where a process may have lost its memory: each restart, and each input a
    lasting store fault met (failing closed there is a restart's taking the store's word
    back, which may forget what the store never held, as a restart may)."""
    steps = []
    delivered = trace.delivered()
    for i, event in enumerate(delivered):
        if isinstance(event, Restart):
            steps.append(i)
        elif isinstance(event, StoreFault) and event.lasting:
            later = next((j for j in range(i + 1, len(delivered)) if not isinstance(delivered[j], StoreFault)), None)
            if later is not None:
                steps.append(later)
    return steps


def check_ledger(ctx: Context) -> Iterable[Violation]:
    rows: dict[CallKey, list[LedgerRow]] = defaultdict(list)
    for obs in ctx.observations:
        if isinstance(obs, LedgerRow):
            rows[obs.key].append(obs)
    for ex in ctx.executions:
        if not any(ctx.words.decision_of(r.decision) is Dispatch.DISPATCHED for r in rows.get(ex.key, [])):
            yield Violation(
                "INV-LEDGER", "an execution left no ledger row that says it was dispatched", ex.key, ex.step
            )
    for record in ctx.records_everywhere(lambda r: r.state in (State.CANCELLED, State.FAILED)):
        if not rows.get(record.key):
            yield Violation("INV-LEDGER", f"no ledger row for a refused call ({record.why})", record.key)
    for record in ctx.records_everywhere(_awaits_confirmation):
        if not rows.get(record.key):
            yield Violation("INV-LEDGER", "no ledger row for a call that awaits confirmation", record.key)
    restarts = _crash_steps(ctx.trace)
    terminal_at = _terminal_steps(ctx)
    for record in ctx.records_everywhere(lambda r: r.state in TERMINAL_STATES or _awaits_confirmation(r)):
        if rows.get(record.key):
            last = rows[record.key][-1]
            ended = terminal_at.get(record.key)
            early = ended is None or last.step < ended  # written before the call's terminal event
            forgot = any(i <= last.step for i in restarts) or early
            problems = [
                _ledger_untruth(
                    last,
                    r,
                    forgot,
                    _accepted_by(reading, ctx.trace, record.key, last.step) if early else None,
                    ctx.words,
                )
                for reading in ctx.oracle.readings
                if (r := ctx.record(record.key, reading)) is not None
            ]
            if all(problems):
                yield Violation(
                    "INV-LEDGER", f"the call's last ledger row is untrue: {problems[0]}", record.key, last.step
                )
    yield from _audit_untruths(ctx)
    records = [r for reading in ctx.oracle.readings for r in reading.semantics.state.calls.values()]
    values = argument_values(ctx.trace, records)
    if values:
        own: OwnWords | None = None
        for obs in ctx.observations:
            for text in observation_texts(obs):
                if not any(v in text for v in values):
                    continue
                own = own or OwnWords.of(ctx.trace, records)
                leaked = leaked_value(values, text, own)
                if leaked is not None:
                    yield Violation(
                        "INV-LEDGER",
                        f"an argument value appears in a {obs.kind.replace('_', ' ')}",
                        getattr(obs, "key", None),
                        obs.step,
                    )
                    break


def _awaits_confirmation(record: CallRecord) -> bool:
    return record.state is State.VALIDATED and record.confirmation_requested


_CONTROLS: Final = frozenset({E.QUARANTINE, E.DISABLE_TOOL, E.STOP_TENANT})


def _control_stops(ctx: Context) -> dict[int, set[CallKey]]:
    """Each operator control's step, with the calls it stopped in every reading the oracle
    allows (a call another reading leaves to something else is not asked of the audit)."""
    per_reading: list[dict[int, set[CallKey]]] = []
    for reading in ctx.oracle.readings:
        stops: dict[int, set[CallKey]] = defaultdict(set)
        for s in reading.steps:
            if s.event in _CONTROLS and not s.note:
                stops[s.step].add(s.key)
        per_reading.append(stops)
    out: dict[int, set[CallKey]] = {}
    for i, event in enumerate(ctx.trace.delivered()):
        if event.kind in ("quarantine_response", "disable_tool", "stop_tenant"):
            keys = [stops.get(i, set()) for stops in per_reading]
            out[i] = set.intersection(*keys) if keys else set()
    return out


def _audit_untruths(ctx: Context) -> Iterable[Violation]:
    """Every operator control that stopped a call leaves an audit row, at or after it,
    with a reason and every call key the control stopped ("Log the reason and the affected
    call keys so a reviewer can distinguish a provider interruption from a product safety
    hold"). A control that stopped nothing may be logged or not: with no affected call
    there is no interruption to tell apart, and the spec asks for the keys it affected."""
    controls = _control_stops(ctx)
    if not controls:
        return
    audits = [o for o in ctx.observations if isinstance(o, AuditRow)]
    for step, stopped in sorted(controls.items()):
        if not stopped:
            continue
        after = [a for a in audits if a.step >= step]
        if not after:
            yield Violation("INV-LEDGER", "an operator control left no audit row", None, step)
            continue
        if not any(a.reason.strip() for a in after):
            yield Violation("INV-LEDGER", "an operator control's audit row gives no reason", None, after[0].step)
        named = {k for a in after for k in a.keys}
        for key in sorted(stopped - named, key=lambda k: k.short()):
            yield Violation(
                "INV-LEDGER", "an operator control's audit rows do not name a call key it stopped", key, step
            )


def check_status(ctx: Context) -> Iterable[Violation]:
    """The status is read by meaning (:class:`~callsafe.model.record_words.StatusMeaning`):
    a "done" claim needs an action that ran in the turn, and every stop that leaves a turn
    with nothing run is followed, at or after the stop, by a retry or hand-off offer for
    that turn, or by an offer still standing when it came. What is shown after the offer (a
    new call "preparing" in the same turn, the retry itself) does not take it back."""
    executed_turns: set[str] = set()
    shown: dict[str, list[tuple[int, bool]]] = defaultdict(list)  # per turn: (step, is an offer)
    last_status: dict[str, StatusShown] = {}
    for obs in ctx.observations:
        if isinstance(obs, Executed):
            executed_turns.add(obs.key.turn)
        elif isinstance(obs, StatusShown):
            last_status[obs.turn] = obs
            meaning = ctx.words.status_of(obs.status)
            if meaning is None:
                yield Violation("INV-STATUS", f"unknown status {obs.status!r}", None, obs.step)
            elif meaning is StatusMeaning.DONE and obs.turn not in executed_turns:
                yield Violation("INV-STATUS", "status says an action ran, but none did", None, obs.step)
            shown[obs.turn].append((obs.step, meaning in (StatusMeaning.RETRY, StatusMeaning.HANDOFF)))
    stopped: dict[str, int] = {}
    for record in ctx.records_everywhere(_stopped):
        ended = [
            r.ended_at
            for reading in ctx.oracle.readings
            if (r := ctx.record(record.key, reading)) is not None and _stopped(r) and r.ended_at is not None
        ]
        at = min(ended, default=0)
        stopped[record.key.turn] = max(stopped.get(record.key.turn, at), at)
    for turn, at in sorted(stopped.items()):
        if turn in executed_turns:
            continue
        if not _offered(shown.get(turn, []), at):
            last = last_status.get(turn)
            yield Violation(
                "INV-STATUS",
                f"after a stop (step {at}) the user was not offered retry or hand-off (last status: "
                f"{last.status if last else 'none'})",
            )


def _offered(shown: list[tuple[int, bool]], at: int) -> bool:
    """Whether a retry or hand-off offer stands for a stop at step ``at``: one shown at or
    after it, or one shown before it that nothing replaced (an offer still on screen)."""
    if any(is_offer and step >= at for step, is_offer in shown):
        return True
    before = [is_offer for step, is_offer in shown if step <= at]
    return bool(before) and before[-1]


def _stopped(record: CallRecord) -> bool:
    return record.ended_by in STOPPING_EVENTS and record.state in (State.CANCELLED, State.FAILED)


def check_live(ctx: Context) -> Iterable[Violation]:
    executed = {ex.key for ex in ctx.executions}
    requested = {o.key for o in ctx.observations if isinstance(o, ConfirmationRequested)}
    for verdict in ctx.oracle.verdicts.values():
        if verdict.execute == "must" and verdict.key not in executed:
            yield Violation(
                "LIVE-DISPATCH", "a completed, valid, current call was never executed", verdict.key, None, "liveness"
            )
        if verdict.execute == "must_not" and verdict.confirmation_due and verdict.key not in requested:
            yield Violation(
                "LIVE-DISPATCH", "a valid call was never put up for confirmation", verdict.key, None, "liveness"
            )
        if (
            verdict.execute == "may"
            and verdict.key not in executed
            and "business_validation" in ctx.capabilities
            and not _a_reading_explains_not_running(ctx, verdict.key)
        ):
            yield Violation(
                "LIVE-DISPATCH",
                "never executed, though the target business-validated it and every reading that validates "
                "it runs it (the readings that let it not run refuse it before validation)",
                verdict.key,
                None,
                "liveness",
            )


def _a_reading_explains_not_running(ctx: Context, key: CallKey) -> bool:
    """Whether some reading that does not run ``key`` agrees with the target on whether the
    call reached the business validator. A ``may`` lets the target take either reading,
    not a mix: one that reassembled a call (and validated it) cannot not run it because
    another reading fails the call before validation."""
    validated = any(isinstance(o, BusinessValidated) and o.key == key for o in ctx.observations)
    for reading in ctx.oracle.readings:
        expected = reading.semantics.expected
        if any(e.key == key and e.what == "execute" for e in expected):
            continue
        if any(e.key == key and e.what == "validate" for e in expected) == validated:
            return True
    return False


INVARIANTS: Final[tuple[Invariant, ...]] = (
    Invariant(
        "INV-TERMINAL",
        "nothing reaches the executor before the call's own terminal event was delivered and its "
        "arguments parsed and validated",
        "Fragments must remain inert until the adapter knows that one call has ended under its protocol. "
        "A terminal event permits parsing; it does not itself authorize execution.",
        "safety",
        check_terminal,
    ),
    Invariant(
        "INV-EXACT-ARGS",
        "executed arguments are exactly that call's own fragments, in protocol position, each position once",
        "Append only fragments from that exact tuple. Never concatenate all argument deltas into a single "
        "response-wide string.",
        "safety",
        check_exact_args,
    ),
    Invariant(
        "INV-ONCE",
        "each call key reaches the executor at most once",
        "Persist the terminal event ID so reconnect delivery cannot dispatch it twice. A repeated delta is a "
        "delivery condition, not evidence that the user requested the action twice.",
        "safety",
        check_once,
    ),
    Invariant(
        "INV-TURN",
        "a call executes only for the turn current at execution time, for the actor and tenant bound to it",
        "Bind them to the active turn and authenticated actor. An old tuple cannot affect a newer turn.",
        "safety",
        check_turn,
    ),
    Invariant(
        "INV-CANCEL",
        "every stop ends in a non-dispatching state that nothing revives, a restart included",
        "Cancellation, supersession, connection loss, malformed data, unknown tool name, and size limit all move "
        "the buffer to a non-dispatching terminal state. A late terminal event for a cancelled turn must be "
        "rejected by turn ownership, not revived because its JSON happens to parse.",
        "safety",
        check_cancel,
    ),
    Invariant(
        "INV-CONFIRM",
        "a call that needs confirmation executes only after it is confirmed, and only if nothing cancelled it "
        "since; only a completed call that passed schema and business validation is put up for confirmation",
        "The dispatcher must additionally check the current turn's cancellation and confirmation state at "
        "execution time. Only the completed, validated proposal can request a confirmation.",
        "safety",
        check_confirm,
        frozenset({"confirmation"}),
    ),
    Invariant(
        "INV-VALIDATE-ONCE",
        "each final call is schema- and business-validated exactly once",
        "Each final call is schema- and business-validated exactly once.",
        "safety",
        check_validate_once,
        frozenset({"business_validation"}),
    ),
    Invariant(
        "INV-BOUNDED",
        "every buffer reaches a terminal state; bytes per call and per turn are capped",
        "Each buffer has a bounded lifecycle. A buffer should have a byte limit.",
        "safety",
        check_bounded,
        frozenset({"ledger"}),
        about=("action", "records"),
    ),
    Invariant(
        "INV-LEDGER",
        "every decision leaves a ledger row, and a call's final row tells the model's decision and terminal "
        "reason, with a count no lower than the positions the call accepted; no ledger, audit, log or status "
        "line contains argument values",
        "Record an assembly ledger with the tuple key, count, terminal reason, parse result, validation result, "
        "and dispatch decision. It lets an operator distinguish a malformed stream from a permission rejection "
        "without retaining sensitive argument values in broad logs.",
        "safety",
        check_ledger,
        frozenset({"ledger"}),
        about=("records",),
    ),
    Invariant(
        "INV-STATUS",
        "the visible status is truthful and separate from action safety",
        'The client may display a non-actionable "preparing request" cue. The user sees a truthful retry or '
        "handoff route. Test visible status separately from action safety.",
        "safety",
        check_status,
        frozenset({"status"}),
        about=("records",),
    ),
    Invariant(
        "LIVE-DISPATCH",
        "a well-formed, completed, current, permitted call is executed (or put up for confirmation)",
        "Only the completed, validated proposal can request a confirmation.",
        "liveness",
        check_live,
    ),
)

BY_ID: Final[dict[str, Invariant]] = {inv.id: inv for inv in INVARIANTS}


@dataclass(frozen=True)
class Check:
    """One check an invariant makes, with the spec sentences it enforces (verbatim,
    typography aside) or, where the spec is silent, callsafe's own choice in words."""

    invariant: str
    what: str
    spec: tuple[str, ...]
    own: str = ""


_LEDGER: Final = (
    "Record an assembly ledger with the tuple key, count, terminal reason, parse result, validation result, "
    "and dispatch decision."
)
_DISTINGUISH: Final = "It lets an operator distinguish a malformed stream from a permission rejection"
_AUDIT: Final = (
    "Log the reason and the affected call keys so a reviewer can distinguish a provider interruption from a "
    "product safety hold."
)
_STATUS_ROUTE: Final = "the user sees a truthful retry or handoff route"
_STATUS_APART: Final = "Test visible status separately from action safety."
_PREPARING: Final = "The client may display a non-actionable"
_CONFIRM_AFTER_VALIDATION: Final = "Only the completed, validated proposal can request a confirmation."
_INERT: Final = "fragments must remain inert until the adapter knows that one call has ended under its protocol."

# Every check the invariants make (tests/test_spec_traceability.py: each names a spec
# sentence or says it is callsafe's own choice; docs/spec-traceability.md is generated).
CHECKS: Final[tuple[Check, ...]] = (
    Check("INV-TERMINAL", "no execution before the call's own completed terminal event", (_INERT,)),
    Check(
        "INV-TERMINAL",
        "an execution of a call the model refuses for its data (malformed, invalid, data after the terminal)",
        ("A terminal event permits parsing; it does not itself authorize execution.",),
    ),
    Check(
        "INV-EXACT-ARGS",
        "the executed tool and arguments are the call's own fragments in position order",
        ("Append only fragments from that exact tuple.",),
    ),
    Check(
        "INV-EXACT-ARGS",
        "no execution of a key the stream never carried",
        ("every executor input names a completed call ID and originating turn",),
    ),
    Check(
        "INV-ONCE",
        "each call key reaches the executor at most once",
        ("Persist the terminal event ID so reconnect delivery cannot dispatch it twice.",),
    ),
    Check(
        "INV-TURN",
        "executed for the actor and tenant bound to the turn, and only while the turn is current",
        (
            "bind them to the active turn and authenticated actor",
            "an old tuple cannot affect a newer turn.",
        ),
    ),
    Check(
        "INV-CANCEL",
        "no execution of a call a stop made inert",
        ("every cancellation prevents dispatch",),
    ),
    Check(
        "INV-CONFIRM",
        "a confirmation request only after the call passed schema and business validation",
        (_CONFIRM_AFTER_VALIDATION,),
    ),
    Check(
        "INV-CONFIRM",
        "a tool that needs confirmation runs only after it was asked for and given",
        ("pass them through the existing permission and confirmation boundary",),
    ),
    Check(
        "INV-VALIDATE-ONCE",
        "business validation exactly once per executed call, never before its terminal event",
        ("each final call is schema- and business-validated exactly once.",),
    ),
    Check(
        "INV-BOUNDED",
        "every call the model ends has a last ledger row that means dispatched or not dispatched",
        ("each buffer has a bounded lifecycle",),
    ),
    Check("INV-BOUNDED", "no execution of a call over a byte cap", ("A buffer should have a byte limit",)),
    Check("INV-LEDGER", "every execution leaves a row that says it was dispatched", (_LEDGER,)),
    Check("INV-LEDGER", "every refused call leaves a row", (_LEDGER,)),
    Check("INV-LEDGER", "a call awaiting confirmation leaves a row that says so", (_LEDGER, "await confirmation")),
    Check(
        "INV-LEDGER",
        "a call's last row: its decision means the model's (dispatched, awaiting confirmation, not dispatched)",
        (_LEDGER,),
        own="a cancelled and a failed call are both 'not dispatched' (the spec's example writes reject for both)",
    ),
    Check("INV-LEDGER", "a call's last row: the stream's terminal reason, a count no lower than accepted", (_LEDGER,)),
    Check(
        "INV-LEDGER",
        "a call's last row: parse ok for a call that parsed, validation ok (or refused at dispatch) for one "
        "that passed validation, failed for one a business rule refused",
        (_LEDGER, _DISTINGUISH),
    ),
    Check("INV-LEDGER", "every operator control leaves an audit row with a reason and every key it stopped", (_AUDIT,)),
    Check(
        "INV-LEDGER",
        "no argument value in a ledger, audit, log or status line",
        ("without retaining sensitive argument values in broad logs",),
    ),
    Check(
        "INV-STATUS",
        "every status word has a known meaning",
        (_PREPARING, _STATUS_ROUTE),
        own="the meanings (preparing, awaiting confirmation, done, retry, handoff) and their words; an adapter "
        "declares its own",
    ),
    Check("INV-STATUS", "'done' only once an action of the turn ran", (_STATUS_APART,)),
    Check(
        "INV-STATUS",
        "a stop that leaves a turn with nothing run is followed by a retry or hand-off offer (or one stands)",
        (_STATUS_ROUTE,),
    ),
    Check(
        "LIVE-DISPATCH",
        "a completed, valid, current, permitted call is executed, or put up for confirmation",
        (_CONFIRM_AFTER_VALIDATION,),
        own="the spec states safety; that a correct call runs is callsafe's reading of an assembler's purpose",
    ),
    Check(
        "LIVE-DISPATCH",
        "a 'may' is one reading taken whole: validated as reassembled, then never run, is not allowed",
        ("reject or reassemble by its documented position",),
    ),
)


def check_all(
    trace: Trace,
    observations: Sequence[Observation],
    capabilities: Iterable[str] = ("ledger", "status", "confirmation", "business_validation"),
    oracle: Oracle | None = None,
    words: RecordWords = DEFAULT_WORDS,
) -> dict[str, list[Violation] | None]:
    """Every invariant's violations for one run; ``None`` where the invariant needs a
    capability the target lacks (not applicable). ``words``: what the target's record words
    mean (:mod:`callsafe.model.record_words`)."""
    caps = set(capabilities)
    ctx = Context(trace, oracle or judge(trace), observations, words=words, capabilities=frozenset(caps))
    results: dict[str, list[Violation] | None] = {}
    for inv in INVARIANTS:
        if not inv.needs <= caps:
            results[inv.id] = None
            continue
        found: list[Violation] = []
        seen: set[tuple[str, CallKey | None, str]] = set()
        for v in inv.check(ctx):
            ident = (v.message, v.key, v.invariant)
            if ident not in seen:
                seen.add(ident)
                found.append(v)
        results[inv.id] = found
    return results
