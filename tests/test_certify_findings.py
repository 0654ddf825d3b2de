"""How a certification's findings reach the user (issue 29): the console summary never
turns a verdict into a traceback, every distinct finding is shown, and action safety is
reported apart from the records."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
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
        "callsafe.campaigns.mutants:dispatch_on_parse",
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
        "callsafe.campaigns.mutants:dispatch_on_parse",
        "--scenario",
        "schema-changed-mid-call",
        "--report",
        str(tmp_path),
    )
    assert code == 1, out  # the verdict's status, not a traceback's
    assert "the console summary broke" in out and "not certified" in out
    assert (tmp_path / "report.json").exists()


def test_each_distinct_cause_of_an_invariant_gets_its_own_counterexample(tmp_path: Path) -> None:
    """A target that runs calls on their first parse breaks INV-TERMINAL for several
    reasons (no terminal yet, a terminal that came after a stop): each distinct cause is
    kept and shown, up to --counterexamples, in the console, report.json and JUnit."""
    code, out = invoke(
        "certify",
        "callsafe.campaigns.mutants:dispatch_on_parse",
        "--generators",
        "catalog",
        "--counterexamples",
        "3",
        "--no-minimize",
        "--report",
        str(tmp_path),
    )
    assert code == 1, out
    doc = json.loads((tmp_path / "report.json").read_text())
    terminal = next(i for i in doc["invariants"] if i["id"] == "INV-TERMINAL")
    causes = {ce["cause"] for ce in terminal["counterexamples"]}
    assert len(terminal["counterexamples"]) == 3 == len(causes) and terminal["causes"] > 3
    assert all(ce["traces"] >= 1 for ce in terminal["counterexamples"])
    assert "cause 2 of" in out and "more causes than --counterexamples keeps" in out
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    action = next(s for s in junit.findall("testsuite") if s.get("name") == "callsafe.action-safety")
    case = next(c for c in action.findall("testcase") if c.get("name") == "INV-TERMINAL")
    failure = case.find("failure")
    assert failure is not None and "3 of" in failure.get("message", "")


def test_action_safety_is_reported_apart_from_the_records(tmp_path: Path) -> None:
    """A target that logs argument values runs nothing wrong: its only violation is about
    records. The run still fails (exit 1), and every report says it is records only."""
    code, out = invoke(
        "certify", "callsafe.campaigns.mutants:leak_arguments", "--generators", "catalog", "--report", str(tmp_path)
    )
    assert code == 1, out
    assert "action safety held; records: INV-LEDGER untrue" in out
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["summary"]["violation_kind"] == "records"
    assert doc["summary"]["action_violated"] == [] and doc["summary"]["records_violated"] == ["INV-LEDGER"]
    by_about = {s["about"]: s for s in doc["sections"]}
    assert by_about["action"]["status"] == "holds" and by_about["records"]["status"] == "violated"
    assert all(ce["about"] == "records" for i in doc["invariants"] for ce in i["counterexamples"])
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    suites = {s.get("name"): s for s in junit.findall("testsuite")}
    assert suites["callsafe.action-safety"].get("failures") == "0"
    assert suites["callsafe.records"].get("failures") == "1"
    page = (tmp_path / "report.html").read_text()
    assert "section-action" in page and "section-records" in page


def test_a_cause_blanks_what_varies_between_traces_of_it() -> None:
    """Two findings that differ only in values, ids and steps share a cause."""
    from callsafe.certify.judge import message_shape

    assert message_shape("executed tool 'pay' at step 3 with {'a': [1]}") == "executed tool _ at step # with _"


def test_inv_terminal_says_what_happened_to_the_terminal_event() -> None:
    """A call run on its first parse: before a terminal event that came (with its step),
    before one whose stop reason is not completed, or with none at all; never "before the
    completed terminal event" for a call that had none."""
    from callsafe.certify.harness import run_traces
    from callsafe.generators.catalog import LOOKUP
    from callsafe.model.builder import TraceBuilder
    from callsafe.model.vocabulary import ToolSpec

    def message(reason: str | None) -> str:
        b = TraceBuilder(tools={"lookup": ToolSpec(schema=LOOKUP)}).turn("t1").open("a", "lookup")
        b.fragment("a", '{"q":"x"}')
        if reason is not None:
            b.terminal("a", reason)  # type: ignore[arg-type]
        checked = run_traces("callsafe.campaigns.mutants:dispatch_on_parse", [b.build()])[0]
        return checked.judgement.of("INV-TERMINAL")[0].message

    assert message("completed").startswith(
        "executed at step 2, before the call's own completed terminal event (step 3)"
    )
    assert message("length").startswith(
        "executed before the call's terminal event (step 3), whose stop reason is 'length'"
    )
    assert message(None).startswith("executed, but the call's own terminal event never arrived")
