"""The hypothesis state machine bound to a target: a correct target passes, a broken one
fails with a shrunk, replayable trace, and rules a target cannot take are never fired."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest
import toy_targets
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from callsafe.certify.harness import check_trace
from callsafe.certify.machine import certify_machine
from callsafe.certify.runner import Session
from callsafe.generators.machine import trace_machine
from callsafe.model.vocabulary import Event, Limits, Observation, ToolSpec, Trace, TurnStarted

SETTINGS = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_a_correct_target_passes() -> None:
    run_state_machine_as_test(certify_machine("toy_targets:model_target"), settings=SETTINGS)


def test_a_broken_target_fails_with_a_small_replayable_trace() -> None:
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(certify_machine(toy_targets.dispatch_on_first_parse), settings=SETTINGS)
    message = str(failure.value)
    assert message.startswith("INV-TERMINAL")
    trace = Trace.from_json(json.loads(message.split("`callsafe replay FILE TARGET`):\n", 1)[1]))
    assert len(trace.events) <= 5  # shrunk: turn, open, the fragments that parse
    assert "INV-TERMINAL" in check_trace(toy_targets.dispatch_on_first_parse, trace).violated


class Recorder:
    """A correct target behind a session, recording what the machine sends."""

    def __init__(self, tools: Mapping[str, ToolSpec], limits: Limits) -> None:
        self.session = Session(toy_targets.ModelTarget(), tools, limits).open()

    @property
    def observations(self) -> Sequence[Observation]:
        return self.session.observations

    def send(self, event: Event, during: Sequence[Event] = ()) -> None:
        SENT.extend([event, *during])
        self.session.send(event, during)

    def close(self) -> None:
        self.session.close()


SENT: list[Event] = []


def test_rules_needing_a_missing_capability_never_fire() -> None:
    machine = trace_machine(Recorder, frozenset({"business_validation"}), {"note": ToolSpec()}, name="Bare")
    SENT.clear()
    run_state_machine_as_test(machine, settings=SETTINGS)
    kinds = {e.kind for e in SENT}
    assert {"turn_started", "call_opened", "fragment", "call_terminal"} <= kinds
    assert not kinds & {"cancel_turn", "stop_tenant", "restart", "confirm", "quarantine_response", "disconnect"}
    assert {e.turn for e in SENT if isinstance(e, TurnStarted)} == {"t1"}  # no new turn: it would supersede
