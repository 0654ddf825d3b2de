"""The consoles every command prints through: nothing from an input reaches the terminal raw.

Why here, once, rather than at each ``print``: a command prints tables, progress lines,
findings and errors whose cells hold tool names, call ids and messages from streams and
targets, and one forgotten field is one escape sequence on the user's terminal. rich turns
everything it prints into segments of text plus its own styles, and writes the styles as
escape codes only at the end (``Console._render_buffer``); escaping the control
characters of the text segments there covers every renderable (tables, markup, ``Text``)
and leaves rich's own colours alone. ``tests/test_terminal_safety.py`` feeds ESC, CSI,
OSC 8 and OSC 52 through every command and checks none arrives.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console
from rich.segment import Segment

from callsafe.safe_text import json_text, printable

__all__ = ["SafeConsole", "SafeGroup", "echo", "echo_json"]


class SafeConsole(Console):
    """A rich console that shows control characters in printed text as escapes."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)  # ":smile:" in a target name is text, not a picture
        super().__init__(**kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (seg if seg.control else Segment(printable(seg.text), seg.style, seg.control) for seg in buffer)
        return super()._render_buffer(safe)


def echo(message: str = "", *, err: bool = False) -> None:
    """``click.echo`` for text that may hold an input's characters."""
    click.echo(printable(message), err=err)


def echo_json(value: Any, *, indent: int | None = 1) -> None:
    """A JSON document on stdout, valid and without a raw control character."""
    click.echo(json_text(value, indent=indent))


class _Escaping:
    """A text stream that escapes control characters on the way to ``stream``."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return int(self.stream.write(printable(text)))

    def flush(self) -> None:
        self.stream.flush()


class SafeGroup(click.Group):
    """The ``callsafe`` group: click's own error messages (which quote the user's input,
    a trace file's error, a bad target name) go out escaped like everything else."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show(file=_Escaping(sys.stderr))  # type: ignore[arg-type]
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            echo("Aborted!", err=True)
            sys.exit(1)
        # a command that returned without sys.exit: click's standalone mode would exit 0
        sys.exit(result if isinstance(result, int) else 0)
