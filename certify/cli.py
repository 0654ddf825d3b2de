"""The ``callsafe`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from callsafe import __version__
from callsafe.model.abstract import CONTROLS, Config

__all__ = ["main"]

console = Console()


def _config(calls: int, turns: int, fragments: int, controls: str | None, restarts: int) -> Config:
    chosen = frozenset(CONTROLS) if controls is None else frozenset(c for c in controls.split(",") if c)
    try:
        return Config(calls=calls, turns=turns, fragments=fragments, controls=chosen, restarts=restarts)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_bounds = [
    click.option("--calls", default=2, show_default=True, help="Tool calls in the explored configuration."),
    click.option("--turns", default=2, show_default=True, help="User turns (one conversation)."),
    click.option("--fragments", default=1, show_default=True, help="Argument fragments per call."),
    click.option(
        "--controls",
        default=None,
        metavar="LIST",
        help=f"Comma-separated controls to enable (default: all): {', '.join(CONTROLS)}.",
    ),
    click.option("--restarts", default=1, show_default=True, help="Process restarts allowed."),
]


_F = TypeVar("_F", bound=Callable[..., Any])


def bounds(func: _F) -> _F:
    """The exploration bounds shared by the commands that explore the model."""
    for option in reversed(_bounds):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="callsafe")
def main() -> None:
    """callsafe: certify code that turns streamed LLM tool-call fragments into tool executions.

    The model (a lifecycle table and the system rules around it) generates adversarial
    event orders, runs them against an implementation, and judges every run by the spec's
    invariants.
    """


@main.command("model")
@click.option("--json", "as_json", is_flag=True, help="Print states, events, transitions and graph statistics as JSON.")
@bounds
def model_cmd(as_json: bool, calls: int, turns: int, fragments: int, controls: str | None, restarts: int) -> None:
    """Print the lifecycle table and the state graph's statistics.

    The graph is the reachable state space of a bounded configuration; every reachable
    state is checked against the state invariants.
    """
    from callsafe.model.summary import model_summary

    summary = model_summary(_config(calls, turns, fragments, controls, restarts))
    if as_json:
        click.echo(json.dumps(summary, indent=1))
        return
    table = Table(title="Lifecycle table: state-changing entries (the rest: ignored or rejected, see --json)")
    for col in ("from", "event", "to"):
        table.add_column(col)
    for row in summary["transitions"]:
        if row["outcome"] == "transition":
            table.add_row(row["from"], row["event"], row["to"])
    console.print(table)
    g = summary["graph"]
    stats = Table(title=f"State graph of {g['config']}")
    stats.add_column("measure")
    stats.add_column("value", justify="right")
    for key in (
        "states",
        "transitions",
        "terminal_states",
        "deadlocks",
        "lifecycle_transitions_covered",
        "lifecycle_transitions_total",
        "violations",
    ):
        stats.add_row(key.replace("_", " "), str(g[key]))
    console.print(stats)
    if g["violations"]:
        for inv, path in g["shortest_violations"].items():
            console.print(f"[red]{inv} violated[/red]: " + " -> ".join(path))
        sys.exit(1)
    console.print("[green]No reachable state violates a state invariant.[/green]")


@main.command("render")
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("out"), show_default=True
)
@click.option("--png", is_flag=True, help="Also write PNG files (for viewing at review size).")
def render_cmd(out_dir: Path, png: bool) -> None:
    """Write the diagrams: the lifecycle (from the table) and the system graph of a small
    configuration. DOT always; SVG (and PNG) where Graphviz's `dot` is installed."""
    from callsafe.model.diagrams import has_dot, write_diagrams
    from callsafe.model.graph import explore

    small = explore(Config(calls=1, turns=1, fragments=1, controls=frozenset({"cancel", "stop_tenant"}), restarts=0))
    written = write_diagrams(out_dir, small, ("svg", "png") if png else ("svg",))
    for path in written:
        click.echo(str(path))
    if not has_dot():
        click.echo("note: Graphviz 'dot' is not installed: wrote DOT only (apt-get install graphviz)", err=True)
