"""The ``callsafe`` command line."""

from __future__ import annotations

import dataclasses
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

# No wrapping of piped output: a CI log keeps whole paths (SafeConsole: no emoji codes, no
# control characters from user text).
console = SafeConsole()
if not console.is_terminal:
    console.soft_wrap = True
    console.width = max(console.width, 160)  # tables keep invariant ids and paths whole


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
    invariants: `callsafe certify TARGET`, `callsafe replay TRACE.json TARGET`.
    """


@main.command("model")
@click.option("--json", "as_json", is_flag=True, help="Print states, events, transitions and graph statistics as JSON.")
@click.option(
    "--max-states",
    type=click.IntRange(min=1),
    default=20_000_000,
    show_default=True,
    help="Stop exploring past this many states (about 150 bytes each).",
)
@click.option(
    "--no-symmetry",
    is_flag=True,
    help="Explore every state, not one per set of states that differ only by which call of a turn is which.",
)
@bounds
def model_cmd(
    as_json: bool,
    max_states: int,
    no_symmetry: bool,
    calls: int,
    turns: int,
    fragments: int,
    controls: str | None,
    restarts: int,
) -> None:
    """Print the lifecycle table and the state graph's statistics.

    The graph is the reachable state space of a bounded configuration; every reachable
    state is checked against the state invariants. By default the calls of a turn are
    interchangeable (symmetry reduction): the counts are those of the reduced graph, and
    a violation is shown as a run of the unreduced system.
    """
    from callsafe.formal.graph import StateBoundExceeded
    from callsafe.formal.summary import model_summary

    config = _config(calls, turns, fragments, controls, restarts)
    try:
        summary = model_summary(config, symmetry=not no_symmetry, max_states=max_states)
    except StateBoundExceeded as exc:
        raise click.ClickException(
            f"the model has more than {exc.max_states:,} reachable states"
            f"{'' if no_symmetry else ' (with symmetry)'}: raise the bound with --max-states, or lower the bounds"
        ) from None
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
    reduced = ", calls of a turn interchangeable (symmetry)" if g["symmetry"] else ""
    stats = Table(title=f"State graph of {g['config']}{reduced}")
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

_STATUS_STYLE = {"holds": "green", "violated": "bold red", "not_established": "yellow", "not_applicable": "dim"}


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
@click.argument("target")
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop generating traces after this long (minimising counterexamples gets up to 30 s more).",
)
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Exhaustive bound: events after the turn start.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the random walks (the rest is deterministic).")
@click.option(
    "--walks",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Random walks (each with its own seed from --seed).",
)
@click.option(
    "--calls",
    type=click.IntRange(1, 4),
    default=2,
    show_default=True,
    help="Call ids in the walks and the exhaustive traces (1-4).",
)
@click.option(
    "--turns",
    type=click.IntRange(1, 3),
    default=2,
    show_default=True,
    help="Turns of the conversation (1-3; 1 for a target without cancel).",
)
@click.option(
    "--fragments", type=click.IntRange(1, 4), default=2, show_default=True, help="Argument fragments per call (1-4)."
)
@click.option(
    "--domain",
    type=click.Choice(["rich", "plain"]),
    default="rich",
    show_default=True,
    help="The concrete domain the generated traces draw from: rich (tenants, agent loops, tools with rules and "
    "confirmation, multi-byte values, caps at the trace's sizes, repeated events, restarts) or plain (one tenant, "
    'one tool, {"v":100}, roomy caps: the domain of old).',
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.json, report.html, junit.xml and counterexamples [default: reports/TARGET].",
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, help="JUnit XML file.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes (each builds its own targets).",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run the traces on the Dask cluster of this scheduler (tcp://HOST:PORT; needs callsafe[dask]).",
)
@click.option(
    "--partition-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Traces per partition with --workers or --scheduler [default: 256]. Smaller partitions spread a short run "
    "over more workers and lose less to a lost worker; larger ones ship fewer tasks.",
)
@click.option(
    "--generators",
    default=None,
    metavar="LIST",
    help="Comma-separated, of catalog,coverage,synthesis,walks,exhaustive,edges (the default: all six; edges: long "
    "texts, schema keywords, odd positions, stops then new calls, caps after a restart), wire "
    "(provider-shaped traces, for library adapters), wire-adversities (mutated provider streams, each operator "
    "from a public bug report; the expected verdicts from the oracle on what the parser reads) and traces (the "
    "files of --traces).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    metavar="PATTERN",
    help="Run only the catalog scenarios whose names match (fnmatch: 'cancel-*'; repeatable; "
    "`callsafe scenarios list`). Alone, it runs the catalog only.",
)
@click.option(
    "--traces",
    "traces_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Certify the trace files (*.json, the format of `callsafe replay`) in this folder. Alone, it runs them only.",
)
@click.option(
    "--trace-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="A trace that takes longer is stopped and reported as a hang [default: 10; a target's first trace in a "
    "process: 60, for its imports].",
)
@click.option(
    "--max-hangs",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    metavar="N",
    help="Stop the run (exit 3) after N traces in a row hung, or once hangs are half of 10 or more traces run: a "
    "target that hangs on every trace costs N timeouts, not one per trace. 0: never stop for hangs.",
)
@click.option("--fail-fast", is_flag=True, help="Stop at the first violation or target error.")
@click.option("--no-minimize", is_flag=True, help="Keep counterexamples as found (faster).")
@click.option(
    "--counterexamples",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Distinct causes kept per invariant, each minimised into its own counterexample.",
)
@click.option(
    "--record-spans",
    "record_spans",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Record the target's own OpenTelemetry spans (the agent frameworks' instrumentation, the guard's) as OTLP "
    "JSON in DIR, a file per trace run, for `callsafe observe` (a local file exporter only: nothing leaves the "
    "machine). Sets CALLSAFE_RECORD_SPANS for the programs it starts.",
)
def certify_cmd(
    target: str,
    budget: float | None,
    depth: int,
    seed: int,
    walks: int,
    calls: int,
    turns: int,
    fragments: int,
    domain: str,
    report_dir: Path | None,
    junit: Path | None,
    workers: int,
    scheduler: str | None,
    partition_size: int | None,
    generators: str | None,
    scenarios: tuple[str, ...],
    traces_dir: Path | None,
    trace_timeout: float | None,
    max_hangs: int,
    fail_fast: bool,
    no_minimize: bool,
    counterexamples: int,
    record_spans: Path | None,
) -> None:
    """Certify TARGET: run adversarial traces against it and judge every run, then write
    report.json, report.html and junit.xml (--report). `callsafe certify reference`
    certifies callsafe's own reference implementation.

    \b
    TARGET is one of:
      reference             the reference implementation over SQLite in memory (a fresh
                            database per trace)
      reference:STORE       over STORE: sqlite (a file per trace, with its fsyncs),
                            sqlite-ram, memory or postgres (CALLSAFE_PG_DSN)
      module:factory        your code: a callable in an importable module that returns a
                            fresh target (a class works); the current folder is importable
      exec:COMMAND          a program in any language speaking the target protocol on its
                            stdin and stdout (quote it: 'exec:node my-target.js')
      guard:STORE:PROTOCOL  callsafe.guard reading a provider's wire (guard alone:
                            guard:sqlite:openai-chat)
      library:NAME          a client library or agent framework behind its adapter
                            (library:openai:openai-chat:final; an unknown NAME lists them)

    \b
    Exit status (what CI reads):
      0  certified: no invariant violated, no target error
      1  an invariant was violated
      2  usage error (a bad option, a target name that does not resolve)
      3  not certified and no violation: target errors or hangs (the target raised or did not
         finish a trace in time; --max-hangs stops a run that keeps hanging), a program whose
         handshake failed, or no trace ran (each needed a capability the target lacks)
      130  interrupted (Ctrl-C): a partial report was written
    """
    from callsafe.certify.execution import ExecutionError
    from callsafe.certify.harness import TRACES_GENERATOR, certify, load_trace_folder
    from callsafe.certify.targets import TargetSpecError
    from callsafe.certify.watchdog import DEFAULT_TRACE_TIMEOUT
    from callsafe.model.vocabulary import TraceFormatError
    from callsafe.reporting.sections import verdict_line

    if record_spans is not None:
        _record_spans(record_spans)
    if scheduler:
        from callsafe.certify.distributed import dask_available

        if not dask_available():
            raise click.BadParameter("needs Dask distributed: pip install 'callsafe[dask]'", param_hint="--scheduler")
    if partition_size is not None and workers == 1 and not scheduler:
        raise click.BadParameter("partitions are for --workers N (N > 1) or --scheduler", param_hint="--partition-size")
    if traces_dir is not None:
        try:
            load_trace_folder(traces_dir)
        except TraceFormatError as exc:
            raise click.BadParameter(str(exc), param_hint="--traces") from None
    if generators is None and (scenarios or traces_dir is not None):
        generators = ",".join((["catalog"] if scenarios else []) + ([TRACES_GENERATOR] if traces_dir else []))
    options = _options(
        generators,
        budget=budget,
        depth=depth,
        seed=seed,
        walks=walks,
        calls=calls,
        turns=turns,
        fragments=fragments,
        domain=domain,
        workers=workers,
        scheduler=scheduler,
        partition_size=partition_size,
        minimize=not no_minimize,
        counterexamples=counterexamples,
        trace_timeout=DEFAULT_TRACE_TIMEOUT if trace_timeout is None else trace_timeout,
        fail_fast=fail_fast,
        max_hangs=max_hangs,
        scenarios=scenarios,
        traces_dir=str(traces_dir) if traces_dir is not None else None,
    )
    try:
        with _progress() as on_progress:
            cert = certify(target, options, on_progress)
    except TargetSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="TARGET") from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except ExecutionError as exc:
        raise click.ClickException(str(exc)) from None

    out_dir = report_dir or _default_report_dir(target)
    _summarise(cert, target, seed, out_dir, junit)
    verdict = {
        "pass": "[green]certified: no invariant violated[/green]",
        "fail": f"[bold red]not certified: {escape(verdict_line(cert))}[/bold red]",
        "target_errors": f"[bold yellow]not certified: the target broke {cert.broken_traces} traces "
        "(target errors, not a verdict on the invariants)[/bold yellow]",
        "partial": "[yellow]interrupted: the report is partial (what ran until Ctrl-C)[/yellow]",
        "nothing_ran": "[bold yellow]not certified: no trace ran, so nothing was checked[/bold yellow] "
        + escape(_why_nothing_ran(cert)),
    }[cert.verdict]
    if cert.stopped == "hangs":
        verdict += f"\n[bold yellow]stopped early: {escape(cert.stop_reason)}[/bold yellow]"
    if cert.partial and cert.verdict != "partial":
        verdict += " [yellow](interrupted: the report is partial)[/yellow]"
    console.print(verdict)
    sys.exit(cert.exit_code)


def _record_spans(directory: Path) -> None:
    """``--record-spans DIR``: the directory made, ``CALLSAFE_RECORD_SPANS`` set for the
    programs this run starts, and this process's recording installed (in-process targets:
    the guard's spans, pydantic-ai's instrumentation)."""
    import os

    from callsafe import span_recording

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"cannot make {directory}: {exc.strerror}", param_hint="--record-spans") from None
    os.environ[span_recording.ENVIRONMENT] = str(directory.resolve())
    try:
        span_recording.record_spans(directory.resolve())
    except RuntimeError as exc:
        raise click.BadParameter(str(exc), param_hint="--record-spans") from None


def _why_nothing_ran(cert: Any) -> str:
    """In words: why a run ran no trace (what the traces needed, or that none was planned)."""
    if cert.not_applicable:
        needs = ", ".join(f"{cap} ({n} traces)" for cap, n in sorted(cert.not_applicable.items()))
        return f"(every trace needed what {cert.target.spec} lacks: {needs})"
    if cert.budget_exhausted:
        return "(the --budget ran out before the first trace)"
    return "(the options selected no trace)"


class _progress:
    """The progress of a run: a bar on a terminal; elsewhere (CI logs) a line every
    :data:`PROGRESS_EVERY` seconds, so that a long run is never silent."""

    PROGRESS_EVERY = 10.0

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.err = SafeConsole(stderr=True, highlight=False)
        self.bar = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.err,
            transient=True,
            disable=not self.err.is_terminal,
        )
        self.tasks: dict[str, Any] = {}
        self.started = 0.0
        self.last = 0.0

    def __enter__(self) -> Callable[[str, int, int | None], None]:
        import time

        self.started = self.last = time.monotonic()
        self.bar.__enter__()
        return self.update

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def update(self, generator: str, done: int, total: int | None) -> None:
        if self.err.is_terminal:
            if generator not in self.tasks:
                self.tasks[generator] = self.bar.add_task(generator, total=total)
            if done % 25 == 0 or done == total:
                self.bar.update(self.tasks[generator], completed=done)
            return
        import time

        now = time.monotonic()
        if now - self.last >= self.PROGRESS_EVERY or (done == total and generator not in self.tasks):
            if done == total:
                self.tasks[generator] = None
            self.last = now
            of = f"/{total}" if total is not None else ""
            self.err.print(f"progress: {generator} {done}{of} traces, {now - self.started:.0f} s", markup=False)


def _summarise(cert: Any, target: str, seed: int, out_dir: Path, junit: Path | None) -> None:
    """Write the reports and print the console's account; the verdict is already made,
    so a failure here (a report folder that cannot be written, a summary that breaks on an
    odd trace) is said on stderr and never becomes the exit status: ``certify_cmd`` exits
    with ``cert.exit_code`` whatever happens here."""
    from callsafe.reporting.report import write_reports

    try:
        reports = write_reports(cert, out_dir, junit)
    except Exception as exc:  # the verdict must survive a report that cannot be written
        _summary_failed("the reports could not be written", exc)
    else:
        try:
            _print_certification(cert, target, seed, out_dir)
        except Exception as exc:  # the verdict must survive a summary that breaks
            _summary_failed("the console summary broke", exc)
        console.print(f"reports: {reports.json}, {reports.html}, {reports.junit}", markup=False)


def _summary_failed(what: str, exc: Exception) -> None:
    err = SafeConsole(stderr=True, highlight=False)
    err.print(
        f"callsafe: {what} ({type(exc).__name__}: {exc}); the verdict below and the exit status stand",
        markup=False,
    )


def _events_key(trace: Any) -> str:
    """A trace's events as canonical JSON: a key for "the same story" that events holding
    a schema (a mapping, unhashable) can have too."""
    import json

    from callsafe.model.vocabulary import event_to_json

    return json.dumps([event_to_json(e) for e in trace.events], sort_keys=True, default=repr)


def _print_findings(cert: Any, out_dir: Path) -> None:
    """Every kept counterexample, in two sections (action safety, then records: the spec's
    "Test visible status separately from action safety"), one block per story within a
    section (the same events shown once, with every invariant they break), each saying
    which of its invariant's distinct causes it shows and how many traces had that cause."""
    from callsafe.reporting.sections import sections

    for section in sections(cert):
        if not section.counterexamples and not section.violated:
            continue
        violated = ", ".join(section.violated) or "nothing"
        console.print(f"[bold]{section.title}[/bold] ({escape(section.covers)}): {escape(violated)} violated")
        stories: dict[str, list[tuple[str, Any]]] = {}
        for inv_id, ce in section.counterexamples:
            stories.setdefault(_events_key(ce.minimal), []).append((inv_id, ce))
        for shown in stories.values():
            inv_id, ce = shown[0]
            also = [i for i, _ in shown[1:] if i != inv_id]
            summary = cert.invariants[inv_id]
            rank = [c for c in cert.counterexamples.get(inv_id, [])].index(ce) + 1
            of = f"cause {rank} of {summary.causes}" if summary.causes > 1 else "its only cause"
            console.print(
                f"[red]{escape(ce.minimal.name)}[/red]" + (f" (also {escape(', '.join(also))})" if also else "")
            )
            console.print(f"  {inv_id}: {of}, {ce.traces} violating traces with it", markup=False)
            for finding in ce.findings[:3]:
                console.print(f"  {finding.describe()}", markup=False)
            for call in ce.calls[:6]:
                console.print(f"  {call.describe()}", markup=False)
            merged = f"; {ce.merged} counterexamples like it" if ce.merged > 1 else ""
            console.print(
                f"  from: {ce.minimal.source}{merged}\n"
                f"  trace: {len(ce.minimal.events)} events ({out_dir / ce.files.get('trace', '')}); "
                f"pytest: {out_dir / ce.files.get('pytest', '')}",
                markup=False,
            )
        hidden = [
            f"{i} ({cert.invariants[i].causes - len(cert.counterexamples.get(i, []))} more)"
            for i in section.violated
            if cert.invariants[i].causes > len(cert.counterexamples.get(i, []))
        ]
        if hidden:
            console.print(
                f"  more causes than --counterexamples keeps: {', '.join(hidden)} (raise --counterexamples)",
                markup=False,
            )


def _print_certification(cert: Any, target: str, seed: int, out_dir: Path) -> None:
    """The console's account of a run: invariants, generators, coverage, counterexamples
    (one block per story: the same events shown once, with every invariant they break),
    and the target errors with the first traceback and the replay command."""
    from callsafe.certify.targets import replay_command

    title = f"callsafe certify {escape(target)}: {escape(cert.target.name)} ({escape(cert.target.protocol)})"
    table = Table(title=title)
    for col in ("invariant", "kind", "about", "status", "traces checked", "violated", "broken"):
        table.add_column(col, justify="right" if col in ("traces checked", "violated", "broken") else "left")
    for inv in cert.invariants.values():
        style = _STATUS_STYLE[inv.status]
        table.add_row(
            inv.id,
            inv.kind,
            "+".join(inv.about),
            f"[{style}]{inv.status.replace('_', ' ')}[/{style}]",
            str(inv.traces_checked),
            str(inv.traces_violated),
            str(inv.traces_broken),
        )
    console.print(table)
    gens = Table(title="generators")
    for col in ("generator", "ran", "not applicable", "skipped as equivalent", "violating", "target errors", "seconds"):
        gens.add_column(col, justify="left" if col == "generator" else "right")
    for name, g in cert.generators.items():
        gens.add_row(
            escape(name) + ("" if g.complete else " (stopped)"),
            str(g.ran),
            str(g.not_applicable),
            str(g.skipped_equivalent),
            str(g.violating),
            str(g.errors),
            f"{g.seconds:.2f}",
        )
    console.print(gens)
    failed = [r for r in cert.scenarios if r.outcome not in ("passed", "not_applicable")]
    if failed:
        console.print(f"scenarios that failed ({len(failed)} of {len(cert.scenarios)} named traces):")
        for r in failed[:20]:
            what = ", ".join(r.violated) if r.violated else r.outcome.replace("_", " ")
            console.print(f"  {r.generator}/{r.name}: {what}", markup=False)
        if len(failed) > 20:
            console.print(f"  ... and {len(failed) - 20} more (report.json: scenarios)", markup=False)
    if cert.target.setup:
        console.print(f"setup: {cert.target.setup}")
    console.print(
        f"coverage: {len(cert.transitions)} of 55 lifecycle transitions, {len(cert.pairs)} transition pairs; "
        f"{cert.traces_run} traces in {cert.timings['total_seconds']} s (seed {seed})"
        + (" [yellow]budget exhausted[/yellow]" if cert.budget_exhausted else "")
        + (" [yellow]stopped at the first failure (--fail-fast)[/yellow]" if cert.stopped == "fail-fast" else "")
    )
    execution = cert.execution.summary()
    console.print(f"[yellow]{escape(execution)}[/yellow]" if cert.execution.rerun_partitions else escape(execution))
    from callsafe.targets.exec_target import order_note

    best_effort = order_note(cert.target.run)
    if best_effort is not None:
        console.print(f"[yellow]{escape(best_effort)}[/yellow]")
    _print_findings(cert, out_dir)
    if cert.broken_traces:
        kinds = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(cert.broken_count.items()))
        console.print(f"[bold yellow]target errors: {cert.broken_traces} traces broken by the target ({kinds})[/]")
        first = cert.broken[0] if cert.broken else None
        if first is not None:
            error = first.errors[0]
            console.print(f"first: {first.generator}/{first.name}: {error.describe()}", markup=False)
            text = error.traceback.rstrip() or "(no traceback)"
            label = "stack of the hung thread" if error.kind == "hang" else "traceback"
            console.print(f"{label}:\n{text}", markup=False, highlight=False)
            if error.stderr:
                console.print(f"stderr (tail):\n{error.stderr.rstrip()}", markup=False, highlight=False)
            if first.files.get("trace") and first.generator != "factory":  # a factory's error has no trace
                console.print(f"replay it: {replay_command(out_dir / first.files['trace'], target)}", markup=False)


@main.command("replay")
@click.argument("trace_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("target", required=False)
@click.option(
    "--target",
    "target_option",
    default=None,
    metavar="TARGET",
    help="The same as the TARGET argument (kept for old command lines); give one or the other.",
)
@click.option(
    "--trace-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Per-trace timeout.",
)
@click.option("--json", "as_json", is_flag=True, help="Print observations and findings as JSON.")
def replay_cmd(
    trace_file: Path, target: str | None, target_option: str | None, trace_timeout: float, as_json: bool
) -> None:
    """Run one trace (a JSON file) against TARGET, judge it, and say where TARGET's verdicts
    differ from the reference implementation's on the same trace:
    `callsafe replay TRACE.json TARGET`, TARGET named as for `callsafe certify`
    (`reference` for the reference implementation).

    TRACE_FILE is a trace in callsafe's format: a counterexample or broken trace of a report,
    `callsafe scenarios export NAME --out FILE`, `callsafe inspect REC --trace-out FILE`.

    \b
    Exit status: 0 no violation, 1 violated, 2 usage error, 3 no verdict (the target lacks
    a capability the trace needs, or it raised or hung).
    """
    from callsafe.certify.checking import run_checked
    from callsafe.certify.target_errors import TraceTimeout
    from callsafe.certify.targets import TargetSpecError, describe, resolve_target
    from callsafe.certify.watchdog import first_trace_allowance, trace_deadline
    from callsafe.model.vocabulary import Trace, TraceFormatError, observation_to_json

    if target and target_option and target != target_option:
        raise click.UsageError(f"two targets: TARGET {target!r} and --target {target_option!r}; give one")
    target = target or target_option
    if not target:
        raise click.UsageError(
            "Missing argument 'TARGET': which implementation to judge, after TRACE_FILE or as --target "
            "(e.g. `reference`)"
        )
    try:
        trace = Trace.loads(trace_file.read_bytes())
    except TraceFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="TRACE_FILE") from None
    try:
        factory = resolve_target(target)
        with trace_deadline(first_trace_allowance(f"building {target}", trace_timeout)):
            info = describe(factory, target)
    except TargetSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="TARGET") from None
    except Exception as exc:  # the factory raised: a target error, not a usage error
        console.print(f"target error: building {target} raised {type(exc).__name__}: {exc}", markup=False)
        sys.exit(3)
    except TraceTimeout as hung:
        console.print(f"target hang: building {target}: {hung}\n{hung.stack}", markup=False, highlight=False)
        sys.exit(3)
    if isinstance(info.run.get("handshake_error"), str):  # the program never said what it is: nothing can run
        console.print(f"target error: {target} failed its handshake: {info.run['handshake_error']}", markup=False)
        sys.exit(3)
    checked = run_checked(factory, info.capabilities, trace, trace_timeout)
    differences = _differences_from_reference(target, trace, checked, trace_timeout)
    if as_json:
        echo_json(
            {
                "trace": trace.name,
                "target": target,
                "missing_capabilities": list(checked.missing),
                "verdicts": [v.to_json() for v in checked.oracle.verdicts.values()],
                "observations": [observation_to_json(o) for o in (checked.run.observations if checked.run else [])],
                "calls": [c.to_json() for c in (checked.run.calls if checked.run else [])],
                "findings": [f.to_json() for f in checked.judgement.findings],
                "target_errors": [e.to_json() for e in checked.judgement.errors],
                "differs_from_reference": differences,
            }
        )
    if checked.missing:
        if not as_json:
            console.print(f"[yellow]not applicable[/yellow]: {escape(target)} lacks {', '.join(checked.missing)}")
        sys.exit(3)
    if not as_json:
        console.print(f"judged: {target} ({info.name}, protocol {info.protocol})", markup=False)
        verdicts = Table(title=f"{escape(trace.name or trace_file.name)}: the oracle's verdicts")
        for col in ("call", "verdict", "reason"):
            verdicts.add_column(col)
        for v in checked.oracle.verdicts.values():
            verdicts.add_row(v.key.short(), v.execute, escape(v.reason))
        console.print(verdicts)
        from callsafe.diagrams.sequence import sequence_rows

        for src, dst, label, _ in sequence_rows(trace, checked.run.observations if checked.run else []):
            arrow = f"{src} -> {dst}"
            console.print(f"  {arrow:<20} {label}", markup=False, highlight=False)
        for call in checked.run.calls if checked.run else []:
            console.print(f"  {call.describe()}", markup=False)
        for f in checked.judgement.findings:
            console.print(f"[red]{escape(f.describe())}[/red]")
        for e in checked.judgement.errors:
            console.print(f"[yellow]target {escape(e.describe())}[/yellow]")
            if e.traceback:
                console.print(e.traceback.rstrip(), markup=False, highlight=False)
        if differences is None:
            pass
        elif differences:
            console.print("verdicts that differ from the reference implementation's on this trace:")
            for line in differences:
                console.print(f"  {line}", markup=False)
        else:
            console.print("same verdicts as the reference implementation on this trace", markup=False)
    if checked.violated:
        sys.exit(1)
    if checked.judgement.broken:
        if not as_json:
            console.print("[yellow]no verdict: the target broke the run (target error)[/yellow]")
        sys.exit(3)
    if not as_json:
        console.print(f"[green]no invariant violated by {escape(target)}[/green]")


def _differences_from_reference(target: str, trace: Any, checked: Any, timeout: float) -> list[str] | None:
    """Where ``target``'s run differs from the reference implementation's on ``trace``: per
    invariant (violated on one, not on the other) and per call (executed, how often, with
    which arguments). None when ``target`` is the reference, the trace is not applicable
    to one of them, or ``target`` broke the run (a hang or a crash cut it short: what it
    did before the break is no run to compare, so "same verdicts" would be a claim the run
    cannot back)."""
    if target.startswith("reference") or checked.missing or checked.run is None or checked.judgement.broken:
        return None
    from callsafe.certify.checking import run_checked
    from callsafe.certify.targets import describe, resolve_target
    from callsafe.model.vocabulary import Executed

    factory = resolve_target("reference:memory")
    reference = run_checked(factory, describe(factory, "reference:memory").capabilities, checked.trace, timeout)
    if reference.missing or reference.run is None:
        return None
    lines: list[str] = []
    for inv in sorted(set(checked.judgement.results) | set(reference.judgement.results)):
        mine, theirs = checked.judgement.results.get(inv), reference.judgement.results.get(inv)
        if mine is None:
            continue
        if bool(mine) != bool(theirs):
            lines.append(
                f"{inv}: {'violated' if mine else 'holds'} here, {'violated' if theirs else 'holds'} on reference"
            )

    def executions(run: Any) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for obs in run.observations:
            if isinstance(obs, Executed):
                out.setdefault(obs.key.short(), []).append(obs.arguments)
        return out

    mine_ex, ref_ex = executions(checked.run), executions(reference.run)
    for call in sorted(set(mine_ex) | set(ref_ex)):
        a, b = mine_ex.get(call, []), ref_ex.get(call, [])
        if a != b:
            lines.append(f"{call}: executed {len(a)}x {a!r} here, {len(b)}x {b!r} on reference")
    return lines


@main.command("selftest")
@click.option(
    "--budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="Budget per mutant."
)
@click.option("--depth", type=click.IntRange(min=0), default=2, show_default=True, help="Exhaustive bound per mutant.")
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--correct-depth",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="The correct variants must also pass at this exhaustive bound (0: only at --depth).",
)
def selftest_cmd(budget: float | None, depth: int, seed: int, correct_depth: int) -> None:
    """Certify every registered mutant (callsafe.campaigns.zoo) and print the mutation
    score: which invariant caught each mutant, how long it took, and the length of the
    minimal counterexample; then certify the correct variants, which must pass (at
    --depth and at --correct-depth). Exit status 0 only when every mutant was caught and
    every correct variant passed."""
    from callsafe.campaigns.selftest import mutation_score, run_selftest
    from callsafe.campaigns.zoo import correct_variants, registry
    from callsafe.certify.harness import Options

    mutants = registry()
    if not mutants:
        console.print("no mutants registered (callsafe.campaigns.zoo.MUTANTS is empty): nothing to score")
        return
    options = Options(budget=budget, depth=depth, seed=seed, counterexamples=1)
    results = run_selftest(mutants, options)
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
    variants = correct_variants()
    depths = sorted({depth, correct_depth} - {0})
    passed = 0
    checked = 0
    if variants:
        vtable = Table(title="correct variants (must pass)")
        for col in ("variant", "choice", "depth", "result", "seconds"):
            vtable.add_column(col)
        for d in depths:
            for r in run_selftest(variants, dataclasses.replace(options, depth=d)):
                checked += 1
                passed += r.ok
                if r.error:
                    verdict = f"[red]error: {r.error}[/red]"
                elif r.caught_by:
                    verdict = f"[red]blamed: {', '.join(r.caught_by)} (a false alarm)[/red]"
                else:
                    verdict = "passed"
                vtable.add_row(r.mutant.name, r.mutant.description, str(d), verdict, f"{r.seconds:.2f}")
        console.print(vtable)
        console.print(f"correct variants: {passed}/{checked} passed")
    if n_caught != len(results) or passed != checked:
        sys.exit(1)


def _register_extensions() -> None:
    """Commands that live in their own modules, so each stays small: the formal side
    (`prove`, `export`), `store`, `serve` and, where present, `matrix` and `inspect`."""
    from importlib import import_module

    for module, names in (
        ("callsafe.cli.formal", ("prove_cmd", "export_cmd")),
        ("callsafe.cli.matrix", ("matrix_cmd",)),
        ("callsafe.cli.inspect", ("inspect_cmd",)),
        ("callsafe.cli.observe", ("observe_cmd",)),
        ("callsafe.cli.scenarios", ("scenarios_cmd",)),
        ("callsafe.cli.store", ("store_cmd",)),
        ("callsafe.cli.serve", ("serve_cmd",)),
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
