"""The command line's side of issue 17: Ctrl-C writes a partial report, render reads every
report certify writes, progress in CI logs, scenarios listed, exported, selected and
certified from a folder, and target names printed as text."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import toy_targets
from click.testing import CliRunner

from callsafe.cli import main as cli_main
from callsafe.cli.main import main
from callsafe.generators.catalog import CATALOG
from callsafe.reporting.report import REPORT_SCHEMA


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_ctrl_c_writes_a_partial_report_that_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(toy_targets._RUNS, "count", 0)
    code, out = invoke("certify", "toy_targets:interrupted", "--generators", "catalog", "--report", str(tmp_path))
    assert code == 130, out
    assert "partial" in out
    doc = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert doc["partial"] is True and doc["stopped"] == "interrupted" and doc["verdict"] == "partial"
    assert 0 < doc["summary"]["traces_run"] < len(CATALOG)  # what ran until then, and no more
    assert "Partial report" in (tmp_path / "report.html").read_text()


def test_render_reads_a_report_with_keys_without_a_tenant(tmp_path: Path) -> None:
    report = tmp_path / "r"
    code, out = invoke("certify", "toy_targets:no_tenant", "--generators", "catalog", "--report", str(report))
    assert code == 1, out  # executed under keys the trace never carried
    doc = json.loads((report / "report.json").read_text())
    keys = [
        o["executed"]["key"]
        for i in doc["invariants"]
        for ce in i["counterexamples"]
        for o in ce["observations"]
        if "executed" in o
    ]
    assert keys and all(k["tenant"] is None for k in keys)
    code, out = invoke("render", "--out", str(tmp_path / "d"), "--report", str(report / "report.json"), "--png")
    assert code == 0, out
    assert list((tmp_path / "d" / "sequences").glob("*.dot"))


def test_progress_lines_when_stdout_is_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_main._progress, "PROGRESS_EVERY", 0.0)
    result = CliRunner().invoke(
        main,
        ["certify", "toy_targets:simple", "--generators", "catalog,walks", "--walks", "30", "--report", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert any("catalog" in line for line in lines) and any("walks 30/30" in line for line in lines), lines


def test_piped_output_keeps_paths_and_target_names_whole(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "reports"
    code, out = invoke("certify", "toy_targets:simple", "--generators", "catalog", "--report", str(deep))
    assert code == 0
    assert str(deep / "report.json") in out  # one line, not cut at 80 columns
    assert "toy_targets:simple" in out and "INV-EXACT-ARGS" in out


def test_scenarios_are_listed_exported_selected_and_certified_from_a_folder(tmp_path: Path) -> None:
    code, out = invoke("scenarios", "list")
    assert code == 0 and all(s.name in out for s in CATALOG)
    code, out = invoke("scenarios", "list", "--json", "cancel-*")
    rows = json.loads(out)
    assert code == 0 and rows and all(r["name"].startswith("cancel-") for r in rows)
    folder = tmp_path / "mine"
    for name in ("cancel-before-terminal", "duplicate-deltas"):
        code, out = invoke("scenarios", "export", name, "--out", str(folder / f"{name}.json"))
        assert code == 0, out
    assert invoke("scenarios", "export", "no-such-scenario")[0] == 2
    report = tmp_path / "r"
    code, out = invoke("certify", "toy_targets:ignore_cancel", "--traces", str(folder), "--report", str(report))
    assert code == 1, out
    doc = json.loads((report / "report.json").read_text())
    assert list(doc["generators"]) == ["traces"]
    outcomes = {r["name"]: r["outcome"] for r in doc["scenarios"]}
    assert outcomes == {"cancel-before-terminal": "violated", "duplicate-deltas": "passed"}
    junit = (report / "junit.xml").read_text()
    assert 'name="cancel-before-terminal"' in junit and 'name="duplicate-deltas"' in junit
    code, out = invoke("certify", "toy_targets:simple", "--scenario", "cancel-*", "--report", str(tmp_path / "s"))
    assert code == 0, out
    doc = json.loads((tmp_path / "s" / "report.json").read_text())
    assert {r["name"] for r in doc["scenarios"]} == {s.name for s in CATALOG if s.name.startswith("cancel-")}
    assert invoke("certify", "toy_targets:simple", "--scenario", "nothing-like-it*")[0] == 2
    (folder / "bad.json").write_text('{"events": [{"teleport": {}}]}')
    assert invoke("certify", "toy_targets:simple", "--traces", str(folder))[0] == 2


def test_a_target_name_is_printed_as_text(tmp_path: Path) -> None:
    code, out = invoke("certify", "toy_targets:factory", "--generators", "catalog", "--report", str(tmp_path))
    assert code == 0 and "callsafe certify toy_targets:factory: simple" in out
    assert "\N{FACTORY}" not in out


def test_the_exit_statuses_are_in_help_and_in_the_cli_page() -> None:
    code, out = invoke("certify", "--help")
    readme = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    for status, words in (("0", "certified"), ("1", "violated"), ("2", "usage"), ("3", "target errors")):
        assert any(line.strip().startswith(f"{status}  ") and words in line for line in out.splitlines()), status
        assert f"| {status} | " in readme, status
    assert code == 0 and "--trace-timeout" in out and "--fail-fast" in out
