"""Nothing from a stream, a trace or a target reaches the terminal raw.

Each command is run as a user runs it (a subprocess, output through a pipe), fed tool
names, call ids, trace names, argument text, target names and exception messages that hold
the sequences an attacker would use: clear screen and cursor moves (CSI), a colour, an
OSC 8 hyperlink, an OSC 52 clipboard write, BEL, the 8-bit CSI (U+009B). No byte of them
may appear on stdout or stderr; each must be shown escaped, so the reader still sees it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from netguard import guarded_env

from callsafe.cli.console import SafeConsole
from callsafe.model.builder import TraceBuilder
from callsafe.safe_text import printable

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

CLEAR = "\x1b[2J\x1b[H"
COLOUR = "\x1b[31m"
LINK = "\x1b]8;;https://example.invalid/\x1b\\click\x1b]8;;\x1b\\"
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CSI8 = "\x9b2J"
EVIL = CLEAR + COLOUR + LINK + CLIPBOARD + CSI8
FORBIDDEN = ("\x1b", "\x07", "\x9b")


def callsafe(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = guarded_env({**os.environ, "PYTHONPATH": str(TESTS), "COLUMNS": "200"})
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "callsafe", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        env=env,
        cwd=cwd,
        timeout=300,
    )


def assert_no_raw_sequence(result: subprocess.CompletedProcess[str]) -> None:
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        for seq in FORBIDDEN:
            assert seq not in text, f"{seq!r} reached {stream}:\n{text[-2000:]}"


def test_printable_escapes_every_control_and_keeps_the_text() -> None:
    shown = printable(EVIL + "\ud800 ok\n")
    assert not any(seq in shown for seq in FORBIDDEN)
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in shown and "\\x9b2J" in shown and "\\ud800" in shown
    assert shown.endswith(" ok\n")  # newlines stay, and plain text is untouched
    assert printable("a\tb\nc", newlines=False) == "a\\tb\\nc"


def test_the_console_escapes_text_inside_tables_and_markup_but_keeps_its_own_colours() -> None:
    from rich.markup import escape
    from rich.table import Table

    console = SafeConsole(force_terminal=True, width=200, color_system="standard")
    table = Table()
    table.add_column("tool")
    table.add_row(EVIL)
    with console.capture() as capture:
        console.print(table)
        console.print(f"[red]{escape(EVIL)}[/red]")
    out = capture.get()
    assert CLIPBOARD not in out and "\x07" not in out and "\x9b" not in out
    assert "\\x1b]52;c;" in out
    assert "\x1b[31m" in out  # rich's own red, written by rich: still a colour


def _evil_chat_stream(tmp_path: Path) -> Path:
    call = {"index": 0, "id": "id" + EVIL, "type": "function", "function": {"name": "pay" + EVIL, "arguments": ""}}
    lines = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {
            "id": "c1",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": json.dumps({"a": EVIL})}}]},
                }
            ],
        },
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_inspect_shows_a_streams_escape_sequences_escaped(tmp_path: Path) -> None:
    path = _evil_chat_stream(tmp_path)
    trace = tmp_path / "incident.json"
    result = callsafe("inspect", path, "--library", "none", "--to-trace", trace)
    assert result.returncode == 0, result.stderr
    assert "\\x1b]52;c;" in result.stdout  # shown, escaped
    assert_no_raw_sequence(result)
    as_json = callsafe("inspect", path, "--library", "none", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["tools"]
    assert_no_raw_sequence(as_json)
    replayed = callsafe("replay", trace, "--target", "reference:memory")
    assert replayed.returncode in (0, 1), replayed.stderr
    assert "\\x1b]52;c;" in replayed.stdout
    assert_no_raw_sequence(replayed)


def test_replay_shows_a_traces_names_escaped(tmp_path: Path) -> None:
    tool = "pay" + EVIL
    trace = (
        TraceBuilder(tools={tool: {"type": "object"}}, name="incident " + EVIL)
        .turn("t1", actor="u" + EVIL, tenant="acme")
        .open("a" + EVIL, tool)
        .fragment("a" + EVIL, json.dumps({"note": EVIL}))
        .terminal("a" + EVIL)
        .build()
    )
    path = tmp_path / "trace.json"
    path.write_text(trace.dumps(), encoding="utf-8")
    for extra in ((), ("--json",)):
        result = callsafe("replay", path, "--target", "reference:memory", *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        assert_no_raw_sequence(result)


def test_certify_and_render_escape_a_targets_name_and_errors(tmp_path: Path) -> None:
    """The target's name and what it raises are the target's words: shown escaped on the
    console, and drawn in the report's diagrams (Graphviz refused them before)."""
    report = tmp_path / "report"
    result = callsafe(
        "certify", "escape_targets:evil_target", "--generators", "catalog", "--report", report, "--no-minimize"
    )
    assert result.returncode != 0  # the target raises: never certified
    assert_no_raw_sequence(result)
    assert (report / "report.html").is_file() and (report / "report.json").is_file()
    rendered = callsafe("render", "--out", tmp_path / "diagrams", "--report", report / "report.json")
    assert rendered.returncode == 0, rendered.stderr
    assert_no_raw_sequence(rendered)


def test_a_usage_error_quoting_the_input_is_escaped(tmp_path: Path) -> None:
    result = callsafe("certify", "no_such_module_" + "\x1b[2J" + ":factory", "--generators", "catalog")
    assert result.returncode == 2
    assert_no_raw_sequence(result)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
        (bytes(range(256)) * 8, "UTF-8"),
        (b'{"events": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}", "nested"),
    ],
    ids=["deep JSON", "random bytes", "deep events"],
)
def test_replay_of_deep_or_binary_input_is_one_usage_line(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = callsafe("replay", path, "--target", "reference:memory")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and expected in result.stderr
    assert_no_raw_sequence(result)


def test_inspect_with_a_deep_tools_schema_is_one_usage_line(tmp_path: Path) -> None:
    path = _evil_chat_stream(tmp_path)
    tools = tmp_path / "tools.json"
    tools.write_text('{"pay": {"schema": ' + '{"items": ' * 100_000 + "{}" + "}" * 100_000 + "}}", encoding="utf-8")
    result = callsafe("inspect", path, "--library", "none", "--tools", tools)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "nested too deeply" in result.stderr
