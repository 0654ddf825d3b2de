"""The formal commands of the ``callsafe`` CLI: ``prove`` (z3) and ``export`` (TLA+).

They live apart from :mod:`callsafe.cli.main` so that the formal side can grow without
touching the main command group; the group registers them with
``main.add_command(prove_cmd)`` and ``main.add_command(export_cmd)``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from callsafe.cli.console import echo, echo_json
from callsafe.formal.abstract import CONTROLS, Config, SystemModel

__all__ = ["export_cmd", "prove_cmd"]

_DEFAULTS = {"calls": 2, "turns": 2, "fragments": 1, "restarts": 1}

_F = TypeVar("_F", bound=Callable[..., Any])


def _bounds(func: _F) -> _F:
    options = [
        click.option("--calls", type=int, default=None, help="Tool calls [default: 2, or the mutant's]."),
        click.option(
            "--turns", type=int, default=None, help="User turns, one conversation [default: 2, or the mutant's]."
        ),
        click.option("--fragments", type=int, default=None, help="Fragments per call [default: 1, or the mutant's]."),
        click.option(
            "--controls",
            default=None,
            metavar="LIST",
            help=f"Comma-separated controls [default: all, or the mutant's]: {', '.join(CONTROLS)}.",
        ),
        click.option("--restarts", type=int, default=None, help="Restarts allowed [default: 1, or the mutant's]."),
        click.option(
            "--mutant", default=None, metavar="NAME", help="Check a deliberately wrong model (see --list-mutants)."
        ),
        click.option("--list-mutants", is_flag=True, help="List the model mutants and exit."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _model(
    calls: int | None,
    turns: int | None,
    fragments: int | None,
    controls: str | None,
    restarts: int | None,
    mutant: str | None,
) -> tuple[SystemModel, str]:
    """The model to check: the correct one or a mutant, with the bounds given; a bound not
    given comes from the mutant's own configuration, else the defaults."""
    from callsafe.formal.mutants import mutant as find_mutant

    base = Config(**_DEFAULTS)  # type: ignore[arg-type]
    chosen = None
    if mutant is not None:
        try:
            chosen = find_mutant(mutant)
        except KeyError as exc:
            raise click.BadParameter(str(exc.args[0]), param_hint="--mutant") from None
        base = chosen.config
    try:
        config = Config(
            calls=base.calls if calls is None else calls,
            turns=base.turns if turns is None else turns,
            fragments=base.fragments if fragments is None else fragments,
            controls=base.controls if controls is None else frozenset(c for c in controls.split(",") if c),
            restarts=base.restarts if restarts is None else restarts,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if chosen is None:
        return SystemModel(config), "correct"
    return chosen.model(config), f"mutant {chosen.name}"


def _describe(config: Config) -> str:
    controls = "all" if config.controls == frozenset(CONTROLS) else ",".join(sorted(config.controls)) or "none"
    return (
        f"calls={config.calls} turns={config.turns} fragments={config.fragments} "
        f"restarts={config.restarts} controls={controls}"
    )


def _list_mutants() -> None:
    from callsafe.formal.mutants import MASKED, MUTANTS

    for title, group in (("mutants (each breaks an invariant)", MUTANTS), ("masked faults (safe: hidden)", MASKED)):
        echo(title + ":")
        for m in group.values():
            echo(f"  {m.name:24} {m.description}")


@click.command("prove")
@click.option("--depth", default=12, show_default=True, help="Bounded model checking depth (steps).")
@click.option("--k", "k_max", default=4, show_default=True, help="Largest k tried by k-induction.")
@click.option("--no-strengthen", is_flag=True, help="Plain k-induction only, without proved lemmas.")
@click.option("--lemmas", "show_lemmas", is_flag=True, help="Print the lemmas the induction used.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@_bounds
def prove_cmd(
    depth: int,
    k_max: int,
    no_strengthen: bool,
    show_lemmas: bool,
    as_json: bool,
    calls: int | None,
    turns: int | None,
    fragments: int | None,
    controls: str | None,
    restarts: int | None,
    mutant: str | None,
    list_mutants: bool,
) -> None:
    """Prove the state invariants with z3: bounded model checking to --depth, then
    k-induction for traces of any length.

    Per invariant: proved (and how), holds to depth k (bounded only), or violated with
    a shortest counterexample, one step per line: "action results in <what changed>".
    Exits 1 when an invariant is violated.
    """
    if list_mutants:
        _list_mutants()
        return
    from callsafe.formal.z3_proof import prove

    model, label = _model(calls, turns, fragments, controls, restarts, mutant)
    start = time.perf_counter()
    report = prove(model, depth=depth, k_max=k_max, strengthen=not no_strengthen)
    total = time.perf_counter() - start
    if as_json:
        echo_json({"model": label, **report.to_json(), "seconds": round(total, 3)})
    else:
        echo(f"callsafe prove: {label}; {_describe(model.config)}")
        echo(f"{len(model.all_actions)} actions; bounded model checking to depth {depth}: {report.bmc_seconds:.1f} s")
        if report.plain_k is None and report.k_limit:
            echo(
                f"k-induction: plain, not inductive up to k={report.k_limit}; strengthened with"
                f" {len(report.lemmas)} lemmas proved by Houdini ({len(report.used)} in the proof's unsat core):"
                f" {report.induction_seconds:.1f} s"
            )
        elif report.k_limit:
            echo(f"k-induction: {report.induction_seconds:.1f} s")
        width = max(len(inv) for inv in report.verdicts)
        for inv, verdict in report.verdicts.items():
            echo(f"{inv:{width}}  {verdict.summary()}  [{verdict.seconds:.1f} s]")
            if verdict.counterexample is not None:
                for line in verdict.counterexample.lines():
                    echo("    " + line)
        if show_lemmas:
            echo("lemmas used by the induction:")
            for lemma in report.used:
                echo(f"    {lemma}")
        echo(f"total {total:.1f} s")
    if any(v.status == "violated" for v in report.verdicts.values()):
        sys.exit(1)


@click.command("export")
@click.option(
    "--tla",
    "tla_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Write the TLA+ module and its TLC configuration into this directory.",
)
@click.option("--module", default="CallsafeModel", show_default=True, help="The TLA+ module name.")
@click.option("--no-canonical", is_flag=True, help="Export the system without canonicalisation.")
@click.option(
    "--symmetry",
    is_flag=True,
    help="Give TLC the explorer's symmetry (the calls of a turn are interchangeable); compare with the "
    "symmetric explorer.",
)
@click.option(
    "--readable",
    is_flag=True,
    help="Every action written out in full as the rules compute it (slower for TLC) instead of the lean module.",
)
@click.option("--tlc", "run", is_flag=True, help="Run TLC on it and compare with callsafe's explorer.")
@_bounds
def export_cmd(
    tla_dir: Path,
    module: str,
    no_canonical: bool,
    symmetry: bool,
    readable: bool,
    run: bool,
    calls: int | None,
    turns: int | None,
    fragments: int | None,
    controls: str | None,
    restarts: int | None,
    mutant: str | None,
    list_mutants: bool,
) -> None:
    """Export the model as TLA+ (generated from the lifecycle table and the system rules)
    for a configuration, with a TLC configuration checking every state invariant.

    The module is the lean one (parametrised actions, the table as constant functions);
    --readable writes every action out in full instead."""
    if list_mutants:
        _list_mutants()
        return
    from callsafe.formal.graph import explore
    from callsafe.formal.tla import TlcUnavailable, export_tla, run_tlc
    from callsafe.formal.tla_lean import export_lean

    if readable and symmetry:
        raise click.UsageError("--symmetry needs the lean module (the readable one names every call)")
    model, label = _model(calls, turns, fragments, controls, restarts, mutant)
    if no_canonical:
        model = SystemModel(model.config, model.table, model.guards, canonicalise=False)
    if readable:
        tla, cfg = export_tla(model, tla_dir, module)
    else:
        tla, cfg = export_lean(model, tla_dir, module, symmetry=symmetry)
    echo(str(tla))
    echo(str(cfg))
    if not run:
        return
    try:
        result = run_tlc(tla, cfg)
    except TlcUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    start = time.perf_counter()
    exploration = explore(model=model, symmetry=symmetry, graph=False)
    explored = time.perf_counter() - start
    echo(f"{label}; {_describe(model.config)}")
    echo(f"TLC: {result.distinct_states} distinct states, {result.states_generated} generated [{result.seconds:.1f} s]")
    states, transitions = exploration.stats().states, exploration.transitions
    echo(f"callsafe explorer: {states} states, {transitions} transitions [{explored:.1f} s]")
    if result.violated:
        path = exploration.shortest_violation(result.violated)
        echo(f"TLC: {result.violated} violated after {result.trace_length} steps: {' '.join(result.trace)}")
        echo(f"callsafe explorer: shortest {result.violated} violation: {len(path) if path else None} steps")
        sys.exit(1)
