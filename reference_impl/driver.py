"""Performs the core's effects: the store, the business validator, the executor, and what
people see. The only place where the reference implementation does I/O.

Why the order matters:

* facts are written before the next outward effect, in one transaction per run of
  consecutive facts: a decision is durable before anyone is told about it, and before
  the business validator runs (which may deliver more events, i.e. more transactions);
* the business validator's answer and the store's claim go straight back into the core,
  so the effects that follow from them are performed before anything else;
* the executor runs only after the store's claim said ``claimed``: at most once across
  replays, replicas and restarts (a crash between claim and execution loses the
  execution rather than repeating it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from callsafe.model.vocabulary import (
    AuditRow,
    CallKey,
    ConfirmationRequested,
    LedgerRow,
    LogLine,
    Observation,
    StatusShown,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.effects import (
    Audit,
    Claim,
    Dispatch,
    Effect,
    Fact,
    Ledger,
    Log,
    RequestConfirmation,
    Status,
    ValidateBusiness,
)
from callsafe.reference_impl.store import Store

__all__ = ["Driver"]

Executor = Callable[[CallKey, str, str, Any, str | None], None]
BusinessValidator = Callable[[CallKey, str, Any], str | None]


class Driver:
    """Binds one core to one store and the application's services."""

    def __init__(
        self,
        core: Core,
        store: Store,
        *,
        executor: Executor,
        business_validator: BusinessValidator,
        observe: Callable[[Observation], None],
        step: Callable[[], int],
        clock: Callable[[], float],
    ) -> None:
        self.core = core
        self.store = store
        self._executor = executor
        self._validator = business_validator
        self._observe = observe
        self._step = step
        self._clock = clock

    def run(self, effects: Sequence[Effect]) -> None:
        """Perform ``effects`` in order."""
        if not effects:
            return
        first = effects[0]
        if len(effects) == 1 and isinstance(first, Fact):  # the per-fragment case
            self.store.apply((first,), self._clock())
            return
        facts: list[Fact] = []
        for effect in effects:
            if isinstance(effect, Fact):
                facts.append(effect)
                continue
            if facts:
                self.store.apply(facts, self._clock())
                facts = []
            self._perform(effect)
        if facts:
            self.store.apply(facts, self._clock())

    def _perform(self, effect: Effect) -> None:
        observe = self._observe
        if isinstance(effect, Ledger):
            e = effect.entry
            observe(
                LedgerRow(
                    self._step(),
                    e.key,
                    e.fragments,
                    e.terminal_reason,
                    e.parse,
                    e.validation,
                    e.decision,
                    e.traceparent,
                )
            )
        elif isinstance(effect, Status):
            observe(StatusShown(self._step(), effect.turn, effect.status))
        elif isinstance(effect, Log):
            observe(LogLine(self._step(), effect.text))
        elif isinstance(effect, ValidateBusiness):
            try:
                problem = self._validator(effect.key, effect.tool, effect.arguments)
            except Exception as exc:  # a failing validator fails the call, safely
                problem = f"business validator raised {type(exc).__name__}"
            self.run(self.core.business_result(effect.key, problem))
        elif isinstance(effect, Claim):
            result = self.store.claim(effect.key, effect.tool, effect.entry, self._clock())
            self.run(self.core.claim_result(effect.key, result))
        elif isinstance(effect, Dispatch):
            try:
                self._executor(effect.key, effect.actor, effect.tool, effect.arguments, effect.traceparent)
            except Exception as exc:  # claimed and handed over: never retried (at most once)
                observe(LogLine(self._step(), f"{effect.key}: executor raised {type(exc).__name__}"))
        elif isinstance(effect, RequestConfirmation):
            observe(ConfirmationRequested(self._step(), effect.key, effect.tool))
        elif isinstance(effect, Audit):
            observe(AuditRow(self._step(), effect.action, effect.reason, effect.keys))
        else:  # pragma: no cover - every effect type is handled above
            raise TypeError(f"unknown effect {type(effect).__name__}")
