"""The reference implementation certified: nothing violated, every transition a concrete
trace can reach is reached, and the three reports are written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from callsafe.certify.harness import Options, certify
from callsafe.generators.coverage import ALL_TRANSITIONS
from callsafe.model.lifecycle import State
from callsafe.reporting.report import write_reports

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("callsafe.targets.reference") is None, reason="the reference target is not installed"
)


def test_reference_memory_is_certified_with_full_coverage(tmp_path: Path) -> None:
    cert = certify("reference:memory", Options(depth=2, walks=100))
    assert cert.ok, {i: [f.describe() for e in cert.examples.get(i, []) for f in e.findings] for i in cert.violated}
    assert {s.status for s in cert.invariants.values()} == {"holds"}
    missing = ALL_TRANSITIONS - cert.transitions
    assert all(state is State.TERMINAL_CANDIDATE for state, _ in missing), missing
    reports = write_reports(cert, tmp_path)
    assert json.loads(reports.json.read_text())["verdict"] == "pass"
    assert reports.junit.exists() and reports.html.exists()


def test_reference_sqlite_passes_the_catalog() -> None:
    cert = certify("reference", Options(generators=("catalog",)))
    assert cert.ok and cert.generators["catalog"].not_applicable == 0
