"""Leases: which instance owns which call in flight, so replicas sharing one store never
fail each other's calls.

Why: a call in flight is assembled from a stream that only one process reads; its bytes
are in that process's memory. When a process starts (or resyncs after a store fault) it
must fail the calls whose assembling process is gone, since nothing will ever finish them,
but never the calls of a replica that is alive and still reading its streams. The store
cannot tell the two apart from the calls alone, so each instance holds a **lease**: a row
``(owner, heartbeat, expires)`` it renews every ``ttl / 3`` seconds, and each call it
opens records it as the owner (``calls.owner``). Then:

* a starting instance adopts (:meth:`~callsafe.reference_impl.store.LeaseStore.adopt_orphans`,
  ``own=True``) its own leftovers (a restart under the same ``owner``), the calls with no
  owner (written before leases, or by a core without one), and those whose owner's lease
  expired or was released; its core then fails exactly those, as a restart does;
* while running, each heartbeat renews the lease and adopts the calls of instances whose
  lease expired since (``own=False``): a killed replica's calls fail once its lease has
  expired, never before;
* the adoption is one atomic ``UPDATE`` per store: each orphan gets exactly one new owner,
  and the dispatch claim (the call's state) stays the one place where "runs" is decided,
  so a paused owner that comes back and a replica failing its calls still agree on one
  outcome per call.

An instance's identity (``owner``) is :func:`new_identity` by default: unique, so replicas
never take each other for themselves. A restarted process with a new identity leaves its
predecessor's calls to the heartbeat, which fails them once the old lease expires (at most
``ttl`` plus a heartbeat interval later). A stable identity (a pod name, a worker index)
makes a restart take its own leftovers at once; two live processes must never share one.
The times come from the instance's clock (``time.time`` unless injected): the clocks of
replicas on different hosts must agree to well within ``ttl``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Final

from callsafe.reference_impl.store import CallRow, LeaseStore

__all__ = ["DEFAULT_LEASE_SECONDS", "Heartbeat", "Lease", "new_identity"]

DEFAULT_LEASE_SECONDS: Final = 30.0


def new_identity() -> str:
    """A unique instance identity: host, process and a random part (the process id alone
    repeats across hosts and containers)."""
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())[:64]
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


class Lease:
    """One instance's lease in one store: renewed by :meth:`renew`, dropped by :meth:`release`."""

    def __init__(self, store: LeaseStore, owner: str, ttl: float, clock: Callable[[], float]) -> None:
        if not isinstance(owner, str) or not owner or len(owner) > 200 or not owner.isprintable():
            raise ValueError("an instance identity is a printable string of 1 to 200 characters")
        if not ttl > 0:
            raise ValueError("a lease lasts a positive number of seconds")
        self.store = store
        self.owner = owner
        self.ttl = float(ttl)
        self._clock = clock

    @property
    def interval(self) -> float:
        """How often the heartbeat renews: a third of the lease, so two missed beats in a
        row still leave it live."""
        return self.ttl / 3

    def acquire(self) -> list[CallRow]:
        """At start: the lease written, then this instance's leftovers and every orphan
        adopted (the calls its core fails as a restart's)."""
        now = self._clock()
        self.store.renew_lease(self.owner, self.ttl, now)
        return self.store.adopt_orphans(self.owner, now, own=True)

    def renew(self) -> bool:
        """Renew; False when the lease had lapsed (or was removed) before this renewal: other
        instances may have adopted this instance's calls meanwhile."""
        return self.store.renew_lease(self.owner, self.ttl, self._clock())

    def orphans(self) -> list[CallRow]:
        """The calls of instances whose lease expired, adopted by this one (to be failed)."""
        return self.store.adopt_orphans(self.owner, self._clock(), own=False)

    def release(self) -> None:
        """A clean shutdown: the lease removed, so this instance's open calls are orphans at once."""
        self.store.release_lease(self.owner)


class Heartbeat:
    """A daemon thread calling ``beat()`` every ``interval`` seconds until :meth:`stop`.

    Why a thread and not a renewal on each store write: an instance whose streams are all
    waiting (a model thinking for a minute between two fragments) writes nothing, and its
    lease must stay live all the same. ``beat`` handles its own errors; one that escapes is
    passed to ``on_error`` and the beating goes on."""

    def __init__(
        self, beat: Callable[[], object], interval: float, on_error: Callable[[BaseException], None], name: str
    ) -> None:
        self._beat = beat
        self._interval = interval
        self._on_error = on_error
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._beat()
            except Exception as exc:  # a store fault: logged, and the next beat tries again
                self._on_error(exc)

    def stop(self) -> None:
        """Stop beating; waits for a beat in progress (not from the thread itself)."""
        self._stopped.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._interval + 5.0)
