"""``callsafe matrix``: certify every available client library and the reference
implementation, and write the conformance matrix (Markdown, JSON, HTML).

A command of its own module so that the main CLI only registers it
(``main.add_command(matrix_cmd)``); everything it does lives in
:mod:`callsafe.campaigns.matrix`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from callsafe.cli.console import SafeConsole

if TYPE_CHECKING:
    from callsafe.campaigns.matrix import Matrix

__all__ = ["matrix_cmd"]

_STYLE = {"holds": "green", "violated": "bold red", "not_established": "yellow", "not_applicable": "dim"}
_SHORT = {"holds": "ok", "violated": "X", "not_established": "?", "not_applicable": "-"}
_COLUMN = {
    "INV-TERMINAL": "TERM",
    "INV-EXACT-ARGS": "ARGS",
    "INV-ONCE": "ONCE",
    "INV-TURN": "TURN",
    "INV-CANCEL": "CANC",
    "INV-CONFIRM": "CONF",
    "INV-VALIDATE-ONCE": "VAL1",
    "INV-BOUNDED": "BOUND",
    "INV-LEDGER": "LEDG",
    "INV-STATUS": "STAT",
    "LIVE-DISPATCH": "LIVE",
}


@click.command("matrix")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/matrix"),
    show_default=True,
    help="Folder for matrix.md, matrix.json, matrix.html and the counterexample traces.",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Per row: stop generating traces after this long (a row cut short is marked; counts then depend on "
    "the machine).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the random walks (the rest is deterministic).")
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Exhaustive bound: events after the turn start.",
)
@click.option("--walks", type=click.IntRange(min=0), default=200, show_default=True, help="Random walks per row.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes per row, program rows included (each worker runs its own program process and "
    "its own loopback provider); how a row runs, never what it finds.",
)
@click.option(
    "--only",
    multiple=True,
    metavar="TEXT",
    help="Only the rows whose target name contains TEXT (repeatable), e.g. --only openai --only reference.",
)
@click.option(
    "--ecosystem",
    type=click.Choice(["python", "node"]),
    default=None,
    help="Only one group's library rows (python: the Python libraries and agent frameworks; node: the "
    "TypeScript libraries), after the reference implementation. Default: both.",
)
@click.option(
    "--mcp",
    is_flag=True,
    help="Add the MCP hosts' rows (callsafe.targets.mcp_rows: agents with their framework's MCP client, "
    "certified as agent:COMMAND; a process per model stream, so minutes per row).",
)
@click.option(
    "--readme",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="After the run, rewrite the matrix table of this page (between its matrix markers: docs/matrix.md) "
    "from the run, and write the run's summary to matrix-summary.json beside it (the test that keeps them "
    "equal reads both).",
)
@click.option(
    "--merge",
    is_flag=True,
    help="With --readme: put this run's rows (an --only run) into the recorded matrix-summary.json and page "
    "rather than replacing them (same options required; the page says which rows a later run measured).",
)
def matrix_cmd(
    merge: bool,
    readme: Path | None,
    report_dir: Path,
    budget: float | None,
    seed: int,
    depth: int,
    walks: int,
    workers: int,
    only: tuple[str, ...],
    ecosystem: str | None,
    mcp: bool,
) -> None:
    """Certify each client library adapter (one row per surface: the moment the library
    presents a call as finished) and the reference implementation under the same
    options, and write the conformance table: library and version × invariant, each cell
    holds, violated (with its minimal counterexample and the standalone script that
    reproduces it) or not applicable.

    A library that is not installed gets a row saying so. Exit status 0, unless the
    reference implementation or callsafe.guard violates an invariant.
    """
    from callsafe.campaigns.matrix import (
        GUARD_ROWS,
        MATRIX_GENERATORS,
        REFERENCE_ROW,
        RowResult,
        RowSpec,
        default_rows,
        run_matrix,
        write_matrix,
    )
    from callsafe.certify.harness import Options

    try:
        options = Options(
            budget=budget, depth=depth, seed=seed, walks=walks, workers=workers, generators=MATRIX_GENERATORS
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    rows = [r for r in default_rows(ecosystem, mcp) if not only or any(text in r.spec for text in only)]
    if not rows:
        raise click.BadParameter(f"no row matches {', '.join(only)}", param_hint="--only")
    console = SafeConsole() if sys.stdout.isatty() else SafeConsole(width=140)  # a log file gets the whole table
    err = SafeConsole(stderr=True)

    def progress(row: RowSpec, result: RowResult | None) -> None:
        if result is None:
            err.print(f"[dim]certifying {row.spec} ...[/dim]", highlight=False)
        elif result.unavailable:
            err.print(f"  {escape(row.spec)}: skipped ({escape(result.unavailable)})", highlight=False)
        else:
            cut = " (budget ran out)" if result.budget_exhausted else ""
            err.print(f"  {row.spec}: {result.traces_run} traces in {result.seconds:.1f} s{cut}", highlight=False)

    matrix = run_matrix(options, rows, progress)
    files = write_matrix(matrix, report_dir)
    if merge and readme is None:
        raise click.BadParameter("--merge needs --readme", param_hint="--merge")
    if readme is not None:
        _write_readme(readme, matrix, merge)

    ids = list(matrix.rows[0].cells) if matrix.rows else []
    table = Table(title=f"callsafe conformance matrix (seed {seed})", box=None, pad_edge=False)
    table.add_column("row", no_wrap=True)
    for inv in ids:
        table.add_column(_COLUMN.get(inv, inv), justify="center")
    for r in matrix.rows:
        library, _, surface = r.row.label.partition(" · ")
        installed = r.version if r.version and not r.unavailable else "(not installed)"
        label = escape(f"{library} {installed} · {surface}")
        cells = [f"[{_STYLE[c.status]}]{_SHORT[c.status]}[/{_STYLE[c.status]}]" for c in r.cells.values()]
        table.add_row(label, *cells)
    console.print(table)
    console.print("ok: holds · X: violated · -: not applicable (see matrix.md for what each cell means and why)")
    for r in matrix.rows:
        if r.unavailable:
            console.print(f"not installed: {escape(r.row.spec)}: {escape(r.unavailable)}", highlight=False)
    console.print(f"{len(matrix.rows)} rows in {matrix.seconds:.1f} s")
    console.print(f"wrote {files.markdown}, {files.json}, {files.html}")
    reference = next((r for r in matrix.rows if r.row == REFERENCE_ROW), None)
    if reference is not None and any(c.status == "violated" for c in reference.cells.values()):
        console.print("[bold red]the reference implementation violates an invariant[/bold red]")
        sys.exit(1)
    guards = [r for r in matrix.rows if r.row in GUARD_ROWS and any(c.status == "violated" for c in r.cells.values())]
    if guards:
        console.print(
            f"[bold red]callsafe.guard violates an invariant: {', '.join(r.row.spec for r in guards)}[/bold red]"
        )
        sys.exit(1)


def _write_readme(readme: Path, matrix: Matrix, merge: bool = False) -> None:
    """The page's table (``docs/matrix.md``) and ``matrix-summary.json`` beside it from this run
    (``merge``: this run's rows put into the recorded summary)."""
    import json

    from callsafe.campaigns.matrix import (
        default_rows,
        matrix_json,
        matrix_summary,
        merge_summary,
        readme_table,
        replace_readme_table,
    )

    summary = matrix_summary(matrix_json(matrix))
    target = readme.parent / "matrix-summary.json"
    if merge:
        try:
            recorded = json.loads(target.read_text(encoding="utf-8"))
            summary = merge_summary(recorded, summary, [r.spec for r in default_rows()])
        except (OSError, ValueError, KeyError) as exc:
            raise click.BadParameter(f"cannot merge into {target}: {exc}", param_hint="--merge") from None
    text = readme.read_text(encoding="utf-8")
    try:
        updated = replace_readme_table(text, readme_table(summary))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--readme") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    readme.write_text(updated, encoding="utf-8")
