"""The reference target's fresh SQLite stores are copies of one empty store per process
(``callsafe.targets.reference._empty_sqlite_file``): the copy must be the store a fresh
file would have been, and the template must never be removed from under its owner."""

from __future__ import annotations

import atexit
import os
import sqlite3
from pathlib import Path

import pytest

from callsafe.certify.harness import Options, certify
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reporting.report import comparable_text, report_json
from callsafe.targets import reference


def _schema(path: Path) -> tuple[list[tuple[str, str, str]], str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()
    return rows, mode


def test_a_store_copied_from_the_template_is_the_store_a_fresh_file_gives(tmp_path: Path) -> None:
    fresh, copied = tmp_path / "fresh.sqlite3", tmp_path / "copied.sqlite3"
    SqliteStore(fresh, create=True, witness=False).close()
    reference._empty_sqlite_file(copied)
    SqliteStore(copied, create=True, witness=False).close()
    rows, mode = _schema(copied)
    assert (rows, mode) == _schema(fresh)
    assert mode == "wal" and any(kind == "table" for kind, _, _ in rows)


def test_certifying_over_copied_stores_reports_what_fresh_stores_do(monkeypatch: pytest.MonkeyPatch) -> None:
    options = Options(generators=("catalog",), minimize=False)
    copied = comparable_text(report_json(certify("reference:sqlite", options)))
    monkeypatch.setattr(reference, "_empty_sqlite_file", lambda path: None)  # the store makes its file
    assert comparable_text(report_json(certify("reference:sqlite", options))) == copied


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_template_and_never_removes_its_parents(tmp_path: Path) -> None:
    """The child runs only the template's own exit handler, for both templates (running
    every inherited exit handler would also run the parent's other cleanups)."""
    reference._empty_sqlite_file(tmp_path / "parent.sqlite3")
    assert reference._TEMPLATE is not None
    parent_pid, parent_template = os.getpid(), reference._TEMPLATE[1]
    report = tmp_path / "child.txt"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            handlers = atexit._ncallbacks()
            reference._empty_sqlite_file(tmp_path / "child.sqlite3")
            assert reference._TEMPLATE is not None and atexit._ncallbacks() == handlers + 1
            child_template = reference._TEMPLATE[1]
            report.write_text(str(child_template))
            reference._remove_template(parent_pid, parent_template.parent)  # the parent's: not ours
            reference._remove_template(os.getpid(), child_template.parent)  # our own
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child_template = Path(report.read_text())
    assert child_template != parent_template
    assert parent_template.exists(), "the child removed its parent's template"
    assert not child_template.exists(), "the child's exit handler left its own template behind"
    assert (tmp_path / "child.sqlite3").exists()
