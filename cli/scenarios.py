"""``callsafe scenarios``: the catalog of named scenarios, to list and to export.

Why a command: a user who wants to know what certification tries, run one scenario
(``callsafe certify T --scenario NAME``), or start a trace file of their own from one (and
certify a folder of them with ``--traces DIR``) should not have to read
``generators/catalog.py``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from callsafe.cli.console import SafeConsole, echo, echo_json

__all__ = ["scenarios_cmd"]

console = SafeConsole()
console.soft_wrap = not console.is_terminal


@click.group("scenarios")
def scenarios_cmd() -> None:
    """The catalog of named scenarios (from the spec and from public bug reports)."""


@scenarios_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Name, origin, source, events and needed capabilities as JSON.")
@click.argument("patterns", nargs=-1)
def list_cmd(as_json: bool, patterns: tuple[str, ...]) -> None:
    """List the catalog's scenarios (those matching PATTERNS, fnmatch, when given)."""
    from callsafe.certify.harness import select_scenarios
    from callsafe.generators.needs import needed_capabilities

    chosen = select_scenarios(patterns)
    if not chosen:
        echo(f"no scenario matches {', '.join(patterns)}", err=True)
        sys.exit(2)
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "origin": s.origin,
            "events": len(s.trace.events),
            "needs": sorted(needed_capabilities(s.trace)),
            "source": s.source,
        }
        for s in chosen
    ]
    if as_json:
        echo_json(rows)
        return
    if not console.is_terminal:  # a pipe or a CI log: one whole line per scenario, nothing cut
        for r in rows:
            needs = f", needs {', '.join(r['needs'])}" if r["needs"] else ""
            echo(f"{r['name']}  ({r['origin']}, {r['events']} events{needs}): {r['source']}")
        return
    table = Table(title=f"callsafe scenarios: {len(rows)} of the catalog")
    for col in ("name", "origin", "events", "needs", "source"):
        table.add_column(col, justify="right" if col == "events" else "left", no_wrap=col == "name")
    for r in rows:
        table.add_row(str(r["name"]), str(r["origin"]), str(r["events"]), ", ".join(r["needs"]), str(r["source"]))
    console.print(table, markup=False)


@scenarios_cmd.command("export")
@click.argument("name")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the trace file here (default: print it).",
)
def export_cmd(name: str, out: Path | None) -> None:
    """Write the scenario NAME as a trace file (the format of `callsafe replay` and of
    `callsafe certify --traces DIR`)."""
    from callsafe.generators.catalog import CATALOG

    found = next((s for s in CATALOG if s.name == name), None)
    if found is None:
        raise click.BadParameter(f"no scenario {name!r} (callsafe scenarios list)", param_hint="NAME")
    text = found.trace.dumps() + "\n"
    if out is None:
        click.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    echo(str(out))
    from callsafe.certify.targets import replay_command
    from callsafe.cli.serve import servable_protocols

    echo(f"judge it: {replay_command(out, 'reference')} (or your target)", err=True)
    protocols = servable_protocols(found.trace)
    if protocols:
        serve = f"callsafe serve {shlex.quote(str(out))} --protocol {protocols[0]}"
        echo(f"serve it: {serve} (it serves as {', '.join(protocols)})", err=True)
    else:
        echo("no provider protocol can carry this scenario as a stream (callsafe serve refuses it)", err=True)
