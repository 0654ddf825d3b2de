"""``callsafe matrix``: the conformance matrix of the client libraries and the reference.

The matrices here are small (a few rows, the wire-shaped traces and the catalog) so that
the tests stay fast; the full matrix is ``callsafe matrix``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from callsafe.campaigns.matrix import (
    GUARD_PROTOCOLS,
    GUARD_ROWS,
    REFERENCE_ROW,
    RowSpec,
    default_rows,
    matrix_json,
    matrix_markdown,
    merge_summary,
    run_matrix,
    stable_view,
    write_matrix,
)
from callsafe.certify.harness import WIRE_GENERATOR, Options
from callsafe.cli.matrix import matrix_cmd
from callsafe.model.invariants import INVARIANTS
from callsafe.targets.libraries import LIBRARY_TARGETS, unavailable
from callsafe.targets.mcp_rows import MCP_ROWS
from callsafe.targets.program_catalog import program_rows

ROOT = Path(__file__).resolve().parents[1]
SMALL = Options(depth=1, walks=5, generators=(WIRE_GENERATOR, "catalog"), minimize_budget=20)
ANTHROPIC = RowSpec("library:anthropic:anthropic-messages:block_stop", "anthropic", "anthropic-messages", "block_stop")
LANGCHAIN = RowSpec("library:langchain-core:openai-chat:preview", "langchain-core", "openai-chat", "preview")


def _need(row: RowSpec) -> None:
    reason = unavailable(row.spec.removeprefix("library:"))
    if reason is not None:
        pytest.skip(reason)


def test_rows_are_the_reference_the_guard_then_every_library_surface() -> None:
    rows = default_rows()
    assert rows[0] == REFERENCE_ROW
    guards = len(GUARD_ROWS)
    assert [r.spec for r in rows[1 : 1 + guards]] == [f"guard:memory:{p}" for p in GUARD_PROTOCOLS]
    libraries = len(LIBRARY_TARGETS)
    assert [r.spec for r in rows[1 + guards : 1 + guards + libraries]] == [f"library:{n}" for n in LIBRARY_TARGETS]
    # then the programs: the Python agent frameworks, then the TypeScript libraries; the MCP
    # hosts only on request (``callsafe matrix --mcp``), after them
    hosts = {r.name for r in MCP_ROWS}
    programs = {n: p for n, p in program_rows().items() if n not in hosts}
    assert [r.spec for r in rows[1 + guards + libraries :]] == [f"library:{n}" for n in programs]
    assert [r.ecosystem for r in rows[1 + guards + libraries :]] == [p.ecosystem for p in programs.values()]
    assert [r.spec for r in default_rows(mcp=True)[len(rows) :]] == [f"library:{r.name}" for r in MCP_ROWS]
    assert len({r.label for r in rows}) == len(rows)  # each surface is a row of its own


def test_matrix_is_stable_for_a_seed_and_judges_fairly(tmp_path: Path) -> None:
    """Two runs with the same seed agree on everything but the timings; the reference holds
    everything; a library gets "not applicable" where it lacks what an invariant needs, and
    each violated cell carries its counterexample and a reproduction script that exists."""
    _need(ANTHROPIC)
    _need(LANGCHAIN)
    rows = [REFERENCE_ROW, ANTHROPIC, LANGCHAIN]
    first = matrix_json(run_matrix(SMALL, rows))
    second_matrix = run_matrix(SMALL, rows)
    second = matrix_json(second_matrix)
    assert stable_view(first) == stable_view(second)
    assert "timings" in first and "timings" not in stable_view(first)

    reference, anthropic, langchain = second["rows"]
    assert {c["status"] for c in reference["cells"].values()} == {"holds"}
    for row in (anthropic, langchain):
        assert row["version"] and row["available"]
        for inv in INVARIANTS:
            cell = row["cells"][inv.id]
            if inv.needs:
                assert cell["status"] == "not_applicable" and "needs" in cell["reason"]
            if cell["status"] == "violated":
                ce = cell["counterexample"]
                assert ce["steps"] and ce["findings"] and ce["wire"]
                assert cell["findings"], (row["spec"], inv.id)
                for finding in cell["findings"]:
                    assert (ROOT / finding["script"]).is_file()
        assert row["traces_not_applicable"][f"{row['protocol']} rendering"] > 0
    assert anthropic["cells"]["INV-TERMINAL"]["status"] == "violated"
    assert langchain["cells"]["INV-TERMINAL"]["status"] == "violated"

    files = write_matrix(second_matrix, tmp_path)
    assert json.loads(files.json.read_text())["rows"][1]["spec"] == ANTHROPIC.spec
    replay = files.counterexamples[(ANTHROPIC.spec, "INV-TERMINAL")]
    assert json.loads((tmp_path / replay).read_text())["events"]
    text = files.markdown.read_text()
    assert "| anthropic " in text and "campaigns/repro/anthropic_" in text and f"callsafe replay {replay}" in text
    assert "<table>" in files.html.read_text()


def test_replaying_a_matrix_counterexample_shows_the_same_violation(tmp_path: Path) -> None:
    _need(ANTHROPIC)
    from callsafe.cli.main import main

    files = write_matrix(run_matrix(SMALL, [ANTHROPIC]), tmp_path)
    path = tmp_path / files.counterexamples[(ANTHROPIC.spec, "INV-TERMINAL")]
    result = CliRunner().invoke(main, ["replay", str(path), "--target", ANTHROPIC.spec])
    assert result.exit_code == 1, result.output
    assert "INV-TERMINAL" in result.output


def test_a_missing_library_is_a_row_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import callsafe.targets.libraries as libraries

    reason = "litellm is not installed (pip install 'callsafe[sdks]')"
    monkeypatch.setattr(libraries, "unavailable", lambda name: reason)
    matrix = run_matrix(SMALL, [RowSpec("library:litellm:openai-chat:final", "litellm", "openai-chat", "final")])
    (row,) = matrix.rows
    assert row.unavailable and row.traces_run == 0
    assert {c.status for c in row.cells.values()} == {"not_applicable"}
    assert f"(not installed: {reason})" in matrix_markdown(matrix)


def test_the_command_writes_the_three_files(tmp_path: Path) -> None:
    group = click.Group(commands={"matrix": matrix_cmd})
    out = tmp_path / "m"
    args = ["matrix", "--report", str(out), "--depth", "0", "--walks", "0", "--only", "reference", "--seed", "3"]
    result = CliRunner().invoke(group, args)
    assert result.exit_code == 0, result.output
    assert (out / "matrix.md").is_file() and (out / "matrix.html").is_file()
    doc = json.loads((out / "matrix.json").read_text())
    assert doc["options"]["seed"] == 3 and [r["spec"] for r in doc["rows"]] == [REFERENCE_ROW.spec]
    assert "conformance matrix" in result.output
    bad = CliRunner().invoke(group, ["matrix", "--report", str(out), "--only", "no-such-row"])
    assert bad.exit_code == 2 and "no row matches" in bad.output


def test_program_rows_run_at_the_matrix_depth_and_walks() -> None:
    """Issue 30, item 2: no program row is judged on a smaller part of the space than the
    in-process rows (only a budget and a per-trace bound may differ, for the MCP hosts)."""
    rows = default_rows(mcp=True)
    programs = [r for r in rows if r.spec.removeprefix("library:") in program_rows()]
    assert programs
    for row in programs:
        overrides = dict(row.overrides)
        assert not {"depth", "walks", "calls", "turns", "fragments", "generators"} & set(overrides), row.spec
        assert row.options(SMALL).depth == SMALL.depth and row.options(SMALL).walks == SMALL.walks


def test_the_command_passes_workers_to_every_row_and_records_them_nowhere_in_the_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import callsafe.campaigns.matrix as matrix_module

    seen: list[int] = []
    real = matrix_module.run_matrix

    def spy(options: Options, rows: object = None, progress: object = None) -> object:
        seen.append(options.workers)
        return real(dataclasses.replace(options, workers=1), rows, progress)  # type: ignore[arg-type]

    monkeypatch.setattr(matrix_module, "run_matrix", spy)
    group = click.Group(commands={"matrix": matrix_cmd})
    out = tmp_path / "m"
    args = ["matrix", "--report", str(out), "--depth", "0", "--walks", "0", "--only", "reference", "--workers", "2"]
    result = CliRunner().invoke(group, args)
    assert result.exit_code == 0, result.output
    assert seen == [2]
    doc = json.loads((out / "matrix.json").read_text())
    assert "workers" not in doc["options"]  # how a row ran is no part of what it found
    assert CliRunner().invoke(group, [*args[:-1], "0"]).exit_code == 2


def _summary_of(specs: list[str], measured_on: str, seconds: float, walks: int = 10) -> dict[str, object]:
    rows = [{"spec": s, "library": s, "ecosystem": "python", "title": s, "available": True, "cells": {}} for s in specs]
    options = {"seed": 0, "depth": 3, "walks": walks}
    return {
        "measured_on": measured_on,
        "options": options,
        "versions": {measured_on: "1"},
        "seconds": seconds,
        "rows": rows,
    }


def test_a_partial_run_is_merged_in_todays_order_and_said_on_the_page() -> None:
    recorded = _summary_of(["a", "c", "d"], "2026-12-01", 600.0)
    later = _summary_of(["b", "c"], "2026-12-03", 30.0)
    merged = merge_summary(recorded, later, ["a", "b", "c", "d"])
    assert [r["spec"] for r in merged["rows"]] == ["a", "b", "c", "d"]
    assert merged["versions"] == {"2026-12-01": "1", "2026-12-03": "1"}
    assert merged["rows_in_run"] == 3 and merged["merged"] == [
        {"measured_on": "2026-12-03", "rows": ["b", "c"], "seconds": 30.0}
    ]
    again = merge_summary(merged, _summary_of(["c"], "2026-12-04", 5.0), ["a", "b", "c", "d"])
    assert [(m["measured_on"], m["rows"]) for m in again["merged"]] == [("2026-12-03", ["b"]), ("2026-12-04", ["c"])]
    with pytest.raises(ValueError, match="options"):
        merge_summary(recorded, _summary_of(["b"], "2026-12-03", 1.0, walks=200), ["a", "b"])
