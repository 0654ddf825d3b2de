"""A lone surrogate escape (``"\\ud800"``, no low half after it) is a reading the spec leaves
open: the JSON grammar admits it, RFC 8259 section 8.2 calls receivers' behaviour
"unpredictable", and the spec only says malformed data never runs. The model refuses it;
an implementation that takes it as the code point it names is not blamed for running the
call, with exactly those arguments, once. A raw lone surrogate in the text (which no UTF-8
stream carries) stays malformed under every reading."""

from __future__ import annotations

import pytest

from callsafe.certify.checking import check_trace
from callsafe.certify.judge import judge_observations
from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import judge
from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import Executed, Trace

SCHEMA = {"type": "object", "properties": {"memo": {"type": "string"}}}
LONE = "\ud800"


def _trace(text: str) -> Trace:
    return TraceBuilder(tools={"note": SCHEMA}).turn("t1").call("a", "note", text).build()


def test_the_parse_takes_a_lone_escape_only_under_the_reading() -> None:
    with pytest.raises(ParseFailure, match="lone surrogate"):
        strict_parse('{"memo":"\\ud800"}')
    assert strict_parse('{"memo":"\\ud800"}', lone_surrogate_escapes=True) == {"memo": LONE}
    with pytest.raises(ParseFailure, match="lone surrogate"):  # raw, not an escape
        strict_parse('{"memo":"' + LONE + '"}', lone_surrogate_escapes=True)


def test_a_lone_escape_may_run_with_the_code_point_it_names() -> None:
    t = _trace('{"memo":"\\ud800"}')
    (verdict,) = judge(t).verdicts.values()
    assert verdict.execute == "may" and verdict.arguments == {"memo": LONE}
    assert "lone surrogate escapes accepted" in verdict.reason


def test_an_implementation_of_either_reading_passes_and_a_wrong_one_does_not() -> None:
    t = _trace('{"memo":"\\ud800"}')
    key = next(iter(judge(t).verdicts))
    refused = check_trace("reference:memory", t)  # the model's reading
    assert refused.violated == set() and not refused.judgement.errors
    accepted = [Executed(3, key, "u1", "note", {"memo": LONE})]
    assert judge_observations(t, accepted, ()).violated == set()
    other = [Executed(3, key, "u1", "note", {"memo": "\ufffd"})]  # replaced, not what the text says
    assert "INV-EXACT-ARGS" in judge_observations(t, other, ()).violated
    twice = [*accepted, Executed(4, key, "u1", "note", {"memo": LONE})]
    assert "INV-ONCE" in judge_observations(t, twice, ()).violated


def test_a_raw_lone_surrogate_and_a_paired_escape_are_not_readings() -> None:
    (raw,) = judge(_trace('{"memo":"' + LONE + '"}')).verdicts.values()
    assert raw.execute == "must_not"
    (paired,) = judge(_trace('{"memo":"\\ud83e\\udd84"}')).verdicts.values()
    assert paired.execute == "must" and paired.arguments == {"memo": "\U0001f984"}
