"""The mutant zoo: every deliberately broken variant of the reference implementation is
caught by the invariant its bug is about, with a counterexample of at most a dozen events."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from callsafe.campaigns.selftest import MutantResult, mutation_score, run_selftest
from callsafe.campaigns.zoo import correct_variants, registry
from callsafe.certify.harness import Options
from callsafe.model.invariants import BY_ID


def test_every_mutant_is_caught_by_its_invariant_with_a_small_counterexample() -> None:
    mutants = registry()
    assert len(mutants) >= 35
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


def test_the_zoo_names_real_invariants_and_its_domain_mutants_cover_every_part_of_the_domain() -> None:
    mutants = registry()
    assert all(m.expect and set(m.expect) <= set(BY_ID) for m in mutants)
    assert len({m.name for m in mutants}) == len(mutants)
    domain = {m.name for m in mutants if "domain_mutants" in m.target}
    # at least one per part of the rich domain: identities/tools, values, caps, events
    for part in (
        {"arguments-by-call-id", "item-without-response", "skip-rules-when-confirmed"},
        {"dedupe-by-text", "latin1-deltas"},
        {"chars-for-bytes", "cap-off-by-one", "turn-cap-per-response", "turn-bytes-reset-on-restart"},
        {"forget-quarantine-on-restart", "latest-binding-wins", "confirm-runs-again", "tenant-stop-sticks"},
    ):
        assert part <= domain


def test_the_domain_mutants_are_missed_by_the_plain_domain() -> None:
    """What the rich domain buys: these bugs pass a certification whose traces come
    from the domain of old (one tenant, one tool, {"v":100}, roomy caps). (Latin-1
    decoding is not among them: the synthesised fragmentations carry multi-byte text.)"""
    names = {"arguments-by-call-id", "dedupe-by-text", "chars-for-bytes", "turn-cap-per-response"}
    assert _caught_in_a_fresh_process(names, "plain") == set()
    assert _caught_in_a_fresh_process(names, "rich") == names


def _caught_in_a_fresh_process(names: set[str], domain: str) -> set[str]:
    """The mutants of ``names`` a certification over ``domain`` catches by their own
    invariant, run as ``callsafe selftest`` runs it: in a process of its own. (Once, in a
    long-lived test worker, the plain domain caught dedupe-by-text: z3 proofs run earlier
    in that worker had changed the synthesised traces. Synthesis now runs in a z3 context
    of its own, tests/test_z3_determinism.py; a fresh process is still the faithful
    setting for what ``callsafe selftest`` reports.)"""
    code = (
        "import json, sys\n"
        "from callsafe.campaigns.selftest import run_selftest\n"
        "from callsafe.campaigns.zoo import registry\n"
        "from callsafe.certify.harness import Options\n"
        "names = set(json.loads(sys.argv[1]))\n"
        "chosen = [m for m in registry() if m.name in names]\n"
        "results = run_selftest(chosen, Options(depth=2, seed=0, minimize=False, domain=sys.argv[2]))\n"
        "print(json.dumps(sorted(r.mutant.name for r in results if r.caught)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(sorted(names)), domain],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("name", [v.name for v in correct_variants()])
def test_correct_variants_pass(depth: int, name: str) -> None:
    """Choices the spec leaves open (reject out-of-order or repeated positions, an outbox
    of executions, failing a doomed call early, refusing an unknown tool's call at its
    opening, keeping calls across a catalog change, records in the spec's or declared
    words, preparing again after a retry offer) are certified like mutants and must pass:
    a violation is a false alarm. (``callsafe selftest`` also runs them at depth 4.)"""
    (variant,) = [v for v in correct_variants() if v.name == name]
    assert variant.correct
    (result,) = run_selftest([variant], Options(depth=depth, seed=0, minimize=False))
    assert result.ok, (result.caught_by, result.error)


def test_there_are_at_least_eight_correct_variants() -> None:
    """Each a choice the spec leaves open, the false alarms of issue 29 among them."""
    assert {v.name for v in correct_variants()} >= {
        "reject-out-of-order",
        "defer-executions",
        "fail-doomed-early",
        "fail-on-repeat",
        "refuse-unknown-at-open",
        "keep-calls-across-catalog-change",
        "spec-words",
        "declared-words",
        "preparing-after-retry",
    }
    assert len(correct_variants()) >= 8
    assert all(v.correct and v.description for v in correct_variants())


def test_a_correct_variant_that_is_blamed_fails_the_selftest() -> None:
    variant = correct_variants()[0]
    blamed = MutantResult(variant, ["LIVE-DISPATCH"], 0.0, 5)
    assert not blamed.ok
    assert MutantResult(variant, [], 0.0, None).ok
    assert mutation_score([MutantResult(variant, [], 0.0, None)]) is None
