"""The matrix page's table (``docs/matrix.md``) is the one a run wrote (``callsafe matrix
--readme docs/matrix.md``), and that run had today's rows: a row added, renamed or dropped
without measuring the matrix again fails here, as does a hand edit of the table (generated,
grouped by ecosystem, with versions and date)."""

from __future__ import annotations

import json
from pathlib import Path

from callsafe.campaigns.matrix import README_END, README_START, default_rows, readme_table
from callsafe.model.invariants import INVARIANTS
from callsafe.targets.framework_rows import FRAMEWORK_ROWS, OPENAI2_KEY, OtherVenvRow
from callsafe.targets.node_rows import NODE_ROWS

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "docs" / "matrix-summary.json"


def _summary() -> dict:
    return json.loads(SUMMARY.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_matrix_page_is_generated_from_the_recorded_run() -> None:
    text = (ROOT / "docs" / "matrix.md").read_text(encoding="utf-8")
    block = text.split(README_START, 1)[1].split(README_END, 1)[0]
    assert block == readme_table(_summary()), "run: callsafe matrix --readme docs/matrix.md"
    # and the line above the table names the command that rewrites this page
    assert "`callsafe matrix --readme docs/matrix.md`" in block


def test_the_recorded_run_had_every_row_of_today_and_every_library_installed() -> None:
    summary = _summary()
    assert [r["spec"] for r in summary["rows"]] == [r.spec for r in default_rows()]
    missing = [r["spec"] for r in summary["rows"] if not r["available"]]
    assert not missing, f"measured without {missing}"
    ids = {inv.id for inv in INVARIANTS}
    assert all(set(r["cells"]) == ids for r in summary["rows"])
    node = [r for r in summary["rows"] if r["ecosystem"] == "node"]
    assert all(f"npm:{r['spec'].split('/', 1)[1].split(':', 1)[0]}" in summary["versions"] for r in node)
    # the packages judged beside a node library (a provider package, @langchain/openai) too
    assert all(f"npm:{n}" in summary["versions"] for row in NODE_ROWS for n in row.needs)
    # and the SDK and HTTP client under each python framework, from the environment it ran in
    for row in FRAMEWORK_ROWS:
        prefix = f"{OPENAI2_KEY}:" if isinstance(row, OtherVenvRow) else ""
        assert all(prefix + name in summary["versions"] for name in row.dependencies), row.name
