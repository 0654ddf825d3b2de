"""Every error the guard raises on purpose: one base class, one subclass per misuse.

Why typed: an agent loop in production must tell "my code called the guard wrongly"
(fix the code) from "the provider sent a stream that cannot be read" (nothing ran; retry
the request) from "the store failed" (page an operator). Each is its own class, and every
message names identifiers and wording only, never an argument value.
"""

from __future__ import annotations

from callsafe.reference_impl.errors import StoreFault

__all__ = [
    "ClosedGuard",
    "ConfigError",
    "GuardError",
    "GuardStoreError",
    "LimitExceeded",
    "StreamError",
    "UnknownInput",
    "UnknownProtocol",
    "UnknownTurn",
]


class GuardError(Exception):
    """Base of every error :class:`~callsafe.guard.Guard` raises on purpose."""


class ConfigError(GuardError, ValueError):
    """The guard was built wrongly: a tool that is not a JSON Schema or a ToolSpec, a store
    URL it does not know, limits that are not limits, an executor that is not callable."""


class GuardStoreError(GuardError):
    """The durable store failed, or a store that should hold decisions is lost (opening
    never creates one unless ``create=True``). ``fault`` names the cause in an operator's
    words (:class:`~callsafe.reference_impl.errors.StoreFault`)."""

    def __init__(self, message: str, fault: StoreFault = StoreFault.OTHER) -> None:
        super().__init__(message)
        self.fault = fault


class ClosedGuard(GuardError):
    """The guard (or a stream of it) was used after :meth:`Guard.close`."""


class UnknownTurn(GuardError):
    """An operation named a turn this guard never started."""


class UnknownProtocol(GuardError):
    """The stream's protocol could not be told from its first event, or the protocol named
    is not one callsafe reads. Pass ``protocol=`` (one of :func:`callsafe.providers.names`)."""


class UnknownInput(GuardError, TypeError):
    """An object the guard does not read: not an SDK stream event, a dict payload, or SSE
    bytes of a supported protocol (or a confirm/deny for something that is not a call)."""


class StreamError(GuardError):
    """The provider's stream could not be read (a payload of the wrong shape, an order the
    protocol forbids, bytes that are not UTF-8 or JSON). The stream was ended as a dropped
    connection before this was raised, so nothing it opened can run; the calls that
    finished before the bad payload ran (or were yielded) as usual."""


class LimitExceeded(StreamError):
    """A stream opened more tool calls than the cap per turn (``turn_calls``) or per response
    (``response_calls``) allows: the stream was ended as a dropped connection first, so its
    calls in flight fail and none runs; each call beyond the cap cost nothing."""
