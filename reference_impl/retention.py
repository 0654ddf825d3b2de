"""Retention: how long a store keeps finished turns, their calls, terminal event ids and the
records for people, and the pass that deletes what is past it.

Why a window, not "delete what is finished": the rows of a finished call are its replay
protection. A replayed stream of a turn (the provider's retry, a client that reconnects and
resends) meets the store's ``turns`` and ``calls`` rows: the turn keeps its first binding,
the call keeps its first decision, and the claim finds it already dispatched. Deleting them
while a replay can still arrive would let a replay run a tool again. So the policy names a
**replay window** (``window`` seconds): the longest a deployment lets a replay or a late
event of a turn arrive after the turn is over. Within it nothing of the turn is dropped;
past it, a replay of the whole turn would be taken for a new one (the window is an
operator's promise about the traffic, like a lease's clock agreement).

What a pass deletes (:meth:`~callsafe.reference_impl.sql_store.SqlStore.prune_retained`):

* a **turn that is over** (its status is no longer ``live``, or it is no longer its
  conversation's current turn) since more than ``window`` seconds, with its calls, their
  outcomes and its ended responses; except the newest ``keep`` over turns, and never a turn
  with a call still open (``collecting`` or awaiting something: a restart fails it) or a
  call claimed without a recorded outcome (a restart reports it: whether the tool ran is
  unknown). A turn that is still live and current (a conversation's last turn) may still
  receive events and is never dropped;
* a **terminal event id** recorded more than ``window`` seconds ago, except the newest
  ``keep``: a replayed terminal event younger than the window is always recognised;
* **ledger and audit rows** older than ``records`` seconds (None: never), except the newest
  ``keep`` of each and always the newest ledger row (the high-water mark the witness checks).

What it never deletes: leases, quarantines, disabled tools, tenant stops, the store's
identity, and everything above while it is inside its window: what ``Core.start`` and a
restart read back (open calls, unknown outcomes, live turns, current turns).

When a turn became over is stamped when the store sees it happen (a status change, a
tenant stop); a turn that became over otherwise (another replica bound its conversation's
next turn, or a store written before the stamp existed) is stamped by the first pass that
finds it, so its window only starts later, never earlier. Terminal ids written before
their time was stored are stamped the same way.

Each pass works in **batches** of at most ``batch`` turns (or rows) per transaction, so a
store busy with live traffic is held for one short transaction at a time; a pass stops
after ``max_batches`` batches and the next pass goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Protocol, TypeGuard

__all__ = ["DEFAULT_RETENTION", "Retention", "RetentionStore", "keeps_retention"]

DAY: Final = 86_400.0


@dataclass(frozen=True)
class Retention:
    """A retention policy (module docstring). ``window``: the replay window in seconds
    (what is younger is never dropped); ``keep``: the newest over turns, terminal ids and
    ledger and audit rows always kept, whatever their age; ``records``: the age in seconds
    past which ledger and audit rows go (None: kept); ``every``: seconds between two online
    passes (a guard's retention thread); ``batch`` and ``max_batches``: the size of one
    transaction and how many one pass runs."""

    window: float = 7 * DAY
    keep: int = 10_000
    records: float | None = 30 * DAY
    every: float = 60.0
    batch: int = 500
    max_batches: int = 100

    def __post_init__(self) -> None:
        for name in ("window", "every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"retention {name} is a number of seconds")
            if value < 0 or (name == "every" and value == 0):
                raise ValueError(f"retention {name} is {'a positive' if name == 'every' else 'a non-negative'} number")
        if self.records is not None and (
            isinstance(self.records, bool)
            or not isinstance(self.records, (int, float))
            or not math.isfinite(self.records)
            or self.records < 0
        ):
            raise ValueError("retention records is a non-negative number of seconds, or None")
        for name in ("keep", "batch", "max_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "keep" else 1):
                raise ValueError(f"retention {name} is a {'non-negative' if name == 'keep' else 'positive'} integer")


DEFAULT_RETENTION: Final = Retention()


class RetentionStore(Protocol):
    """A store that can apply a retention policy (the SQL stores)."""

    def prune_retained(self, policy: Retention, now: float) -> dict[str, int]:
        """One pass of ``policy`` at time ``now``: how many rows of each table went."""


def keeps_retention(store: object) -> TypeGuard[RetentionStore]:
    """Whether ``store`` can apply a retention policy."""
    return callable(getattr(store, "prune_retained", None))
