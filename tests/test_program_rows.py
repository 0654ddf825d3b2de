"""Program rows (issue 21): a library run as a program over the target protocol is a
``library:NAME`` like any in-process adapter (certify, the matrix, its groups, versions and
overrides), and a program that reads over HTTP is never judged when callsafe's loopback
cannot start."""

from __future__ import annotations

import sys

import pytest

import callsafe.targets.bedrock_rows as bedrock_rows
import callsafe.targets.framework_rows as framework_rows
import callsafe.targets.mcp_rows as mcp_rows
import callsafe.targets.node_rows as node_rows
import callsafe.targets.realtime_rows as realtime_rows
from callsafe.campaigns.matrix import REFERENCE_ROW, default_rows, matrix_json, matrix_markdown, run_matrix
from callsafe.certify.harness import Options, certify
from callsafe.certify.targets import TargetSpecError, resolve_target
from callsafe.targets.exec_target import ExecTarget, ExecTargetFailure
from callsafe.targets.libraries import unavailable
from callsafe.targets.program_catalog import program_rows
from callsafe.targets.programs import ProgramRow

EXAMPLE = ProgramRow(
    name="openai:openai-chat:sdk-example",
    library="openai",
    ecosystem="python",
    protocol="openai-chat",
    surface="the SDK example program",
    argv=("{python}", "-m", "callsafe.adapters.openai_sdk_example"),
    needs=("openai",),
    options={"walks": 3, "depth": 1},
)
MISSING = ProgramRow(
    name="nosuchframework:openai-chat:agent",
    library="nosuchframework",
    ecosystem="python",
    protocol="openai-chat",
    surface="agent",
    argv=("{python}", "-m", "nosuchframework"),
    needs=("nosuchframework_xyz",),
)
NODE = ProgramRow(
    name="node/nosuchpackage:openai-chat:stream",
    library="nosuchpackage-xyz",
    ecosystem="node",
    protocol="openai-chat",
    surface="stream",
    argv=("node", "{node_dir}/dist/rows/nosuch.js"),
)


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framework_rows, "FRAMEWORK_ROWS", (EXAMPLE, MISSING))
    monkeypatch.setattr(node_rows, "NODE_ROWS", (NODE,))
    monkeypatch.setattr(mcp_rows, "MCP_ROWS", ())
    monkeypatch.setattr(realtime_rows, "REALTIME_ROWS", ())
    monkeypatch.setattr(bedrock_rows, "BEDROCK_ROWS", ())


def test_a_program_row_is_a_library_name_that_runs_its_program(rows: None) -> None:
    assert set(program_rows()) == {EXAMPLE.name, MISSING.name, NODE.name}
    target = resolve_target(f"library:{EXAMPLE.name}")()
    try:
        assert isinstance(target, ExecTarget)
        assert target.command == f"{sys.executable} -m callsafe.adapters.openai_sdk_example"
    finally:
        target.close()
    with pytest.raises(TargetSpecError, match="unknown library target"):
        resolve_target("library:nosuch:openai-chat:x")


def test_what_is_missing_is_said_with_how_to_install_it(rows: None) -> None:
    assert unavailable(EXAMPLE.name) is None
    missing = unavailable(MISSING.name)
    assert missing is not None and "nosuchframework_xyz" in missing and "frameworks" in missing
    node = unavailable(NODE.name)
    assert node is not None and ("nosuchpackage-xyz" in node or "node is not on PATH" in node)
    assert MISSING.version() is None and NODE.version() is None
    with pytest.raises(ValueError, match="ecosystem"):
        ProgramRow("x", "x", "ruby", "openai-chat", "x", ("x",))


def test_the_matrix_groups_program_rows_and_runs_them_with_their_overrides(rows: None) -> None:
    everything = default_rows()
    node = default_rows("node")
    python = default_rows("python")
    assert node[0] == REFERENCE_ROW and python[0] == REFERENCE_ROW
    assert [r.spec for r in node[1:]] == [f"library:{NODE.name}"]
    assert f"library:{EXAMPLE.name}" in {r.spec for r in python} and all(r.ecosystem == "python" for r in python)
    assert len(everything) == len(python) + len(node) - 1
    with pytest.raises(ValueError, match="ecosystems"):
        default_rows("ruby")

    chosen = [r for r in everything if r.spec in (f"library:{EXAMPLE.name}", f"library:{MISSING.name}")]
    matrix = run_matrix(Options(generators=("wire", "walks"), walks=50, minimize=False), chosen)
    doc = matrix_json(matrix)
    ran, skipped = doc["rows"]
    assert ran["ecosystem"] == "python" and ran["options"] == {"depth": 1, "walks": 3}
    assert ran["version"] == EXAMPLE.version() and doc["versions"]["openai"] == EXAMPLE.version()
    assert ran["traces_run"] > 0 and ran["traces_with_target_errors"] == 0
    # the row ran with its own walks and depth, not the matrix's 50 walks
    alone = certify(f"library:{EXAMPLE.name}", Options(generators=("wire", "walks"), walks=3, depth=1, minimize=False))
    assert matrix.rows[0].traces_generated == sum(g.generated for g in alone.generators.values())
    assert alone.generators["walks"].generated == 3
    assert not skipped["available"] and "nosuchframework_xyz" in skipped["unavailable"]
    text = matrix_markdown(matrix)
    assert "| **Python** |" in text and "(depth 1, walks 3)" in text


def test_a_program_over_http_is_refused_when_the_loopback_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the missing server raised inside receive_wire, which reads as the SDK failing
    its stream, so every trace 'held' its safety invariants and LIVE-DISPATCH was violated."""
    monkeypatch.setitem(sys.modules, "callsafe.loopback.server", None)  # import fails
    spec = f"exec:{sys.executable} -m callsafe.adapters.openai_sdk_example"
    with pytest.raises(ExecTargetFailure, match="loopback provider"):
        resolve_target(spec)()
    cert = certify(spec, Options(generators=("wire",), minimize=False))
    assert cert.verdict == "target_errors"
    assert not cert.violated
    assert all(s.status in ("not_established", "not_applicable") for s in cert.invariants.values())
