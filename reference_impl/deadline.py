"""A client-side bound on one blocking operation: a watchdog thread that acts at a deadline.

Why client-side: a connection whose peer vanished without a FIN or a RST (a network
partition, a host that died, a black-holed route) never answers, and nothing on the
server can end the wait: ``statement_timeout`` runs on the server that no longer hears
us, TCP keepalives only probe an idle connection, and ``tcp_user_timeout`` only fires
while sent data stays unacknowledged (a middlebox that acknowledges and drops defeats
it). Only the client can give up, so :class:`Watchdog` calls ``expire`` (for a database
connection: shut its socket down, which wakes the blocked read with an error) once an
armed operation outlives its deadline.

Why one thread per watchdog rather than a timer per operation: the store arms it for
every write (one per fragment), and starting a thread each time costs more than the
write; arming and disarming here is a lock and two assignments, and the thread sleeps
until the earliest deadline it knows of.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

__all__ = ["Watchdog"]


class Watchdog:
    """Calls ``expire`` when an :meth:`arm`-ed operation is not :meth:`disarm`-ed within
    its timeout. One operation at a time (the owner serialises them); the thread starts
    on the first :meth:`arm` and ends with :meth:`close`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._deadline: float | None = None
        self._expire: Callable[[], None] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.expired = 0  # how many operations it ended

    def arm(self, timeout: float, expire: Callable[[], None]) -> None:
        """From now, ``expire()`` runs (on the watchdog's thread) after ``timeout`` s
        unless :meth:`disarm` comes first."""
        with self._cond:
            self._deadline = time.monotonic() + timeout
            self._expire = expire
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            else:
                # idle, or waiting out an earlier operation's later deadline: either way the
                # thread must re-read the deadline now (an earlier one would otherwise wait)
                self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None
            self._expire = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._deadline = None
            self._expire = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)  # a later arm moves the deadline: re-read it
                    continue
                expire, self._deadline, self._expire = self._expire, None, None
                if expire is not None:
                    self.expired += 1
                    with contextlib.suppress(Exception):  # the owner sees its operation fail, or not
                        expire()
