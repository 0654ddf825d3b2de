"""After a failed write the core and the store agree (issue 23, item 3): the driver retries
a transient fault within its bound, and for a fault that stays it takes the store's word
back (``Core.resync``), so nothing is left undecided in memory; a stale driver performs
nothing decided on memory the store never confirmed.

A store that fails on demand (``Flaky``) stands in for the disk, the lock and the network
(``tests/test_reliability_store_faults.py`` has the real ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    Limits,
    LogLine,
    Observation,
    StatusShown,
    ToolSpec,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.effects import Fact, LedgerEntry, RecordProgress
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.store import ClaimResult

TOOLS = {"book": ToolSpec(schema={"type": "object", "required": ["day"]})}
KEY = CallKey("acme", "t1", "r1", "i1", "a")


def _call(cid: str = "a", text: str = '{"day":"Tue"}') -> list[Event]:
    return [
        CallOpened(turn="t1", response="r1", item=f"i-{cid}", call=cid, tool="book"),
        Fragment(turn="t1", response="r1", item=f"i-{cid}", call=cid, position=0, text=text),
        CallTerminal(turn="t1", response="r1", item=f"i-{cid}", call=cid, event_id=f"e-{cid}"),
    ]


class Flaky(MemoryStore):
    """A memory store whose next ``failures`` writes (apply or claim) fail with ``fault``;
    with ``commit_then_fail`` a claim commits before its answer is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.fault = StoreFault.LOCKED
        self.commit_then_fail = False
        self.reads_fail = False
        self.only: str | None = None  # fail only this kind of write ("apply" or "claim")
        self.attempts = 0

    def _maybe_fail(self, kind: str) -> None:
        self.attempts += 1
        if self.failures and self.only in (None, kind):
            self.failures -= 1
            raise StoreError(f"injected: {self.fault}", self.fault)

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        self._maybe_fail("apply")
        super().apply(facts, at)

    def progress(self, fact: RecordProgress) -> None:
        self._maybe_fail("apply")
        super().progress(fact)

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        if self.commit_then_fail and self.failures:
            super().claim(key, tool, entry, at)
        self._maybe_fail("claim")
        return super().claim(key, tool, entry, at)

    def load(self) -> Any:
        if self.reads_fail:
            raise StoreError("injected: the store cannot be read", StoreFault.CONNECTION_LOST)
        return super().load()


class Rig:
    def __init__(self, store: Flaky, retries: int = 3) -> None:
        self.store = store
        self.ran: list[CallKey] = []
        self.seen: list[Observation] = []
        self.sleeps: list[float] = []
        self.core = Core(TOOLS, Limits(), store.load())
        self.driver = Driver(
            self.core,
            store,
            executor=lambda key, *rest: self.ran.append(key),
            business_validator=lambda key, tool, arguments: None,
            observe=self.seen.append,
            step=lambda: 0,
            clock=lambda: 0.0,
            retries=retries,
            retry_delay=0.01,
            sleep=self.sleeps.append,
        )

    def deliver(self, events: Sequence[Event]) -> list[StoreError]:
        errors = []
        for event in events:
            try:
                self.driver.receive(event)
            except StoreError as exc:
                errors.append(exc)
        return errors

    def state(self, cid: str = "a") -> tuple[State | None, State | None]:
        """(core, store) state of a call."""
        key = CallKey("acme", "t1", "r1", f"i-{cid}", cid)
        view = self.core.view(key)
        row = self.store.load().calls.get((key.turn, key.response, key.item, key.call))
        return (view.state if view else None, row.state if row else None)


def test_a_transient_fault_is_retried_within_the_bound() -> None:
    store = Flaky()
    rig = Rig(store)
    rig.deliver([TurnStarted(turn="t1", actor="u1", tenant="acme")])
    store.failures = 3  # the bound: 3 retries after the first attempt
    assert rig.deliver(_call()) == []
    assert rig.sleeps == [0.01, 0.02, 0.04]  # doubling
    assert [k.call for k in rig.ran] == ["a"]


def test_a_fault_past_the_bound_fails_the_call_in_memory_and_in_the_store() -> None:
    store = Flaky()
    rig = Rig(store)
    rig.deliver([TurnStarted(turn="t1", actor="u1", tenant="acme"), *_call()[:2]])
    store.failures = 4  # one more than the bound: the terminal event's write fails
    errors = rig.deliver(_call()[2:])
    assert [e.fault for e in errors] == [StoreFault.LOCKED]
    assert store.attempts >= 5
    # the store never got the terminal event; the core took its word back and failed the
    # call in flight, as a restart does: both say failed, nothing runs, the status says retry
    assert rig.state() == (State.FAILED, State.FAILED)
    assert rig.ran == []
    assert StatusShown(0, "t1", "retry") in rig.seen
    assert any(isinstance(o, LogLine) and "store failed (locked)" in o.text for o in rig.seen)
    rig.deliver(_call())  # the stream again: the decided call stays decided
    assert rig.ran == []


def test_a_lasting_fault_is_not_retried() -> None:
    store = Flaky()
    rig = Rig(store)
    rig.deliver([TurnStarted(turn="t1", actor="u1", tenant="acme")])
    store.failures, store.fault = 1, StoreFault.DISK_FULL
    errors = rig.deliver(_call()[:1])
    assert [e.fault for e in errors] == [StoreFault.DISK_FULL] and rig.sleeps == []
    assert rig.state() == (None, None)  # the open never reached the store, and the core forgot it
    assert rig.deliver(_call()[1:]) == []  # its fragment and terminal: a call never opened fails
    assert rig.state()[1] is State.FAILED and rig.ran == []


def test_a_store_that_cannot_be_read_makes_the_driver_stale_until_it_returns() -> None:
    store = Flaky()
    rig = Rig(store)
    rig.deliver([TurnStarted(turn="t1", actor="u1", tenant="acme"), *_call()[:2]])
    store.failures, store.fault, store.reads_fail = 1, StoreFault.CONNECTION_LOST, True
    rig.driver._retries = 0
    assert [e.fault for e in rig.deliver(_call()[2:])] == [StoreFault.CONNECTION_LOST]
    assert rig.driver.stale
    # while stale, nothing decided on unconfirmed memory is performed
    with pytest.raises(StoreError) as still:
        rig.driver.run(rig.core.receive(_call("b")[0]))
    assert still.value.fault is StoreFault.CONNECTION_LOST
    store.reads_fail = False
    with pytest.raises(StoreError, match="not applied"):  # run(): the input was decided on stale memory
        rig.driver.run(rig.core.receive(_call("d")[0]))
    assert not rig.driver.stale
    assert rig.state() == (State.FAILED, State.FAILED)  # call a was in flight: failed, in both
    assert rig.deliver(_call("c")) == []  # receive(): takes the store's word first, then applies
    assert [k.call for k in rig.ran] == ["c"]


def test_a_claim_whose_answer_was_lost_is_not_run_again() -> None:
    """The claim committed, its answer was lost (a connection dropped in COMMIT): the
    retry finds it dispatched and does not run it; the store lists it without outcome."""
    store = Flaky()
    rig = Rig(store)
    rig.deliver([TurnStarted(turn="t1", actor="u1", tenant="acme")])
    store.failures, store.fault, store.commit_then_fail = 1, StoreFault.CONNECTION_LOST, True
    store.only = "claim"
    assert rig.deliver(_call()) == []
    assert rig.ran == []
    assert [k.call for k, _ in store.unknown_outcomes()] == ["a"]
    assert any(isinstance(o, LogLine) and "claim answer lost" in o.text for o in rig.seen)
