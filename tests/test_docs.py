"""The README's lifecycle picture is generated from the table, not drawn by hand."""

from __future__ import annotations

from pathlib import Path

from callsafe.diagrams.model import lifecycle_diagram

ROOT = Path(__file__).resolve().parents[1]


def test_committed_lifecycle_diagram_matches_the_table() -> None:
    committed = (ROOT / "docs" / "lifecycle.dot").read_text(encoding="utf-8")
    assert committed == lifecycle_diagram().source, (
        "docs/lifecycle.dot is stale: regenerate it with `callsafe render --out docs` "
        "(and keep docs/lifecycle.svg with it)"
    )


def test_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```sh") + 3]
    assert block[0].startswith("make certify") and block[1].startswith("make test")
