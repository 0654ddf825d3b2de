"""A restart during validation is a crash there: the validator never returns, the target
is restarted, and the call whose validation was interrupted never runs."""

from __future__ import annotations

import contextlib

import pytest

from callsafe.certify.runner import run_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.invariants import check_all
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import BusinessValidated, Executed, Restart, Trace
from callsafe.targets.reference import ReferenceTarget


def crash_trace() -> Trace:
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1").call("a", "pay", '{"amount":1}')
    b.add(Restart(during_validation=True))  # the process dies while validating call a
    b.replay(0, 4)  # the provider reconnects and re-delivers everything
    b.open("b", "pay").fragment("b", "{}").terminal("b")
    return b.build()


def test_the_oracle_fails_the_interrupted_call() -> None:
    verdicts = judge(crash_trace()).by_short_name()
    assert verdicts["t1/a"].execute == "must_not" and "restart" in verdicts["t1/a"].reason
    assert verdicts["t1/b"].execute == "must"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_reference_survives_a_crash_inside_its_validator(store: str) -> None:
    trace = crash_trace()
    run = run_trace(ReferenceTarget(store=store), trace)
    assert run.errors == []
    assert [o.key.call for o in run.observations if isinstance(o, BusinessValidated)][:1] == ["a"]
    assert [o.key.call for o in run.observations if isinstance(o, Executed)] == ["b"]
    assert {k: v for k, v in check_all(trace, run.observations).items() if v} == {}


class _SwallowingTarget(ReferenceTarget):
    """Catches everything its validator raises: a crash is not an exception it can catch."""

    def receive(self, event):  # type: ignore[no-untyped-def]
        with contextlib.suppress(Exception):
            super().receive(event)


def test_a_target_cannot_swallow_the_crash() -> None:
    run = run_trace(_SwallowingTarget(store="memory"), crash_trace())
    assert [o.key.call for o in run.observations if isinstance(o, Executed)] == ["b"]
