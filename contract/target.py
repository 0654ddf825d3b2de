"""The Target contract: what an implementation must offer to be certified.

The harness owns everything a target could lie about. It hands the target:

* an **executor** spy, so "what the executor received" is observed at the boundary, never
  reported by the target about itself;
* the **tool catalog** (a live view: the harness applies catalog changes before it
  delivers the :class:`~callsafe.model.vocabulary.ToolChanged` event);
* the **business validator** (a spy too: it counts validations, and it is the point at
  which the harness delivers events marked ``during_validation``);
* the byte **limits**, a **clock**, and a folder for a durable **store**;
* ``observe``, through which the target reports what it shows people (status, confirmation
  requests) and writes (ledger, audit, log lines).

A target declares the wire protocol it consumes (``"abstract"`` for callsafe's own events,
or a provider name such as ``"openai-responses"``) and its capabilities; optionally, as
``record_words``, what its ledger and status words mean when they are neither callsafe's
nor the spec's (:mod:`callsafe.model.record_words`). A scenario that
needs a capability the target lacks is "not applicable", never "passed".

Writing an adapter for one's own implementation is one small class with ``start``,
``receive`` and (optionally) ``restart`` and ``close``; see ``docs/tutorial-assembler.md``
and ``docs/adapters.md``.

A target that reads a provider's wire (:class:`ProtocolTarget`, as the client-library
adapters in :mod:`callsafe.targets` do) also has ``receive_wire(payload)``, for each decoded
payload of that provider's stream, and ``end_stream()``, called when a stream's body ends
normally; the harness renders each abstract trace for it (:mod:`callsafe.certify.wire`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from callsafe.model.vocabulary import CallKey, Event, Limits, Observation, ToolSpec

__all__ = [
    "CAPABILITIES",
    "BusinessValidator",
    "Executor",
    "ProtocolTarget",
    "Target",
    "TargetEnv",
]

CAPABILITIES: Final = frozenset(
    {
        "cancellation",  # honours cancel_turn, disconnect, supersession by a new turn
        "operator_controls",  # quarantine_response, disable_tool, stop_tenant
        "confirmation",  # asks for and honours confirm events
        "restart",  # survives restart() over a durable store
        "ledger",  # reports ledger, audit and log lines through observe()
        "status",  # reports the visible status through observe()
        "business_validation",  # calls the harness's business validator once per final call
        "catalog_changes",  # validates against the catalog as it stands
        "turn_binding",  # binds calls to turn, actor and tenant
        "store_faults",  # store_fault(): its store can be made to fail (StoreFault events)
    }
)


class Executor(Protocol):
    """The tool executor the harness owns. A target calls it to run a tool."""

    def __call__(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None: ...


class BusinessValidator(Protocol):
    """The application's business validation, owned by the harness. Returns None when the
    call passes, or the reason it fails."""

    def __call__(self, key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None: ...


@dataclass
class TargetEnv:
    """What the harness gives a target when a run starts."""

    executor: Executor
    business_validator: BusinessValidator
    tools: Mapping[str, ToolSpec]  # live view of the catalog, as it stands
    limits: Limits
    observe: Callable[[Observation], None]
    step: Callable[[], int]  # the step of the event being delivered (for observations)
    clock: Callable[[], float]
    store_dir: Path | None = None


@runtime_checkable
class Target(Protocol):
    """An implementation under certification."""

    name: str
    protocol: str
    capabilities: frozenset[str]

    def start(self, env: TargetEnv) -> None:
        """Begin a run: a fresh implementation with a fresh store in ``env.store_dir``."""

    def receive(self, event: Event) -> None:
        """Deliver one event (an abstract event, or for a provider-protocol target the
        application events: turns, confirmations, operator controls)."""

    def restart(self) -> None:
        """Simulate a process restart: drop everything in memory, reopen the store."""

    # Optional, with the ``store_faults`` capability:
    #
    #   def store_fault(self, lasting: bool, after: int) -> None:
    #       """Make the store fail while the next receive() runs (see
    #       callsafe.model.vocabulary.StoreFault): transiently, after ``after`` operations,
    #       as many times in a row as this target's retries absorb; or (``lasting``) every
    #       operation, until that receive() returns."""

    def close(self) -> None:
        """End the run and release resources."""


@runtime_checkable
class ProtocolTarget(Target, Protocol):
    """A target that consumes one provider's wire protocol (``protocol`` names it, as in
    :mod:`callsafe.providers.registry`). Application events still arrive through
    :meth:`Target.receive`, a dropped connection as a
    :class:`~callsafe.model.vocabulary.Disconnect` among them."""

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        """Deliver one decoded payload of the current stream (one SSE ``data:`` object)."""

    def end_stream(self) -> None:
        """The current stream's body ended normally (after ``data: [DONE]`` where the
        protocol sends it): where an application reads a library's final result."""
