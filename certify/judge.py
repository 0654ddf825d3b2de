"""Judging one run: the invariant checkers, and a direct comparison with the oracle.

Why both: the checkers (:func:`callsafe.model.invariants.check_all`) each look at one
property; the oracle comparison looks at the bottom line for every call the trace carries:

* ``must``: executed exactly once, with the verdict's arguments (none: a liveness
  shortfall; more than once or other arguments: a safety violation);
* ``must_not``: never executed;
* ``may``: at most once, and then with the verdict's arguments.

Both report under the invariant ids of DESIGN.md, so a report stays "per invariant". An
oracle finding goes to the invariant the model names for it
(:func:`callsafe.model.invariants.invariant_for_refusal`); when the target lacks the
capability that invariant needs (say a target without a ledger executes a call over the
byte cap: INV-BOUNDED needs a ledger), it goes to INV-CANCEL, whose spec sentence covers
every stop, so that a safety violation is never dropped as "not applicable".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from callsafe.certify.target_errors import TargetError
from callsafe.model.invariants import BY_ID, INVARIANTS, About, check_all, invariant_for_refusal
from callsafe.model.oracle import Oracle, judge
from callsafe.model.record_words import DEFAULT_WORDS, RecordWords
from callsafe.model.vocabulary import CallKey, Executed, Observation, Trace

__all__ = ["Finding", "Judgement", "judge_observations", "message_shape", "oracle_findings"]

Kind = Literal["safety", "liveness"]
FALLBACK: Final = "INV-CANCEL"


@dataclass(frozen=True)
class Finding:
    """One violation of one invariant in one run."""

    invariant: str
    kind: Kind
    message: str
    key: CallKey | None = None
    step: int | None = None
    source: Literal["checker", "oracle"] = "checker"
    # "action" (what reached the executor, the validators, the confirmation prompt) or
    # "records" (ledger, audit, logs, status): reported apart (docs/reading-a-report.md)
    about: About = "action"

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "kind": self.kind,
            "message": self.message,
            "key": self.key.to_json() if self.key else None,
            "step": self.step,
            "source": self.source,
            "about": self.about,
            "cause": self.cause,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        key = CallKey.from_json(data["key"]) if data.get("key") else None
        about: About = "records" if data.get("about") == "records" else "action"
        return cls(
            data["invariant"],
            data["kind"],
            data["message"],
            key,
            data.get("step"),
            data.get("source", "checker"),
            about,
        )

    @property
    def cause(self) -> str:
        """The finding's cause: its invariant, section and source and the shape of its
        message (quoted values, numbers and the reprs of arguments blanked), so that two
        traces whose findings differ only in ids, steps or values share a cause, and a
        finding of another kind (another rule, another reason in the model) does not."""
        return f"{self.invariant} {self.about} {self.source}: {message_shape(self.message)}"

    def describe(self) -> str:
        where = f" [{self.key.short()}]" if self.key else ""
        at = f" at step {self.step}" if self.step is not None else ""
        return f"{self.invariant}{where}{at}: {self.message} ({self.source})"


@dataclass
class Judgement:
    """Per invariant: its findings, or None when it does not apply to the target.

    ``errors`` are the target's own failures on the run (:class:`TargetError`). A run with
    one is *broken*: a safety finding about a call executed before the break still counts
    (what the executor received, it received); every other finding is set aside
    (``set_aside``), not counted: a call the target never got to is no evidence against
    the target, and no evidence for it either, so the harness says "not established" for
    an invariant that only broken runs checked."""

    results: dict[str, list[Finding] | None]
    errors: list[TargetError] = field(default_factory=list)
    set_aside: list[Finding] = field(default_factory=list)
    # A provider-protocol run judged under another defensible reading of its stream than
    # the protocol's own parser (:mod:`callsafe.certify.wire_readings`): the reading's name
    # and the operator that made the stream, and the invariants the parser's own reading
    # would have found violated that this reading does not. Empty otherwise.
    reading: str = ""
    spared: tuple[str, ...] = ()

    @property
    def broken(self) -> bool:
        """The target broke the run (:attr:`TargetError.breaks_run`)."""
        return any(e.breaks_run for e in self.errors)

    @property
    def violated(self) -> set[str]:
        return {inv for inv, found in self.results.items() if found}

    @property
    def findings(self) -> list[Finding]:
        return [f for found in self.results.values() if found for f in found]

    @property
    def safety(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "safety"]

    @property
    def liveness(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "liveness"]

    def of(self, invariant: str) -> list[Finding]:
        return list(self.results.get(invariant) or [])

    def explain(self, invariant: str | None = None) -> str:
        found = self.findings if invariant is None else self.of(invariant)
        lines = [f.describe() for f in found] + [f"target {e.describe()}" for e in self.errors]
        return "\n".join(lines) or "no violation"


_QUOTED: Final = re.compile(r"(?<!\w)(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
_BRACKETED: Final = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_NUMBER: Final = re.compile(r"\d+")


def message_shape(message: str) -> str:
    """``message`` with what varies between traces of one cause blanked: quoted text,
    ``{...}``/``[...]`` reprs (nested ones too, innermost first) and numbers."""
    shape = _QUOTED.sub("_", message)
    for _ in range(8):  # nesting depth of an argument repr; bounded so any input ends
        blanked = _BRACKETED.sub("_", shape)
        if blanked == shape:
            break
        shape = blanked
    return _NUMBER.sub("#", shape)


def _kind(invariant: str) -> Kind:
    inv = BY_ID.get(invariant)
    return inv.kind if inv is not None else "safety"


def _about(invariant: str) -> About:
    inv = BY_ID.get(invariant)
    return inv.about[0] if inv is not None else "action"


def oracle_findings(oracle: Oracle, observations: Sequence[Observation]) -> list[Finding]:
    """The direct comparison of what the executor received with the oracle's verdicts."""
    executions: dict[CallKey, list[Executed]] = {}
    for obs in observations:
        if isinstance(obs, Executed):
            executions.setdefault(obs.key, []).append(obs)
    out: list[Finding] = []
    for key, runs in executions.items():
        if key not in oracle.verdicts:
            out.append(
                Finding(
                    "INV-EXACT-ARGS", "safety", "executed a call the trace never carried", key, runs[0].step, "oracle"
                )
            )
    records = oracle.semantics.state.calls
    for key, verdict in oracle.verdicts.items():
        runs = executions.get(key, [])
        if verdict.execute == "must" and not runs:
            out.append(
                Finding(
                    "LIVE-DISPATCH",
                    "liveness",
                    f"must execute once ({verdict.reason}); the executor never received it",
                    key,
                    None,
                    "oracle",
                )
            )
            continue
        if verdict.execute == "must_not" and runs:
            record = records.get((key.turn, key.response, key.item, key.call))
            invariant = invariant_for_refusal(verdict, record)
            out.append(
                Finding(
                    invariant, "safety", f"must not execute ({verdict.reason}); it did", key, runs[0].step, "oracle"
                )
            )
        if len(runs) > 1:
            out.append(
                Finding("INV-ONCE", "safety", f"executed {len(runs)} times; at most once", key, runs[1].step, "oracle")
            )
        if verdict.execute != "must_not":
            for run in runs:
                if run.arguments != verdict.arguments:
                    out.append(
                        Finding(
                            "INV-EXACT-ARGS",
                            "safety",
                            f"executed with {run.arguments!r}; the call's own fragments in position order are "
                            f"{verdict.arguments!r}",
                            key,
                            run.step,
                            "oracle",
                        )
                    )
                    break
    return out


def judge_observations(
    trace: Trace,
    observations: Sequence[Observation],
    capabilities: Iterable[str],
    errors: Sequence[TargetError] = (),
    oracle: Oracle | None = None,
    words: RecordWords = DEFAULT_WORDS,
) -> Judgement:
    """Judge one run of ``trace``: every invariant's findings, or None where the target's
    ``capabilities`` make it not applicable; on a run with target ``errors``, liveness
    findings are set aside (see :class:`Judgement`). ``words``: what the target's record
    words mean (its declared ``record_words`` over the defaults)."""
    caps = frozenset(capabilities)
    oracle = oracle or judge(trace)
    checked = check_all(trace, observations, caps, oracle=oracle, words=words)
    results: dict[str, list[Finding] | None] = {}
    for inv in INVARIANTS:
        found = checked.get(inv.id)
        results[inv.id] = (
            None
            if found is None
            else [
                Finding(v.invariant, v.kind, v.message, v.key, v.step, "checker", v.about or _about(v.invariant))
                for v in found
            ]
        )
    for finding in oracle_findings(oracle, observations):
        target = finding.invariant
        if results.get(target) is None:
            target = FALLBACK
            finding = Finding(
                FALLBACK,
                finding.kind,
                f"{finding.message} (reported under {FALLBACK}: {finding.invariant} is not applicable to this target)",
                finding.key,
                finding.step,
                "oracle",
            )
        bucket = results[target]
        assert bucket is not None  # INV-CANCEL and LIVE-DISPATCH need no capability
        if not any(f.key == finding.key and f.invariant == finding.invariant for f in bucket):
            bucket.append(finding)
    set_aside: list[Finding] = []
    breaking = [e for e in errors if e.breaks_run]
    if breaking:
        counts = _counts_on_broken_run(breaking, observations)
        for inv_id, kept in results.items():
            if kept:
                set_aside += [f for f in kept if not counts(f)]
                results[inv_id] = [f for f in kept if counts(f)]
    return Judgement(results, list(errors), set_aside)


def _counts_on_broken_run(errors: Sequence[TargetError], observations: Sequence[Observation]) -> Any:
    """Which findings of a broken run still count: a safety finding about a call the
    executor received before the target first broke (what was executed was executed).
    Everything else is set aside: a liveness shortfall, a missing ledger row or status,
    anything after the break (a target that goes on after a failed ``restart`` is not what
    a restarted process would do), since the run is not the target's own behaviour."""
    broke_at = min(
        (float("inf") if e.where == "close" else -1 if e.step is None else e.step for e in errors), default=-1
    )
    first_run: dict[CallKey, int] = {}
    for obs in observations:
        if isinstance(obs, Executed):
            first_run.setdefault(obs.key, obs.step)

    def counts(finding: Finding) -> bool:
        if finding.kind != "safety" or finding.key is None:
            return False
        step = first_run.get(finding.key)
        return step is not None and step < broke_at

    return counts


def count_by_invariant(judgements: Iterable[Judgement]) -> Counter[str]:
    """How many runs violated each invariant."""
    counts: Counter[str] = Counter()
    for j in judgements:
        counts.update(j.violated)
    return counts
