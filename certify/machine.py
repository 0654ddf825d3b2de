"""``certify_machine``: the hypothesis state machine of :mod:`callsafe.generators.machine`
bound to a target, for use in your own test suite.

    from callsafe.certify.machine import certify_machine

    TestMyAssembler = certify_machine("mypkg.adapter:factory").TestCase

Every run of the machine starts a fresh target behind the harness's spies (executor,
business validator) and sends it the events its rules choose; after each event every
invariant that applies to the target is checked on what the harness observed. A failure
shrinks to a minimal sequence of rules, and its message carries the trace as JSON.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from hypothesis.stateful import RuleBasedStateMachine

from callsafe.certify.runner import Session
from callsafe.certify.targets import TargetFactory, describe, resolve_target
from callsafe.generators.machine import trace_machine
from callsafe.model.vocabulary import Event, Limits, Observation, ToolSpec, Trace

__all__ = ["certify_machine"]


class _SessionDriver:
    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def observations(self) -> Sequence[Observation]:
        return self.session.observations

    def send(self, event: Event, during: Sequence[Event] = ()) -> None:
        self.session.send(event, during)

    def close(self) -> None:
        self.session.close()


def certify_machine(
    target: str | TargetFactory,
    tools: Mapping[str, ToolSpec] | None = None,
    limits: Limits | None = None,
) -> type[RuleBasedStateMachine]:
    """A state machine class certifying ``target`` (a name or a factory); use its
    ``TestCase`` in a test module, or ``hypothesis.stateful.run_state_machine_as_test``."""
    factory = resolve_target(target) if isinstance(target, str) else target
    info = describe(factory, target if isinstance(target, str) else None)
    if info.protocol != "abstract":
        raise ValueError(
            f"{info.name} reads {info.protocol!r}: the state machine sends abstract events one at a time; "
            "certify a provider-protocol target with callsafe.certify.harness.certify"
        )

    def open_driver(catalog: Mapping[str, ToolSpec], run_limits: Limits) -> _SessionDriver:
        return _SessionDriver(Session(factory(), catalog, run_limits).open())

    def shrink(trace: Trace, invariant: str) -> Trace:
        from callsafe.certify.harness import check_trace
        from callsafe.certify.minimize import minimize_trace

        def fails(candidate: Trace) -> bool:
            return invariant in check_trace(factory, candidate).violated

        return minimize_trace(trace, fails, deadline=time.perf_counter() + 20) if fails(trace) else trace

    name = "Certify" + "".join(part.capitalize() for part in info.name.replace("-", "_").split("_") if part)
    return trace_machine(open_driver, info.capabilities, tools, limits, name=name, shrink=shrink)
