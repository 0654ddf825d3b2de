"""Performs the core's effects: the store, the business validator, the executor, and what
people see. The only place where the reference implementation does I/O.

Why the order matters:

* the effects of one answer of the core are cut only at its *questions* (the business
  validator, the dispatch claim) and at the executor; between two cuts, every fact is
  written in **one transaction** before any outward effect of that stretch is performed.
  So an input's decisions are durable before anyone is told about them, and a process
  killed at any instant leaves all of a stretch or none of it: an operator stop, a
  cancel or a restart's failures are never half written (a stop whose first call was
  cancelled on disk but whose turn was still live, and which had no audit row, was the
  state a kill between two transactions used to leave);
* the business validator's answer and the store's claim go straight back into the core,
  so the effects that follow from them are performed before anything else;
* the executor runs only after the store's claim said ``claimed``: **at most once, with
  an intent record** across replays, replicas and restarts. The claim (the call's
  ``dispatched`` state and its ledger row) commits before the executor runs; a
  :class:`~callsafe.reference_impl.effects.RecordOutcome` commits after it comes back. A
  crash between the two loses the execution rather than repeating it, and leaves a
  claim without an outcome, which ``Store.unknown_outcomes()`` lists and the next
  start of a core logs, so an operator can check the tool's side effect.

Why a failed write is not just raised: the core decides before the driver writes, so
when the store fails, the core's memory is ahead of the store (an opened call, a terminal
event, a decision the store never got), and a call could stay undecided in memory or be
refused at its claim for a row that was never written. So a transient failure (a held
lock, a timeout, a dropped connection) is retried up to ``retries`` times with a doubling
delay from ``retry_delay`` s; a failure that stays is raised (a typed
:class:`~callsafe.reference_impl.errors.StoreError` with its fault) only after the core
has taken the store's word back (:meth:`Core.resync`): what was in flight fails, as at a
restart, and its ``retry`` status is shown once that is written. If the store cannot even
be read, the driver is *stale*: it performs nothing until a later input finds the store
back and resyncs (that input is refused, with the fault, if the store is still down, and
refused too when it returns, since it was decided on memory the store never confirmed;
:meth:`Driver.receive` resyncs first and then applies it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from callsafe.model.vocabulary import (
    AuditRow,
    CallKey,
    ConfirmationRequested,
    Event,
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
    RecordOutcome,
    RecordProgress,
    RequestConfirmation,
    Status,
    ValidateBusiness,
)
from callsafe.reference_impl.errors import StoreError, StoreFault
from callsafe.reference_impl.store import ClaimResult, Store

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
        retries: int = 3,
        retry_delay: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.core = core
        self.store = store
        self._executor = executor
        self._validator = business_validator
        self._observe = observe
        self._step = step
        self._clock = clock
        self._retries = retries
        self._retry_delay = retry_delay
        self._sleep = sleep
        self._depth = 0  # run() inside run() (a validator's or a claim's answer)
        self.stale = False  # the store failed and could not be read back: perform nothing
        self._failure: StoreError | None = None  # the last failure (its fault is what a stale driver reports)
        # Outward effects and questions by exact type: one dict lookup per effect instead
        # of a chain of isinstance checks (the core makes only these types).
        self._performers: dict[type[Effect], Callable[[Any], None]] = {
            Ledger: self._report_ledger,
            Status: self._show_status,
            Log: self._log,
            ValidateBusiness: self._validate_business,
            Claim: self._claim,
            Dispatch: self._dispatch,
            RequestConfirmation: self._request_confirmation,
            Audit: self._report_audit,
        }

    def receive(self, event: Event) -> None:
        """Deliver one input: if the store had failed, take its word back first."""
        if self.stale:
            self._resync_or_raise()
        self.run(self.core.receive(event))

    def run(self, effects: Sequence[Effect]) -> None:
        """Perform ``effects``: each stretch between two cuts (see the module docstring)
        writes its facts in one transaction, then performs its outward effects in order."""
        if not effects:
            return
        first = effects[0]
        if len(effects) == 1 and isinstance(first, Fact) and not (self._depth or self.stale):
            try:  # the per-fragment case, written out: one write, nothing to tell
                if isinstance(first, RecordProgress):
                    self.store.progress(first)  # no clock read: progress rows carry no time
                else:
                    self.store.apply((first,), self._clock())
            except StoreError as exc:
                self._depth = 1
                try:
                    self._retry_apply((first,), exc)
                except StoreError as failure:
                    self._after_failure(failure)
                    raise
                finally:
                    self._depth = 0
            return
        if self._depth:  # a nested answer: a failure is handled once, at the top
            self._run(effects)
            return
        if self.stale:  # decided on memory the store never confirmed: never performed
            fault = self._failure.fault if self._failure is not None else StoreFault.OTHER
            self._resync_or_raise()
            raise StoreError(
                f"the store is back after a fault ({fault}); this input was decided before the core took the "
                "store's state back and was not applied: deliver it again",
                fault,
            )
        self._depth = 1
        try:
            self._run(effects)
        except StoreError as exc:
            self._after_failure(exc)
            raise
        finally:
            self._depth = 0

    def _run(self, effects: Sequence[Effect]) -> None:
        first = effects[0]
        if len(effects) == 1 and isinstance(first, Fact):  # the per-fragment case
            try:
                if isinstance(first, RecordProgress):
                    self.store.progress(first)
                else:
                    self.store.apply((first,), self._clock())
            except StoreError as exc:
                self._retry_apply((first,), exc)
            return
        facts: list[Fact] = []
        told: list[Effect] = []
        for effect in effects:
            if isinstance(effect, Fact):
                facts.append(effect)
            elif isinstance(effect, (ValidateBusiness, Claim, Dispatch)):  # the cuts (module docstring)
                self._settle(facts, told)
                facts, told = [], []
                if isinstance(effect, Dispatch):
                    facts.append(self._execute(effect))
                else:
                    self._perform(effect)
            else:
                told.append(effect)
        self._settle(facts, told)

    # -- store failures ------------------------------------------------------------

    def _retry_apply(self, facts: Sequence[Fact], failure: StoreError) -> None:
        """A write that failed, retried while its fault is transient; the last failure raised.
        The facts are idempotent (their rows are keyed; a retried ledger row after an
        answer lost in a COMMIT is a duplicate line, never a second decision)."""
        delay = self._retry_delay
        for _ in range(self._retries):
            if not failure.transient:
                break
            self._sleep(delay)
            delay *= 2
            try:
                self.store.apply(facts, self._clock())
                return
            except StoreError as exc:
                failure = exc
        raise failure

    def _write(self, facts: Sequence[Fact]) -> None:
        try:
            self.store.apply(facts, self._clock())
        except StoreError as exc:
            self._retry_apply(facts, exc)

    def _claim_with_retries(self, effect: Claim) -> ClaimResult:
        try:
            return self.store.claim(effect.key, effect.tool, effect.entry, self._clock())
        except StoreError as exc:
            failure = exc
        delay = self._retry_delay
        for _ in range(self._retries):
            if not failure.transient:
                break
            self._sleep(delay)
            delay *= 2
            try:
                result = self.store.claim(effect.key, effect.tool, effect.entry, self._clock())
            except StoreError as exc:
                failure = exc
                continue
            if result is ClaimResult.TAKEN:
                # the failed attempt may have committed before its answer was lost: this
                # replica did not run it, and the store lists it as a claim without outcome
                self._observe(LogLine(self._step(), f"{effect.key}: claim answer lost ({failure.fault}); not run here"))
            return result
        raise failure

    def _after_failure(self, failure: StoreError) -> None:
        """The core takes the store's word back (see the module docstring)."""
        self._observe(LogLine(self._step(), f"store failed ({failure.fault}): the core takes the store's state back"))
        self._failure = failure
        try:
            self._resync()
        except StoreError as exc:
            self._failure = exc
            self.stale = True

    def _resync(self) -> None:
        snapshot = self.store.load()  # may raise: then nothing was changed
        effects = self.core.resync(snapshot)
        self.stale = False
        self._depth += 1
        try:
            if effects:
                self._run(effects)
        except StoreError as exc:
            # the restart's own decisions (in-flight calls failed) could not be written:
            # memory says failed, the store still says in flight; take its word again later
            self._failure = exc
            self.stale = True
        finally:
            self._depth -= 1

    def _resync_or_raise(self) -> None:
        try:
            self._resync()
        except StoreError as exc:
            self._failure = exc
            raise StoreError(f"the store is still failing: {exc}", exc.fault) from exc
        if self.stale and self._failure is not None:
            failure = self._failure
            raise StoreError(f"the store is still failing: {failure}", failure.fault) from failure

    def _settle(self, facts: list[Fact], told: list[Effect]) -> None:
        """One stretch: its facts in one transaction, then what it tells the world."""
        if facts:
            self._write(facts)
        for effect in told:
            self._perform(effect)

    def _execute(self, effect: Dispatch) -> RecordOutcome:
        """Run the tool (its claim is durable); its outcome, to be written next."""
        try:
            self._executor(effect.key, effect.actor, effect.tool, effect.arguments, effect.traceparent)
        except Exception as exc:  # claimed and handed over: never retried (at most once)
            self._observe(LogLine(self._step(), f"{effect.key}: executor raised {type(exc).__name__}"))
            return RecordOutcome(effect.key, f"raised {type(exc).__name__}")
        return RecordOutcome(effect.key, "returned")

    def _perform(self, effect: Effect) -> None:
        performer = self._performers.get(type(effect))
        if performer is None:  # pragma: no cover - every effect type the core makes is listed
            raise TypeError(f"unknown effect {type(effect).__name__}")
        performer(effect)

    def _report_ledger(self, effect: Ledger) -> None:
        e = effect.entry
        self._observe(
            LedgerRow(
                self._step(), e.key, e.fragments, e.terminal_reason, e.parse, e.validation, e.decision, e.traceparent
            )
        )

    def _show_status(self, effect: Status) -> None:
        self._observe(StatusShown(self._step(), effect.turn, effect.status))

    def _log(self, effect: Log) -> None:
        self._observe(LogLine(self._step(), effect.text))

    def _validate_business(self, effect: ValidateBusiness) -> None:
        try:
            problem = self._validator(effect.key, effect.tool, effect.arguments)
        except Exception as exc:  # a failing validator fails the call, safely
            problem = f"business validator raised {type(exc).__name__}"
        self.run(self.core.business_result(effect.key, problem))

    def _claim(self, effect: Claim) -> None:
        result = self._claim_with_retries(effect)
        self.run(self.core.claim_result(effect.key, result))

    def _dispatch(self, effect: Dispatch) -> None:
        self._write((self._execute(effect),))

    def _request_confirmation(self, effect: RequestConfirmation) -> None:
        self._observe(ConfirmationRequested(self._step(), effect.key, effect.tool))

    def _report_audit(self, effect: Audit) -> None:
        self._observe(AuditRow(self._step(), effect.action, effect.reason, effect.keys))
