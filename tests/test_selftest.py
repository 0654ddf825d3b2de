"""The mutant zoo: every deliberately broken variant of the reference implementation is
caught by the invariant its bug is about, with a counterexample of at most a dozen events."""

from __future__ import annotations

from callsafe.campaigns.selftest import mutation_score, run_selftest
from callsafe.campaigns.zoo import registry
from callsafe.certify.harness import Options


def test_every_mutant_is_caught_by_its_invariant_with_a_small_counterexample() -> None:
    mutants = registry()
    assert len(mutants) >= 12
    results = run_selftest(mutants, Options(depth=2, seed=0, counterexamples=1))
    missed = {r.mutant.name: (r.caught_by, r.error) for r in results if not r.caught}
    assert missed == {}
    too_long = {r.mutant.name: r.expected_minimal for r in results if (r.expected_minimal or 99) > 12}
    assert too_long == {}
    assert mutation_score(results) == 1.0


def test_the_reference_itself_is_not_a_mutant() -> None:
    from callsafe.certify.harness import certify

    cert = certify("reference:memory", Options(depth=1, seed=0, generators=("catalog",)))
    assert cert.ok and cert.violated == []
