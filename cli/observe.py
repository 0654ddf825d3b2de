"""``callsafe observe SOURCE``: production records judged with certify's invariants.

SOURCE is a JSONL log (provider events, turns, executions), an OTLP JSON span file, or the
guard's store (a SQLite file or a ``postgresql://`` DSN); the format is detected unless
``--format`` names it. Exit status: 0 no violation found (each invariant holds or is not
judgeable from these records), 1 a violation, 2 records that cannot be read (one line on
standard error), 3 an internal error. ``--follow`` tails a growing file and stops at the
first violation (exit 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from callsafe.cli.console import echo, echo_json

__all__ = ["observe_cmd"]

PROG = "callsafe observe"


def _fail(message: str, code: int) -> NoReturn:
    echo(f"{PROG}: error: {message}", err=True)
    sys.exit(code)


@click.command("observe", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("source")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["log", "spans", "store"]),
    default=None,
    help="The records' format (default: detected).",
)
@click.option(
    "--recorded",
    multiple=True,
    help="A kind of record the source holds even where it has no record of that kind (repeatable): stream, "
    "calls, turns, executions, arguments, ledger, status, confirmation, business_validation.",
)
@click.option(
    "--namespace",
    default="callsafe",
    show_default=True,
    help="A PostgreSQL store's schema (the guard's namespace).",
)
@click.option("--json", "as_json", is_flag=True, help="Print observe.json instead of the console lines.")
@click.option(
    "--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write observe.json here."
)
@click.option(
    "--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write an HTML page here."
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write JUnit XML here.")
@click.option(
    "--follow", is_flag=True, help="Tail a growing log or span file; report the first violation at once and stop."
)
@click.option(
    "--max-turns", type=click.IntRange(min=1), default=1000, show_default=True, help="--follow: live turns kept."
)
@click.option(
    "--remember",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="--follow: finished turns remembered.",
)
def observe_cmd(
    source: str,
    fmt: str | None,
    recorded: tuple[str, ...],
    namespace: str,
    as_json: bool,
    json_out: Path | None,
    html_out: Path | None,
    junit: Path | None,
    follow: bool,
    max_turns: int,
    remember: int,
) -> None:
    """Judge the production records SOURCE (a JSONL log, an OTLP JSON span file, the guard's
    store) with certify's invariants; each verdict says what the records could establish."""
    from callsafe.observe.records import KINDS, RecordError

    unknown = [k for k in recorded if k not in KINDS]
    if unknown:
        _fail(f"--recorded: unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}", 2)
    try:
        if follow:
            _follow(source, fmt, recorded, max_turns, remember)
        else:
            _observe(source, fmt, recorded, namespace, as_json, json_out, html_out, junit)
    except RecordError as exc:
        _fail(str(exc), 2)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(0)
    except Exception as exc:  # a bug in callsafe: one line, never a traceback
        _fail(f"internal error ({type(exc).__name__}: {exc}); please report it", 3)


def _observe(
    source: str,
    fmt: str | None,
    recorded: tuple[str, ...],
    namespace: str,
    as_json: bool,
    json_out: Path | None,
    html_out: Path | None,
    junit: Path | None,
) -> None:
    from callsafe.observe.judging import judge_records
    from callsafe.observe.output import console_lines, html_page, junit_xml
    from callsafe.observe.sources import read_source
    from callsafe.safe_text import json_text

    records = read_source(source, fmt, namespace)
    observed = judge_records(records, kinds=set(records.kinds) | set(recorded))
    doc = observed.to_json()
    if as_json:
        echo_json(doc)
    else:
        for line in console_lines(observed):
            echo(line)
    if json_out is not None:
        _write(json_out, json_text(doc, indent=1) + "\n")
    if html_out is not None:
        _write(html_out, html_page(observed))
    if junit is not None:
        tree = junit_xml(observed)
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            tree.write(junit, encoding="utf-8", xml_declaration=True)
        except OSError as exc:
            _fail(f"cannot write {junit}: {exc.strerror or exc}", 2)
    sys.exit(1 if observed.violated else 0)


def _follow(source: str, fmt: str | None, recorded: tuple[str, ...], max_turns: int, remember: int) -> None:
    from callsafe.observe.follow import Follower, follow_file
    from callsafe.observe.output import finding_line
    from callsafe.observe.sources import detect_format, line_reader

    path = Path(source)
    if not path.is_file():
        _fail(f"{source}: no such file to follow", 2)
    reader = line_reader(fmt or detect_format(source), path.name)
    kinds = frozenset(recorded) | frozenset(reader.records.kinds) if recorded else None
    follower = Follower(reader, kinds=kinds, max_turns=max_turns, remember=remember)
    follow_file(path, follower, stop=lambda: bool(follower.found))
    found = follower.found[0]
    echo(f"VIOLATED at line {follower.lines}: {finding_line(found)}")
    echo(json.dumps(found.to_json(), ensure_ascii=True), err=True)
    sys.exit(1)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}", 2)
