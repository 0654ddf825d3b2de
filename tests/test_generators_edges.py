"""The edge traces: what each family holds, that the reference passes them, and that they
are part of the rich domain only."""

from __future__ import annotations

import json

import fastjsonschema
import jsonschema
import pytest

from callsafe.certify.harness import GENERATORS, Options, certify
from callsafe.generators import edges
from callsafe.generators.edges import FAMILIES, SCAN_STEP, edge_traces
from callsafe.generators.store_faults import store_fault_traces
from callsafe.model.vocabulary import CallOpened, Fragment, Restart


def test_every_family_has_traces_with_unique_names_and_the_same_ones_every_time() -> None:
    traces = edge_traces()
    names = [t.name for t in traces]
    assert len(names) == len(set(names))
    assert {n.split(":")[0] for n in names} == {f"edges/{f}" for f in FAMILIES}
    again = tuple(t for build in FAMILIES.values() for t in build())
    assert [(t.name, t.events) for t in again] == [(t.name, t.events) for t in traces]
    assert "edges" in GENERATORS


def test_long_documents_are_cut_at_every_kind_of_boundary_in_fragments_a_scan_reads_whole() -> None:
    long = [
        t for t in edge_traces() if t.name.startswith("edges/long: ") and ", cut " in t.name and "parse" not in t.name
    ]
    cut_kinds = {t.name.split(", cut ")[1] for t in long}
    assert set(edges._CUTS) <= cut_kinds
    for trace in long:
        for call in {e.call for e in trace.events if isinstance(e, Fragment)}:
            texts = [e.text for e in trace.events if isinstance(e, Fragment) and e.call == call]
            assert sum(map(len, texts)) > 3 * SCAN_STEP
            assert all(len(t) >= SCAN_STEP for t in texts[:-1]), trace.name  # each one triggers a scan
    # a boundary inside an escape: a fragment ends on the backslash that opens it
    escape = next(t for t in long if t.name.endswith("cut inside an escape"))
    assert any(e.text.endswith("\\") for e in escape.events if isinstance(e, Fragment))


def test_huge_repeats_are_over_the_digest_slice_and_within_the_caps() -> None:
    for trace in (t for t in edge_traces() if t.name.startswith("edges/huge")):
        sizes = [len(e.text.encode()) for e in trace.events if isinstance(e, Fragment)]
        assert max(sizes) > 1 << 16
        assert trace.limits.call_bytes > 2 * max(sizes) and trace.limits.turn_bytes > sum(sizes)


LOOSER_WHEN_COMPILED = (
    "a dollar inside a lookahead",
    "a dollar inside a lookahead, nothing required",
    "a dollar inside a lookahead, under anyOf",
    "a dollar inside a lookahead, no top-level type",
    "backreferences in patternProperties",
    "prefixItems",
    "dependentRequired",
    "dependentRequired, no top-level type",
    "a decimal multipleOf",
)


@pytest.mark.parametrize("name", LOOSER_WHEN_COMPILED)
def test_schema_family_rejects_what_a_compiled_validator_would_accept(name: str) -> None:
    """Why the family matters: each of these schemas has arguments that JSON Schema 2020-12
    (the model's validator) rejects and fastjsonschema accepts, so an implementation that
    hands such a schema to the compiled validator executes what it must not."""
    schema, valid, invalid = edges._SCHEMAS[name]
    reference = jsonschema.Draft202012Validator(schema)
    compiled = fastjsonschema.compile(schema, use_default=False, use_formats=False, detailed_exceptions=False)
    assert all(reference.is_valid(v) for v in valid)
    assert not any(reference.is_valid(v) for v in invalid)
    looser = []
    for value in invalid:
        try:
            compiled(value)
        except fastjsonschema.JsonSchemaException:
            continue
        looser.append(value)
    assert looser, name


def test_schema_traces_validate_each_schema_more_often_than_the_compile_threshold() -> None:
    from callsafe.reference_impl.schema_check import COMPILE_AFTER

    for trace in (t for t in edge_traces() if t.name.startswith("edges/schema")):
        opened = [e for e in trace.events if isinstance(e, CallOpened)]
        assert len(opened) > COMPILE_AFTER + 1
        decisive = [e for e in trace.events if isinstance(e, Fragment) and e.call.startswith("x")]
        first = next(i for i, e in enumerate(trace.events) if isinstance(e, Fragment) and e.call.startswith("x"))
        assert decisive and sum(isinstance(e, CallOpened) for e in trace.events[:first]) > COMPILE_AFTER
        json.loads(decisive[0].text)


def test_caps_after_a_restart_are_met_exactly_by_the_call_after_it() -> None:
    met = [t for t in edge_traces() if t.name.startswith("edges/caps: the turn cap met exactly")]
    assert len(met) == 3  # nothing before the restart, one call, two interleaved calls
    for trace in met:
        cut = [isinstance(e, Restart) for e in trace.events].index(True)
        sizes = sum(len(e.text.encode()) for e in trace.events if isinstance(e, Fragment))
        assert sizes == trace.limits.turn_bytes and any(isinstance(e, Fragment) for e in trace.events[cut:])
    # the interleaved pair: the first-opened call's fragment comes last, so each call's last
    # progress carries another turn total and only the larger one is the turn's
    (pair,) = [t for t in met if "interleaved" in t.name]
    before = pair.events[: [isinstance(e, Restart) for e in pair.events].index(True)]
    opened = [e.call for e in before if isinstance(e, CallOpened)]
    fragments = [e.call for e in before if isinstance(e, Fragment)]
    assert len(opened) == 2 and fragments[-1] == opened[0] and fragments.index(opened[1]) < len(fragments) - 1


def test_the_reference_passes_every_edge_trace_and_the_plain_domain_has_none() -> None:
    cert = certify("reference:memory", Options(generators=("edges",), minimize=False))
    faults = len(list(store_fault_traces()))  # the reference target has the store_faults capability
    assert cert.generators["edges"].ran == len(edge_traces()) + faults and cert.ok, cert.violated
    plain = certify("reference:memory", Options(generators=("edges",), minimize=False, domain="plain"))
    assert plain.generators["edges"].ran == 0
