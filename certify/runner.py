"""The runner: deliver one trace to one target and record what it does at the boundary.

The harness owns the executor (a spy), the business validator (a spy that is also the
window through which events marked ``during_validation`` arrive), the catalog, the clock
and the store folder. Each run starts a fresh target with a fresh store; a
:class:`~callsafe.model.vocabulary.Restart` inside the trace calls ``target.restart()``
and keeps the store.

Observation steps follow :mod:`callsafe.model.invariants`: the index of the most recently
*started* delivery.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callsafe.certify.contract import Target, TargetEnv
from callsafe.model.system import business_check
from callsafe.model.vocabulary import (
    BusinessValidated,
    CallKey,
    Event,
    Executed,
    Observation,
    Restart,
    ToolChanged,
    ToolSpec,
    Trace,
)

__all__ = ["Run", "TargetError", "run_trace"]


class TargetError(RuntimeError):
    """The target raised while receiving an event: recorded, never hidden."""


@dataclass
class Run:
    """One trace run against one target."""

    trace: Trace
    observations: list[Observation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # exceptions the target raised, by step
    seconds: float = 0.0


class _Catalog(dict[str, ToolSpec]):
    """The live catalog the harness owns; catalog changes are applied before the event is
    delivered, so a target that validates "as it stands now" sees the change."""

    def apply(self, ev: ToolChanged) -> None:
        spec = self.pop(ev.tool, None)
        if ev.change == "rename" and spec is not None and ev.new_name:
            self[ev.new_name] = spec
        elif ev.change == "schema" and spec is not None:
            self[ev.tool] = ToolSpec(
                schema=dict(ev.schema or {}), confirm=spec.confirm, business=spec.business, actors=spec.actors
            )


class _Delivery:
    """Delivers events to the target, tracking the step and the during-validation window."""

    def __init__(self, target: Target, run: Run, catalog: _Catalog) -> None:
        self.target = target
        self.run = run
        self.catalog = catalog
        self.step = -1
        self.pending: list[tuple[int, Event]] = []

    def deliver(self, index: int, event: Event) -> None:
        self.step = index
        if isinstance(event, ToolChanged):
            self.catalog.apply(event)
        try:
            if isinstance(event, Restart):
                self.target.restart()
            else:
                self.target.receive(event)
        except Exception as exc:  # the target's own failure is an observation, not a crash
            self.run.errors.append(f"step {index}: {type(exc).__name__}: {exc}")

    def flush_pending(self) -> None:
        pending, self.pending = self.pending, []
        for index, event in pending:
            self.deliver(index, event)

    # -- the harness-owned services ---------------------------------------------------

    def execute(self, key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        self.run.observations.append(Executed(self.step, key, actor, tool, _frozen_copy(arguments), traceparent))

    def validate(self, key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
        self.run.observations.append(BusinessValidated(self.step, key, tool))
        self.flush_pending()  # what arrives while the validator runs
        spec = self.catalog.get(tool)
        return business_check(spec, arguments) if spec is not None else "unknown tool"

    def observe(self, obs: Observation) -> None:
        self.run.observations.append(obs)


def _frozen_copy(value: Any) -> Any:
    """A deep copy of JSON-like arguments, so a target cannot mutate what was observed."""
    if isinstance(value, dict):
        return {k: _frozen_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_frozen_copy(v) for v in value]
    return value


def run_trace(target: Target, trace: Trace, store_dir: Path | None = None) -> Run:
    """Run ``trace`` against a freshly started ``target``; return what was observed."""
    run = Run(trace)
    catalog = _Catalog(trace.tools)
    delivery = _Delivery(target, run, catalog)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="callsafe-store-") as tmp:
        env = TargetEnv(
            executor=delivery.execute,
            business_validator=delivery.validate,
            tools=catalog,
            limits=trace.limits,
            observe=delivery.observe,
            step=lambda: delivery.step,
            clock=lambda: float(max(delivery.step, 0)),
            store_dir=store_dir or Path(tmp),
        )
        target.start(env)
        try:
            events = trace.delivered()
            i = 0
            while i < len(events):
                j = i + 1
                while j < len(events) and getattr(events[j], "during_validation", False):
                    j += 1
                delivery.pending = [(k, events[k]) for k in range(i + 1, j)]
                delivery.deliver(i, events[i])
                delivery.flush_pending()  # no validation consumed them: they arrive now
                i = j
        finally:
            try:
                target.close()
            except Exception as exc:
                run.errors.append(f"close: {type(exc).__name__}: {exc}")
    run.seconds = time.perf_counter() - started
    return run
