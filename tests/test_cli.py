"""The command line: ``callsafe model`` and ``callsafe render``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from callsafe.cli.main import main
from callsafe.model.lifecycle import State


def test_model_json_has_states_events_transitions_and_graph_statistics() -> None:
    result = CliRunner().invoke(main, ["model", "--json", "--calls", "1", "--turns", "1", "--fragments", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["states"] == [s.value for s in State]
    assert set(doc["terminal_states"]) == {"dispatched", "cancelled", "failed"}
    assert "fragment_repeat" in doc["events"]
    assert {"from": "validated", "event": "dispatch", "outcome": "transition", "to": "dispatched"} in doc["transitions"]
    assert len(doc["transitions"]) == len(doc["states"]) * len(doc["events"])
    graph = doc["graph"]
    assert graph["states"] > 10 and graph["transitions"] >= graph["states"] - 1
    assert graph["violations"] == 0
    assert {i["id"] for i in doc["invariants"]} >= {"INV-TERMINAL", "LIVE-DISPATCH"}


def test_model_table_output_and_bad_bounds() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["model", "--calls", "1", "--turns", "1"])
    assert result.exit_code == 0, result.output
    assert "terminal_completed" in result.output and "No reachable state violates" in result.output
    bad = runner.invoke(main, ["model", "--controls", "cancel,teleport"])
    assert bad.exit_code == 2 and "unknown controls" in bad.output


def test_model_past_its_state_bound_says_so_in_one_line() -> None:
    result = CliRunner().invoke(main, ["model", "--calls", "3", "--max-states", "100"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)  # a message, no traceback
    lines = result.output.strip().splitlines()
    assert lines == [
        "Error: the model has more than 100 reachable states (with symmetry): raise the bound with "
        "--max-states, or lower the bounds"
    ]


def test_model_symmetry_counts_fewer_states_with_the_same_verdict() -> None:
    runner = CliRunner()
    args = ["model", "--json", "--calls", "2", "--turns", "1", "--controls", "cancel,confirmation"]
    reduced = json.loads(runner.invoke(main, args).output)["graph"]
    full = json.loads(runner.invoke(main, [*args, "--no-symmetry"]).output)["graph"]
    assert reduced["symmetry"] is True and full["symmetry"] is False
    assert 0 < reduced["states"] < full["states"]
    assert reduced["violations"] == full["violations"] == 0


def test_help_reads_well() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "model" in result.output and "render" in result.output


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed (apt-get install graphviz)")
def test_render_writes_dot_and_svg_with_all_seven_states(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    dot = (tmp_path / "lifecycle.dot").read_text()
    svg = (tmp_path / "lifecycle.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for state in State:
        assert f"<title>{state.value}</title>" in svg, state
        assert state.value in dot
    assert (tmp_path / "system.svg").exists()


def test_render_writes_dot_without_graphviz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(main, ["render", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "lifecycle.dot").exists() and not (tmp_path / "lifecycle.svg").exists()
    assert "wrote DOT only" in result.output
