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

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from callsafe.model.invariants import BY_ID, INVARIANTS, check_all, invariant_for_refusal
from callsafe.model.oracle import Oracle, judge
from callsafe.model.vocabulary import CallKey, Executed, Observation, Trace

__all__ = ["Finding", "Judgement", "judge_observations", "oracle_findings"]

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

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "kind": self.kind,
            "message": self.message,
            "key": self.key.to_json() if self.key else None,
            "step": self.step,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        key = CallKey.from_json(data["key"]) if data.get("key") else None
        return cls(
            data["invariant"], data["kind"], data["message"], key, data.get("step"), data.get("source", "checker")
        )

    def describe(self) -> str:
        where = f" [{self.key.short()}]" if self.key else ""
        at = f" at step {self.step}" if self.step is not None else ""
        return f"{self.invariant}{where}{at}: {self.message} ({self.source})"


@dataclass
class Judgement:
    """Per invariant: its findings, or None when it does not apply to the target."""

    results: dict[str, list[Finding] | None]
    errors: list[str] = field(default_factory=list)

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
        lines = [f.describe() for f in found] + [f"target error: {e}" for e in self.errors]
        return "\n".join(lines) or "no violation"


def _kind(invariant: str) -> Kind:
    inv = BY_ID.get(invariant)
    return inv.kind if inv is not None else "safety"


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
    errors: Sequence[str] = (),
    oracle: Oracle | None = None,
) -> Judgement:
    """Judge one run of ``trace``: every invariant's findings, or None where the target's
    ``capabilities`` make it not applicable."""
    caps = frozenset(capabilities)
    oracle = oracle or judge(trace)
    checked = check_all(trace, observations, caps, oracle=oracle)
    results: dict[str, list[Finding] | None] = {}
    for inv in INVARIANTS:
        found = checked.get(inv.id)
        results[inv.id] = (
            None if found is None else [Finding(v.invariant, v.kind, v.message, v.key, v.step) for v in found]
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
    return Judgement(results, list(errors))


def count_by_invariant(judgements: Iterable[Judgement]) -> Counter[str]:
    """How many runs violated each invariant."""
    counts: Counter[str] = Counter()
    for j in judgements:
        counts.update(j.violated)
    return counts
