"""The reference implementation's typed errors: anything else escaping it is a bug."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AssemblerError", "ModelDriftError", "StoreError", "StoreFault", "StoreLost", "UnsupportedEvent"]


class AssemblerError(Exception):
    """Base of every error the reference implementation raises on purpose."""


class UnsupportedEvent(AssemblerError):
    """An event the core has no rule for (e.g. an unexpanded ``replay``)."""


class CallLimitExceeded(AssemblerError):
    """A call was opened beyond the cap on calls per turn or per response: the event is
    refused before anything changes (a flood of new call ids costs no memory or write per
    id); the application ends the stream, and the calls in flight of that response fail."""


class ModelDriftError(AssemblerError):
    """The lifecycle table now says something the core was not written for (e.g. a
    terminal state with a way out). Raised rather than guessed: the model is the spec."""


class StoreFault(StrEnum):
    """Why a store failed, in the words an operator acts on (never a driver's class name).

    ``LOCKED``, ``TIMEOUT`` and ``CONNECTION_LOST`` are transient: the driver retries them
    within a bound. The lost-store faults (``MISSING`` .. ``NO_WITNESS``) are raised only
    when a store is opened, by :class:`StoreLost`."""

    DISK_FULL = "disk full"
    PERMISSION = "permission denied"
    LOCKED = "locked"
    TIMEOUT = "timed out"
    CORRUPT = "corrupt"
    CONNECTION_LOST = "connection lost"
    VALUE = "value cannot be stored"
    WITNESS = "witness not written"
    MISSING = "missing"
    EMPTY = "empty"
    BEHIND = "history behind its witness"
    MISMATCH = "another store"
    NO_WITNESS = "witness missing"
    OTHER = "failed"


TRANSIENT_FAULTS = frozenset({StoreFault.LOCKED, StoreFault.TIMEOUT, StoreFault.CONNECTION_LOST})


class StoreError(AssemblerError):
    """The durable store failed or holds something it cannot read; ``fault`` says why."""

    def __init__(self, message: str, fault: StoreFault = StoreFault.OTHER) -> None:
        super().__init__(message)
        self.fault = fault

    @property
    def transient(self) -> bool:
        """Worth retrying: a lock, a timeout or a dropped connection may clear."""
        return self.fault in TRANSIENT_FAULTS


class StoreLost(StoreError):
    """A store that should hold decisions does not (missing, empty, behind its witness,
    or another store's file): refused at open, never recreated as new. The message says
    what to check; creating a store is explicit (``callsafe store init PATH``)."""
