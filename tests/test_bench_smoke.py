"""The benchmarks run: ``python -m bench --quick`` finishes, prints the machine, the
command and ratios against the floor, and writes its section of the results file.

Only that they run and report, never how fast: times depend on the machine, and a smoke
test that asserted them would fail on a busy one.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_modules import ROOT, bench_module


def _ratios(stdout: str) -> dict[str, float]:
    lines = [line for line in stdout.splitlines() if line.startswith("ratios: ")]
    assert lines, stdout[-2000:]
    out: dict[str, float] = {}
    for item in lines[-1].removeprefix("ratios: ").split(", "):
        name, value = item.split("=")
        out[name] = float(value)
    return out


def _quick(name: str, results: Path, env: dict[str, str] | None = None) -> str:
    """``python -m bench --quick --only NAME`` into ``results``; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", name, "--results", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    results = tmp_path_factory.mktemp("bench") / "RESULTS.md"
    results.write_text("# old\n\n<!-- end of header -->\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n")
    return _quick("assembly", results), results


def test_quick_run_reports_ratios_against_the_floor(quick_run: tuple[str, Path]) -> None:
    stdout, _ = quick_run
    ratios = _ratios(stdout)
    assert ratios["many/floor"] == 1.0
    for variant in ("core", "target-memory", "target-sqlite"):
        for name in (f"many/{variant}", f"many/{variant}@cpu", f"grow/{variant}", f"grow/{variant}@cpu"):
            assert ratios[name] > 0, name
        assert ratios[f"slope/{variant}"] > 0
    assert "command: `" in stdout and "python" in stdout and "cpu: " in stdout
    assert "time per byte" in stdout and "ratio (CPU)" in stdout


def test_quick_run_writes_its_own_section_and_keeps_the_others(quick_run: tuple[str, Path]) -> None:
    _, results = quick_run
    text = results.read_text()
    assert text.startswith("# Benchmark results")
    assert text.count("<!-- bench:assembly -->") == 1 and text.count("<!-- /bench:assembly -->") == 1
    assert "<!-- bench:other -->\nkept\n<!-- /bench:other -->" in text
    assert "## Assembly cost" in text and "(quick)" in text


def test_quick_run_times_each_installed_library_accumulator_against_the_reference(
    quick_run: tuple[str, Path],
) -> None:
    """Every installed library is timed on both shapes (or, when the time guard stopped it,
    its stopping run is reported as such) and compared with the reference; every missing one
    is named as skipped, with the reason, never silently left out."""
    accumulators = bench_module("library_accumulators")
    ACCUMULATORS, unavailable = accumulators.ACCUMULATORS, accumulators.unavailable
    stdout, _ = quick_run
    ratios = _ratios(stdout)
    missing = unavailable()
    for name, why in missing.items():
        assert f"**{name}**: skipped, {why}" in stdout
    installed = [acc.name for acc in ACCUMULATORS if acc.name not in missing]
    if not installed:
        pytest.skip("no library accumulator is installed (pip install callsafe[sdks])")
    for name in installed:
        for shape in ("many", "grow"):
            for ref in ("core", "target-memory", "target-sqlite"):
                assert ratios[f"{shape}/{ref}-vs-{name}"] > 0 and ratios[f"{shape}/{ref}-vs-{name}@cpu"] > 0
        assert ratios[f"many/{name}"] > 0 and ratios[f"many/{name}@cpu"] > 0
    for shape in ("many", "grow"):
        worst = max(ratios[f"{shape}/core-vs-{name}@cpu"] for name in installed)
        assert ratios[f"ref-vs-fastest-lib/{shape}@cpu"] == worst
    assert "### The reference against each library accumulator" in stdout and "What each library does" in stdout
    for shape, label in (("many", "Many small calls"), ("grow", "One growing call")):
        cpu = {name: ratios[f"{shape}/target-sqlite-vs-{name}@cpu"] for name in installed}
        line = next(x for x in stdout.splitlines() if x.startswith(f"- {label}, with the SQLite store:"))
        # the printed ratios have 4 significant digits: a ratio that rounds to 1 could go either way
        assert all(f"{name} (" in line for name, r in cpu.items() if r > 1.001)
        assert not any(f"{name} (" in line for name, r in cpu.items() if r < 0.999)


def test_a_section_is_replaced_not_repeated(tmp_path: Path) -> None:
    common = bench_module("common")
    Section, update_results = common.Section, common.update_results
    path = tmp_path / "RESULTS.md"
    update_results(path, "# head", [Section("a", "A", "first"), Section("b", "B", "bee")])
    update_results(path, "# head 2", [Section("a", "A", "second")])
    text = path.read_text()
    assert text.startswith("# head 2") and "second" in text and "first" not in text and "bee" in text
    assert text.index("second") < text.index("bee")


def test_a_small_ratio_keeps_its_value_in_print_and_in_the_ratios_line() -> None:
    """A library hundreds of times slower than the reference gives a ratio like 0.003: printed
    with two decimals it read ``0.00`` and a CI run took the measured ratio for zero."""
    common = bench_module("common")
    fmt_ratio, ratio_line = common.fmt_ratio, common.ratio_line
    ratios = {"many/floor": 1.0, "grow/core-vs-anthropic@cpu": 0.003141, "big": 123.456}
    line = ratio_line(ratios)
    assert _ratios(line) == pytest.approx(ratios, rel=1e-3)
    assert fmt_ratio(0.003141) == "0.0031x" and fmt_ratio(0.5) == "0.50x" and fmt_ratio(12.345) == "12.35x"


def test_quick_scaling_run_compares_one_process_local_workers_and_dask(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask distributed is not installed (callsafe[dask])")
    results = tmp_path / "RESULTS.md"
    ratios = _ratios(_quick("scaling", results))
    assert ratios["speedup/one process"] == ratios["cpu/one process"] == 1.0
    for variant in ("processes-2", "dask-1", "dask-2"):
        assert ratios[f"speedup/{variant}"] > 0 and ratios[f"cpu/{variant}"] > 0, variant
    assert ratios["speedup/dask-2 vs dask-1"] > 0
    text = results.read_text()
    assert "## Scaling out certification" in text and "traces/s" in text and "(quick)" in text
    assert "Every variant wrote the single-process report" in text


def test_quick_throughput_run_reports_every_variant_against_the_oracle(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    ratios = _ratios(_quick("throughput", results))
    for store in ("memory", "sqlite-ram", "sqlite-file"):
        for name in (f"inprocess/{store}", f"certify/{store}-w1", f"certify/{store}-w2"):
            assert ratios[name] > 0 and ratios[f"{name}@cpu"] > 0, name
        assert ratios[f"speedup/{store}"] > 0 and ratios[f"speedup/{store}-no-startup"] > 0
    assert ratios["sqlite-ram-over-memory"] > 0 and ratios["sqlite-file-over-ram"] > 0
    text = results.read_text()
    assert "## Certification throughput" in text and "(quick)" in text
    assert "floor: the oracle alone" in text
    assert "certify, SQLite in memory, workers=2" in text and "certify, SQLite file, workers=2" in text
    for pair in ("domain/memory-depth3", "domain/sqlite-depth3"):  # quick: both at the default depth
        assert ratios[pair] > 0 and ratios[f"{pair}@cpu"] > 0, pair
    assert "plain (before issue 16) against rich" in text
    assert "pool's fixed" in text and "traces/s" in text


def test_quick_durable_run_measures_sqlite_and_postgres_only_when_reachable(tmp_path: Path) -> None:
    """SQLite always; PostgreSQL when CALLSAFE_PG_DSN is set (CI starts a server), and
    "not measured" with the reason, never a number, when it is not."""
    import os

    env = dict(os.environ)
    dsn = env.get("CALLSAFE_PG_DSN", "")
    results = tmp_path / "RESULTS.md"
    ratios = _ratios(_quick("durable", results, env))
    for name in ("sqlite/shipped", "sqlite/shipped-vs-commits", "sqlite/normal", "sqlite/normal-vs-commits"):
        assert ratios[name] > 0 and ratios[f"{name}@cpu"] > 0, name
    text = results.read_text()
    assert "## Durable decisions" in text and "floor: the shipped store's commits" in text
    pg = [name for name in ratios if name.startswith("pg/")]
    if dsn:
        assert "Not measured" not in text and "2 replicas racing" in text
        for name in ("pg/1-replica", "pg/2-replicas", "pg/1-replica-vs-commits", "pg/2-replicas-vs-commits"):
            assert ratios[name] > 0, name
    else:
        assert pg == [] and "Not measured: CALLSAFE_PG_DSN is not set" in text
    if dsn:  # and without the server, the same run says why it measured nothing
        env.pop("CALLSAFE_PG_DSN")
        ratios = _ratios(_quick("durable", results, env))
        assert [name for name in ratios if name.startswith("pg/")] == []
        assert "Not measured: CALLSAFE_PG_DSN is not set" in results.read_text()


def test_the_durable_floor_commits_exactly_as_the_store_does(tmp_path: Path) -> None:
    """The fairness claim of the durable benchmark: the floor mirroring the store makes the
    same commits at the same synchronous levels, read the same way (SQLite's trace)."""
    decisions = bench_module("decisions")
    decision_events, ledger_rows, profile_store = (
        decisions.decision_events,
        decisions.ledger_rows,
        decisions.profile_store,
    )
    sqlite_connect, sqlite_floor = decisions.sqlite_connect, decisions.sqlite_floor
    profile = profile_store(tmp_path, "adaptive")
    assert sorted(set(profile.commits)) == ["FULL", "NORMAL"] and profile.commits.count("FULL") == 1
    _, keys = decision_events(4)
    conn = sqlite_connect(tmp_path / "floor.sqlite3")
    levels: list[str] = []
    level = [""]

    def trace(sql: str) -> None:
        words = sql.upper().split()
        if words[:2] == ["PRAGMA", "SYNCHRONOUS"]:
            level[0] = words[-1]
        elif words[:1] == ["COMMIT"]:
            levels.append(level[0])

    conn.set_trace_callback(trace)
    sqlite_floor(conn, ledger_rows(keys, profile), profile.commits)()
    assert levels == list(profile.commits) * len(keys)
    assert conn.execute("SELECT count(*), count(DISTINCT call_id) FROM ledger").fetchone() == (len(levels), 4)
    conn.close()


def test_the_durable_check_refuses_a_call_run_twice_or_missing() -> None:
    decision_events = bench_module("decisions").decision_events
    _ran_once = bench_module("durable")._ran_once
    _, keys = decision_events(3)
    _ran_once(keys, keys, "ok")
    with pytest.raises(AssertionError, match="1 more than once"):
        _ran_once([*keys, keys[0]], keys, "twice")
    with pytest.raises(AssertionError, match="2 of 3 calls ran"):
        _ran_once(keys[:2], keys, "missing")


def test_quick_exploration_run_compares_the_explorer_with_tlc_on_the_same_states(tmp_path: Path) -> None:
    """With TLC: both counted the same 217 states (the run fails otherwise) and every ratio
    is there; without Java or tla2tools.jar: "not applicable", and no number."""
    results = tmp_path / "RESULTS.md"
    stdout = _quick("exploration", results)
    text = results.read_text()
    assert "## Exploration speed" in text and "(quick)" in text
    if bench_module("exploration").tlc_available() is not None:
        assert "Not applicable on this machine" in text and "tlc-w1" not in text
        return
    ratios = _ratios(stdout)
    for workers in ("tlc-w1", "tlc-w2"):
        for suffix in ("", "@process", "@cpu", "@rss"):
            assert ratios[f"217/{workers}{suffix}"] > 0, workers + suffix
    assert "| 1 call, 1 turn | 217    | callsafe |" in text and "RSS at search start" in text


def test_the_exploration_benchmark_refuses_a_different_state_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TLC that counts one state fewer than the explorer stops the benchmark: a speed
    comparison of two different searches means nothing."""
    exploration = bench_module("exploration")
    shape = exploration.QUICK_SHAPES[0]

    def explorer(config: object) -> Any:
        return exploration.Measure(wall=1.0, cpu=1.0, search_wall=0.5, states=217, generated=2818)

    def tlc(tla: Path, cfg: Path, workers: int) -> Any:
        return exploration.Measure(wall=3.0, cpu=3.0, search_wall=2.0, states=216, generated=2818)

    monkeypatch.setattr(exploration, "run_explorer", explorer)
    monkeypatch.setattr(exploration, "run_tlc", tlc)
    with pytest.raises(AssertionError, match=r"found 216 distinct states .* the explorer 217"):
        exploration.measure(shape, 1, tmp_path)


def test_the_exploration_benchmark_compares_with_symmetry_on_both_sides(tmp_path: Path) -> None:
    """A symmetric shape runs TLC with SYMMETRY on the hand-written spec and the explorer with
    its reduction, with a fitted heap: the same (reduced) counts, fewer than without."""
    exploration = bench_module("exploration")
    if exploration.tlc_available() is not None:
        pytest.skip(f"TLC unavailable: {exploration.tlc_available()}")
    from callsafe.formal.abstract import CONTROLS
    from callsafe.formal.abstract import Config as ModelConfig
    from callsafe.formal.graph import explore

    config = ModelConfig(2, 1, 1, frozenset(CONTROLS), 0)  # the spec has every control on
    reduced = exploration.measure(exploration.Shape("sym", config, 1, symmetry=True, heap="128m"), 1, tmp_path)
    assert set(reduced) == {"callsafe", "tlc-w1"}
    assert reduced["callsafe"].states == reduced["tlc-w1"].states < explore(config, graph=False).stats().states


def test_quick_bugpower_run_scores_both_sides_on_three_mutants(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    ratios = _ratios(_quick("bugpower", results))
    assert ratios["mutants"] == 3
    assert ratios["caught/callsafe"] == 3  # the selftest catches these three
    assert ratios["caught/callsafe@1s"] == ratios["caught/callsafe@2s"] == 3
    # every baseline at both budgets (the strawman at the short one), scored alike
    for side in ("competent@1s", "competent@2s", "certify_machine@1s", "certify_machine@2s", "plain@1s"):
        assert 0 <= ratios[f"caught/{side}"] <= ratios[f"found/{side}"] <= 3
    # a longer budget repeats the shorter one's examples first: it never catches fewer
    for side in ("competent", "certify_machine"):
        assert ratios[f"caught/{side}@1s"] <= ratios[f"caught/{side}@2s"]
    text = results.read_text()
    assert "## Bug-finding power" in text and "(quick)" in text
    for row in ("| dispatch-on-parse ", "| merge-by-index ", "| never-execute ", "| reference (control) "):
        assert row in text
    assert "control (reference): callsafe ran" in text


def test_the_plain_machine_judges_each_event_as_the_harness_does() -> None:
    """The baseline is not blind: a completed call that the never-execute mutant drops
    fails the machine's invariant, with LIVE-DISPATCH, and the same events pass on the
    reference implementation."""
    from callsafe.certify.targets import describe, resolve_target

    plain = bench_module("plain_machine")
    outcomes = {}
    for spec in ("callsafe.campaigns.mutants:never_execute", "reference:memory"):
        factory = resolve_target(spec)
        probe = plain.PlainProbe(factory, describe(factory, spec).capabilities, budget=60)
        machine = plain.plain_machine(probe)()
        machine.turn_started("t1", "u1", "acme")
        machine.call_opened("t1", "r1", "i1", "c1", "note")
        machine.fragment("t1", "r1", "i1", "c1", 0, '{"n":1}')
        machine.every_invariant_holds()
        machine.call_terminal("t1", "r1", "i1", "c1", "e1", "completed")
        try:
            machine.every_invariant_holds()
        except AssertionError as exc:
            outcomes[spec] = str(exc)
        machine.teardown()
        assert probe.executing == (spec == "reference:memory")
        if spec in outcomes:
            assert probe.first_failure is not None and probe.smallest is not None and len(probe.smallest) == 4
    assert "LIVE-DISPATCH" in outcomes["callsafe.campaigns.mutants:never_execute"]
    assert "reference:memory" not in outcomes


def test_the_competent_machine_completes_calls_and_is_scored_by_the_mutants_invariant() -> None:
    """The competent baseline opens, fills and finishes a call through its rules; never-execute
    then breaks LIVE-DISPATCH (its own invariant, so the test fails), and the reference
    executes the call and passes. A violation of an invariant the mutant does not name is
    noted, not failed on."""
    from callsafe.certify.targets import describe, resolve_target

    competent = bench_module("competent_machine")
    plain = bench_module("plain_machine")
    failed = {}
    for spec, expect in (
        ("callsafe.campaigns.mutants:never_execute", frozenset({"LIVE-DISPATCH"})),
        ("reference:memory", frozenset()),
    ):
        factory = resolve_target(spec)
        probe = plain.PlainProbe(factory, describe(factory, spec).capabilities, budget=60, expect=expect)
        machine = competent.competent_machine(probe)()
        machine.first_turn()
        call = machine.open_call("note", '{"n":1}', [3])
        machine.send_piece(call)
        machine.every_invariant_holds()
        machine.finish(call)
        try:
            machine.every_invariant_holds()
        except AssertionError as exc:
            failed[spec] = str(exc)
        machine.teardown()
        assert probe.executing == (spec == "reference:memory")
    assert "LIVE-DISPATCH" in failed["callsafe.campaigns.mutants:never_execute"]
    assert "reference:memory" not in failed
    probe = plain.PlainProbe(resolve_target("reference:memory"), frozenset(), budget=60, expect=frozenset({"INV-ONCE"}))
    assert probe.counts(frozenset({"INV-LEDGER"})) is False and probe.others == {"INV-LEDGER"}
    assert probe.counts(frozenset({"INV-ONCE", "INV-LEDGER"})) is True


def test_the_first_violation_is_found_among_the_runs_by_its_events() -> None:
    """The recorder matches a trace to the target that ran it: a replay is delivered as the
    events it repeats and a restart is a call, not an event."""
    from callsafe.certify.harness import check_trace
    from callsafe.certify.targets import resolve_target
    from callsafe.model.vocabulary import CallOpened, Replay, Restart, ToolSpec, Trace, TurnStarted

    bugpower = bench_module("bugpower")
    recorder = bugpower._Recorder(resolve_target("reference:memory"))
    events = (TurnStarted("t1", "u1", "acme"), CallOpened("t1", "r1", "i1", "c1", "note"), Restart(), Replay(0, 2))
    trace = Trace(events, {"note": ToolSpec()})
    other = Trace(events[:2], {"note": ToolSpec()})
    check_trace(recorder, other)
    check_trace(recorder, trace)
    ran, first = recorder.first_run_of(trace), recorder.first_run_of(other)
    assert ran is not None and first is not None  # (describe() builds a target too, which receives nothing)
    assert ran is recorder.built[-1] and len(ran.events) == 4 and ran.closed_at < float("inf")
    assert first.events == list(other.events) and first.closed_at < ran.closed_at


def test_the_guard_benchmark_reports_its_cost_over_the_bare_sdk_iteration(tmp_path: Path) -> None:
    """``--only guard``: every protocol whose SDK is installed gets the guard's ratios over
    the SDK's own stream iteration, measured in the same run (the benchmark itself checks,
    outside the clock, that every call ran exactly once with its arguments)."""
    results = tmp_path / "RESULTS.md"
    stdout = _quick("guard", results)
    ratios = _ratios(stdout)
    installed = [p for p, (dist, mod) in bench_module("guard").SDKS.items() if importlib.util.find_spec(mod)]
    assert installed, "the openai and anthropic SDKs are dev dependencies"
    for protocol in installed:
        for variant in ("loop", "guard-memory", "guard-sqlite"):
            assert ratios[f"{protocol}/{variant}"] > 0 and ratios[f"{protocol}/{variant}@cpu"] > 0
    text = results.read_text()
    assert "<!-- bench:guard -->" in text and "callsafe.guard: the cost over the SDK" in text
    assert "command: `" in text


def test_the_whole_certify_process_is_timed_by_its_own_cpu(tmp_path: Path) -> None:
    """The throughput benchmark's whole-process figure: a fresh ``python -m callsafe certify``
    (here the catalog alone, so that it is short), its CPU time its own; a run that does not
    certify stops the benchmark rather than be timed."""
    throughput = bench_module("throughput")
    timing = throughput.whole_process(["reference:memory", "--generators", "catalog"])
    assert timing.cpu > 0 and timing.wall > 0
    with pytest.raises(AssertionError, match="exited"):
        throughput.whole_process(["no-such-target"])


def test_quick_program_rows_run_compares_before_and_after_on_the_same_verdicts(tmp_path: Path) -> None:
    """The guard program over HTTP before and after (one TLS context per process): the
    benchmark fails when any variant's verdicts differ from the first's, so a passing run
    pins that the speed-up changed no verdict."""
    for module in ("openai", "uvicorn"):
        pytest.importorskip(module, reason=f"{module} is not installed (callsafe[sdks])")
    results = tmp_path / "RESULTS.md"
    ratios = _ratios(_quick("program_rows", results))
    assert ratios["verdicts-identical"] == 1.0
    assert ratios["after/before"] > 0 and ratios["framework-traces/defaults-vs-old"] > 0
    text = results.read_text()
    assert "## Program rows over HTTP" in text and "traces/s" in text and "projected seconds" in text
