"""Text from a stream, a trace or a target, made safe to show on a terminal or in a drawing.

Why: tool names, call ids, trace names, exception messages and argument fragments come
from recorded streams and from programs under test, and a terminal obeys the control
characters in them: clear the screen, move the cursor, recolour, hide text, make an OSC 8
link, write the clipboard (OSC 52). Graphviz refuses them outright. So every control
character (C0 but newline and tab, DEL, C1) is shown as a visible escape (``\\x1b``,
``\\x9b``), which keeps the text readable and lossless for a reader, and no sequence
survives to be interpreted. Lone surrogates (invalid JSON escapes decode to them) cannot
be encoded to UTF-8 and would crash a print: they are shown as ``\\udXXX`` too.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["CONTROL", "json_text", "printable"]

# C0 controls except tab and newline, DEL, C1 controls, and lone surrogates.
CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


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
