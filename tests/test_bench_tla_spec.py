"""The hand-written TLA+ specification TLC is measured on (``bench/tla/CallLifecycle.tla``)
searches the explorer's state space: the same distinct states and the same generated
states (TLC counts the initial state too), with and without symmetry, at small bounds so
that TLC finishes in seconds on a loaded machine. The benchmark checks the same at its own
bounds (3 calls, 2 turns, 1 fragment: 204,811 distinct, 6,541,221 generated) on every run.
Without Java or tla2tools.jar the TLC tests are skipped, with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_modules import bench_module

from callsafe.formal.abstract import CONTROLS, Config, SystemModel
from callsafe.formal.graph import explore

exploration = bench_module("exploration")
baseline = bench_module("tla_baseline")
_MISSING = exploration.tlc_available()
needs_tlc = pytest.mark.skipif(_MISSING is not None, reason=f"TLC unavailable: {_MISSING}")
ALL = frozenset(CONTROLS)


def test_the_model_names_the_calls_of_each_turn(tmp_path: Path) -> None:
    tla, cfg = baseline.write_model(Config(3, 2, 1, ALL, 1), tmp_path, symmetry=True)
    assert "MCTurnCalls == <<{c0, c1}, {c2}>>" in tla.read_text()
    text = cfg.read_text()
    assert "TurnCalls <- MCTurnCalls" in text and "SYMMETRY Symmetry" in text and "MaxRestarts = 1" in text
    assert (tmp_path / "CallLifecycle.tla").read_text() == baseline.SPEC.read_text()
    _, plain = baseline.write_model(Config(3, 2, 1, ALL, 1), tmp_path / "plain")
    assert "SYMMETRY" not in plain.read_text()


def test_a_configuration_with_a_control_off_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="every control on"):
        baseline.write_model(Config(1, 1, 1, frozenset({"cancel"}), 0), tmp_path)


@needs_tlc
@pytest.mark.parametrize(
    ("config", "symmetry"),
    [
        (Config(1, 1, 1, ALL, 1), False),  # 217 states
        (Config(1, 2, 2, ALL, 1), False),  # 628: turns, supersession, two fragments
        (Config(2, 1, 1, ALL, 0), True),  # 1,394: two calls of one turn, permuted
    ],
    ids=["1x1x1", "1x2x2", "2x1x1-symmetry"],
)
def test_tlc_on_the_hand_written_spec_counts_the_explorers_states(
    tmp_path: Path, config: Config, symmetry: bool
) -> None:
    tla, cfg = baseline.write_model(config, tmp_path, symmetry=symmetry)
    tlc = exploration.run_tlc(tla, cfg, 1, heap="256m")  # raises on a violation
    mine = explore(model=SystemModel(config), symmetry=symmetry, graph=False)
    assert tlc.states == mine.stats().states
    assert tlc.generated == mine.transitions + 1  # TLC also counts the initial state
