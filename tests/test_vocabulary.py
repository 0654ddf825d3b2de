"""Events, observations and traces serialise to readable JSON and back; bad documents get
a typed error that names the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.model.vocabulary import (
    EVENT_TYPES,
    AuditRow,
    CallKey,
    Executed,
    LedgerRow,
    Trace,
    TraceFormatError,
    event_from_json,
    event_to_json,
    observation_from_json,
    observation_to_json,
)

KEY = CallKey("acme", "t8", "r1", "i1", "a")

SAMPLES: dict[str, dict[str, Any]] = {
    "turn_started": {"turn": "t8", "actor": "u1", "tenant": "acme"},
    "call_opened": {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "tool": "book_slot"},
    "fragment": {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "position": 0, "text": '{"day":"Tue"'},
    "text_fragment": {"turn": "t8", "response": "r1", "item": "m", "text": "hello"},
    "call_terminal": {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "event_id": "ev-7"},
    "response_terminal": {"turn": "t8", "response": "r1", "reason": "length"},
    "cancel_turn": {"turn": "t8"},
    "disconnect": {"turn": "t8", "response": "r1"},
    "replay": {"start": 0, "stop": 1},
    "tool_changed": {"tool": "book_slot", "change": "rename", "new_name": "reserve"},
    "confirm": {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "approved": False},
    "quarantine_response": {"response": "r1", "reason": "abuse"},
    "disable_tool": {"tool": "book_slot"},
    "stop_tenant": {"tenant": "acme", "during_validation": True},
    "restart": {},
    "store_fault": {"lasting": True},
}


def test_samples_cover_every_event_kind() -> None:
    assert set(SAMPLES) == set(EVENT_TYPES)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_event_round_trip(kind: str) -> None:
    doc = {kind: SAMPLES[kind]}
    event = event_from_json(doc)
    assert event.kind == kind
    assert event_to_json(event) == doc
    assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event


def test_the_design_example_trace_loads() -> None:
    text = """{"tools": {"book_slot": {"schema": {"type": "object", "required": ["day", "time"]}}},
     "events": [
      {"turn_started": {"turn": "t8", "actor": "u1", "tenant": "acme"}},
      {"call_opened":  {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "tool": "book_slot"}},
      {"fragment":     {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "position": 0, "text": "{\\"day\\":\\"Tue\\""}},
      {"cancel_turn":  {"turn": "t8"}},
      {"fragment":     {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "position": 1, "text": ",\\"time\\":\\"10:00\\"}"}},
      {"call_terminal": {"turn": "t8", "response": "r1", "item": "i1", "call": "a", "event_id": "ev-7", "reason": "completed"}}
     ],
     "verdicts": {"t8/a": {"execute": false, "reason": "cancelled"}}}"""
    trace = Trace.loads(text)
    assert len(trace.events) == 6
    assert Trace.loads(trace.dumps()) == trace
    from callsafe.model.oracle import judge

    verdict = judge(trace).by_short_name()["t8/a"]
    assert verdict.matches_author(trace.verdicts["t8/a"])


def test_observations_round_trip() -> None:
    for obs in (
        Executed(3, KEY, "u1", "book_slot", {"day": "Tue"}),
        LedgerRow(4, KEY, 2, "completed", "ok", "ok", "dispatched", None),
        AuditRow(5, "stop_tenant", "abuse", (KEY,)),
    ):
        assert observation_from_json(json.loads(json.dumps(observation_to_json(obs)))) == obs


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"events": [{"fragmnt": {}}]}, "unknown event kind 'fragmnt'"),
        ({"events": [{"cancel_turn": {}}]}, "missing field 'turn'"),
        ({"events": [{"cancel_turn": {"turn": 8}}]}, "field 'turn' must be str"),
        (
            {"events": [{"call_terminal": {"turn": "t", "response": "r", "item": "i", "call": "c", "reason": "eof"}}]},
            "reason",
        ),
        ({"events": [{"replay": {"start": 0, "stop": 3}}]}, "replay must re-deliver earlier events"),
        ({"events": [], "tools": {"x": {"schema": {"type": 12}}}}, "not a valid JSON Schema"),
        ({"events": [], "extra": 1}, "unknown trace fields"),
        ({"evnts": []}, "unknown trace fields"),
        ([], "must be a JSON object"),
    ],
)
def test_bad_documents_get_a_typed_error(doc: Any, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message.replace("(", r"\(")):
        Trace.from_json(doc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["events", "tools", "limits", "verdicts", "name"]),
        json_values
        | st.lists(st.dictionaries(st.sampled_from(sorted(EVENT_TYPES)), json_values, max_size=1), max_size=4),
    )
)
def test_random_documents_load_or_fail_with_trace_format_error(doc: dict[str, Any]) -> None:
    try:
        trace = Trace.from_json(doc)
    except TraceFormatError:
        return
    assert Trace.loads(trace.dumps()) == trace
