"""The findings page's table (``docs/findings.md``) is the one ``callsafe.campaigns.findings``
generates (a prose list had drifted, naming findings that were no entry of the file)."""

from __future__ import annotations

from pathlib import Path

from callsafe.campaigns.findings import FINDINGS, findings_markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "findings.md"


def test_the_findings_page_table_is_generated_from_findings_py() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- findings:start -->\n", 1)[1].split("<!-- findings:end -->", 1)[0]
    assert table == findings_markdown(), "paste callsafe.campaigns.findings.findings_markdown() between the markers"
    assert all(f"| {f.id} |" in table for f in FINDINGS)
