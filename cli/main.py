"""The ``callsafe`` command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from callsafe import __version__
from callsafe.cli.console import SafeConsole, SafeGroup, echo, echo_json
from callsafe.formal.abstract import CONTROLS, Config

__all__ = ["main"]

console = SafeConsole()


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


@click.group(cls=SafeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="callsafe")
def main() -> None:
    """callsafe: certify code that turns streamed LLM tool-call fragments into tool executions.

    The model (a lifecycle table and the system rules around it) generates adversarial
    event orders, runs them against an implementation, and judges every run by the spec's
    invariants: `callsafe certify TARGET`, `callsafe replay TRACE.json --target TARGET`.
    """


@main.command("model")
@click.option("--json", "as_json", is_flag=True, help="Print states, events, transitions and graph statistics as JSON.")
@bounds
def model_cmd(as_json: bool, calls: int, turns: int, fragments: int, controls: str | None, restarts: int) -> None:
    """Print the lifecycle table and the state graph's statistics.

    The graph is the reachable state space of a bounded configuration; every reachable
    state is checked against the state invariants.
    """
    from callsafe.formal.summary import model_summary

    summary = model_summary(_config(calls, turns, fragments, controls, restarts))
    if as_json:
        echo_json(summary)
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
@click.option(
    "--report",
    "report_path",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A certification report.json (or its folder): adds the coverage heat map and one sequence diagram per "
    "counterexample.",
)
@click.option("--png", is_flag=True, help="Also write PNG files (for viewing at review size).")
def render_cmd(out_dir: Path, report_path: Path | None, png: bool) -> None:
    """Write the design-review diagrams: the lifecycle (from the table), the system rules
    (broadcasts, guards, restart), the reachable states of a small configuration and, with
    --report, the coverage heat map and the counterexamples' sequence diagrams. DOT always;
    SVG (and PNG) where Graphviz's `dot` is installed."""
    import jsonschema

    from callsafe.diagrams.model import has_dot
    from callsafe.reporting.diagram_files import load_report, write_model_diagrams, write_report_diagrams

    formats = ("svg", "png") if png else ("svg",)
    written = write_model_diagrams(out_dir, formats)
    notes: list[str] = []
    if report_path is None:
        notes.append(
            "the coverage heat map and the counterexamples' sequence diagrams need a report: --report REPORT.json"
        )
    else:
        try:
            report = load_report(report_path)
        except (OSError, ValueError, jsonschema.ValidationError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise click.BadParameter(f"not a certification report: {first}", param_hint="--report") from None
        done = write_report_diagrams(report, out_dir, formats)
        written += done.files
        notes += done.notes
    for path in written:
        echo(str(path))
    for note in notes:
        echo(f"note: {note}", err=True)
    if not has_dot():
        echo("note: Graphviz 'dot' is not installed: wrote DOT only (apt-get install graphviz)", err=True)


# --------------------------------------------------------------------------------------
# Certification
# --------------------------------------------------------------------------------------

_STATUS_STYLE = {"holds": "green", "violated": "bold red", "not_applicable": "dim"}


def _options(generators: str | None, **fields: Any) -> Any:
    """The harness's Options from the command line's values; a bad combination is a usage
    error (exit 2) with the Options' own message."""
    from callsafe.certify.harness import GENERATORS, Options

    chosen = GENERATORS if generators is None else tuple(g for g in generators.split(",") if g)
    try:
        return Options(generators=chosen, **fields)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _default_report_dir(spec: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in spec).strip("-") or "target"
    return Path("reports") / slug


@main.command("certify")
@click.argument("target", default="reference")
@click.option(
    "--budget",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Stop generating traces after this long (minimising counterexamples gets up to 30 s more).",
)
@click.option("--depth", default=3, show_default=True, help="Exhaustive bound: events after the turn start.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random walks (the rest is deterministic).")
@click.option("--walks", default=200, show_default=True, help="Random walks (each with its own seed from --seed).")
@click.option("--calls", default=2, show_default=True, help="Call ids in the walks and the exhaustive traces (1-4).")
@click.option(
    "--turns", default=2, show_default=True, help="Turns of the conversation (1-3; 1 for a target without cancel)."
)
@click.option("--fragments", default=2, show_default=True, help="Argument fragments per call (1-4).")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.json, report.html, junit.xml and counterexamples [default: reports/TARGET].",
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, help="JUnit XML file.")
@click.option("--workers", default=1, show_default=True, help="Worker processes (each builds its own targets).")
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run the traces on the Dask cluster of this scheduler (tcp://HOST:PORT; needs callsafe[dask]).",
)
@click.option(
    "--partition-size",
    type=int,
    default=None,
    metavar="N",
    help="Traces per partition with --workers or --scheduler [default: 256]. Smaller partitions spread a short run "
    "over more workers and lose less to a lost worker; larger ones ship fewer tasks.",
)
@click.option(
    "--generators",
    default=None,
    metavar="LIST",
    help="Comma-separated, of catalog,coverage,synthesis,walks,exhaustive (the default: all five) and wire "
    "(provider-shaped traces, for library adapters).",
)
@click.option("--no-minimize", is_flag=True, help="Keep counterexamples as found (faster).")
@click.option("--counterexamples", default=1, show_default=True, help="Counterexamples kept per invariant.")
def certify_cmd(
    target: str,
    budget: float | None,
    depth: int,
    seed: int,
    walks: int,
    calls: int,
    turns: int,
    fragments: int,
    report_dir: Path | None,
    junit: Path | None,
    workers: int,
    scheduler: str | None,
    partition_size: int | None,
    generators: str | None,
    no_minimize: bool,
    counterexamples: int,
) -> None:
    """Certify TARGET: run adversarial traces against it and judge every run.

    TARGET is `reference` (the reference implementation over SQLite in a temporary
    folder), `reference:memory`, `reference:postgres`, or `module:factory` (a callable that
    returns a fresh target). Exit status 0 only when no invariant was violated.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from callsafe.certify.execution import ExecutionError
    from callsafe.certify.harness import certify
    from callsafe.certify.targets import TargetSpecError
    from callsafe.reporting.report import write_reports

    if scheduler:
        from callsafe.certify.distributed import dask_available

        if not dask_available():
            raise click.BadParameter("needs Dask distributed: pip install 'callsafe[dask]'", param_hint="--scheduler")
    if partition_size is not None and workers == 1 and not scheduler:
        raise click.BadParameter("partitions are for --workers N (N > 1) or --scheduler", param_hint="--partition-size")
    options = _options(
        generators,
        budget=budget,
        depth=depth,
        seed=seed,
        walks=walks,
        calls=calls,
        turns=turns,
        fragments=fragments,
        workers=workers,
        scheduler=scheduler,
        partition_size=partition_size,
        minimize=not no_minimize,
        counterexamples=counterexamples,
    )
    err = SafeConsole(stderr=True)
    progress = Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    tasks: dict[str, Any] = {}

    def on_progress(generator: str, done: int, total: int | None) -> None:
        if generator not in tasks:
            tasks[generator] = progress.add_task(generator, total=total)
        if done % 25 == 0 or done == total:
            progress.update(tasks[generator], completed=done)

    try:
        with progress:
            cert = certify(target, options, on_progress)
    except TargetSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="TARGET") from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ExecutionError as exc:
        raise click.ClickException(str(exc)) from None

    out_dir = report_dir or _default_report_dir(target)
    reports = write_reports(cert, out_dir, junit)

    table = Table(title=f"callsafe certify {target}: {cert.target.name} ({cert.target.protocol})")
    for col in ("invariant", "kind", "status", "traces checked", "violated"):
        table.add_column(col, justify="right" if col in ("traces checked", "violated") else "left")
    for inv in cert.invariants.values():
        style = _STATUS_STYLE[inv.status]
        table.add_row(
            inv.id,
            inv.kind,
            f"[{style}]{inv.status.replace('_', ' ')}[/{style}]",
            str(inv.traces_checked),
            str(inv.traces_violated),
        )
    console.print(table)
    gens = Table(title="generators")
    for col in ("generator", "ran", "not applicable", "skipped as equivalent", "violating", "seconds"):
        gens.add_column(col, justify="left" if col == "generator" else "right")
    for name, g in cert.generators.items():
        gens.add_row(
            name + ("" if g.complete else " (budget)"),
            str(g.ran),
            str(g.not_applicable),
            str(g.skipped_equivalent),
            str(g.violating),
            f"{g.seconds:.2f}",
        )
    console.print(gens)
    console.print(
        f"coverage: {len(cert.transitions)} of 55 lifecycle transitions, {len(cert.pairs)} transition pairs; "
        f"{cert.traces_run} traces in {cert.timings['total_seconds']} s (seed {seed})"
        + (" [yellow]budget exhausted[/yellow]" if cert.budget_exhausted else "")
    )
    execution = cert.execution.summary()
    console.print(f"[yellow]{escape(execution)}[/yellow]" if cert.execution.rerun_partitions else escape(execution))
    for inv_id, ces in sorted(cert.counterexamples.items()):
        for ce in ces:
            console.print(
                f"[red]{inv_id}[/red]: {escape(ce.findings[0].describe()) if ce.findings else inv_id}\n"
                f"  minimal trace: {len(ce.minimal.events)} events ({out_dir / ce.files.get('trace', '')}); "
                f"pytest: {out_dir / ce.files.get('pytest', '')}"
            )
    console.print(f"reports: {reports.json}, {reports.html}, {reports.junit}")
    if cert.ok:
        console.print("[green]certified: no invariant violated[/green]")
    else:
        console.print(f"[bold red]not certified: {', '.join(cert.violated)} violated[/bold red]")
        sys.exit(1)


@main.command("replay")
@click.argument("trace_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--target", "target", default="reference", show_default=True, help="Target name (as for certify).")
@click.option("--json", "as_json", is_flag=True, help="Print observations and findings as JSON.")
def replay_cmd(trace_file: Path, target: str, as_json: bool) -> None:
    """Run one trace (a JSON file) against TARGET and judge it.

    Exit status: 0 no violation, 1 violated, 3 not applicable (the target lacks a
    capability the trace needs).
    """
    from callsafe.certify.harness import check_trace
    from callsafe.certify.targets import TargetSpecError
    from callsafe.model.vocabulary import Trace, TraceFormatError, observation_to_json

    try:
        trace = Trace.loads(trace_file.read_bytes())
    except TraceFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="TRACE_FILE") from None
    try:
        checked = check_trace(target, trace)
    except TargetSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None
    if as_json:
        echo_json(
            {
                "trace": trace.name,
                "missing_capabilities": list(checked.missing),
                "verdicts": [v.to_json() for v in checked.oracle.verdicts.values()],
                "observations": [observation_to_json(o) for o in (checked.run.observations if checked.run else [])],
                "findings": [f.to_json() for f in checked.judgement.findings],
                "target_errors": checked.judgement.errors,
            }
        )
    if checked.missing:
        if not as_json:
            console.print(f"[yellow]not applicable[/yellow]: {target} lacks {', '.join(checked.missing)}")
        sys.exit(3)
    if not as_json:
        verdicts = Table(title=f"{trace.name or trace_file.name}: the oracle's verdicts")
        for col in ("call", "verdict", "reason"):
            verdicts.add_column(col)
        for v in checked.oracle.verdicts.values():
            verdicts.add_row(v.key.short(), v.execute, v.reason)
        console.print(verdicts)
        from callsafe.diagrams.sequence import sequence_rows

        for src, dst, label, _ in sequence_rows(trace, checked.run.observations if checked.run else []):
            arrow = f"{src} -> {dst}"
            console.print(f"  {arrow:<20} {label}", markup=False, highlight=False)
        for f in checked.judgement.findings:
            console.print(f"[red]{escape(f.describe())}[/red]")
        for e in checked.judgement.errors:
            console.print(f"[yellow]target error: {escape(e)}[/yellow]")
    if checked.violated:
        sys.exit(1)
    if not as_json:
        console.print("[green]no invariant violated[/green]")


@main.command("selftest")
@click.option("--budget", type=float, default=None, metavar="SECONDS", help="Budget per mutant.")
@click.option("--depth", default=2, show_default=True, help="Exhaustive bound per mutant.")
@click.option("--seed", default=0, show_default=True)
def selftest_cmd(budget: float | None, depth: int, seed: int) -> None:
    """Certify every registered mutant (callsafe.campaigns.zoo) and print the mutation
    score: which invariant caught each mutant, how long it took, and the length of the
    minimal counterexample. Exit status 0 only when every mutant was caught."""
    from callsafe.campaigns.selftest import mutation_score, run_selftest
    from callsafe.campaigns.zoo import registry
    from callsafe.certify.harness import Options

    mutants = registry()
    if not mutants:
        console.print("no mutants registered (callsafe.campaigns.zoo.MUTANTS is empty): nothing to score")
        return
    results = run_selftest(mutants, Options(budget=budget, depth=depth, seed=seed, counterexamples=1))
    table = Table(title="mutation score")
    for col in ("mutant", "bug", "caught by (expected)", "also violated", "seconds", "minimal counterexample"):
        table.add_column(col)
    for r in results:
        if r.error:
            caught = f"[red]error: {r.error}[/red]"
        elif not r.caught:
            caught = f"[red]not caught (expected {', '.join(r.mutant.expect)})[/red]"
        else:
            caught = ", ".join(r.expected_hits)
        also = ", ".join(i for i in r.caught_by if i not in r.expected_hits)
        table.add_row(
            r.mutant.name,
            r.mutant.description,
            caught,
            also,
            f"{r.seconds:.2f}",
            f"{r.expected_minimal} events" if r.expected_minimal is not None else "-",
        )
    console.print(table)
    score = mutation_score(results)
    n_caught = sum(r.caught for r in results)
    console.print(f"mutation score: {n_caught}/{len(results)} ({(score or 0) * 100:.0f}%)")
    if n_caught != len(results):
        sys.exit(1)


def _register_extensions() -> None:
    """Commands that live in their own modules, so each stays small: the formal side
    (`prove`, `export`) and, where present, `matrix` and `inspect`."""
    from importlib import import_module

    for module, names in (
        ("callsafe.cli.formal", ("prove_cmd", "export_cmd")),
        ("callsafe.cli.matrix", ("matrix_cmd",)),
        ("callsafe.cli.inspect", ("inspect_cmd",)),
    ):
        try:
            loaded = import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        for name in names:
            main.add_command(getattr(loaded, name))


_register_extensions()
