"""The Python agent-framework rows (issue 21): each framework, run whole as a program over the
target protocol with its own HTTP client reading the loopback provider, runs a finished call
through its own tool runner, and what reaches callsafe's executor is that call, under its
key, with its exact arguments; a response with no call runs nothing; a cancel goes to the
framework's own API. Each row is skipped with the reason when its framework is missing.

Every bound is sized for a loaded machine (:mod:`loaded`): an agent framework that takes
30 s to import and answer on a busy 2-CPU machine is slow there, not hung."""

from __future__ import annotations

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.certify.checking import check_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Executed, ToolSpec, Trace
from callsafe.targets.framework_rows import FRAMEWORK_ROWS, OPENAI2_KEY, OtherVenvRow
from callsafe.targets.programs import ProgramRow

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
ROWS = [pytest.param(row, id=row.name) for row in FRAMEWORK_ROWS]


@pytest.fixture(autouse=True)
def _loaded_machine_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def _skip_missing(row: ProgramRow) -> None:
    reason = row.unavailable()
    if reason is not None:
        pytest.skip(reason)


def _builder() -> TraceBuilder:
    return TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")


def _executed(trace: Trace, row: ProgramRow) -> list[Executed]:
    checked = check_trace(f"library:{row.name}", trace, TRACE_TIMEOUT)
    assert not checked.missing, checked.note
    assert checked.run is not None and not checked.run.errors, checked.run.errors if checked.run else None
    return [o for o in checked.run.observations if isinstance(o, Executed)]


def test_the_rows_are_named_for_the_matrix() -> None:
    assert len(FRAMEWORK_ROWS) == len({r.name for r in FRAMEWORK_ROWS})
    for row in FRAMEWORK_ROWS:
        assert row.ecosystem == "python" and row.name.startswith(f"{row.library}:{row.protocol}:")
        assert row.argv[1:3] == ("-m", f"callsafe.adapters.frameworks.{row.argv[2].rsplit('.', 1)[-1]}")


@pytest.mark.parametrize("row", ROWS)
def test_the_sdk_under_each_framework_is_recorded_with_its_version(row: ProgramRow) -> None:
    """What a framework reads the stream with is judged with it, so its version is recorded:
    an ``openai<3`` row's as installed in that environment (``.venv-openai2:openai``, not the
    main environment's openai), every other row's by distribution."""
    _skip_missing(row)
    versions = row.dependency_versions()
    assert row.dependencies and len(versions) == len(row.dependencies), versions
    prefix = f"{OPENAI2_KEY}:" if isinstance(row, OtherVenvRow) else ""
    assert set(versions) == {prefix + name for name in row.dependencies}
    if isinstance(row, OtherVenvRow):
        assert versions[f"{OPENAI2_KEY}:openai"].split(".")[0] in {"1", "2"}  # openai<3, pinned in the extra


@pytest.mark.parametrize("row", ROWS)
def test_a_finished_call_reaches_the_tool_exactly_once(row: ProgramRow) -> None:
    _skip_missing(row)
    trace = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}")
    executed = _executed(trace.terminal("call_a").response_end("completed").build(), row)
    assert [(e.key.turn, e.key.call, e.tool, e.arguments) for e in executed] == [
        ("t1", "call_a", "pay", {"amount": 100})
    ]


@pytest.mark.parametrize("row", ROWS)
def test_two_calls_in_one_response_both_reach_their_tools(row: ProgramRow) -> None:
    _skip_missing(row)
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1}')
    if row.protocol == "gemini":  # Gemini streams one call at a time, each closed before the next
        b.terminal("call_a").open("call_b", "pay", item="1").fragments("call_b", '{"amount":2}').terminal("call_b")
    else:  # Chat Completions ends every call with the response's finish_reason
        b.open("call_b", "pay", item="1").fragments("call_b", '{"amount":2}').terminal("call_a").terminal("call_b")
    executed = _executed(b.response_end("completed").build(), row)
    assert sorted((e.key.call, e.arguments["amount"]) for e in executed) == [("call_a", 1), ("call_b", 2)]


@pytest.mark.parametrize("row", ROWS)
def test_a_text_reply_runs_nothing(row: ProgramRow) -> None:
    _skip_missing(row)
    trace = _builder().text("hello").response_end("completed").build()
    assert _executed(trace, row) == []


@pytest.mark.parametrize("row", ROWS)
def test_a_cancel_goes_to_the_frameworks_own_cancel_api(row: ProgramRow) -> None:
    """The user cancels while the call streams: a framework with a cancel API stops its run and
    the call never reaches the tool; one without (crewAI) declares no capability, so the
    trace is not applicable to it, never passed; nor does smolagents, whose ``interrupt()`` is
    read only when the next step starts."""
    _skip_missing(row)
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1')
    b.cancel("t1").fragments("call_a", "00}").terminal("call_a")
    trace = b.response_end("completed").build()
    checked = check_trace(f"library:{row.name}", trace, TRACE_TIMEOUT)
    if row.library in {"crewai", "smolagents"}:
        assert checked.missing == ("cancellation",), checked.missing
        return
    assert not checked.missing, checked.note
    assert checked.run is not None and not checked.run.errors, checked.run.errors
    assert [o for o in checked.run.observations if isinstance(o, Executed)] == []
    assert not checked.violated


@pytest.mark.parametrize(
    ("protocol", "follow_up", "first"),
    [
        (
            "openai-chat",
            {"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]},
            {"messages": [{"role": "user"}]},
        ),
        ("openai-responses", {"input": [{"role": "user"}, {"type": "function_call_output"}]}, {"input": "go"}),
        (
            "anthropic-messages",
            {"messages": [{"role": "user"}, {"role": "assistant"}]},
            {"messages": [{"role": "user"}]},
        ),
        ("gemini", {"contents": [{"role": "user"}, {"role": "model"}]}, {"contents": [{"role": "user"}]}),
    ],
)
def test_the_loopback_answers_an_agents_follow_up_with_a_short_reply(
    protocol: str, follow_up: dict[str, object], first: dict[str, object]
) -> None:
    """A framework asks again after its tools ran; that request is no part of the trace, so
    it gets a text reply that the protocol's own parser reads as a finished response, while
    the first request (and a reconnect, which repeats it) waits for the trace's stream."""
    import json

    from callsafe.loopback.server import is_follow_up, reply_payloads
    from callsafe.model.vocabulary import ResponseTerminal, TextFragment
    from callsafe.providers import registry

    assert is_follow_up(protocol, json.dumps(follow_up).encode())
    assert not is_follow_up(protocol, json.dumps(first).encode())
    assert not is_follow_up(protocol, b"not json")
    parser = registry.get(protocol).new_parser("t", "r")
    events = [e for p in reply_payloads(protocol) for e in parser.feed(p)] + list(parser.finish(clean=True))
    assert any(isinstance(e, TextFragment) for e in events)
    assert [e.reason for e in events if isinstance(e, ResponseTerminal)] == ["completed"]
