"""Crash points: the reference implementation over SQLite, killed with SIGKILL at every step
of the decision path, then restarted on the same store and fed the stream again.

Each crash point is a named hook in the child (``tests/reliability_child.py``): after
the terminal event is stored, inside the business validator, between the claim and the
executor, inside the executor before and after its side effect, after it returns and
before its outcome is recorded, in the middle of an operator stop, a user cancel and a
quarantine, and while a restarted process is itself recovering. The executor's side
effect is an fsync'd, append-only journal, so the parent counts what really ran.

After each crash, a fresh process opens the same store and the stream is delivered
again, in two ways:

* **full**: the application re-delivers everything (turns, confirmations, controls): the
  executions must be what the model's oracle says for the scenario with a restart at the
  crash, before or after the event the process was handling (a decision is all or
  nothing), where a call claimed but without a recorded outcome may have run once or not
  at all;
* **wire**: the provider's reconnect re-delivers what it had sent: nothing may run at
  all (what had ended is decided, what was in flight failed at the restart).

Both check: no call key ran twice, a call validated at most once, nothing decided before
the restart changes or becomes a candidate again, every operator action is whole in the
store (its decisions, its turn statuses and its audit row, or none of them), and the
claims without an outcome are exactly the ones the crash interrupted, listed by
``Store.unknown_outcomes()`` and logged by the restarted core.

The guarantee at the executor boundary is **at most once, with an intent record**: the
claim commits before the executor runs and the outcome after it returns; a crash in
between is never repeated and is shown to an operator as an unknown outcome.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import product
from pathlib import Path

import pytest
import reliability_child as child
import skips
from reliability_child import CRASH_POINTS, LIMITS, SCENARIO, TOOLS, ChildConfig, journal_entries, wire_events
from reliability_support import (
    CTX,
    KILLED,
    StoreState,
    consistency_problems,
    execution_counts,
    launch,
    long_variant,
    oracle_problems,
    read_json,
    read_store,
    report_figures,
)

from callsafe.model.vocabulary import CallKey, Event, LogLine, Observation, Restart
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import BindTurn, LedgerEntry, OpenCall, RecordOutcome
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import ClaimResult, Store

DSN = os.environ.get("CALLSAFE_PG_DSN", "")


def _key(turn: str, call: str, response: str = "r1") -> CallKey:
    tenant = "globex" if turn.startswith("g") else "acme"
    return CallKey(tenant, turn, response, f"i-{call}", call)


# The calls each crash point leaves claimed with no outcome: the executor was handed the
# call (or was about to be), and the process died before its return was recorded.
UNKNOWN = {
    "claimed": {_key("t1", "a")},
    "executing": {_key("t1", "a")},
    "executed-not-returned": {_key("t1", "a")},
    "returned-not-recorded": {_key("t1", "a")},
    "outcome-torn": {_key("t1", "a")},
    "other-tenant-claimed": {_key("g1", "a")},
    "confirmed-claimed": {_key("t1", "c")},
    "new-turn-claimed": {_key("t2", "f", "r3")},
    "last-call-executing": {_key("t3", "k", "r5")},
}
# ... and those where the tool's side effect is on disk although no outcome is
RAN_UNRECORDED = {"executed-not-returned", "returned-not-recorded", "outcome-torn"}

FIRST_CRASHES = [name for name in CRASH_POINTS if not name.startswith("recovery-")]


class Run:
    """One store, one journal, and the processes that take turns on them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.store = folder / "store" / "callsafe.sqlite3"
        self.store.parent.mkdir(exist_ok=True)
        # created once, explicitly (what `callsafe store init` does): no process creates it
        SqliteStore(self.store, create=True).close()
        self.journal = folder / "journal"
        self.validations = folder / "validations"
        self.processes = 0

    def process(self, events: list[Event], crash_at: str | None) -> tuple[int, int, Path]:
        """One process on the store: its exit code, the index of the event it was handling
        (-1: none), and where its observations are (if it ended normally)."""
        self.processes += 1
        progress = self.folder / f"progress-{self.processes}"
        observations = self.folder / f"observations-{self.processes}.json"
        cfg = ChildConfig(
            store=self.store,
            journal=self.journal,
            events=events,
            crash_at=crash_at,
            progress=progress,
            observations=observations,
            validations=self.validations,
        )
        code = launch(child.run, cfg)
        lines = progress.read_text().split() if progress.exists() else []
        return code, (int(lines[-1]) if lines else -1), observations

    def killed_after(self, events: list[Event], seconds: float) -> tuple[int, int]:
        """One process on the store, sent SIGKILL by the parent after ``seconds`` (if it
        has not ended by then): its exit code and the index of the event it was handling."""
        self.processes += 1
        progress = self.folder / f"progress-{self.processes}"
        cfg = ChildConfig(
            store=self.store,
            journal=self.journal,
            events=events,
            progress=progress,
            validations=self.validations,
        )
        process = CTX.Process(target=child.run, args=(cfg,))
        process.start()
        process.join(seconds)
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
        process.join(60)
        lines = progress.read_text().split() if progress.exists() else []
        return int(process.exitcode or 0), (int(lines[-1]) if lines else -1)

    def copy(self, folder: Path) -> Run:
        """The same store and journal, as a second world to recover in."""
        other = Run(folder)
        for path in self.store.parent.iterdir():  # the database, its WAL and shared memory
            shutil.copy2(path, other.store.parent / path.name)
        for name in ("journal", "validations"):
            if (self.folder / name).exists():
                shutil.copy2(self.folder / name, other.folder / name)
        other.processes = self.processes
        return other

    def executions(self) -> list[dict[str, object]]:
        return journal_entries(self.journal)

    def validated(self) -> Counter[CallKey]:
        return Counter(CallKey.from_json(e) for e in journal_entries(self.validations))


def _crash(run: Run, events: list[Event], point: str) -> int:
    code, index, _ = run.process(events, point)
    assert code == KILLED, f"crash point {point!r} was never reached (exit code {code})"
    return index


def _candidates(segments: list[tuple[list[Event], int]]) -> list[list[Event]]:
    """The model traces a run of crashed processes may stand for: each process delivered
    ``events[:index]`` and then, atomically, its event ``index`` or not; each crash is a
    restart; the last process delivers the whole scenario."""
    out = []
    for took in product((False, True), repeat=len(segments)):
        trace: list[Event] = []
        for (events, index), whole in zip(segments, took, strict=True):
            trace += events[: index + 1 if whole else max(index, 0)]
            trace.append(Restart())
        out.append(trace + SCENARIO)
    return out


def _check_recovered(
    run: Run, before: StoreState, segments: list[tuple[list[Event], int]], point: str | None, observations: Path
) -> None:
    """What must hold after a full re-delivery recovered from the crashes in ``segments``
    (``point`` None: killed at unplanned instants, so which claims lost their outcome is
    whatever the store says)."""
    after = read_store(run.store)
    assert consistency_problems(after) == []
    entries = run.executions()
    counts = execution_counts(entries)
    assert max(counts.values(), default=0) <= 1, f"a call key ran twice: {counts.most_common(3)}"
    assert max(run.validated().values(), default=0) <= 1, "a call was business-validated twice"
    for key, state in before.decided.items():
        assert after.decided.get(key) == state, f"{key.short()} was {state} before the restart"
    unknown = set(after.unknown)
    assert unknown == set(before.unknown), "the recovery left a claim without an outcome, or recorded one"
    if point is not None:
        assert unknown == UNKNOWN.get(point, set()), "the claims without an outcome are not the interrupted ones"
        for key in unknown:
            assert counts[key] == (1 if point in RAN_UNRECORDED else 0)
    logged = [o["log_line"]["text"] for o in read_json(observations) if "log_line" in o]
    for key in unknown:
        assert any(str(key) in line and "outcome" in line for line in logged), "an unknown outcome was not logged"
    results = [oracle_problems(trace, TOOLS, LIMITS, entries, unknown) for trace in _candidates(segments)]
    assert [] in results, f"no atomic reading of the crash explains the executions: {min(results, key=len)}"


@pytest.mark.parametrize("point", FIRST_CRASHES)
def test_crash_point_then_restart(point: str, tmp_path: Path) -> None:
    run = Run(tmp_path / "crashed")
    index = _crash(run, SCENARIO, point)
    before = read_store(run.store)
    assert consistency_problems(before) == [], f"the crash at {point} left an operator action half written"
    assert set(before.unknown) == UNKNOWN.get(point, set())
    ran_before = execution_counts(run.executions())
    decided_before = set(before.decided)

    # the application re-delivers everything
    full = run.copy(tmp_path / "full")
    code, _, observations = full.process(SCENARIO, None)
    assert code == 0
    _check_recovered(full, before, [(SCENARIO, index)], point, observations)
    validated_again = full.validated() - run.validated()
    assert not set(validated_again) & decided_before, "a decided call became a candidate again"

    # the provider's reconnect re-delivers what it had sent: nothing may run
    wire = run.copy(tmp_path / "wire")
    code, _, _ = wire.process(wire_events(SCENARIO[: index + 1]), None)
    assert code == 0
    assert execution_counts(wire.executions()) == ran_before, "a replay after the restart ran something"
    assert wire.validated() == run.validated(), "a replay after the restart validated something"
    after = read_store(wire.store)
    assert consistency_problems(after) == []
    assert {k: s for k, s in after.decided.items() if k in decided_before} == before.decided


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("stop-torn", "recovery-torn"),  # the restart's own failing of b and x, torn
        ("claimed", "recovery-start"),  # killed again before the restart did anything
        ("executed-not-returned", "confirmed-claimed"),  # two claims interrupted, by two crashes
        ("mid-validation", "stop-first-decision"),
    ],
)
def test_crash_while_recovering(first: str, second: str, tmp_path: Path) -> None:
    run = Run(tmp_path)
    index1 = _crash(run, SCENARIO, first)
    index2 = _crash(run, SCENARIO, second)
    before = read_store(run.store)
    assert consistency_problems(before) == []
    code, _, observations = run.process(SCENARIO, None)
    assert code == 0
    expected = UNKNOWN.get(first, set()) | UNKNOWN.get(second, set())
    after = read_store(run.store)
    assert set(after.unknown) == expected
    counts = execution_counts(run.executions())
    assert max(counts.values()) == 1
    for key, state in before.decided.items():
        assert after.decided.get(key) == state
    results = [
        oracle_problems(trace, TOOLS, LIMITS, run.executions(), expected)
        for trace in _candidates([(SCENARIO, index1), (SCENARIO, index2)])
    ]
    assert [] in results, min(results, key=len)
    logged = [o["log_line"]["text"] for o in read_json(observations) if "log_line" in o]
    assert sum("no outcome recorded" in line for line in logged) == len(expected)


def _random_kills(tmp_path: Path, runs: int, seed: int, min_killed: int = 0) -> Counter[str]:
    """Kill processes at unplanned instants (up to three in a row on one store), recover,
    check; what happened, counted. A kill that lands after the run already ended kills
    nothing, and how often that happens depends on the machine's speed: with
    ``min_killed``, further runs (at most ``4 * runs`` in all) are made until that many
    processes were really killed."""
    rng = random.Random(seed)
    timing = Run(tmp_path / "timing")
    t0 = time.monotonic()
    assert timing.process(SCENARIO, None)[0] == 0
    whole = time.monotonic() - t0  # how long an uninterrupted run takes here
    seen: Counter[str] = Counter()
    n = -1
    while n + 1 < runs or (seen["killed"] < min_killed and n + 1 < 4 * runs):
        n += 1
        run = Run(tmp_path / f"run-{n}")
        segments: list[tuple[list[Event], int]] = []
        for _ in range(rng.randint(1, 3)):
            code, index = run.killed_after(SCENARIO, rng.uniform(0.0, whole))
            if code != KILLED:
                assert code == 0
                seen["ended before the kill"] += 1
                segments.append((SCENARIO, len(SCENARIO)))  # a whole run, then a restart
                break
            segments.append((SCENARIO, index))
            seen["killed"] += 1
        before = read_store(run.store)
        assert consistency_problems(before) == [], f"run {n} (seed {seed}): {consistency_problems(before)}"
        seen["claims left without an outcome"] += len(before.unknown)
        code, _, observations = run.process(SCENARIO, None)
        assert code == 0
        _check_recovered(run, before, segments, None, observations)
    return seen


def test_killed_at_random_instants(tmp_path: Path) -> None:
    """The named points are where a crash is interesting; these are wherever the kill
    lands (in SQLite's commit, between two statements, in Python's own machinery)."""
    seen = _random_kills(tmp_path, runs=8, seed=7, min_killed=4)
    report_figures("random kills", dict(seen))
    assert seen["killed"] >= 4


@long_variant
def test_killed_at_random_instants_long(tmp_path: Path) -> None:
    seed = int(time.time())
    seen = _random_kills(tmp_path, runs=300, seed=seed)
    report_figures("random kills (long)", {"seed": seed, **seen})


def test_every_crash_point_is_on_the_path() -> None:
    """A crash point that names a label the scenario never produces would 'pass' by never
    firing; ``_crash`` asserts each one fires, and this keeps the list honest."""
    assert len(FIRST_CRASHES) >= 25
    assert {h for h, _ in CRASH_POINTS.values()} == {
        "apply",
        "before-commit",
        "committed",
        "claim-before-commit",
        "claimed",
        "validate",
        "execute",
        "executed",
        "start",
    }


# -- the intent record, in every store -------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        opened: Store = SqliteStore(tmp_path / "s.sqlite3", create=True)
        yield opened
        opened.close()
        return
    if not DSN:
        pytest.skip(skips.POSTGRES)
    from callsafe.reference_impl.postgres_store import PostgresStore

    pg = PostgresStore(DSN)
    yield pg
    pg.drop()
    pg.close()


def test_unknown_outcomes_are_claims_without_an_outcome(store: Store) -> None:
    a, b = CallKey("acme", "t1", "r1", "i1", "a"), CallKey("acme", "t1", "r1", "i2", "b")
    store.apply([BindTurn("t1", "u1", "acme", "main", None), OpenCall(a, "book"), OpenCall(b, "book")], 1.0)
    assert store.unknown_outcomes() == []
    for key in (a, b):
        assert store.claim(key, "book", LedgerEntry(key, 1, "completed", "ok", "ok", "dispatched", None), 2.0) == (
            ClaimResult.CLAIMED
        )
    assert store.unknown_outcomes() == [(a, "book"), (b, "book")]
    store.apply([RecordOutcome(a, "returned")], 3.0)
    assert store.unknown_outcomes() == [(b, "book")]
    assert store.load().unknown_outcomes == [b]
    store.apply([RecordOutcome(b, "raised ValueError"), RecordOutcome(b, "returned")], 4.0)  # the first stands
    assert store.unknown_outcomes() == []


def test_a_restarted_core_logs_the_unknown_outcome_and_runs_nothing(tmp_path: Path) -> None:
    """In process: a claim made, then the 'process' (core and driver) dropped before the
    executor returned; the next core on the store logs the key and never runs it."""
    store = SqliteStore(tmp_path / "s.sqlite3", create=True)
    ran: list[CallKey] = []
    seen: list[Observation] = []

    class Died(BaseException):
        """What the process dying inside the executor looks like to this test."""

    def dying(key: CallKey, *args: object) -> None:
        raise Died

    def driver_for(executor: Callable[..., None]) -> Driver:
        core = Core(TOOLS, LIMITS, store.load())
        driver = Driver(
            core,
            store,
            executor=executor,
            business_validator=lambda key, tool, arguments: None,
            observe=seen.append,
            step=lambda: 0,
            clock=lambda: 0.0,
        )
        driver.run(core.start())
        return driver

    events = [SCENARIO[0], *SCENARIO[2:6]]  # t1 and its call a
    driver = driver_for(dying)
    with pytest.raises(Died):
        for event in events:
            driver.run(driver.core.receive(event))
    key = _key("t1", "a")
    assert store.unknown_outcomes() == [(key, "book")]
    driver = driver_for(lambda key, *args: ran.append(key))
    assert [o.text for o in seen if isinstance(o, LogLine)] == [
        f"{key}: dispatched, no outcome recorded: whether the tool ran is unknown"
    ]
    for event in events:
        driver.run(driver.core.receive(event))
    assert ran == [] and store.unknown_outcomes() == [(key, "book")]
    store.close()


def test_an_executor_that_raises_has_a_known_outcome(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3", create=True)
    seen: list[Observation] = []

    def failing(key: CallKey, *args: object) -> None:
        raise RuntimeError("card sk-live-PLANTED declined")  # its text is never recorded

    core = Core(TOOLS, LIMITS, store.load())
    driver = Driver(
        core,
        store,
        executor=failing,
        business_validator=lambda key, tool, arguments: None,
        observe=seen.append,
        step=lambda: 0,
        clock=lambda: 0.0,
    )
    for event in [SCENARIO[0], *SCENARIO[2:6]]:
        driver.run(core.receive(event))
    assert store.unknown_outcomes() == []
    assert [row[5] for row in store.rows("outcomes")] == ["raised RuntimeError"]
    assert not [o for o in seen if "PLANTED" in repr(o)]
    store.close()
