"""The reports: report.json against its schema, JUnit XML, report.html, and the sequence
diagrams of counterexamples."""

from __future__ import annotations

import functools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from callsafe.certify.harness import Certification, Options, certify, check_trace
from callsafe.diagrams.sequence import sequence_rows, sequence_svg
from callsafe.generators.catalog import CATALOG, by_name
from callsafe.reporting.report import REPORT_SCHEMA, comparable_text, html_report, junit_xml, report_json, write_reports

OPTIONS = Options(depth=1, walks=20, generators=("catalog", "walks"))


@functools.cache
def broken() -> Certification:
    return certify("toy_targets:dispatch_on_first_parse", OPTIONS)


@functools.cache
def limited() -> Certification:
    return certify("toy_targets:simple", OPTIONS)


def test_report_json_follows_its_schema(tmp_path: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(REPORT_SCHEMA)
    for cert in (broken(), limited()):
        reports = write_reports(cert, tmp_path / cert.target.spec.replace(":", "-"))
        doc = json.loads(reports.json.read_text())
        jsonschema.validate(doc, REPORT_SCHEMA)
    doc = report_json(broken())
    assert doc["verdict"] == "fail" and "INV-TERMINAL" in doc["summary"]["safety_violated"]
    inv = next(i for i in doc["invariants"] if i["id"] == "INV-TERMINAL")
    assert inv["status"] == "violated" and inv["counterexamples"][0]["minimal_events"] <= 6
    assert inv["counterexamples"][0]["files"]["trace"].endswith(".json")
    ok = report_json(limited())
    assert ok["verdict"] == "pass" and ok["summary"]["violated"] == []
    statuses = {i["id"]: i["status"] for i in ok["invariants"]}
    assert statuses["INV-LEDGER"] == "not_applicable" and statuses["INV-ONCE"] == "holds"
    assert ok["not_applicable"]["restart"] > 0 and ok["seed"] == 0
    assert ok["coverage"]["lifecycle_transitions"]["total"] == 55


def test_comparable_text_drops_only_when_and_how_a_run_was_executed() -> None:
    doc = report_json(limited())
    text = comparable_text(doc)
    again = report_json(certify("toy_targets:simple", OPTIONS))  # a second run: other timings
    assert comparable_text(again) == text
    assert "started_at" not in json.loads(text) and "execution" not in json.loads(text)
    assert all("seconds" not in g for g in json.loads(text)["generators"].values())
    assert doc["timings"] and "started_at" in doc  # the document itself is not changed
    changed = json.loads(json.dumps(doc))
    changed["generators"]["walks"]["ran"] += 1  # what a run found still counts
    assert comparable_text(changed) != text
    changed = json.loads(json.dumps(doc))
    changed["coverage"]["lifecycle_transitions"]["hits"][0][2] += 1
    assert comparable_text(changed) != text


def test_junit_has_one_case_per_invariant_per_generator() -> None:
    root = junit_xml(broken()).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "callsafe.catalog",
        "callsafe.walks",
        "callsafe.action-safety",
        "callsafe.records",
        "callsafe.scenarios",
    ]
    for suite in suites[:2]:
        assert len(suite.findall("testcase")) == 11
    catalog = suites[0]
    failed = {c.get("name") for c in catalog.findall("testcase") if c.find("failure") is not None}
    assert failed == set(broken().generators["catalog"].violated)
    skipped = {c.get("name") for c in catalog.findall("testcase") if c.find("skipped") is not None}
    assert {"INV-LEDGER", "INV-STATUS", "INV-CONFIRM", "INV-BOUNDED"} <= skipped
    assert int(root.get("failures", "0")) >= len(failed)
    ET.fromstring(ET.tostring(root))  # well formed


def test_junit_has_one_case_per_named_scenario() -> None:
    cert = broken()
    suite = next(s for s in junit_xml(cert).getroot().findall("testsuite") if s.get("name") == "callsafe.scenarios")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    catalog = {r.name for r in cert.scenarios if r.generator == "catalog"}
    assert catalog == {s.name for s in CATALOG} and catalog <= set(cases)
    failing = {r.name for r in cert.scenarios if r.outcome == "violated"}
    assert failing and {n for n, c in cases.items() if c.find("failure") is not None} == failing
    passing = {r.name for r in cert.scenarios if r.outcome == "passed"}
    assert passing and all(cases[n].find("failure") is None and cases[n].find("skipped") is None for n in passing)
    assert int(suite.get("failures", "0")) == len(failing)
    doc = report_json(cert)
    assert {r["name"] for r in doc["scenarios"] if r["outcome"] == "violated"} == failing


def test_html_shows_verdicts_counterexamples_and_coverage(tmp_path: Path) -> None:
    page = html_report(broken())
    for inv in broken().invariants:
        assert inv in page
    assert 'class="badge violated"' in page and 'class="badge not_applicable"' in page
    assert page.count('class="sequence"') == sum(len(ces) for ces in broken().counterexamples.values())
    assert ">harness</text>" in page and ">executor</text>" in page
    assert "lifecycle" in page  # the coverage-coloured lifecycle diagram
    o = broken().options
    assert f"{o.walks} walks · model of {o.calls} calls, {o.turns} turns, {o.fragments} fragments" in page
    reports = write_reports(broken(), tmp_path)
    assert reports.html.read_text() == html_report(broken())
    assert (tmp_path / "lifecycle-coverage.dot").exists()
    tests = [p for p in reports.counterexamples if p.suffix == ".py"]
    assert len(tests) == sum(len(ces) for ces in broken().counterexamples.values())


def test_sequence_rows_follow_what_happened() -> None:
    trace = by_name("emergency-stop-during-validation").trace
    checked = check_trace("toy_targets:model_target", trace)
    assert checked.run is not None
    rows = sequence_rows(trace, checked.run.observations)
    labels = [label for _, _, label, _ in rows]
    validate = next(i for i, label in enumerate(labels) if label.startswith("validate"))
    stop = next(i for i, label in enumerate(labels) if "stop_tenant" in label)
    terminal = next(i for i, label in enumerate(labels) if "call_terminal" in label)
    assert terminal < validate < stop  # the stop arrived while the call was being validated
    assert not any(src == "target" and dst == "executor" for src, dst, _, _ in rows)
    bad = check_trace("toy_targets:dispatch_on_first_parse", by_name("no-terminal-no-execution").trace)
    assert bad.run is not None
    keys = [f.key for f in bad.judgement.findings if f.key]
    svg = sequence_svg(bad.trace, bad.run.observations, keys)
    assert svg.startswith("<svg") and 'stroke="#c62828"' in svg  # the bad execution in red
