"""How a certification's findings reach the user (issue 29): the console summary never
turns a verdict into a traceback, every distinct finding is shown, and action safety is
reported apart from the records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callsafe.cli import main as cli_main
from callsafe.cli.main import main


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_a_minimal_trace_with_a_schema_change_is_summarised_not_a_traceback(tmp_path: Path) -> None:
    """The minimal trace holds a ``tool_changed`` event with a schema (a mapping): the
    console groups counterexamples by their events, which once hashed the events and
    crashed with ``unhashable type: 'dict'``, and the exit status came from the traceback."""
    code, out = invoke(
        "certify",
        "callsafe.targets.mutants:dispatch_on_parse",
        "--scenario",
        "schema-changed-mid-call",
        "--report",
        str(tmp_path),
    )
    assert code == 1, out
    assert "Traceback" not in out and "unhashable" not in out
    assert "tool_changed" in out and "not certified" in out


def test_a_summary_that_breaks_keeps_the_verdicts_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise TypeError("a summary bug")

    monkeypatch.setattr(cli_main, "_print_certification", broken)
    code, out = invoke(
        "certify",
        "callsafe.targets.mutants:dispatch_on_parse",
        "--scenario",
        "schema-changed-mid-call",
        "--report",
        str(tmp_path),
    )
    assert code == 1, out  # the verdict's status, not a traceback's
    assert "the console summary broke" in out and "not certified" in out
    assert (tmp_path / "report.json").exists()
