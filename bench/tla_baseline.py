"""TLC's baseline for the exploration benchmark: the hand-written TLA+ specification
``bench/tla/CallLifecycle.tla`` and a model of it for one configuration.

Why a hand-written specification: callsafe's own TLA+ export (:mod:`callsafe.formal.tla_lean`)
is generated from the rules over ``Ops`` and carries the lifecycle table whole; a TLA+ user
would write the same model leaner (only the table's moves, one record per call), and TLC runs
such a spec with about half the CPU. The speed of callsafe's explorer is claimed against the
spec a TLA+ user would write. It was written from the lifecycle table (``model/lifecycle.py``)
and the system rules (``model/system.py``), not from the export; its distinct and generated
state counts equal the explorer's (``tests/test_bench_tla_spec.py``, and every benchmark run).

The specification covers every control of the abstract model on (as the benchmark runs it);
a configuration gives the calls of each turn (model values, so that TLC's ``SYMMETRY`` may
permute the calls of a turn), the fragments per call and the restarts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from callsafe.formal.abstract import CONTROLS
from callsafe.formal.abstract import Config as ModelConfig

__all__ = ["SPEC", "write_model"]

SPEC = Path(__file__).resolve().parent / "tla" / "CallLifecycle.tla"


def write_model(config: ModelConfig, directory: Path, symmetry: bool = False) -> tuple[Path, Path]:
    """``MC.tla`` and ``MC.cfg`` in ``directory`` (with a copy of the specification): the
    model of ``config`` for TLC, with ``SYMMETRY`` over the calls of a turn if asked."""
    if frozenset(config.controls) != frozenset(CONTROLS):
        raise ValueError("the hand-written specification has every control on; this configuration turns some off")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SPEC, directory / SPEC.name)
    names = [f"c{i}" for i in range(config.calls)]
    turns = ", ".join("{" + ", ".join(names[i] for i in members) + "}" for members in config.calls_of_turn)
    module = [
        "---- MODULE MC ----",
        "EXTENDS CallLifecycle",
        f"CONSTANTS {', '.join(names)}",
        f"MCTurnCalls == <<{turns}>>",
        "====",
        "",
    ]
    cfg = [
        "CONSTANTS",
        *(f"    {n} = {n}" for n in names),
        "    TurnCalls <- MCTurnCalls",
        f"    Fragments = {config.fragments}",
        f"    MaxRestarts = {config.restarts}",
        "INIT Init",
        "NEXT Next",
        "INVARIANT Safety",
        *(["SYMMETRY Symmetry"] if symmetry else []),
        "",
    ]
    tla, cfg_path = directory / "MC.tla", directory / "MC.cfg"
    tla.write_text("\n".join(module), encoding="utf-8")
    cfg_path.write_text("\n".join(cfg), encoding="utf-8")
    return tla, cfg_path
