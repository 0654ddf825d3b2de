"""``callsafe inspect FILE``: a recorded provider stream through the reference implementation
and every installed library adapter of its protocol, side by side.

Registered on the ``callsafe`` group by the lead (``main.add_command(inspect_cmd)``); this
module only defines the command, so the group's module stays untouched.

Exit status, so that scripts can tell the cases apart:

* ``0``: inspected (whatever the libraries did; a stream that breaks its own protocol is
  reported in the output, it is a finding about the stream, not about the file);
* ``1``: the recording is damaged (a truncated or non-JSON line, invalid UTF-8, an SSE event
  cut off at the end): the report covers what was read before the damage, and one line on
  standard error says where it is;
* ``2``: nothing to inspect (no such file, empty, binary, neither JSON lines nor SSE, a
  protocol that is unknown, ambiguous or mixed, a bad ``--tools`` file): one line on
  standard error, no report;
* ``3``: callsafe itself failed (a bug: one line, never a traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from callsafe.cli.console import SafeConsole, echo, echo_json
from callsafe.inspection.budget import LIBRARY_BUDGET

__all__ = ["inspect_cmd"]

PROG: str = "callsafe inspect"


def _fail(message: str, code: int) -> NoReturn:
    """One line on standard error and the exit status: the whole of a failure's output."""
    echo(f"{PROG}: error: {message}", err=True)
    sys.exit(code)


def _note(message: str) -> None:
    echo(f"{PROG}: {message}", err=True)


@click.command("inspect", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--protocol",
    default=None,
    metavar="NAME",
    help="Read the stream as this protocol instead of detecting it "
    "(openai-responses, openai-chat, anthropic-messages, bedrock-converse, gemini, gemini-interactions, cohere-v2).",
)
@click.option(
    "--tools",
    "tools_file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="TOOLS.json",
    help="Tool declarations (names, JSON Schemas, confirm): callsafe's form or a list of OpenAI/Anthropic tool "
    "definitions. Without it, every tool the stream names gets an open schema.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema callsafe.inspect/1).")
@click.option(
    "--html", "html_out", type=click.Path(path_type=Path), default=None, metavar="OUT.html", help="Write an HTML page."
)
@click.option(
    "--to-trace",
    "trace_out",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUT.json",
    help="Write the recording as a trace (turn, parsed events, tools, the oracle's verdicts) for `callsafe replay`.",
)
@click.option(
    "--library",
    "libraries",
    multiple=True,
    metavar="NAME",
    help="Only these library adapters (a catalog name, or a prefix such as 'openai' or 'langchain-core'); "
    "repeatable; 'none' for none. Default: every adapter of the protocol.",
)
@click.option(
    "--chunk-size",
    type=int,
    default=None,
    metavar="BYTES",
    help="Feed raw SSE to the decoder this many bytes at a time, as a wire would (default: the whole file).",
)
@click.option(
    "--library-budget",
    type=click.FloatRange(min=0),
    default=LIBRARY_BUDGET,
    show_default=True,
    metavar="SECONDS",
    help="Stop a library adapter that takes longer than this on the recording (0: no limit); reported as stopped.",
)
def inspect_cmd(
    file: Path,
    protocol: str | None,
    tools_file: Path | None,
    as_json: bool,
    html_out: Path | None,
    trace_out: Path | None,
    libraries: tuple[str, ...],
    chunk_size: int | None,
    library_budget: float,
) -> None:
    """Replay the recorded stream FILE through the reference implementation and every
    installed library adapter of its protocol, side by side.

    FILE is JSON lines (one event payload per line, as in shared/captures) or raw
    server-sent-event bytes; the format and the protocol are detected. Exit status: 0
    inspected, 1 the recording is damaged (reported up to the damage), 2 nothing to
    inspect, 3 internal error.
    """
    try:
        _inspect(
            file, protocol, tools_file, as_json, html_out, trace_out, libraries, chunk_size, library_budget or None
        )
    except SystemExit:
        raise
    except Exception as exc:  # a bug in callsafe: one line, never a traceback
        _fail(f"internal error ({type(exc).__name__}: {exc}); please report it with the file", 3)


def _inspect(
    file: Path,
    protocol: str | None,
    tools_file: Path | None,
    as_json: bool,
    html_out: Path | None,
    trace_out: Path | None,
    libraries: tuple[str, ...],
    chunk_size: int | None,
    library_budget: float | None,
) -> None:
    from callsafe.inspection.inspect import inspect_recording, load_tools, to_trace
    from callsafe.inspection.recording import RecordingError, read_recording
    from callsafe.inspection.render import html_page, print_inspection

    try:
        data = file.read_bytes()
    except OSError as exc:
        _fail(f"{file}: cannot read: {exc.strerror or exc}", 2)
    try:
        tools = None
        if tools_file is not None:
            try:
                tools_text = tools_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RecordingError(f"--tools: cannot read {tools_file}: {exc}") from None
            tools = load_tools(tools_text)
        chosen = None if not libraries else [] if "none" in libraries else list(libraries)
        recording = read_recording(data, chunk_size=chunk_size)
        inspection = inspect_recording(
            recording, protocol=protocol, tools=tools, libraries=chosen, file=str(file), library_budget=library_budget
        )
    except RecordingError as exc:
        _fail(f"{file}: {exc}", 2)

    if as_json:
        echo_json(inspection.to_json())
    else:
        print_inspection(inspection, SafeConsole(highlight=False, soft_wrap=False))
    if html_out is not None:
        _write(html_out, html_page(inspection))
        _note(f"wrote {html_out}")
    if trace_out is not None:
        _write(trace_out, to_trace(inspection).dumps() + "\n")
        from callsafe.certify.targets import replay_command

        command = replay_command(trace_out, "reference")
        _note(f"wrote {trace_out} (judge it against an implementation: `{command}`, or your own target)")
    damage = inspection.damaged
    if damage is not None:
        _fail(f"{file}: damaged recording: {damage}; the report covers what came before", 1)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}", 2)
