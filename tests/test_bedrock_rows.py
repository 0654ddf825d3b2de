"""The Bedrock ConverseStream rows (issue 33): programs whose client (``boto3``'s
``converse_stream``, Strands' ``BedrockModel``) reads AWS's binary event stream from the
loopback provider over HTTP. A finished call reaches the tool once under the trace's key
(the response named as the program numbers its streams: Bedrock names none); a response
with no call runs nothing; the boto3 guide loop's merging of an unstopped block is what its
finding says. Each row is skipped with the reason when its library is missing.

Bounds are sized for a loaded machine (:mod:`loaded`)."""

from __future__ import annotations

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.certify.checking import check_trace
from callsafe.certify.wire import prepare
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Executed, ToolSpec, Trace
from callsafe.providers.bedrock_converse import response_name
from callsafe.targets.bedrock_rows import BEDROCK_ROWS
from callsafe.targets.programs import ProgramRow

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
ROWS = [pytest.param(row, id=row.name) for row in BEDROCK_ROWS]


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


def test_a_bedrock_trace_names_each_turns_responses_in_stream_order() -> None:
    """Bedrock's wire names no response: the trace's responses become the turn's stream
    numbers, which a program can know, and a response is never reopened by a reconnect."""
    b = _builder().open("call_a", "pay", item="0").fragments("call_a", "{}").terminal("call_a")
    b.response_end("completed").response("r9").open("call_b", "pay", item="0").fragments("call_b", "{}")
    trace = b.terminal("call_b").response_end("completed").build()
    named, _ = prepare(trace, "bedrock-converse", reconnect=True)
    responses = [getattr(e, "response", None) for e in named.events if hasattr(e, "item")]
    assert set(responses) == {response_name("t1", 0), response_name("t1", 1)}
    assert responses[0] == "t1.r0" and responses[-1] == "t1.r1"
    kept, _ = prepare(trace, "openai-chat")
    assert {getattr(e, "response", None) for e in kept.events if hasattr(e, "item")} == {"r1", "r9"}


@pytest.mark.parametrize("row", ROWS)
def test_a_finished_call_reaches_the_tool_exactly_once(row: ProgramRow) -> None:
    _skip_missing(row)
    trace = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}")
    executed = _executed(trace.terminal("call_a").response_end("completed").build(), row)
    assert [(e.key.response, e.key.item, e.key.call, e.tool, e.arguments) for e in executed] == [
        ("t1.r0", "0", "call_a", "pay", {"amount": 100})
    ]


@pytest.mark.parametrize("row", ROWS)
def test_a_response_with_only_text_runs_nothing(row: ProgramRow) -> None:
    _skip_missing(row)
    trace = _builder().text("no tools needed", item="0").response_end("completed").build()
    assert _executed(trace, row) == []


def test_the_guide_loop_runs_an_unstopped_blocks_prefix_under_the_next_call() -> None:
    """BOTO3-GUIDE-BLOCKS-MERGED: call a's block never stops; the guide's one ``tool_use``
    dict takes b's id and name and a's prefix glued to b's input."""
    row = BEDROCK_ROWS[0]
    _skip_missing(row)
    trace = _builder().open("call_a", "pay", item="0").fragments("call_a", '{"amount":1')
    trace = trace.open("call_b", "pay", item="1").fragments("call_b", "00}").terminal("call_b")
    executed = _executed(trace.response_end("completed").build(), row)
    assert [(e.key.call, e.arguments) for e in executed] == [("call_b", {"amount": 100})]
