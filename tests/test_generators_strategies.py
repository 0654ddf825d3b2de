"""The public hypothesis strategies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.generators.needs import needed_capabilities
from callsafe.generators.strategies import (
    PERTURBATIONS,
    adversarial_traces,
    fragmentations,
    json_texts,
    well_formed_traces,
)
from callsafe.model.invariants import check_all
from callsafe.model.oracle import ideal_observations, judge
from callsafe.model.vocabulary import Trace


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fragmentations_join_back(data: st.DataObject) -> None:
    text = data.draw(json_texts())
    pieces = data.draw(fragmentations(text))
    assert "".join(pieces) == text and all(pieces)


@settings(max_examples=60, deadline=None)
@given(well_formed_traces())
def test_well_formed_calls_must_all_execute(trace: Trace) -> None:
    oracle = judge(trace)
    assert oracle.verdicts
    for v in oracle.verdicts.values():
        assert v.execute == "must", (v.reason, trace.dumps())


LIMITED = frozenset({"cancellation", "business_validation"})


@settings(max_examples=30, deadline=None)
@given(adversarial_traces(capabilities=LIMITED))
def test_adversarial_traces_fit_the_capabilities(trace: Trace) -> None:
    assert needed_capabilities(trace) <= LIMITED
    assert Trace.loads(trace.dumps()) == trace


@settings(max_examples=40, deadline=None)
@given(adversarial_traces())
def test_the_models_own_run_of_adversarial_traces_passes(trace: Trace) -> None:
    found = check_all(trace, ideal_observations(judge(trace)))
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_every_perturbation_needs_a_known_capability() -> None:
    from callsafe.generators.needs import CAPABILITY_NAMES

    assert {need for need in PERTURBATIONS.values() if need} <= CAPABILITY_NAMES
