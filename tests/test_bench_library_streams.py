"""The library half of the assembly benchmark compares like with like, and stops in time.

* Each library is fed the benchmark's own streams: on its wire, every call carries exactly
  the abstract trace's fragments, in order, at the same boundaries, one stream per response
  (checked on the payloads, without any library).
* The time guard stops a variant before the size at which it is predicted to exceed the
  limit, and on the run that exceeds it, and says so in words.
* When the libraries are installed, each accumulator's result equals the expected arguments
  on a small stream (the check the benchmark relies on before it times anything).
"""

from __future__ import annotations

from typing import Any

import pytest
from bench_modules import bench_module

from callsafe.model.vocabulary import Fragment

_assembly, _libraries = bench_module("assembly"), bench_module("library_accumulators")
growing_call, many_calls = _assembly.growing_call, _assembly.many_calls
ACCUMULATORS, by_call, prepare = _libraries.ACCUMULATORS, _libraries.by_call, _libraries.prepare
unavailable, wire_streams = _libraries.unavailable, _libraries.wire_streams
TimeGuard = bench_module("time_guard").TimeGuard


def _fragments_by_call(trace: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for event in trace.events:
        if isinstance(event, Fragment):
            out.setdefault(event.call, []).append(event.text)
    return out


def _chat_fragments(streams: list[list[dict[str, Any]]]) -> tuple[dict[str, list[str]], list[str]]:
    """Argument deltas per call id (the index names the call its opening chunk named), and
    each stream's finish reasons."""
    out: dict[str, list[str]] = {}
    finishes = []
    for stream in streams:
        ids: dict[int, str] = {}
        for payload in stream:
            choice = payload["choices"][0]
            if choice.get("finish_reason"):
                finishes.append(choice["finish_reason"])
            for entry in choice["delta"].get("tool_calls", []):
                if entry.get("id"):
                    ids[entry["index"]] = entry["id"]
                elif entry["function"]["arguments"]:
                    out.setdefault(ids[entry["index"]], []).append(entry["function"]["arguments"])
    return out, finishes


def test_chat_streams_carry_the_same_fragments_one_stream_per_response() -> None:
    trace, expected = many_calls(12, per_response=5)
    streams = wire_streams(trace, "openai-chat")
    assert len(streams) == 3  # 5 + 5 + 2 calls
    fragments, finishes = _chat_fragments(streams)
    assert fragments == _fragments_by_call(trace)
    assert finishes == ["tool_calls"] * 3
    assert {key.call for key in expected} == set(fragments)


def test_anthropic_and_responses_streams_carry_the_same_fragments() -> None:
    trace, _, _ = growing_call(2048)
    want = _fragments_by_call(trace)
    anthropic = wire_streams(trace, "anthropic-messages")
    assert len(anthropic) == 1
    deltas = [p["delta"]["partial_json"] for p in anthropic[0] if p["type"] == "content_block_delta"]
    assert deltas == want["call_0"]
    assert any(p["type"] == "message_delta" and "usage" in p for p in anthropic[0])  # as servers send it
    responses = wire_streams(trace, "openai-responses")
    deltas = [p["delta"] for p in responses[0] if p["type"] == "response.function_call_arguments.delta"]
    assert deltas == want["call_0"]


def test_the_guard_stops_before_a_predicted_overrun_and_on_an_actual_one() -> None:
    guard = TimeGuard(limit=2.0)
    assert guard.admit("quad", 1024) and guard.predicted("quad", 1024) is None
    assert guard.record("quad", 1024, 0.01) and guard.record("quad", 4096, 0.16)  # x16 for x4: quadratic
    assert guard.predicted("quad", 16384) == pytest.approx(2.56)
    assert not guard.admit("quad", 16384)
    assert guard.stopped["quad"].startswith("stopped after 4 KiB: 0.16 s per run")
    assert not guard.admit("quad", 65536)  # stopped stays stopped
    # a linear variant is extrapolated linearly (never below: slope at least 1)
    assert guard.record("lin", 1024, 0.4) and guard.record("lin", 4096, 0.2)
    assert guard.predicted("lin", 16384) == pytest.approx(0.8) and guard.admit("lin", 16384)
    assert not guard.record("lin", 16384, 2.5, where="200 calls")
    assert guard.stopped["lin"] == "stopped at 200 calls: 2.5 s per run"


def test_a_wrong_library_result_is_told_apart() -> None:
    assert by_call([("a", {"x": 1}), ("b", {"x": 2})]) == {"a": {"x": 1}, "b": {"x": 2}}
    assert by_call([("a", {"x": 1}), ("a", {"x": 1})]) == {"a": [{"x": 1}, {"x": 1}]}  # presented twice


def test_each_installed_accumulator_presents_the_expected_arguments() -> None:
    missing = unavailable()
    names = [acc.name for acc in ACCUMULATORS if acc.name not in missing]
    if not names:
        pytest.skip("no library accumulator is installed (pip install callsafe[sdks])")
    trace, expected = many_calls(4, per_response=2)
    want = {key.call: value for key, value in expected.items()}
    runs = prepare(trace, names)
    assert [name for name, _ in runs] == names
    for name, run in runs:
        assert by_call(run()) == want, name
        assert by_call(run()) == want, f"{name}, run again over the same chunk objects"
