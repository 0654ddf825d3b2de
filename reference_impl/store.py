"""The durable store's interface, and what the core reads back from it after a restart.

Why an interface: the core decides, the store remembers. Three implementations share
this contract: :mod:`~callsafe.reference_impl.memory_store` (tests; survives
``restart()`` because the object outlives the core), :mod:`~callsafe.reference_impl.sqlite_store`
(the default) and :mod:`~callsafe.reference_impl.postgres_store` (several replicas sharing
one ledger).

The contract:

* :meth:`Store.apply` writes a batch of facts in **one transaction** (all or nothing);
  the first terminal decision recorded for a call wins, later ones leave it alone.
* :meth:`Store.claim` is the dispatch claim: **one atomic step** that moves the call to
  ``dispatched`` only if it is not terminal yet, its turn is still live and current, its
  response is not quarantined and its tool is not disabled *in the store*; it writes the
  ledger row in the same transaction. It answers :data:`ClaimResult.CLAIMED` to exactly
  one claimer, ever.
* a tenant stop (:class:`~callsafe.reference_impl.effects.RecordTenantStop`) closes every
  live turn of the tenant *in the store*, and a turn status change applies to whatever
  turn the store holds: a control delivered to one replica reaches the turns that other
  replicas bound, through the claim's re-check.
* :meth:`Store.load` returns the :class:`Snapshot` a restarted core starts from.
* opening a store never creates one (``create=True`` does, at a first start): a durable
  store that is missing, empty, another store's, or behind the decisions its witness
  (:mod:`~callsafe.reference_impl.witness`) saw committed is refused with
  :class:`~callsafe.reference_impl.errors.StoreLost`; a store that started empty would run
  every call again. Every failure is a ``StoreError`` whose ``fault`` names the cause.
* leases (:mod:`~callsafe.reference_impl.leases`; :class:`LeaseStore`, optional):
  :meth:`LeaseStore.renew_lease` writes an
  instance's lease row (heartbeat and expiry), :meth:`LeaseStore.release_lease` removes it, and
  :meth:`LeaseStore.adopt_orphans` is the **one atomic step** that makes an instance the owner
  of the open calls whose owner's lease has expired (or is itself, at its start): each
  such call is adopted by exactly one instance, which then fails it. A live replica's
  calls are never adopted.
* :meth:`Store.unknown_outcomes` lists the calls whose claim is durable but whose
  :class:`~callsafe.reference_impl.effects.RecordOutcome` is not: the executor boundary
  is *at most once with an intent record* (the claim commits before the executor runs,
  the outcome after it returns), so a process that dies in between leaves exactly these
  rows, and only a person (or the tool's own idempotency) can tell whether the tool ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeGuard

from callsafe.model.lifecycle import State
from callsafe.model.vocabulary import CallKey
from callsafe.reference_impl.effects import Fact, LedgerEntry, RecordProgress

__all__ = ["CallRow", "ClaimResult", "Ident", "LeaseStore", "Snapshot", "Store", "TurnRow", "holds_leases", "ident_of"]

Ident = tuple[str, str, str, str]  # (turn, response, item, call): the tenant follows from the turn


def ident_of(key: CallKey) -> Ident:
    return (key.turn, key.response, key.item, key.call)


class ClaimResult(StrEnum):
    CLAIMED = "claimed"  # this claimer won: run the tool
    TAKEN = "taken"  # another claimer (replica) already dispatched it
    BLOCKED = "blocked"  # the store says no: decided otherwise, or stopped meanwhile


@dataclass
class TurnRow:
    turn: str
    actor: str
    tenant: str
    conversation: str
    traceparent: str | None
    status: str = "live"
    bytes: int = 0
    shown: str = ""
    stopped: bool = False
    executed: bool = False


@dataclass
class CallRow:
    key: CallKey
    tool: str | None
    state: State
    fragments: int = 0
    bytes: int = 0
    owner: str | None = None  # the lease identity of the core that opened it


@dataclass
class Snapshot:
    """Everything durable, as a restarted core needs it."""

    turns: dict[str, TurnRow] = field(default_factory=dict)
    current: dict[tuple[str, str], str] = field(default_factory=dict)  # (tenant, conversation) -> turn
    calls: dict[Ident, CallRow] = field(default_factory=dict)
    terminal_ids: set[str] = field(default_factory=set)
    ended_responses: set[tuple[str, str]] = field(default_factory=set)
    quarantined: set[str] = field(default_factory=set)
    disabled_tools: set[str] = field(default_factory=set)
    unknown_outcomes: list[CallKey] = field(default_factory=list)  # claimed, no outcome recorded


class Store(Protocol):
    """A durable store for the reference implementation."""

    def load(self) -> Snapshot:
        """Read everything a restarted core needs."""

    def apply(self, facts: Sequence[Fact], at: float) -> None:
        """Write the facts in one transaction; ``at`` stamps ledger and audit rows."""

    def progress(self, fact: RecordProgress) -> None:
        """Write one fragment's progress in a transaction of its own: what ``apply((fact,),
        at)`` writes, for any ``at`` (progress rows carry no time).

        Why a method of its own: it is the one write made per fragment, so the driver makes
        it without reading a clock, and a store may make it without the general dispatch
        over fact types. A store whose ``apply`` is where failures or crash points are
        injected makes this an ``apply`` (the SQL stores do), so nothing escapes them."""

    def claim(self, key: CallKey, tool: str, entry: LedgerEntry, at: float) -> ClaimResult:
        """The atomic dispatch claim (see the module docstring)."""

    def ledger(self) -> list[tuple[LedgerEntry, str]]:
        """Every ledger row with its reason, oldest first (for operators and tests)."""

    def audit(self) -> list[tuple[str, str, tuple[CallKey, ...]]]:
        """Every audit row ``(action, reason, keys)``, oldest first."""

    def unknown_outcomes(self) -> list[tuple[CallKey, str]]:
        """Every dispatched call ``(key, tool)`` with no recorded outcome: claimed, then
        the process died (or the executor is still running) before it came back."""

    def close(self) -> None:
        """Release connections; the data stays."""


class LeaseStore(Store, Protocol):
    """A store that keeps leases (the SQL stores and the memory store): what lets replicas
    share it without failing each other's calls (:mod:`~callsafe.reference_impl.leases`).
    A store without them (an application's own ``Store``) is one instance's alone."""

    def renew_lease(self, owner: str, ttl: float, now: float) -> bool:
        """Write or renew ``owner``'s lease: heartbeat ``now``, expiry ``now + ttl``. True
        when the lease was live before (False: new, released, or lapsed meanwhile)."""

    def release_lease(self, owner: str) -> None:
        """Remove ``owner``'s lease (a clean shutdown): its open calls are orphans at once."""

    def adopt_orphans(self, owner: str, now: float, *, own: bool) -> list[CallRow]:
        """Atomically make ``owner`` the owner of every open (non-terminal) call whose
        owner holds no live lease at ``now``; with ``own`` (a start) also of the calls
        that are ``owner``'s own or have no owner. The adopted rows, as now stored."""

    def leases(self) -> list[tuple[str, float, float]]:
        """Every lease ``(owner, heartbeat, expires)`` (for operators and tests)."""


def holds_leases(store: Store) -> TypeGuard[LeaseStore]:
    """Whether ``store`` keeps leases (has every method of :class:`LeaseStore`)."""
    return all(
        callable(getattr(store, name, None)) for name in ("renew_lease", "release_lease", "adopt_orphans", "leases")
    )
