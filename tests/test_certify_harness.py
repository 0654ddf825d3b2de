"""The harness against small targets: a correct one passes with full coverage, a careful
one with fewer capabilities passes what applies to it (the rest is "not applicable",
never "passed"), and broken ones are caught by the invariant their bug breaks."""

from __future__ import annotations

import functools

import pytest
import toy_targets

from callsafe.certify.harness import Certification, Options, certify, check_trace
from callsafe.certify.targets import TargetSpecError, resolve_target
from callsafe.generators.catalog import CATALOG, by_name
from callsafe.generators.coverage import ALL_TRANSITIONS
from callsafe.generators.needs import needed_capabilities
from callsafe.model.lifecycle import State

QUICK = Options(depth=2, walks=60)


@functools.cache
def certified(spec: str, options: Options = QUICK) -> Certification:
    return certify(spec, options)


def test_a_correct_target_passes_everything_with_full_coverage() -> None:
    cert = certified("toy_targets:model_target")
    assert cert.ok and cert.violated == []
    assert {s.status for s in cert.invariants.values()} == {"holds"}
    assert cert.generators["catalog"].ran == len(CATALOG)
    assert cert.generators["exhaustive"].skipped_equivalent > 0
    missing = ALL_TRANSITIONS - cert.transitions
    assert len(cert.transitions) >= 49 and all(s is State.TERMINAL_CANDIDATE for s, _ in missing)
    assert not cert.budget_exhausted and all(g.complete for g in cert.generators.values())


def test_missing_capabilities_are_not_applicable_never_passed() -> None:
    cert = certified("toy_targets:simple")
    assert cert.ok
    caps = toy_targets.SimpleAssembler.capabilities
    expected_na = sum(1 for s in CATALOG if not needed_capabilities(s.trace) <= caps)
    assert cert.generators["catalog"].not_applicable == expected_na > 0
    assert cert.generators["catalog"].ran == len(CATALOG) - expected_na
    for inv in ("INV-CONFIRM", "INV-BOUNDED", "INV-LEDGER", "INV-STATUS"):
        assert cert.invariants[inv].status == "not_applicable", inv
    for inv in ("INV-TERMINAL", "INV-ONCE", "INV-CANCEL", "LIVE-DISPATCH"):
        assert cert.invariants[inv].status == "holds", inv
    assert {"operator_controls", "restart", "confirmation"} <= set(cert.not_applicable)


@pytest.mark.parametrize(
    ("spec", "invariant", "scenario"),
    [
        ("toy_targets:dispatch_on_first_parse", "INV-TERMINAL", "no-terminal-no-execution"),
        ("toy_targets:no_dedupe", "LIVE-DISPATCH", "duplicate-deltas"),  # {"amount":1000} fails validation
        ("toy_targets:ignore_cancel", "INV-CANCEL", "cancel-before-terminal"),
    ],
)
def test_broken_targets_are_caught(spec: str, invariant: str, scenario: str) -> None:
    assert invariant in check_trace(spec, by_name(scenario).trace).violated
    cert = certified(spec)
    assert not cert.ok and invariant in cert.violated
    ces = cert.counterexamples[invariant]  # one per distinct cause, each minimised
    assert ces
    for ce in ces:
        assert len(ce.minimal.events) <= len(ce.original.events)
        assert invariant in check_trace(spec, ce.minimal).violated


def test_an_implementation_that_never_executes_fails_on_liveness_only() -> None:
    cert = certified("toy_targets:never_executes", Options(depth=1, walks=20, generators=("catalog",)))
    assert cert.violated == ["LIVE-DISPATCH"]
    assert cert.invariants["LIVE-DISPATCH"].kind == "liveness"


def test_budget_stops_generation_and_says_so() -> None:
    cert = certify("toy_targets:model_target", Options(budget=0.3, depth=6, generators=("exhaustive",), walks=10))
    assert cert.budget_exhausted and not cert.generators["exhaustive"].complete
    assert 0 < cert.generators["exhaustive"].ran < 10_000


def test_seed_drives_the_walks_only() -> None:
    options = Options(depth=1, walks=30, generators=("walks",), minimize=False)
    a = certify("toy_targets:dispatch_on_first_parse", options)
    b = certify("toy_targets:dispatch_on_first_parse", options)
    c = certify("toy_targets:dispatch_on_first_parse", Options(depth=1, walks=30, generators=("walks",), seed=5))
    assert a.generators["walks"].violated == b.generators["walks"].violated
    assert a.transitions == b.transitions and a.pairs == b.pairs
    assert a.generators["walks"].info["seed"] == 0 and c.generators["walks"].info["seed"] == 5
    assert (a.transitions, a.pairs) != (c.transitions, c.pairs) or a.generators["walks"].violated != c.generators[
        "walks"
    ].violated


def test_workers_give_the_same_results() -> None:
    options = Options(depth=2, walks=40, generators=("catalog", "walks", "exhaustive"), minimize=False)
    one = certified("toy_targets:ignore_cancel", options)
    two = certify("toy_targets:ignore_cancel", Options(**{**options.__dict__, "workers": 2}))
    for name in options.generators:
        assert one.generators[name].violated == two.generators[name].violated, name
        assert one.generators[name].ran == two.generators[name].ran
    assert one.transitions == two.transitions and one.examples.keys() == two.examples.keys()


class Crashy(toy_targets.SimpleAssembler):
    name = "crashy"

    def receive(self, event: object) -> None:
        raise RuntimeError("boom")


def test_a_target_that_raises_is_recorded_not_fatal() -> None:
    cert = certify(Crashy, Options(depth=0, walks=5, generators=("catalog",), minimize=False))
    assert cert.generators["catalog"].errors > 0 and "boom" in cert.errors[0]
    # A call the target never got to is no verdict on its liveness (issue 17): the runs it
    # broke establish nothing, and the certification says "target errors", not "violated".
    assert cert.violated == [] and cert.verdict == "target_errors" and cert.exit_code == 3
    assert cert.invariants["LIVE-DISPATCH"].status == "not_established"
    assert "holds" not in {s.status for s in cert.invariants.values()}


class WireOnly(toy_targets.SimpleAssembler):
    protocol = "openai-responses"


@pytest.mark.parametrize("spec", ["nope", "toy_targets:missing", "toy_targets", "reference:floppy"])
def test_bad_target_names_say_why(spec: str) -> None:
    with pytest.raises(TargetSpecError):
        certify(resolve_target(spec) if ":" not in spec or spec.startswith("reference") else spec)


def test_targets_must_meet_the_contract() -> None:
    with pytest.raises(TargetSpecError, match="lacks"):
        certify(lambda: object())  # type: ignore[arg-type, return-value]
    with pytest.raises(TargetSpecError, match="reads 'openai-responses' but lacks receive_wire"):
        certify(WireOnly)  # a provider-protocol target must take the wire (callsafe.certify.wire)
    with pytest.raises(ValueError, match="workers"):
        certify(toy_targets.simple, Options(workers=2))
