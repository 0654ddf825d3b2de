"""The README's findings table is the one ``callsafe.targets.findings`` generates (issue 18:
the prose list had drifted, naming findings that were no entry of the file)."""

from __future__ import annotations

from pathlib import Path

from callsafe.targets.findings import FINDINGS, findings_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_findings_table_is_generated_from_findings_py() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- findings:start -->\n", 1)[1].split("<!-- findings:end -->", 1)[0]
    assert table == findings_markdown(), "paste callsafe.targets.findings.findings_markdown() between the markers"
    assert all(f"| {f.id} |" in table for f in FINDINGS)
