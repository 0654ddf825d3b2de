"""Text from a stream, a trace or a target, made safe to show on a terminal or in a drawing.

Why: tool names, call ids, trace names, exception messages and argument fragments come
from recorded streams and from programs under test, and a terminal obeys the control
characters in them: clear the screen, move the cursor, recolour, hide text, make an OSC 8
link, write the clipboard (OSC 52). Graphviz refuses them outright. So every control
character (C0 but newline and tab, DEL, C1) is shown as a visible escape (``\\x1b``,
``\\x9b``), which keeps the text readable and lossless for a reader, and no sequence
survives to be interpreted. Lone surrogates (invalid JSON escapes decode to them) cannot
be encoded to UTF-8 and would crash a print: they are shown as ``\\udXXX`` too. So are
the invisible characters that reorder or break what a reader sees without being control
characters: the bidirectional overrides, embeddings, isolates and marks (the "Trojan
Source" characters, U+202A..U+202E, U+2066..U+2069, U+200E, U+200F, U+061C) and the
Unicode line and paragraph separators (U+2028, U+2029), which some log viewers and
editors break a line at, so a value could forge a second log line.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Final

__all__ = ["CONTROL", "EscapedRecords", "escape_logger", "json_text", "printable"]

# C0 controls except tab and newline, DEL, C1 controls, lone surrogates, the bidirectional
# formatting characters and the Unicode line and paragraph separators.
CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape; with
    ``newlines=False`` newlines and tabs too (for one-line fields: labels, table cells)."""
    if newlines:
        return CONTROL.sub(_escape, text)
    return CONTROL.sub(_escape, text).replace("\n", "\\n").replace("\t", "\\t")


def json_text(value: Any, **dumps: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **dumps)`` with every character a terminal
    could obey written as a JSON ``\\uXXXX`` escape: still valid JSON that parses to the
    same value, still readable UTF-8 for everything else. (``json`` escapes C0 itself; DEL,
    C1 and lone surrogates it would write raw.)"""
    text = json.dumps(value, ensure_ascii=False, **dumps)
    return CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class EscapedRecords(logging.Filter):
    """A logging filter that escapes a record's arguments (one line each), its message
    and its traceback with :func:`printable`, newlines included, so a value a
    client chose (a request path, percent-decoded by the server) cannot forge a log line
    or drive a terminal. For loggers callsafe does not format itself (uvicorn's, behind
    ``callsafe serve``); the guard escapes its own fields (``callsafe.guard.telemetry``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = printable(record.msg)
        if isinstance(record.args, dict):
            record.args = {k: printable(v, newlines=False) if isinstance(v, str) else v for k, v in record.args.items()}
        elif record.args:
            record.args = tuple(printable(a, newlines=False) if isinstance(a, str) else a for a in record.args)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:  # also one set before this filter saw the record (escaping twice is a no-op)
            record.exc_text = printable(record.exc_text)
        return True


def escape_logger(name: str) -> None:
    """Attach one :class:`EscapedRecords` to the logger ``name`` (again: nothing)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, EscapedRecords) for f in logger.filters):
        logger.addFilter(EscapedRecords())
