"""The MCP rows (issue 34): an agent program that takes its tools from callsafe's MCP server
through one framework's own MCP client, and its model from the loopback, is a matrix row
certified as ``agent:COMMAND``: two finished calls in one response each reach the MCP
server once, under their own keys, with their exact arguments. Each row is skipped with the
reason when its host is missing. Bounds sized for a loaded machine (:mod:`loaded`)."""

from __future__ import annotations

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.campaigns.matrix import default_rows
from callsafe.certify.checking import check_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Executed, ToolSpec, Trace
from callsafe.targets.mcp_rows import MCP_ROWS
from callsafe.targets.programs import ProgramRow

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
ROWS = [pytest.param(row, id=row.name) for row in MCP_ROWS]


@pytest.fixture(autouse=True)
def _loaded_machine_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def test_the_rows_run_the_agent_form_and_are_matrix_rows_on_request() -> None:
    """Each row is ``agent:`` spelled as its exec program, a library name of the matrix when
    it is asked for them (``callsafe matrix --mcp``), and at least five across the two
    ecosystems."""
    assert len(MCP_ROWS) >= 5 and {r.ecosystem for r in MCP_ROWS} == {"python", "node"}
    with_hosts = [r.spec for r in default_rows(mcp=True)]
    without = [r.spec for r in default_rows()]
    assert [s for s in with_hosts if s not in without] == [f"library:{r.name}" for r in MCP_ROWS]
    for row in MCP_ROWS:
        assert row.argv[:3] == ("{python}", "-m", "callsafe.adapters.mcp_agent") and "--" in row.argv
        assert ":mcp:" in row.name


@pytest.mark.parametrize("row", ROWS)
def test_the_mcp_sdk_beside_each_python_host_is_recorded(row: ProgramRow) -> None:
    if row.ecosystem == "node":
        assert "@modelcontextprotocol/client" in row.needs  # recorded as npm:@modelcontextprotocol/client
        return
    if row.unavailable() is not None:
        pytest.skip(row.unavailable() or "")
    assert set(row.dependency_versions()) == set(row.dependencies) and "mcp" in row.dependencies


def _two_calls(gemini: bool) -> Trace:
    b = TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":', "1}")
    if gemini:  # Gemini streams one call at a time, each closed before the next
        b.terminal("call_a").open("call_b", "pay", item="1").fragments("call_b", '{"amount":2}').terminal("call_b")
    else:
        b.open("call_b", "pay", item="1").fragments("call_b", '{"amount":2}').terminal("call_a").terminal("call_b")
    return b.response_end("completed").build()


@pytest.mark.parametrize("row", ROWS)
def test_two_finished_calls_each_reach_the_mcp_server_once(row: ProgramRow) -> None:
    reason = row.unavailable()
    if reason is not None:
        pytest.skip(reason)
    checked = check_trace(f"library:{row.name}", _two_calls(row.protocol == "gemini"), TRACE_TIMEOUT)
    assert not checked.missing, checked.note
    assert checked.run is not None and not checked.run.errors, checked.run.errors
    executed = [o for o in checked.run.observations if isinstance(o, Executed)]
    assert sorted((e.key.call, e.tool, e.arguments) for e in executed) == [
        ("call_a", "pay", {"amount": 1}),
        ("call_b", "pay", {"amount": 2}),
    ]
    assert not checked.violated, checked.explain()
