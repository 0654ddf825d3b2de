"""The process that the crash and race tests kill: the reference implementation over one
SQLite (or PostgreSQL) store, with named crash points, and an executor whose side effect
is an append-only, fsync'd journal that the parent reads to count executions.

Why a process of its own: a crash is ``SIGKILL``, which no ``try`` or ``finally`` sees;
only a real process dying at a real instant shows what the store keeps. The parent
(``tests/test_reliability_crash.py``, ``tests/test_reliability_races.py``) starts this
module's :func:`run` in a child (``multiprocessing``, fork where the platform has it), or
it runs as a script::

    CALLSAFE_CRASH_AT=claimed python tests/reliability_child.py STORE JOURNAL

Crash points are *named hooks*: the instrumented store, business validator and executor
call :meth:`CrashPoints.hit` with a hook name and the labels of what they are doing (the
facts of a transaction, the call being validated, claimed or executed); when the armed
point's hook and label match, the process kills itself with ``os.kill(os.getpid(),
SIGKILL)``: no cleanup, no flush, no rollback but the database's own.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callsafe.model.system import business_check
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    Event,
    Fragment,
    Limits,
    Observation,
    QuarantineResponse,
    StopTenant,
    ToolSpec,
    TurnStarted,
    observation_to_json,
)
from callsafe.providers.base import WIRE_EVENTS
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import (
    BindTurn,
    EndResponse,
    Fact,
    LedgerEntry,
    OpenCall,
    RecordAudit,
    RecordDecision,
    RecordDisabledTool,
    RecordDisplay,
    RecordLedger,
    RecordOutcome,
    RecordProgress,
    RecordQuarantine,
    RecordTenantStop,
    RecordTerminalId,
    SetTurnStatus,
)
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import ClaimResult

CRASH_ENV = "CALLSAFE_CRASH_AT"

TOOLS: dict[str, ToolSpec] = {
    "book": ToolSpec(schema={"type": "object", "required": ["day"], "properties": {"day": {"type": "string"}}}),
    "pay": ToolSpec(schema={"type": "object", "required": ["amount"]}, business={"max": {"amount": 100}}),
    "confirm_pay": ToolSpec(schema={"type": "object", "required": ["amount"]}, confirm=True),
}
LIMITS = Limits()


# -- the scenario -----------------------------------------------------------------------


def call(turn: str, response: str, cid: str, tool: str, text: str, *, parts: int = 2) -> list[Event]:
    """Open, ``parts`` fragments and a completed terminal event for one call."""
    size = max(1, -(-len(text) // parts))
    chunks = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    item = f"i-{cid}"
    return [
        CallOpened(turn=turn, response=response, item=item, call=cid, tool=tool),
        *[
            Fragment(turn=turn, response=response, item=item, call=cid, position=i, text=c)
            for i, c in enumerate(chunks)
        ],
        CallTerminal(turn=turn, response=response, item=item, call=cid, event_id=f"ev-{turn}-{response}-{cid}"),
    ]


def _scenario() -> list[Event]:
    """Every step of the decision path, twice over: two tenants whose protocol ids collide
    (response ``r1``, item ``i-a``, call ``a`` in both), a business rejection, malformed
    data, a confirmation, an operator stop of one tenant while both have calls in flight,
    a call opened after the stop, a new turn, a user cancel, a quarantine."""
    b = call("t1", "r2", "b", "book", '{"day":"Thu"}')
    x = call("g1", "r2", "x", "book", '{"day":"Fri"}')
    h = call("t2", "r3", "h", "book", '{"day":"Sat"}')
    q = call("t3", "r4", "q", "book", '{"day":"Sun"}')
    return [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        TurnStarted(turn="g1", actor="u9", tenant="globex"),
        *call("t1", "r1", "a", "book", '{"day":"Tue"}'),  # runs
        *call("g1", "r1", "a", "book", '{"day":"Wed"}'),  # the same protocol ids, the other tenant: runs
        *call("t1", "r1", "p", "pay", '{"amount":500}'),  # business rule rejects it
        *call("t1", "r1", "m", "book", '{"day":'),  # malformed
        *call("t1", "r1", "c", "confirm_pay", '{"amount":5}'),  # waits for a confirmation
        Confirm(turn="t1", response="r1", item="i-c", call="c"),  # then runs
        *b[:2],  # acme: in flight
        *x[:2],  # globex: in flight
        StopTenant(tenant="acme", reason="incident 7"),  # b cancelled; globex untouched
        *b[2:],  # a late terminal event: refused
        *call("t1", "r2", "e", "book", '{"day":"Mon"}'),  # opened after the stop: refused
        *x[2:],  # globex: runs
        TurnStarted(turn="t2", actor="u1", tenant="acme"),  # a fresh turn after the stop
        *call("t2", "r3", "f", "book", '{"day":"Tue"}'),  # runs
        *h[:2],
        CancelTurn(turn="t2"),  # the user says stop: h cancelled
        *h[2:],
        TurnStarted(turn="t3", actor="u1", tenant="acme"),
        *q[:2],
        QuarantineResponse(response="r4", reason="review 42"),  # q cancelled
        *q[2:],
        *call("t3", "r5", "k", "book", '{"day":"Wed"}'),  # runs
    ]


SCENARIO: list[Event] = _scenario()


def wire_events(events: Sequence[Event]) -> list[Event]:
    """What a provider re-delivers when the client reconnects: the wire's own events,
    none of the application's (turns, confirmations, user and operator controls)."""
    return [e for e in events if isinstance(e, WIRE_EVENTS)]


# -- crash points ------------------------------------------------------------------------

# name -> (hook, label). Hooks: "apply" (a transaction of facts is about to begin),
# "before-commit" (its statements ran, COMMIT has not), "committed", "claim-before-commit",
# "claimed" (the claim committed and won; the executor has not been called), "validate"
# (inside the business validator), "execute" (inside the executor, before its side
# effect), "executed" (the side effect is on disk; the executor has not returned), "start"
# (a core is about to perform its start effects).
CRASH_POINTS: dict[str, tuple[str, str]] = {
    "open-committed": ("committed", "open:t1/a"),
    "fragment-committed": ("committed", "progress:t1/a:1"),
    "terminal-torn": ("before-commit", "terminal:ev-t1-r1-a"),
    "terminal-stored": ("committed", "terminal:ev-t1-r1-a"),
    "mid-validation": ("validate", "t1/a"),
    "claim-torn": ("claim-before-commit", "t1/a"),
    "claimed": ("claimed", "t1/a"),
    "executing": ("execute", "t1/a"),
    "executed-not-returned": ("executed", "t1/a"),
    "returned-not-recorded": ("apply", "outcome:t1/a"),
    "outcome-torn": ("before-commit", "outcome:t1/a"),
    "outcome-recorded": ("committed", "outcome:t1/a"),
    "other-tenant-mid-validation": ("validate", "g1/a"),
    "other-tenant-claimed": ("claimed", "g1/a"),
    "business-rejected": ("committed", "decision:t1/p"),
    "parse-failed": ("committed", "decision:t1/m"),
    "confirmation-requested": ("committed", "ledger:t1/c:awaiting_confirmation"),
    "confirmed-claimed": ("claimed", "t1/c"),
    "stop-torn": ("before-commit", "tenant-stop:acme"),
    "stop-first-decision": ("committed", "decision:t1/b"),
    "stop-audited": ("committed", "audit:stop_tenant"),
    "refused-after-stop": ("committed", "decision:t1/e"),
    "stop-other-tenant-mid-validation": ("validate", "g1/x"),
    "new-turn-claimed": ("claimed", "t2/f"),
    "cancel-torn": ("before-commit", "turn:t2:cancelled"),
    "cancel-first-decision": ("committed", "decision:t2/h"),
    "quarantine-torn": ("before-commit", "quarantine:r4"),
    "quarantine-audited": ("committed", "audit:quarantine_response"),
    "last-call-executing": ("execute", "t3/k"),
    # used by a second process, while it recovers from a first crash
    "recovery-torn": ("before-commit", "decision:t1/b"),
    "recovery-start": ("start", ""),
}


class CrashPoints:
    """The armed crash point of this process (none: never crash)."""

    def __init__(self, armed: str | None) -> None:
        if armed and armed not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {armed!r}")
        self.armed = CRASH_POINTS[armed] if armed else None

    def hit(self, hook: str, labels: Sequence[str]) -> None:
        """Die here if the armed point is this hook with one of these labels."""
        if self.armed is not None and self.armed[0] == hook and self.armed[1] in labels:
            os.kill(os.getpid(), signal.SIGKILL)


def labels_of(facts: Sequence[Fact]) -> list[str]:
    """What a transaction does, in the words of :data:`CRASH_POINTS`."""
    out: list[str] = []
    for f in facts:
        if isinstance(f, RecordTerminalId):
            out.append(f"terminal:{f.event_id}")
        elif isinstance(f, OpenCall):
            out.append(f"open:{f.key.short()}")
        elif isinstance(f, RecordProgress):
            out.append(f"progress:{f.key.short()}:{f.fragments}")
        elif isinstance(f, RecordDecision):
            out += [f"decision:{f.key.short()}", f"decision:{f.key.short()}:{f.state.value}"]
        elif isinstance(f, RecordLedger):
            out.append(f"ledger:{f.entry.key.short()}:{f.entry.decision}")
        elif isinstance(f, RecordOutcome):
            out.append(f"outcome:{f.key.short()}")
        elif isinstance(f, RecordAudit):
            out.append(f"audit:{f.action}")
        elif isinstance(f, RecordTenantStop):
            out.append(f"tenant-stop:{f.tenant}")
        elif isinstance(f, RecordQuarantine):
            out.append(f"quarantine:{f.response}")
        elif isinstance(f, RecordDisabledTool):
            out.append(f"disable:{f.tool}")
        elif isinstance(f, SetTurnStatus):
            out.append(f"turn:{f.turn}:{f.status}")
        elif isinstance(f, BindTurn):
            out.append(f"bind:{f.turn}")
        elif isinstance(f, EndResponse):
            out.append(f"end:{f.turn}/{f.response}")
        elif isinstance(f, RecordDisplay):
            out.append(f"display:{f.turn}:{f.shown}")
    return out


class CrashingSqliteStore(SqliteStore):
    """The SQLite store, with the crash hooks around each transaction and the claim."""

    def __init__(self, path: str | Path, points: CrashPoints, **options: Any) -> None:
        self._points = points
        self._doing: list[str] = []
        super().__init__(path, **options)

    @contextmanager
    def _transaction(self, facts: Sequence[Fact] | None = None) -> Iterator[None]:
        with super()._transaction(facts):
            yield
            self._points.hit("before-commit" if facts is not None else "claim-before-commit", self._doing)

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        self._doing = labels_of(facts)
        self._points.hit("apply", self._doing)
        super().apply(facts, at)
        self._points.hit("committed", self._doing)
        self._doing = []

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        self._doing = [key.short()]
        result = super().claim(key, tool, entry, at)
        if result is ClaimResult.CLAIMED:
            self._points.hit("claimed", self._doing)
        self._doing = []
        return result


# -- the executor's side effect ------------------------------------------------------------


def append_line(path: Path, line: str) -> None:
    """One line, appended and on disk before this returns (``O_APPEND``: lines of several
    processes never interleave)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def journal_entries(path: Path) -> list[dict[str, Any]]:
    """Every execution the journal holds."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# -- one child --------------------------------------------------------------------------


@dataclass
class ChildConfig:
    store: Path
    journal: Path
    events: list[Event]
    crash_at: str | None = None
    progress: Path | None = None  # index of the event being delivered, one line each
    observations: Path | None = None  # what the child observed, written when it ends normally
    validations: Path | None = None  # every business validation, one line each
    synchronous: str = "adaptive"
    create: bool = False  # the first process of a store creates it; a restart must find it
    witness: Path | None = None  # where the store's witness is (default: beside it)
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run(cfg: ChildConfig) -> None:
    """Start a core on the store (a restart, if the store has data), perform its start
    effects, deliver ``cfg.events``; die at the armed crash point."""
    points = CrashPoints(cfg.crash_at if cfg.crash_at is not None else os.environ.get(CRASH_ENV))
    store = CrashingSqliteStore(
        cfg.store, points, synchronous=cfg.synchronous, create=cfg.create, witness=cfg.witness or True
    )
    observations: list[Observation] = []
    step = [0]
    pid = os.getpid()

    def execute(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        points.hit("execute", [key.short()])
        record = {"key": key.to_json(), "actor": actor, "tool": tool, "arguments": arguments, "pid": pid}
        append_line(cfg.journal, json.dumps(record, sort_keys=True))
        points.hit("executed", [key.short()])

    def validate(key: CallKey, tool: str, arguments: Any) -> str | None:
        if cfg.validations is not None:
            append_line(cfg.validations, json.dumps(key.to_json(), sort_keys=True))
        points.hit("validate", [key.short()])
        spec = TOOLS.get(tool)
        return business_check(spec, arguments) if spec is not None else "unknown tool"

    core = Core(TOOLS, LIMITS, store.load())
    driver = Driver(
        core,
        store,
        executor=execute,
        business_validator=validate,
        observe=observations.append,
        step=lambda: step[0],
        clock=time.time,
    )
    progress = os.open(cfg.progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if cfg.progress else None
    points.hit("start", [""])
    driver.run(core.start())
    for i, event in enumerate(cfg.events):
        step[0] = i
        if progress is not None:
            os.write(progress, f"{i}\n".encode())  # the page cache survives SIGKILL: no fsync needed
        driver.run(core.receive(event))
    if progress is not None:
        os.close(progress)
    if cfg.extra.get("kill_before_close"):  # every decision still in the -wal (no checkpoint)
        os.kill(os.getpid(), signal.SIGKILL)
    store.close()
    if cfg.observations is not None:
        cfg.observations.write_text(json.dumps([observation_to_json(o) for o in observations]), encoding="utf-8")


if __name__ == "__main__":  # python tests/reliability_child.py STORE JOURNAL [--wire] [--create]
    args = sys.argv[1:]
    events = wire_events(SCENARIO) if "--wire" in args else SCENARIO
    run(ChildConfig(store=Path(args[0]), journal=Path(args[1]), events=events, create="--create" in args))


# -- races: several processes on one store --------------------------------------------------


@dataclass
class RaceConfig:
    """One replica of a race: its streams, trial by trial, and where it reports."""

    worker: int
    streams: list[list[Event]]  # trial -> what this replica receives
    journal: Path
    report: Path
    barrier: Any  # a multiprocessing.Barrier shared by the replicas
    store: Path | None = None  # SQLite file
    dsn: str | None = None  # or PostgreSQL, in ``namespace``
    namespace: str | None = None
    tools: dict[str, ToolSpec] = field(default_factory=lambda: dict(TOOLS))


def race_worker(cfg: RaceConfig) -> None:
    """Deliver each trial's stream after all replicas reached the trial's barrier; record
    every claim (its monotonic start and end, and its result) and when each control this
    replica received was durable. A ``Restart`` in a stream rebuilds the core from the
    store, as a process restart would."""
    from callsafe.model.vocabulary import Restart
    from callsafe.reference_impl.store import Store

    claims: list[tuple[int, str, int, int, str]] = []
    controls: list[tuple[int, str, int]] = []
    trial = [0]

    def timed(store: Any) -> Any:
        inner = store.claim

        def claim(key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
            t0 = time.monotonic_ns()
            result: ClaimResult = inner(key, tool, entry, at)
            claims.append((trial[0], key.short(), t0, time.monotonic_ns(), result.value))
            return result

        store.claim = claim
        return store

    def open_store() -> Store:
        if cfg.store is not None:
            return timed(SqliteStore(cfg.store, create=True))  # type: ignore[no-any-return]
        from callsafe.reference_impl.postgres_store import PostgresStore

        assert cfg.dsn is not None
        return timed(PostgresStore(cfg.dsn, cfg.namespace, create=True))  # type: ignore[no-any-return]

    def execute(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        record = {"key": key.to_json(), "actor": actor, "tool": tool, "arguments": arguments, "pid": os.getpid()}
        fd = os.open(cfg.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:  # no fsync: nothing crashes here, and O_APPEND keeps the replicas' lines whole
            os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)

    def validate(key: CallKey, tool: str, arguments: Any) -> str | None:
        spec = cfg.tools.get(tool)
        return business_check(spec, arguments) if spec is not None else "unknown tool"

    def boot(store: Store) -> Driver:
        core = Core(cfg.tools, LIMITS, store.load())
        driver = Driver(
            core,
            store,
            executor=execute,
            business_validator=validate,
            observe=lambda obs: None,
            step=lambda: 0,
            clock=time.time,
        )
        driver.run(core.start())
        return driver

    store = open_store()
    driver = boot(store)
    for i, stream in enumerate(cfg.streams):
        trial[0] = i
        cfg.barrier.wait(timeout=120)
        for event in stream:
            if isinstance(event, Restart):
                store.close()
                store = open_store()
                driver = boot(store)
                continue
            driver.run(driver.core.receive(event))
            if isinstance(event, (StopTenant, CancelTurn, QuarantineResponse)) or (
                isinstance(event, TurnStarted) and event.turn.endswith("-next")
            ):
                controls.append((i, event.kind, time.monotonic_ns()))  # its facts are committed
    store.close()
    cfg.report.write_text(json.dumps({"claims": claims, "controls": controls}), encoding="utf-8")
