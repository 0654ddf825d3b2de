"""``callsafe observe`` on records of certification runs gives certify's verdicts.

Each catalog scenario is run on the reference and on zoo mutants in process (certify's own
``check_trace``); the run is written as production records (:mod:`callsafe.observe.export`)
and observed. Per invariant:

* a JSONL log of everything (the provider events, the turns, the executions, the ledger,
  status, confirmation and validator records): the same verdict as certify on every
  scenario, for every target;
* a log without the stream: INV-ONCE, INV-TURN and INV-CANCEL judged, never a violation
  certify did not find, and every violation found by the mutants that run a call after a stop;
* OTLP spans and the guard's store: INV-ONCE as certify, everything else "not judgeable"
  unless the records hold what it reads.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from callsafe.certify.checking import Checked, check_trace
from callsafe.generators.catalog import CATALOG
from callsafe.observe.export import log_lines, otlp_document, write_store
from callsafe.observe.guard_store import read_store
from callsafe.observe.jsonl_log import read_log
from callsafe.observe.judging import judge_records
from callsafe.observe.otlp import read_spans
from callsafe.observe.records import KINDS

MUTANTS = ("no_dedupe", "no_turn_check", "ignore_cancel", "revive_after_restart", "dispatch_on_parse", "leak_arguments")
TARGETS = ("reference", *(f"callsafe.campaigns.mutants:{m}" for m in MUTANTS))
STREAM = {"call_opened", "fragment", "call_terminal", "response_terminal", "disconnect", "text_fragment"}
RECORDS = {"ledger_row", "status_shown", "audit_row", "log_line", "business_validated", "confirmation_requested"}


def certify_status(checked: Checked, invariant: str) -> str:
    found = checked.judgement.results[invariant]
    return "not applicable" if found is None else "violated" if found else "holds"


@functools.cache
def runs(target: str) -> tuple[Checked, ...]:
    """Every catalog scenario certify ran on ``target`` (once per test process)."""
    return tuple(c for c in (check_trace(target, s.trace) for s in CATALOG) if c.run is not None)


@pytest.fixture(scope="module", params=TARGETS)
def checked_runs(request: pytest.FixtureRequest) -> list[Checked]:
    return list(runs(request.param))


def test_a_full_log_gets_certifys_verdict_on_every_invariant(checked_runs: list[Checked]) -> None:
    violated = 0
    for checked in checked_runs:
        assert checked.run is not None
        lines = [json.dumps({"recorded": list(KINDS)}), *log_lines(checked.trace, checked.run.observations)]
        observed = judge_records(read_log("\n".join(lines).encode()))
        for invariant in checked.judgement.results:
            want = certify_status(checked, invariant)
            got = observed.status(invariant)
            assert got == ("not judgeable" if want == "not applicable" else want), (
                checked.trace.name,
                invariant,
                checked.judgement.explain(invariant),
                [f.finding.describe() for f in observed.verdicts[invariant].findings],
            )
            violated += want == "violated"
    assert violated or all(not c.judgement.violated for c in checked_runs)


@pytest.mark.parametrize("invariant", ["INV-ONCE", "INV-TURN", "INV-CANCEL", "INV-TERMINAL", "INV-LEDGER"])
def test_the_zoos_violations_are_found_in_its_logs_with_their_records(invariant: str) -> None:
    """Not vacuous: every run where certify found ``invariant`` violated is found so from
    its log (the kinds of record inferred from the log itself), the findings naming the
    execution records that show them."""
    found = 0
    for mutant in MUTANTS:
        for checked in runs(f"callsafe.campaigns.mutants:{mutant}"):
            assert checked.run is not None
            if certify_status(checked, invariant) != "violated":
                continue
            records = read_log("\n".join(log_lines(checked.trace, checked.run.observations)).encode())
            verdict = judge_records(records, kinds=records.kinds | {"ledger", "status", "executions"}).verdicts[
                invariant
            ]
            assert verdict.status == "violated", (mutant, checked.trace.name)
            assert all(f.evidence for f in verdict.findings)
            if invariant != "INV-LEDGER":
                assert any("(executed)" in e for f in verdict.findings for e in f.evidence)
            found += 1
    assert found


def test_without_the_stream_once_turn_and_cancel_are_judged_and_never_overclaim(checked_runs: list[Checked]) -> None:
    for checked in checked_runs:
        assert checked.run is not None
        lines = [
            line
            for line in log_lines(checked.trace, checked.run.observations)
            if next(iter(json.loads(line))) not in STREAM | RECORDS
        ]
        observed = judge_records(read_log("\n".join(lines).encode()))
        for invariant, verdict in observed.verdicts.items():
            if invariant not in ("INV-ONCE", "INV-TURN", "INV-CANCEL"):
                assert verdict.status == "not judgeable", (checked.trace.name, invariant)
                continue
            if verdict.status == "not judgeable":  # nothing ran: no execution record at all
                assert verdict.missing == ("executions",)
                continue
            want = certify_status(checked, invariant)
            if verdict.status == "violated":
                assert want == "violated", (checked.trace.name, invariant, verdict.findings)
            if invariant == "INV-ONCE":
                assert verdict.status == want
            else:
                assert verdict.scope  # a judged verdict says what it covers


@pytest.mark.parametrize("mutant", ["no_turn_check", "ignore_cancel", "revive_after_restart"])
def test_without_the_stream_an_execution_after_a_stop_is_still_found(mutant: str) -> None:
    for checked in runs(f"callsafe.campaigns.mutants:{mutant}"):
        assert checked.run is not None
        lines = [
            line
            for line in log_lines(checked.trace, checked.run.observations)
            if next(iter(json.loads(line))) not in STREAM | RECORDS
        ]
        observed = judge_records(read_log("\n".join(lines).encode()))
        for invariant in ("INV-TURN", "INV-CANCEL"):
            if certify_status(checked, invariant) == "violated" and observed.status(invariant) != "violated":
                # the same execution, blamed under the other stop invariant
                other = "INV-CANCEL" if invariant == "INV-TURN" else "INV-TURN"
                assert observed.status(other) == "violated", (checked.trace.name, invariant)


def test_spans_and_the_store_judge_once_as_certify_and_nothing_they_cannot(
    checked_runs: list[Checked], tmp_path: Path
) -> None:
    for n, checked in enumerate(checked_runs):
        assert checked.run is not None
        store = tmp_path / f"run{n}.db"
        write_store(store, checked.trace, checked.run.observations)
        for records in (
            read_spans(json.dumps(otlp_document(checked.trace, checked.run.observations)).encode()),
            read_spans(json.dumps(otlp_document(checked.trace, checked.run.observations, chat=True)).encode()),
            read_store(str(store)),
        ):
            observed = judge_records(records)
            once = observed.status("INV-ONCE")
            if once != "not judgeable":
                assert once == certify_status(checked, "INV-ONCE"), (records.source, checked.trace.name)
            for invariant in ("INV-TERMINAL", "INV-TURN", "INV-CANCEL", "INV-LEDGER", "INV-STATUS", "INV-CONFIRM"):
                assert observed.status(invariant) == "not judgeable", (records.source, invariant)
            exact = observed.status("INV-EXACT-ARGS")
            if exact == "violated":
                assert certify_status(checked, "INV-EXACT-ARGS") == "violated"
