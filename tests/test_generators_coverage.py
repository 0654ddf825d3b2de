"""Coverage suites from the state graph, the abstract-to-concrete mapping, the measure of
what concrete traces reach, and seeded random walks."""

from __future__ import annotations

import functools

from callsafe.formal.abstract import Action, Config, SystemModel
from callsafe.generators.concretise import concretise
from callsafe.generators.coverage import (
    ALL_TRANSITIONS,
    DEFAULT_CONFIG,
    CoverageSuite,
    config_for,
    coverage_suite,
    reached,
)
from callsafe.generators.needs import needed_capabilities
from callsafe.generators.walks import random_walks, walk_config
from callsafe.model.builder import TraceBuilder
from callsafe.model.lifecycle import CallEvent, State
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallTerminal, StopTenant, TurnStarted

S, E = State, CallEvent


@functools.cache
def default_suite() -> CoverageSuite:
    return coverage_suite(DEFAULT_CONFIG)


def test_reached_measures_transitions_and_pairs_from_the_oracle() -> None:
    trace = TraceBuilder().turn("t1").call("a", "x", "{}").cancel().build()
    got = reached([trace])
    assert got.transitions == {
        (S.ABSENT, E.OPEN),
        (S.COLLECTING, E.FRAGMENT),
        (S.COLLECTING, E.TERMINAL_COMPLETED),
        (S.TERMINAL_CANDIDATE, E.PARSE_OK),
        (S.TERMINAL_CANDIDATE, E.INVALID),  # tool "x" is not declared
    }
    assert ((S.ABSENT, E.OPEN), (S.COLLECTING, E.FRAGMENT)) in got.pairs
    assert len(got.pairs) == 4  # consecutive transitions of the one call


def test_suite_reaches_everything_a_concrete_trace_can() -> None:
    suite = default_suite()
    assert suite.reached.transitions == suite.abstract_transitions
    missing = ALL_TRANSITIONS - suite.reached.transitions
    # What no concrete trace reaches: inputs between a call's terminal event and its
    # validation, which only the events that carry during_validation can take.
    assert all(state is S.TERMINAL_CANDIDATE for state, _ in missing), missing
    assert len(suite.reached.transitions) >= 49
    assert len(suite.reached.pairs & suite.abstract_pairs) >= 0.95 * len(suite.abstract_pairs)
    assert all(isinstance(t[0], tuple) for t in suite.not_reached)  # only pairs are ever left over
    # greedy, but not wasteful: every trace covered something no earlier one did
    seen: set[object] = set()
    for trace in suite.traces:
        got = reached([trace])
        new = (got.transitions | got.pairs) - seen
        assert new, trace.name
        seen |= got.transitions | got.pairs


def test_a_path_becomes_the_events_it_names() -> None:
    config = Config(calls=1, turns=1, fragments=2, controls=frozenset({"stop_tenant"}), restarts=0)
    model = SystemModel(config)
    (state,) = model.init_states()
    initial = state
    path = []
    for name in ["start_turn", "open", "fragment", "fragment", "terminal_completed", "parse_ok", "valid", "dispatch"]:
        action = next(a for a in model.actions(state) if a.name == name)
        state, _ = model.next_state(state, action)
        path.append((action, state))
    trace = concretise(config, initial, path)
    assert [e.kind for e in trace.events] == ["turn_started", "call_opened", "fragment", "fragment", "call_terminal"]
    verdict = judge(trace).by_short_name()["t1/c0"]
    assert verdict.execute == "must" and verdict.arguments == {"v": 100}


def _walk(config: Config, names: list[str]) -> list[tuple[Action, object]]:
    model = SystemModel(config)
    (state,) = model.init_states()
    path = []
    for name in names:
        action = next(a for a in model.actions(state) if a.name == name)
        state, _ = model.next_state(state, action)
        path.append((action, state))
    return path


def test_internal_choices_become_data() -> None:
    config = Config(calls=1, turns=1, fragments=1, controls=frozenset({"malformed", "permission"}), restarts=0)
    model = SystemModel(config)
    (initial,) = model.init_states()
    base = ["start_turn", "open", "fragment", "terminal_completed"]
    malformed = concretise(config, initial, _walk(config, [*base, "parse_failed"]))  # type: ignore[arg-type]
    assert "malformed" in judge(malformed).by_short_name()["t1/c0"].reason
    invalid = concretise(config, initial, _walk(config, [*base, "parse_ok", "invalid"]))  # type: ignore[arg-type]
    assert "schema" in judge(invalid).by_short_name()["t1/c0"].reason
    denied = concretise(
        config,
        initial,
        _walk(config, [*base, "parse_ok", "valid", "dispatch_denied"]),  # type: ignore[arg-type]
    )
    assert isinstance(denied.events[0], TurnStarted) and denied.events[0].actor == "u2"
    assert judge(denied).by_short_name()["t1/c0"].execute == "must_not"


def test_a_stop_after_parsing_arrives_during_validation() -> None:
    config = Config(calls=1, turns=1, fragments=1, controls=frozenset({"stop_tenant"}), restarts=0)
    model = SystemModel(config)
    (initial,) = model.init_states()
    names = ["start_turn", "open", "fragment", "terminal_completed", "parse_ok", "stop_tenant"]
    trace = concretise(config, initial, _walk(config, names))  # type: ignore[arg-type]
    assert isinstance(trace.events[-2], CallTerminal)
    assert isinstance(trace.events[-1], StopTenant) and trace.events[-1].during_validation
    steps = [(s.before, s.event) for s in judge(trace).steps if not s.note]
    assert (S.TERMINAL_CANDIDATE, E.STOP_TENANT) in steps


def test_configs_fit_the_capabilities() -> None:
    caps = frozenset({"cancellation", "business_validation", "turn_binding"})
    config = config_for(caps)
    assert "restart" not in config.controls and "confirmation" not in config.controls
    assert {"cancel", "permission"} <= config.controls
    suite = coverage_suite(config)
    assert suite.traces
    for trace in suite.traces:
        assert needed_capabilities(trace) <= caps, trace.name
    for trace in random_walks(3, 30, walk_config(caps)):
        assert needed_capabilities(trace) <= caps, trace.name
    without_validator = coverage_suite(config, during=False)
    for trace in without_validator.traces:
        assert not any(getattr(e, "during_validation", False) for e in trace.events)


def test_walks_are_seeded() -> None:
    first = [t.name for t in random_walks(7, 20)]
    assert first == [t.name for t in random_walks(7, 20)]
    assert first != [t.name for t in random_walks(8, 20)]
    outcomes = {v.execute for t in random_walks(0, 100) for v in judge(t).verdicts.values()}
    # walks get calls executed, and stopped; "may" where a reading of an open choice differs
    assert {"must", "must_not"} <= outcomes <= {"must", "may", "must_not"}
