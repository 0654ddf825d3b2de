"""A store that fails on the harness's word: how the reference target takes
:class:`~callsafe.model.vocabulary.StoreFault` events (the ``store_faults`` capability).

Why a wrapper and not a fault mode inside each store: what a certification exercises is
the driver's handling of a failed write (its retries, its resync after a failure that
stays, a claim whose answer was lost), which is the same over every store. The wrapper
raises the store's own typed error (:class:`~callsafe.reference_impl.errors.StoreError`,
``LOCKED``: a lock held by another process, the fault a retry is for) from exactly the
operations the driver performs while one input is delivered, and is taken away when that
delivery returns. The durable stores' real faults (a full disk, a lost connection, a
permission) are the reliability tests' (``tests/test_reliability_store_faults.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from callsafe.model.vocabulary import CallKey
from callsafe.reference_impl.effects import Fact, LedgerEntry, RecordProgress
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.store import ClaimResult, Snapshot, Store

__all__ = ["FaultPlan", "FaultyStore"]


@dataclass
class FaultPlan:
    """What fails while one input is delivered: every operation (``lasting``), or
    ``failures`` operations in a row after the first ``after`` ones."""

    lasting: bool
    after: int
    failures: int

    def fails(self) -> bool:
        """Whether the store operation about to run fails (and count it)."""
        if self.lasting:
            return True
        if self.after > 0:
            self.after -= 1
            return False
        if self.failures > 0:
            self.failures -= 1
            return True
        return False


class FaultyStore:
    """``store`` with the operations a driver performs failing as ``plan`` says."""

    def __init__(self, store: Store, plan: FaultPlan) -> None:
        self.inner = store
        self.plan = plan

    def _gate(self, operation: str) -> None:
        if self.plan.fails():
            raise StoreError(
                f"{operation}: the store is locked by another process (a fault the harness made)", StoreFault.LOCKED
            )

    def load(self) -> Snapshot:
        self._gate("load")
        return self.inner.load()

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        self._gate("write")
        self.inner.apply(facts, at)

    def progress(self, fact: RecordProgress) -> None:
        self._gate("write")
        self.inner.progress(fact)

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        self._gate("claim")
        return self.inner.claim(key, tool, entry, at)

    def ledger(self) -> list[tuple[LedgerEntry, str]]:
        return self.inner.ledger()

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        return self.inner.audit()

    def unknown_outcomes(self) -> list[tuple[CallKey, str]]:
        return self.inner.unknown_outcomes()

    def close(self) -> None:
        self.inner.close()
