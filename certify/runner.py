"""The runner: deliver one trace to one target and record what it does at the boundary.

The harness owns the executor (a spy), the business validator (a spy that is also the
window through which events marked ``during_validation`` arrive), the catalog, the clock
and the store folder. Each run starts a fresh target with a fresh store; a
:class:`~callsafe.model.vocabulary.Restart` inside the trace calls ``target.restart()``
and keeps the store.

Observation steps follow :mod:`callsafe.model.invariants`: the index of the most recently
*started* delivery.

A provider-protocol target (``target.protocol`` names a provider) gets each trace rendered
for its protocol (:mod:`callsafe.certify.wire`): the trace is relabelled to the protocol's
identities, each wire event becomes the payloads its rendering produced, delivered through
``receive_wire`` at that event's step (payloads that precede the event's effect on the wire
at the previous step), ``end_stream()`` follows the payloads of a response's end, and every
other event (turns, controls, a dropped connection) goes to ``receive``. The abstract path
is untouched.
"""

from __future__ import annotations

import itertools
import multiprocessing.util
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callsafe import span_recording
from callsafe.certify.target_errors import TargetError, TraceTimeout, error_from_exception
from callsafe.certify.wire import ABSTRACT, WirePlan, prepare, reconnects
from callsafe.contract.target import Target, TargetEnv
from callsafe.model.system import apply_tool_change, business_check, join_surrogate_pairs
from callsafe.model.vocabulary import (
    BusinessValidated,
    CallKey,
    Disconnect,
    Event,
    Executed,
    Limits,
    Observation,
    Restart,
    StoreFault,
    ToolChanged,
    ToolSpec,
    Trace,
)

__all__ = [
    "Call",
    "Run",
    "RunStopped",
    "Session",
    "TargetError",
    "events_at",
    "fresh_store_dir",
    "release_store_dir",
    "run_trace",
]


@dataclass(frozen=True)
class Call:
    """One call the target made to a harness-owned service (the business validator or the
    executor): what it passed and what it got back, at which step. A counterexample shows
    them, so "never executed" can say that the validator refused ``amount: 1000``."""

    service: str  # "validator" | "executor"
    step: int
    key: CallKey
    tool: str
    arguments: Any
    answer: str | None = None  # the validator's reason for refusing, None when it passed

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "step": self.step,
            "key": self.key.to_json(),
            "tool": self.tool,
            "arguments": self.arguments,
            "answer": self.answer,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Call:
        return cls(
            str(data["service"]),
            int(data["step"]),
            CallKey.from_json(data["key"]),
            str(data["tool"]),
            data.get("arguments"),
            data.get("answer"),
        )

    def describe(self) -> str:
        if self.service == "executor":
            return f"step {self.step}: executor({self.key.short()}, {self.tool}, {self.arguments!r})"
        answer = "passed" if self.answer is None else f"refused: {self.answer}"
        return f"step {self.step}: validator({self.key.short()}, {self.tool}, {self.arguments!r}) -> {answer}"


@dataclass
class Run:
    """One trace run against one target."""

    trace: Trace
    observations: list[Observation] = field(default_factory=list)
    errors: list[TargetError] = field(default_factory=list)  # what the target raised, hung on, or died of
    seconds: float = 0.0
    calls: list[Call] = field(default_factory=list)  # the validator's and the executor's inputs and answers
    # Per observation, for a provider-protocol target: how many payloads had been handed to
    # it (the one in progress included) when it was observed, and one more than all of them
    # once the body ended or the connection dropped; 0 before the first payload. Steps are
    # indexes into one parse of the stream; this says where in the stream itself the target
    # acted, so that a run can be judged under another reading of the same payloads
    # (:mod:`callsafe.certify.wire_readings`).
    wire_clock: list[int] = field(default_factory=list)
    # Per observation, for a provider-protocol target: the payload being handed over when it
    # was observed, as (the delivery's event index, the step before that delivery, the
    # payload's place among the delivery's payloads), or None between payloads. With it a
    # run is placed in another plan of the same payloads whose events are the same but whose
    # terminal points differ (a reading that ends a call at an earlier payload of the same
    # event, :func:`callsafe.certify.wire_readings.judge_rendered_readings`).
    wire_at: list[tuple[int, int, int] | None] = field(default_factory=list)
    # Inputs the target refused while its store was down (a lasting StoreFault), each
    # delivered again: (step, what it raised). A refusal there is the target failing
    # closed, not a target error; refusing again once the store is back is one.
    refusals: list[tuple[int, str]] = field(default_factory=list)


# How often an input a lasting store fault met is delivered again after its refusal.
REDELIVERIES = 3


class _Catalog(dict[str, ToolSpec]):
    """The live catalog the harness owns; catalog changes are applied before the event is
    delivered, so a target that validates "as it stands now" sees the change."""

    def apply(self, ev: ToolChanged) -> None:
        apply_tool_change(self, ev)


class _ProcessCrash(BaseException):
    """A :class:`Restart` marked ``during_validation``: the process dies inside the business
    validator. Raised there, it unwinds the target's whole stack (a ``BaseException``, so an
    ``except Exception`` in the target cannot swallow it, as no code survives a crash), and
    the outermost delivery restarts the target. The validator never returns."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _Delivery:
    """Delivers events to the target, tracking the step and the during-validation window."""

    def __init__(self, target: Target, run: Run, catalog: _Catalog, plan: WirePlan | None = None) -> None:
        self.target = target
        self.run = run
        self.catalog = catalog
        self.plan = plan
        self.step = -1
        self.fed = 0  # payloads handed to receive_wire so far (see Run.wire_clock)
        self.at: tuple[int, int, int] | None = None  # the payload being handed over (see Run.wire_at)
        self.depth = 0  # nesting of deliveries (re-entrant from inside the validator)
        self.pending: list[tuple[int, Event]] = []
        self.store_down = False  # a lasting StoreFault waits for the next input

    def deliver(self, index: int, event: Event) -> None:
        previous = self.step
        self.step = index
        if isinstance(event, ToolChanged):
            self.catalog.apply(event)
        crashed = False
        self.depth += 1
        try:
            if isinstance(event, Restart):
                self.store_down = False  # a crash ends the fault's input too (the model's reading)
                self._restart(index)
            elif isinstance(event, StoreFault):
                self._store_fault(index, event)
            elif self.plan is not None:
                self._deliver_wire(index, previous, event, self.plan)
            elif self.store_down:
                self.store_down = False
                self._receive_after_fault(index, event)
            else:
                self.target.receive(event)
        except _ProcessCrash as crash:
            if self.depth > 1:
                raise  # a crash ends every frame of the process, not just the innermost
            self._restart(crash.index)
            crashed = True
        except Exception as exc:  # the target's own failure is recorded, and the trace goes on
            self.run.errors.append(error_from_exception(exc, "receive", index))
        finally:
            self.depth -= 1
        if crashed:
            self.flush_pending()  # what was still to come arrives at the restarted process

    def _deliver_wire(self, index: int, previous: int, event: Event, plan: WirePlan) -> None:
        """One event for a provider-protocol target: its payloads (an exception the target
        raises on one is recorded and the next payload still arrives, as a read loop that
        logs and goes on would; a crash is not an exception and ends everything), then the
        event itself where it is the application's, then the end of the body."""
        delivery = plan.deliveries[index]
        wire: Any = self.target
        for k, payload in enumerate(delivery.fresh_payloads()):
            self.step = previous if k < delivery.early else index
            self.fed += 1
            outer, self.at = self.at, (index, previous, k)
            try:
                wire.receive_wire(payload)
            except Exception as exc:
                self.run.errors.append(error_from_exception(exc, "receive_wire", index))
            finally:
                self.at = outer
        self.step = index
        if delivery.end_stream or (delivery.receive and isinstance(event, Disconnect)):
            self.fed = plan.payload_count + 1  # the end of the body (or of the connection)
        if delivery.receive:
            self.target.receive(event)
        if delivery.end_stream:
            try:
                wire.end_stream()
            except Exception as exc:
                self.run.errors.append(error_from_exception(exc, "end_stream", index))

    def _store_fault(self, index: int, event: StoreFault) -> None:
        """Arm the target's store fault for the next input (the ``store_faults`` capability)."""
        self.step = index
        arm = getattr(self.target, "store_fault", None)
        if arm is None:
            raise TypeError(f"target {self.target.name!r} declares store_faults but has no store_fault() method")
        arm(event.lasting, event.after)
        self.store_down = event.lasting

    def _receive_after_fault(self, index: int, event: Event) -> None:
        """The input a lasting store fault meets: a typed refusal is the target failing
        closed, so it is delivered again, up to :data:`REDELIVERIES` times, as a caller
        does after a refusal (the store is back by then); still refused, the last refusal
        is a target error."""
        last: Exception | None = None
        for _ in range(1 + REDELIVERIES):  # the delivery the fault met, then the redeliveries
            try:
                self.target.receive(event)
                return
            except Exception as exc:  # refused: failing closed while the store was down
                self.run.refusals.append((index, f"{type(exc).__name__}: {exc}"[:300]))
                last = exc
        assert last is not None
        raise last

    def _restart(self, index: int) -> None:
        self.step = index
        try:
            self.target.restart()
        except Exception as exc:
            self.run.errors.append(error_from_exception(exc, "restart", index))

    def flush_pending(self) -> None:
        while self.pending:
            index, event = self.pending.pop(0)
            if isinstance(event, Restart) and self.depth > 0:
                # A restart during validation is a crash there: the validator never returns.
                raise _ProcessCrash(index)
            self.deliver(index, event)

    # -- the harness-owned services ---------------------------------------------------

    def execute(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        frozen = _frozen_copy(arguments)
        self._record(Executed(self.step, key, actor, tool, frozen, traceparent))
        self.run.calls.append(Call("executor", self.step, key, tool, frozen))

    def validate(self, key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
        step = self.step
        self._record(BusinessValidated(step, key, tool))
        self.flush_pending()  # what arrives while the validator runs
        spec = self.catalog.get(tool)
        answer = business_check(spec, arguments) if spec is not None else "unknown tool"
        self.run.calls.append(Call("validator", step, key, tool, _frozen_copy(arguments), answer))
        return answer

    def observe(self, obs: Observation) -> None:
        self._record(obs)

    def _record(self, obs: Observation) -> None:
        self.run.observations.append(obs)
        self.run.wire_clock.append(self.fed)
        self.run.wire_at.append(self.at)


def _frozen_copy(value: Any) -> Any:
    """A deep copy of JSON-like arguments, so a target cannot mutate what was observed.

    A string that holds a UTF-16 surrogate pair as two code units (a Python library that
    joined a pair split across two stream events, ``"\\ud83d" + "\\ude00"``) is the same text
    as the character the pair encodes, which is what the model reads when it joins them
    (:attr:`~callsafe.model.system.Reading.join_split_surrogates`): it is observed as that
    character. A lone surrogate stays as it is."""
    if isinstance(value, dict):
        return {_frozen_copy(k): _frozen_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_frozen_copy(v) for v in value]
    if isinstance(value, str) and not value.isascii():
        return join_surrogate_pairs(value)
    return value


class _StoreFolders:
    """Empty folders for runs' stores, reused within a process.

    Each run gets a folder nobody else is using, emptied before it is handed out again.
    Reusing beats creating: on some file systems creating and removing a directory costs
    about a millisecond, which at thousands of runs is most of a certification's time.
    The folders live in one temporary root per process, removed when the process exits
    (also in pool workers)."""

    def __init__(self) -> None:
        self.root: tempfile.TemporaryDirectory[str] | None = None
        self.free: list[Path] = []
        self.count = itertools.count()

    def acquire(self) -> Path:
        if self.root is None or not Path(self.root.name).is_dir():
            self.root = tempfile.TemporaryDirectory(prefix="callsafe-stores-")
            multiprocessing.util.Finalize(self.root, self.root.cleanup, exitpriority=0)
            self.free = []
        if self.free:
            return self.free.pop()
        path = Path(self.root.name) / f"store-{next(self.count)}"
        path.mkdir()
        return path

    def release(self, path: Path) -> None:
        try:
            for entry in os.scandir(path):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        except OSError:
            return  # not reusable: leave it to the root's cleanup
        self.free.append(path)


_STORES = _StoreFolders()


def fresh_store_dir() -> Path:
    """An empty folder for one run's store (give it back with :func:`release_store_dir`)."""
    return _STORES.acquire()


def release_store_dir(path: Path) -> None:
    _STORES.release(path)


class Session:
    """One target, started once, fed events one delivery at a time.

    :func:`run_trace` is a session fed a whole trace; the hypothesis state machine
    (:mod:`callsafe.generators.machine` via :mod:`callsafe.certify.machine`) feeds one as its
    rules fire. ``send(event, during=...)`` delivers ``event`` at the next step and holds the
    ``during`` events until the target calls the business validator (or, when it does not,
    delivers them right after), exactly as a trace with ``during_validation`` events is run.
    """

    def __init__(
        self,
        target: Target,
        tools: Mapping[str, ToolSpec],
        limits: Limits,
        store_dir: Path | None = None,
        plan: WirePlan | None = None,
    ) -> None:
        if plan is None and target.protocol != ABSTRACT:
            raise ValueError(
                f"target {target.name!r} reads {target.protocol!r}: a session for it needs the wire plan of a whole "
                "trace (run_trace makes one); event-by-event sessions deliver abstract events only"
            )
        self.target = target
        self.run = Run(Trace(events=(), tools=dict(tools), limits=limits))
        self.catalog = _Catalog(tools)
        self.delivery = _Delivery(target, self.run, self.catalog, plan)
        self.next_index = 0
        self._own_store: Path | None = None
        self._store_dir = store_dir
        self._started = 0.0
        self.limits = limits

    def open(self) -> Session:
        self._started = time.perf_counter()
        if self._store_dir is None:
            self._own_store = self._store_dir = fresh_store_dir()
        delivery = self.delivery
        env = TargetEnv(
            executor=delivery.execute,
            business_validator=delivery.validate,
            tools=self.catalog,
            limits=self.limits,
            observe=delivery.observe,
            step=lambda: delivery.step,
            clock=lambda: float(max(delivery.step, 0)),
            store_dir=self._store_dir,
        )
        span_recording.begin_run()  # a directory recording of spans: a file per trace
        self.target.start(env)
        return self

    @property
    def observations(self) -> list[Observation]:
        return self.run.observations

    def send(self, event: Event, during: Sequence[Event] = ()) -> None:
        """Deliver ``event``; ``during`` arrive while the target validates a call (if it
        does), else right after ``event``."""
        index = self.next_index
        self.delivery.pending = [(index + 1 + k, e) for k, e in enumerate(during)]
        self.next_index = index + 1 + len(during)
        self.delivery.deliver(index, event)
        self.delivery.flush_pending()  # no validation consumed them: they arrive now

    def abandon(self) -> None:
        """Give the store back without closing a target that cannot be trusted to return."""
        if self._own_store is not None:
            release_store_dir(self._own_store)
            self._own_store = None
        self.run.seconds = time.perf_counter() - self._started

    def close(self) -> Run:
        try:
            self.target.close()
        except Exception as exc:
            self.run.errors.append(error_from_exception(exc, "close"))
        finally:
            if self._own_store is not None:
                release_store_dir(self._own_store)
                self._own_store = None
        self.run.seconds = time.perf_counter() - self._started
        return self.run


def run_trace(target: Target, trace: Trace, store_dir: Path | None = None, plan: WirePlan | None = None) -> Run:
    """Run ``trace`` against a freshly started ``target``; return what was observed.

    For a provider-protocol target, ``plan`` is the trace's wire plan
    (:func:`callsafe.certify.wire.prepare`, which also relabels the trace: pass the
    relabelled trace with it); without one it is made here, and
    :class:`~callsafe.providers.base.NotRepresentable` says the protocol cannot carry the
    trace. ``run.trace`` is the trace that ran."""
    if plan is None and target.protocol != ABSTRACT:
        trace, plan = prepare(trace, target.protocol, reconnects(target))
    session = Session(target, trace.tools, trace.limits, store_dir, plan)
    try:
        session.open()
        events = trace.delivered()
        i = 0
        while i < len(events):
            j = i + 1
            while j < len(events) and getattr(events[j], "during_validation", False):
                j += 1
            session.send(events[i], events[i + 1 : j])
            i = j
    except TraceTimeout as timeout:
        # The target is stuck: it is not closed (that could hang too), only its store is freed.
        session.abandon()
        session.run.trace = trace
        where = "start" if session.delivery.step < 0 else _where(events_at(trace, session.delivery.step))
        step = None if session.delivery.step < 0 else session.delivery.step
        session.run.errors.append(TargetError("hang", where, str(timeout), step, timeout.stack))
        raise RunStopped(session.run) from None
    except Exception as exc:
        session.abandon()
        session.run.trace = trace
        session.run.errors.append(error_from_exception(exc, "start"))
        raise RunStopped(session.run) from None
    run = session.close()
    run.trace = trace
    return run


class RunStopped(Exception):
    """The run could not go on (the target hung, or ``start`` raised); ``run`` has what was
    observed until then and the :class:`TargetError` that stopped it (the last of
    ``run.errors``). :func:`run_trace` raises it; the caller judges the partial run."""

    def __init__(self, run: Run) -> None:
        super().__init__(run.errors[-1].describe() if run.errors else "stopped")
        self.run = run


def events_at(trace: Trace, step: int) -> Event | None:
    """The event delivered at ``step`` (replays expanded), None past the end."""
    delivered = trace.delivered()
    return delivered[step] if 0 <= step < len(delivered) else None


def _where(event: Event | None) -> str:
    return "restart" if isinstance(event, Restart) else "receive"
