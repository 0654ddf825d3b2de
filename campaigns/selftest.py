"""``callsafe selftest``: certify every registered mutant and score the certifier.

Why: the mutation score (caught mutants / all mutants) is the certifier's own test. A
mutant is caught when certification finds any violation (or, when the mutant names the
invariants expected to catch it, one of those); a mutant that slips through is a missing
generator or checker, and the table says which. A correct variant (a choice the spec
leaves open) is certified the same way and must pass: a violation there is a false alarm
of the judge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from callsafe.campaigns.zoo import Mutant
from callsafe.certify.harness import Certification, Options, certify

__all__ = ["MutantResult", "mutation_score", "run_selftest"]


@dataclass
class MutantResult:
    mutant: Mutant
    caught_by: list[str]  # invariants violated
    seconds: float
    minimal_events: int | None  # the smallest counterexample, in events
    error: str | None = None
    expected_minimal: int | None = None  # the smallest counterexample of an expected invariant

    @property
    def expected_hits(self) -> list[str]:
        """The expected invariants that caught it (all that caught it, when none is named)."""
        if not self.mutant.expect:
            return list(self.caught_by)
        return [i for i in self.caught_by if i in self.mutant.expect]

    @property
    def caught(self) -> bool:
        if self.error is not None or not self.caught_by:
            return False
        return not self.mutant.expect or bool(set(self.mutant.expect) & set(self.caught_by))

    @property
    def ok(self) -> bool:
        """What the selftest wants: a mutant caught (by its invariant), a correct variant
        certified (nothing violated, no error)."""
        if self.mutant.correct:
            return self.error is None and not self.caught_by
        return self.caught

    @classmethod
    def of(cls, mutant: Mutant, cert: Certification, seconds: float) -> MutantResult:
        """The score of one certification of ``mutant`` (shared with the bug-finding
        benchmark, so both read a certification the same way)."""
        sizes = [len(ce.minimal.events) for ces in cert.counterexamples.values() for ce in ces]
        expected = [
            len(ce.minimal.events)
            for inv, ces in cert.counterexamples.items()
            if not mutant.expect or inv in mutant.expect
            for ce in ces
        ]
        return cls(
            mutant, cert.violated, seconds, min(sizes, default=None), expected_minimal=min(expected, default=None)
        )


def run_selftest(
    mutants: Sequence[Mutant], options: Options, on_result: Callable[[MutantResult], None] | None = None
) -> list[MutantResult]:
    """Certify each mutant with ``options``."""
    results = []
    for mutant in mutants:
        started = time.perf_counter()
        try:
            cert = certify(mutant.target, options)
        except Exception as exc:  # a mutant that cannot be built is reported, not hidden
            result = MutantResult(mutant, [], time.perf_counter() - started, None, f"{type(exc).__name__}: {exc}")
        else:
            result = MutantResult.of(mutant, cert, time.perf_counter() - started)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def mutation_score(results: Sequence[MutantResult]) -> float | None:
    """Caught / all mutants (correct variants are not mutants), or None with none."""
    mutants = [r for r in results if not r.mutant.correct]
    if not mutants:
        return None
    return sum(r.caught for r in mutants) / len(mutants)
