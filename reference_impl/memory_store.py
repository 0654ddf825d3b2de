"""The in-process store: for tests, and for replicas that share one process.

Why it is "durable" at all: a target's ``restart()`` drops the core (all memory of the
implementation) but keeps this object, the way a disk outlives a process. It follows the
same contract as the SQL stores (:mod:`callsafe.reference_impl.store`); a lock makes
:meth:`MemoryStore.apply` a transaction and :meth:`MemoryStore.claim` atomic when several
cores (replicas) on threads share it.

Progress (the one write per fragment) takes no lock: :meth:`MemoryStore.progress` keeps the
call's latest :class:`RecordProgress` with one dictionary store, which is atomic by itself
(keyed by a tuple of strings, so no Python code runs inside it), and :meth:`MemoryStore.load`
reads it into the rows: the call's fragments and bytes as last written, the turn's bytes as
the SQL stores keep them (the largest total written for the turn). A reader on another
thread sees a call's progress before or after a fragment, never half of one. As in the SQL
stores, progress for a call the store holds no row for changes only the turn's bytes (a row
created later starts from nothing).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from callsafe.model.lifecycle import TERMINAL_STATES, State
from callsafe.model.vocabulary import CallKey
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
from callsafe.reference_impl.errors import StoreError
from callsafe.reference_impl.store import CallRow, ClaimResult, Snapshot, TurnRow, ident_of

__all__ = ["MemoryStore"]

# Read once: every read of an enum class attribute is a descriptor call on CPython 3.11.
_COLLECTING: Final = State.COLLECTING
_DISPATCHED: Final = State.DISPATCHED


def _count_turn_bytes(turns: dict[str, TurnRow], fact: RecordProgress) -> None:
    """The turn's bytes as the SQL stores keep them: the largest total written."""
    turn = turns.get(fact.turn)
    if turn is not None and fact.turn_bytes > turn.bytes:
        turn.bytes = fact.turn_bytes


class MemoryStore:
    """Dictionaries behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: dict[str, TurnRow] = {}
        self._current: dict[tuple[str, str], str] = {}  # (tenant, conversation) -> turn
        self._calls: dict[tuple[str, str, str, str], CallRow] = {}
        self._terminal_ids: set[str] = set()
        self._ended: set[tuple[str, str]] = set()
        self._quarantined: dict[str, str] = {}
        self._disabled: dict[str, str] = {}
        self._tenant_stops: list[tuple[str, str, float]] = []
        self._ledger: list[tuple[LedgerEntry, str, float]] = []
        self._audit: list[tuple[str, str, tuple[CallKey, ...], float]] = []
        self._outcomes: dict[tuple[str, str, str, str], str] = {}
        self._progress: dict[tuple[str, str, str, str], RecordProgress] = {}  # call -> its latest
        self._leases: dict[str, tuple[float, float]] = {}  # owner -> (heartbeat, expires)

    # -- Store -------------------------------------------------------------------

    def load(self) -> Snapshot:
        with self._lock:
            turns = {t: replace(row) for t, row in self._turns.items()}
            calls = {i: replace(row) for i, row in self._calls.items()}
            for ident, fact in dict(self._progress).items():  # one copy: progress takes no lock
                row = calls.get(ident)
                if row is not None:  # no row: only the turn's bytes change, as in the SQL stores
                    row.fragments, row.bytes = fact.fragments, fact.call_bytes
                _count_turn_bytes(turns, fact)
            return Snapshot(
                turns=turns,
                current=dict(self._current),
                calls=calls,
                terminal_ids=set(self._terminal_ids),
                ended_responses=set(self._ended),
                quarantined=set(self._quarantined),
                disabled_tools=set(self._disabled),
                unknown_outcomes=[key for key, _ in self._unknown()],
            )

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        # A few times a call: the lock is taken with acquire/release, which costs half of
        # what a ``with`` block does on CPython 3.11 (no __exit__ call with three Nones).
        self._lock.acquire()
        try:
            for fact in facts:
                if isinstance(fact, RecordProgress):
                    self._progress[fact.ident] = fact
                else:
                    self._apply_one(fact, at)
        finally:
            self._lock.release()

    def progress(self, fact: RecordProgress) -> None:
        # Once per fragment: one dictionary store, atomic without the lock (the module
        # docstring); ``load`` reads it into the rows.
        self._progress[fact.ident] = fact

    def _apply_one(self, fact: Fact, at: float) -> None:
        # the facts every call makes come first (each isinstance check costs)
        if isinstance(fact, RecordDisplay):
            turn = self._turns.get(fact.turn)
            if turn is not None:
                turn.shown, turn.stopped, turn.executed = fact.shown, fact.stopped, fact.executed
        elif isinstance(fact, OpenCall):
            ident = ident_of(fact.key)
            if ident not in self._calls:
                self._calls[ident] = CallRow(fact.key, fact.tool, _COLLECTING, owner=fact.owner)
                self._fold_early_progress(ident)
        elif isinstance(fact, RecordTerminalId):
            self._terminal_ids.add(fact.event_id)
        elif isinstance(fact, RecordOutcome):
            self._outcomes.setdefault(ident_of(fact.key), fact.outcome)
        elif isinstance(fact, BindTurn):
            if fact.turn not in self._turns:
                self._turns[fact.turn] = TurnRow(
                    fact.turn, fact.actor, fact.tenant, fact.conversation, fact.traceparent
                )
                self._current[(fact.tenant, fact.conversation)] = fact.turn
        elif isinstance(fact, SetTurnStatus):
            turn = self._turns.get(fact.turn)
            if turn is not None and turn.status == "live":
                turn.status = fact.status
        elif isinstance(fact, RecordDecision):
            ident = ident_of(fact.key)
            row = self._calls.get(ident)
            if row is None:
                self._calls[ident] = CallRow(fact.key, fact.tool, fact.state, fact.entry.fragments)
                self._fold_early_progress(ident)
            elif row.state not in TERMINAL_STATES:
                row.state = fact.state
            self._ledger.append((fact.entry, fact.why, at))
        elif isinstance(fact, RecordLedger):
            self._ledger.append((fact.entry, fact.why, at))
        elif isinstance(fact, EndResponse):
            self._ended.add((fact.turn, fact.response))
        elif isinstance(fact, RecordQuarantine):
            self._quarantined.setdefault(fact.response, fact.reason)
        elif isinstance(fact, RecordDisabledTool):
            self._disabled.setdefault(fact.tool, fact.reason)
        elif isinstance(fact, RecordTenantStop):
            self._tenant_stops.append((fact.tenant, fact.reason, at))
            for turn in self._turns.values():  # also the turns another replica bound
                if turn.tenant == fact.tenant and turn.status == "live":
                    turn.status = "stopped"
        elif isinstance(fact, RecordAudit):
            self._audit.append((fact.action, fact.reason, fact.keys, at))
        else:  # pragma: no cover - every fact type is handled above
            raise StoreError(f"unknown fact {type(fact).__name__}")

    def _fold_early_progress(self, ident: tuple[str, str, str, str]) -> None:
        """A call row was just created: progress written before it existed changed only the
        turn's bytes (the SQL stores' UPDATE of a missing call row changes nothing)."""
        early = self._progress.pop(ident, None)
        if early is not None:
            _count_turn_bytes(self._turns, early)

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        with self._lock:
            row = self._calls.get(ident_of(key))
            if row is None:
                return ClaimResult.BLOCKED
            if row.state is _DISPATCHED:
                return ClaimResult.TAKEN
            turn = self._turns.get(key.turn)
            if (
                row.state in TERMINAL_STATES
                or turn is None
                or turn.status != "live"
                or self._current.get((turn.tenant, turn.conversation)) != key.turn
                or key.response in self._quarantined
                or tool in self._disabled
            ):
                return ClaimResult.BLOCKED
            row.state = _DISPATCHED
            self._ledger.append((entry, "dispatched", at))
            return ClaimResult.CLAIMED

    # -- leases ------------------------------------------------------------------

    def renew_lease(self, owner: str, ttl: float, now: float) -> bool:
        with self._lock:
            before = self._leases.get(owner)
            self._leases[owner] = (now, now + ttl)
        return before is not None and before[1] > now

    def release_lease(self, owner: str) -> None:
        with self._lock:
            self._leases.pop(owner, None)

    def adopt_orphans(self, owner: str, now: float, *, own: bool) -> list[CallRow]:
        with self._lock:
            adopted: list[CallRow] = []
            for row in self._calls.values():
                if row.state in TERMINAL_STATES:
                    continue
                if row.owner is None or row.owner == owner:
                    if not own:
                        continue
                else:
                    lease = self._leases.get(row.owner)
                    if lease is not None and lease[1] > now:
                        continue
                row.owner = owner
                adopted.append(replace(row))
            for row in adopted:  # the progress written since, as load() reads it
                fact = self._progress.get(ident_of(row.key))
                if fact is not None:
                    row.fragments, row.bytes = fact.fragments, fact.call_bytes
            return adopted

    def leases(self) -> list[tuple[str, float, float]]:
        with self._lock:
            return sorted((owner, beat, expires) for owner, (beat, expires) in self._leases.items())

    def ledger(self) -> list[tuple[LedgerEntry, str]]:
        with self._lock:
            return [(entry, why) for entry, why, _ in self._ledger]

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        with self._lock:
            return [(action, reason, keys) for action, reason, keys, _ in self._audit]

    def unknown_outcomes(self) -> list[tuple[CallKey, str]]:
        with self._lock:
            return self._unknown()

    def _unknown(self) -> list[tuple[CallKey, str]]:
        return sorted(
            (row.key, row.tool or "")
            for ident, row in self._calls.items()
            if row.state is _DISPATCHED and ident not in self._outcomes
        )

    def tenant_stops(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(tenant, reason) for tenant, reason, _ in self._tenant_stops]

    def close(self) -> None:
        """Nothing to release: the object plays the disk that outlives a process (and may
        be shared by several replicas)."""
