"""z3-synthesised scenarios and fragmentations run in every certification, labelled as
synthesised in the report, and catch the assemblers they were made to fool."""

from __future__ import annotations

import json
from pathlib import Path

from callsafe.certify.harness import Options, certify
from callsafe.reporting.report import write_reports


def test_synthesised_traces_are_a_generator_and_labelled_in_the_report(tmp_path: Path) -> None:
    cert = certify("reference:memory", Options(generators=("synthesis",), seed=0))
    assert cert.ok
    stats = cert.generators["synthesis"]
    assert stats.ran >= 20 and stats.not_applicable == 0
    write_reports(cert, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    labels = report["generators"]["synthesis"]["info"]["traces"]
    assert any("synthesised: terminal-after-cancel" in label for label in labels)
    assert any("synthesised: fragmentation duplicate" in label for label in labels)


def test_a_synthesised_fragmentation_catches_an_assembler_that_does_not_dedupe() -> None:
    cert = certify("callsafe.campaigns.mutants:no_dedupe", Options(generators=("synthesis",), seed=0))
    assert not cert.ok
    sources = {ce.original.source for ces in cert.counterexamples.values() for ce in ces}
    assert any(source.startswith("synthesised: fragmentation") for source in sources), sources
