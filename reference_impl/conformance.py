"""Does a run agree with the model? Every invariant, and every verdict of the oracle.

Why here: the reference implementation's tests, its benchmarks and anyone changing it ask
the same question after a run, and the answer must be the model's, never a re-statement:
``check_all`` (:mod:`callsafe.model.invariants`) for the invariants, ``judge``
(:mod:`callsafe.model.oracle`) for what must, must not or may execute.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from callsafe.model.invariants import check_all
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallKey, Executed, Observation, Trace

__all__ = ["conformance_problems"]


def conformance_problems(
    trace: Trace,
    observations: Sequence[Observation],
    errors: Iterable[str] = (),
    capabilities: Iterable[str] = ("ledger", "status", "confirmation", "business_validation"),
) -> list[str]:
    """Every way a run differs from the model: errors the target raised, invariant
    violations (safety and liveness), and executions that do not match the verdicts
    (``must``: exactly once with the verdict's arguments; ``must_not``: never; ``may``:
    at most once, with the verdict's arguments)."""
    problems = [f"target raised: {e}" for e in errors]
    oracle = judge(trace)
    for invariant, violations in check_all(trace, observations, capabilities, oracle).items():
        for v in violations or ():
            where = f" [{v.key.short() if v.key else '-'} @ step {v.step}]"
            problems.append(f"{invariant} ({v.kind}): {v.message}{where}")
    executed: dict[CallKey, list[Executed]] = defaultdict(list)
    for obs in observations:
        if isinstance(obs, Executed):
            executed[obs.key].append(obs)
    for key, verdict in oracle.verdicts.items():
        runs = executed.pop(key, [])
        if verdict.execute == "must_not" and runs:
            problems.append(f"{key.short()}: executed {len(runs)}x, verdict must_not ({verdict.reason})")
        elif verdict.execute == "must" and len(runs) != 1:
            problems.append(f"{key.short()}: executed {len(runs)}x, verdict must (exactly once)")
        elif verdict.execute == "may" and len(runs) > 1:
            problems.append(f"{key.short()}: executed {len(runs)}x, verdict may (at most once)")
        for run in runs:
            if run.arguments != verdict.arguments:
                problems.append(f"{key.short()}: executed with other arguments than the verdict's")
    for key, runs in executed.items():
        problems.append(f"{key.short()}: executed {len(runs)}x, but the model knows no such call")
    return problems
