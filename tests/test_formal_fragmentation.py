"""Fragmentations that fool weak implementations, each checked with json and jsonschema,
each a trace whose oracle verdict is what the spec says."""

from __future__ import annotations

import json

import pytest

from callsafe.generators.fragmentation import (
    adversarial,
    analyse,
    deceptive_prefixes,
    duplicate_fragments,
    escape_cuts,
    glued_calls,
    repair,
    synthesised_fragmentations,
)
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import Fragment, Trace

PAY = {
    "type": "object",
    "required": ["amount"],
    "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}},
}


def test_partial_json_repair_closes_what_is_open() -> None:
    assert repair('{"amount":1') == (True, {"amount": 1})
    assert repair('{"day":"Tu') == (True, {"day": "Tu"})
    assert repair('{"a":[1,2') == (True, {"a": [1, 2]})
    assert repair('{"s":"a\\') == (True, {"s": "a"})  # a dangling backslash is dropped
    assert repair("") == (False, None)


def test_a_number_cut_short_repairs_to_a_smaller_valid_amount() -> None:
    cut_off, finished = list(deceptive_prefixes('{"amount":100}', PAY))[:2]
    assert cut_off.pieces == ('{"amount":1',) and cut_off.naive == {"amount": 1} and cut_off.cut_off
    assert finished.pieces == ('{"amount":1', "00}")
    (verdict,) = judge(cut_off.trace(PAY)).verdicts.values()
    assert verdict.execute == "must_not" and verdict.reason == "stopped: length"
    (verdict,) = judge(finished.trace(PAY)).verdicts.values()
    assert verdict.execute == "must" and verdict.arguments == {"amount": 100}


def test_a_repeated_delta_is_not_another_zero() -> None:
    first = next(duplicate_fragments('{"amount":100}', PAY))
    assert first.pieces[first.duplicate or 0] in ("0", "1")
    assert first.naive in ({"amount": 1000}, {"amount": 1100})
    trace = first.trace(PAY)
    assert len([e for e in trace.events if getattr(e, "position", None) == first.duplicate]) == 2
    (verdict,) = judge(trace).verdicts.values()
    # de-duplicated it runs with the streamed amount, never the glued one; failing the call
    # on the repeat is the spec's other reading ("reject or reassemble"), so it may run
    assert verdict.execute == "may" and verdict.arguments == {"amount": 100}


def test_two_calls_glued_in_arrival_order_still_parse() -> None:
    glued = next(glued_calls('{"a":2}', {"type": "object"}, others=['{"b":1}']))
    order = "".join(glued.pieces[k] if call == 0 else glued.other[k] for call, k in glued.order)
    assert json.loads(order) == glued.naive == {"a": {"b": 12}}
    verdicts = judge(glued.trace({"type": "object"})).by_short_name()
    assert verdicts["t1/a"].arguments == {"a": 2} and verdicts["t1/b"].arguments == {"b": 1}


def test_cuts_fall_inside_escapes_surrogate_pairs_and_next_to_multibyte_characters() -> None:
    text = '{"note":"a\\nb \\u00e9 \\ud83d\\ude00 ö"}'
    places = {p for cut in analyse(text, {"type": "object"}) for p in cut.places}
    assert {"in_escape", "in_unicode_escape", "between_surrogates", "by_multibyte", "in_string"} <= places
    kinds = {f.kind: f for f in escape_cuts(text, {"type": "object"})}
    assert set(kinds) == {"cut-in_escape", "cut-in_unicode_escape", "cut-between_surrogates", "cut-by_multibyte"}
    pair = kinds["cut-between_surrogates"]
    assert pair.pieces[0].endswith("\\ud83d") and pair.pieces[1].startswith("\\ude00")
    assert kinds["cut-by_multibyte"].byte_cuts  # where the cut falls in the UTF-8 bytes
    for frag in kinds.values():
        (verdict,) = judge(frag.trace({"type": "object"})).verdicts.values()
        assert verdict.execute == "must" and verdict.arguments == {"note": "a\nb é 😀 ö"}


def test_z3_meets_every_requirement_at_once() -> None:
    text = '{"amount":100,"note":"caf\\u00e9 \\ud83d\\ude00"}'
    frag = adversarial(text, PAY, fragments=5, max_piece=16)
    assert frag is not None and len(frag.pieces) == 5 and "".join(frag.pieces) == text
    assert max(len(p) for p in frag.pieces) <= 16
    info = {c.position: c for c in analyse(text, PAY)}
    cuts = [sum(len(p) for p in frag.pieces[: k + 1]) for k in range(4)]
    places = {p for c in cuts for p in info[c].places}
    assert {"in_unicode_escape", "between_surrogates", "in_number"} <= places
    assert frag.duplicate is not None and frag.naive != json.loads(text)
    assert adversarial(text, PAY, fragments=2, max_piece=5) is None  # cannot be met


@pytest.mark.parametrize(
    ("schema", "document"),
    [
        (PAY, {"amount": 100, "note": "café 😀"}),
        ({"type": "object", "required": ["day", "time"]}, '{"day":"Tue","time":"10:00"}'),
    ],
)
def test_every_synthesised_trace_gets_the_spec_verdict(schema: dict[str, object], document: object) -> None:
    traces = list(synthesised_fragmentations(schema, document))
    assert len(traces) >= 5
    kinds = {trace.source for _, trace in traces}
    assert all(source.startswith("synthesised: fragmentation") for source in kinds)
    for name, trace in traces:
        verdicts = judge(trace).by_short_name()
        for call, want in trace.verdicts.items():
            assert verdicts[call].matches_author(dict(want)), (name, call)
            if want["execute"]:  # a repeated position may also fail the call (reject_repeats)
                assert verdicts[call].execute == ("may" if _repeats(trace) else "must"), (name, call)


def _repeats(trace: Trace) -> bool:
    """Whether a fragment's position arrives twice for one call."""
    seen = [(e.turn, e.response, e.item, e.call, e.position) for e in trace.events if isinstance(e, Fragment)]
    return len(seen) != len(set(seen))
