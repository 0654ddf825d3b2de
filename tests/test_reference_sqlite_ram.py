"""The certification's store setup (``reference`` = ``reference:sqlite-ram``): the SQLite
store over an in-memory database lent per trace must behave exactly as the SQLite file
store does, a restart included, and a trace must never see what an earlier one left.

Real-disk durability (power loss, fsync, concurrent processes) is not this setup's: the
crash-point and race tests (tests/test_reliability_*.py) keep real files."""

from __future__ import annotations

import html
import os
import sqlite3
from pathlib import Path

import pytest

from callsafe.certify.harness import Options, certify
from callsafe.certify.runner import run_trace
from callsafe.certify.targets import describe, resolve_target
from callsafe.contract.target import TargetEnv
from callsafe.generators.catalog import scenarios
from callsafe.model.vocabulary import CallKey, Limits, Restart
from callsafe.reference_impl.effects import BindTurn, OpenCall
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Snapshot
from callsafe.reporting.report import comparable_text, html_report, report_json
from callsafe.targets import reference
from callsafe.targets.reference import ReferenceTarget


def _env() -> TargetEnv:
    return TargetEnv(
        executor=lambda *args: None,
        business_validator=lambda *args: None,
        tools={},
        limits=Limits(),
        observe=lambda observation: None,
        step=lambda: 0,
        clock=lambda: 0.0,
    )


def _empty(snapshot: Snapshot) -> bool:
    return snapshot == Snapshot()


def test_reference_names_the_in_memory_setup_and_sqlite_the_file() -> None:
    ram = describe(resolve_target("reference"), "reference")
    assert ram.name == "reference-sqlite-ram" and ram.setup is not None and "in memory" in ram.setup
    assert describe(resolve_target("reference:sqlite-ram"), "reference:sqlite-ram").name == ram.name
    disk = describe(resolve_target("reference:sqlite"), "reference:sqlite")
    assert disk.name == "reference-sqlite" and disk.setup is not None and "file per trace" in disk.setup


def test_every_catalog_trace_observes_the_same_over_memory_and_over_a_file(tmp_path: Path) -> None:
    """Same observations, step by step, for every catalog scenario (restarts, restarts
    during validation, replays after a restart among them)."""
    traces = [s.trace for s in scenarios()]
    assert any(isinstance(e, Restart) for t in traces for e in t.events)
    for i, trace in enumerate(traces):
        folder = tmp_path / str(i)
        folder.mkdir()
        on_file = run_trace(ReferenceTarget("sqlite"), trace, store_dir=folder)
        in_memory = run_trace(ReferenceTarget("sqlite-ram"), trace)
        assert in_memory.errors == on_file.errors == [], trace.name
        assert in_memory.observations == on_file.observations, trace.name


def test_a_certification_reports_what_the_file_setup_reports_and_says_which_ran() -> None:
    options = Options(generators=("catalog", "walks"), walks=40, minimize=False)
    ram, disk = report_json(certify("reference", options)), report_json(certify("reference:sqlite", options))
    assert ram["target"]["setup"] != disk["target"]["setup"]
    assert "in memory" in ram["target"]["setup"] and "file per trace" in disk["target"]["setup"]
    assert ram["summary"]["traces_run"] > 90
    ram.pop("target"), disk.pop("target")
    assert comparable_text(ram) == comparable_text(disk)


def test_the_html_report_says_which_setup_ran() -> None:
    cert = certify("reference", Options(generators=("catalog",), minimize=False))
    assert cert.target.setup is not None
    assert f"setup: {html.escape(cert.target.setup)}" in html_report(cert)


def test_a_restart_keeps_what_was_committed_and_loses_what_was_not() -> None:
    target = ReferenceTarget("sqlite-ram")
    target.start(_env())
    try:
        store = target.store
        assert isinstance(store, SqliteStore)
        key = CallKey("acme", "t1", "r1", "i1", "c1")
        store.apply([BindTurn("t1", "u1", "acme", "c", None), OpenCall(key, "pay")], 1.0)
        # a transaction open when the process dies: its rows never reach the next store
        conn = store._conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO terminal_ids (event_id) VALUES ('uncommitted')")
        target.restart()
        snapshot = target.store.load()
        assert set(snapshot.turns) == {"t1"} and snapshot.terminal_ids == set()
        assert snapshot.calls[("t1", "r1", "i1", "c1")].state.value == "failed"  # in flight: failed at start
    finally:
        target.close()


def test_the_next_trace_gets_an_empty_database_the_same_connection_and_the_same_tables() -> None:
    first = ReferenceTarget("sqlite-ram")
    first.start(_env())
    store = first.store
    assert isinstance(store, SqliteStore)
    conn = store._conn
    tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    store.apply([BindTurn("t1", "u1", "acme", "c", None)], 1.0)
    first_id = store.store_id
    first.close()
    second = ReferenceTarget("sqlite-ram")
    second.start(_env())
    try:
        again = second.store
        assert isinstance(again, SqliteStore)
        assert again._conn is conn, "the database was not lent again"
        assert _empty(again.load())
        assert sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")) == tables
        fresh = SqliteStore(":memory:")  # what a new store holds: no rows but its own identity
        try:
            counts = {t: fresh._query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables}
        finally:
            fresh.close()
        assert {t: again._query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables} == counts
        assert again.store_id and again.store_id != first_id, "the next trace's store kept the last one's identity"
    finally:
        second.close()


def test_two_running_targets_never_share_a_database() -> None:
    a, b = ReferenceTarget("sqlite-ram"), ReferenceTarget("sqlite-ram")
    a.start(_env())
    b.start(_env())
    try:
        a.store.apply([BindTurn("t1", "u1", "acme", "c", None)], 1.0)
        assert _empty(b.store.load())
    finally:
        a.close()
        b.close()


def test_a_database_that_cannot_be_emptied_is_never_lent_again() -> None:
    pool = reference._RamDatabases()
    conn = pool.lend()
    conn.close()  # emptying it fails
    pool.give_back(conn)
    assert pool.lend() is not conn


def test_a_borrowed_connection_must_be_in_autocommit_mode() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        with pytest.raises(Exception, match="autocommit"):
            SqliteStore(":memory:", connection=conn)
    finally:
        conn.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_uses_its_parents_databases(tmp_path: Path) -> None:
    pool = reference._RamDatabases()
    parents = pool.lend()
    pool.give_back(parents)
    report = tmp_path / "child.txt"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            report.write_text("fresh" if pool.lend() is not parents else "inherited")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report.read_text() == "fresh"
    assert pool.lend() is parents
