"""The catalog: named scenarios from the spec and from public bug reports, each with a
source, a trace, the author's verdicts (which the oracle must agree with), and the
capabilities a target needs for it."""

from __future__ import annotations

import pytest

from callsafe.contract.target import CAPABILITIES
from callsafe.generators.catalog import CATALOG, Scenario, by_name, scenarios
from callsafe.generators.needs import CAPABILITY_NAMES, needed_capabilities
from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import Trace

# The spec's own list: "two calls interleaved, duplicate deltas, terminal before a missing
# fragment, malformed JSON, cancellation before terminal, reconnection replay, a tool
# renamed mid-release, and a new user turn while old fragments arrive", its acceptance
# checks (emergency stop during collecting and during validation, quarantine after
# restart), and the confirmation flows.
SPEC_FIXTURES = [
    "two-calls-interleaved",
    "duplicate-deltas",
    "terminal-before-missing-fragment",
    "malformed-json",
    "cancel-before-terminal",
    "reconnection-replay",
    "tool-renamed-mid-release",
    "new-turn-while-old-fragments-arrive",
    "emergency-stop-during-collecting",
    "emergency-stop-during-validation",
    "quarantine-across-restart",
    "confirm-then-execute",
    "deny-confirmation",
    "cancel-before-confirm",
]
BUG_REPORTS = [
    "index-collision-distinct-ids",
    "repeated-name-fragments",
    "call-reannounced-with-another-tool",
    "glued-calls-in-one-buffer",
    "truncated-number-at-max-tokens",
    "second-response-start",
    "multibyte-characters-split-across-fragments",
    "surrogate-pair-split-across-fragments",
    "finish-reason-repeated",
    "finish-reason-on-every-chunk",
]


def test_catalog_is_large_named_and_sourced() -> None:
    assert len(CATALOG) >= 30
    names = [s.name for s in CATALOG]
    assert len(set(names)) == len(names)
    for s in CATALOG:
        assert s.source and s.origin in ("spec", "bug"), s.name
        assert s.trace.name == s.name and s.trace.source == s.source
        assert s.source.startswith(s.origin + ":"), s.name
    assert set(SPEC_FIXTURES) <= set(names)
    assert set(BUG_REPORTS) <= {s.name for s in scenarios("bug")}
    # a public bug report is cited by repository and number
    assert all("#" in s.source for s in scenarios("bug"))


@pytest.mark.parametrize("scenario", CATALOG, ids=[s.name for s in CATALOG])
def test_oracle_agrees_with_the_author(scenario: Scenario) -> None:
    oracle = judge(scenario.trace)
    verdicts = oracle.by_short_name()
    assert scenario.trace.verdicts, "every scenario states what it expects"
    assert set(verdicts) == set(scenario.trace.verdicts), "every call of the trace has an expected verdict"
    for short, expected in scenario.trace.verdicts.items():
        v = verdicts[short]
        assert v.matches_author(expected), (short, expected, v.execute, v.reason, oracle.explain(v.key))
        # stricter than matches_author: True means must, False must not, "may" may
        want = {True: "must", False: "must_not", "may": "may"}[expected["execute"]]
        assert v.execute == want, (short, v.reason)
        if "reason" in expected:
            assert expected["reason"] in v.reason, (short, v.reason)


def test_catalog_traces_round_trip_through_json() -> None:
    for s in CATALOG:
        assert Trace.loads(s.trace.dumps()) == s.trace, s.name


def test_needs_are_derived_from_the_events() -> None:
    assert CAPABILITY_NAMES == CAPABILITIES  # generators repeat the contract's names
    assert by_name("quarantine-across-restart").needs >= {"operator_controls", "restart"}
    assert by_name("emergency-stop-during-validation").needs >= {"operator_controls", "business_validation"}
    assert "confirmation" in by_name("awaiting-confirmation").needs
    assert by_name("new-turn-while-old-fragments-arrive").needs >= {"cancellation"}  # supersession
    assert "catalog_changes" in by_name("tool-renamed-mid-release").needs
    assert "turn_binding" in by_name("tenant-isolation").needs
    assert by_name("index-collision-distinct-ids").needs == frozenset()
    for s in CATALOG:
        assert s.needs <= CAPABILITIES, s.name


def test_replayed_turn_start_is_not_a_supersession() -> None:
    b = TraceBuilder().turn("t1").replay(0, 1)
    assert "cancellation" not in needed_capabilities(b.build())
    assert "cancellation" in needed_capabilities(b.turn("t2").build())


def test_by_name_names_the_known_scenarios() -> None:
    assert by_name("duplicate-deltas").trace.verdicts["t1/a"]["arguments"] == {"amount": 100}
    with pytest.raises(KeyError, match="duplicate-deltas"):
        by_name("no-such-scenario")
