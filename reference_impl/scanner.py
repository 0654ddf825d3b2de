"""Incremental JSON syntax state for one argument buffer, linear in bytes, per-byte work in C.

Why it exists: a stream that can never become one JSON object (a ``}{`` glued second
call, a non-object start, a string with a raw control character, mismatched brackets)
should be recognised while it streams, so that its buffer can stop holding bytes and its
terminal event costs no parse. The verdict itself is still the one strict parse of the
model (:func:`callsafe.model.system.strict_parse`) at the call's terminal event: the
scanner only ever *dooms* text that strict parsing would reject too (it is sound, not
complete), so using it can never change a decision.

How it stays linear and in C: text between brackets (including whole strings, with their
escapes) is skipped by one ``re`` match per run; Python code runs once per bracket and
once per fragment, never once per character. String and escape state carry across
fragment boundaries, so a split inside ``\\"`` or inside a multi-byte character is fine
(fragments are ``str``: a character is never split, a surrogate pair may be, which strict
JSON rejects anyway).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["SyntaxScanner"]

# JSON whitespace is exactly these four characters (RFC 8259; what json.loads skips).
_NON_WS: Final = re.compile(r"[^ \t\n\r]")
# The inside of a string up to its closing quote, a final lone backslash, a raw control
# character, or the end of the chunk. Unrolled (no ambiguous alternation), so linear.
_STRING_BODY: Final = re.compile(r'[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*', re.DOTALL)
# A run of text with no bracket: plain characters and complete strings. Stops at a
# bracket, at a string that does not close in this chunk, or at the end.
_RUN: Final = re.compile(r'[^"{}\[\]]*(?:"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*"[^"{}\[\]]*)*', re.DOTALL)
_OPENER: Final = {"}": "{", "]": "["}

_BEFORE, _INSIDE, _AFTER = 0, 1, 2


class SyntaxScanner:
    """Tracks, across fragments fed in position order, whether the text so far can still
    be the prefix of exactly one JSON object. ``error`` is set (and stays set) once it
    cannot; ``closed`` once the top-level object has closed."""

    __slots__ = ("_escape", "_in_string", "_phase", "_stack", "error")

    def __init__(self) -> None:
        self._phase = _BEFORE
        self._stack: list[str] = []
        self._in_string = False
        self._escape = False
        self.error: str | None = None

    @property
    def closed(self) -> bool:
        return self._phase == _AFTER

    def feed(self, chunk: str) -> str | None:
        """Scan the next chunk; returns the error (also kept in ``error``) if the text can
        no longer become one JSON object."""
        if self.error is not None or not chunk:
            return self.error
        phase = self._phase
        i = 0
        if phase == _AFTER:
            if _NON_WS.search(chunk) is not None:
                self.error = "trailing data after the object"
            return self.error
        if phase == _BEFORE:
            m = _NON_WS.search(chunk)
            if m is None:
                return None
            i = m.start()
            if chunk[i] != "{":
                self.error = "arguments do not start with an object"
                return self.error
            self._phase = _INSIDE
            self._stack.append("{")
            i += 1
        n = len(chunk)
        if self._in_string:
            if self._escape:
                if i >= n:
                    return None
                i += 1  # the escaped character itself
                self._escape = False
            i = self._string_rest(chunk, i, n)
            if i < 0:
                return self.error
        stack = self._stack
        while True:
            i = _RUN.match(chunk, i).end()  # type: ignore[union-attr]  # _RUN matches the empty string
            if i >= n:
                return None
            c = chunk[i]
            if c == '"':
                i = self._string_rest(chunk, i + 1, n)
                if i < 0:
                    return self.error
                continue
            if c == "{" or c == "[":
                stack.append(c)
            elif not stack or stack.pop() != _OPENER[c]:
                self.error = "mismatched brackets"
                return self.error
            elif not stack:
                self._phase = _AFTER
                if _NON_WS.search(chunk, i + 1) is not None:
                    self.error = "trailing data after the object"
                return self.error
            i += 1

    def _string_rest(self, chunk: str, i: int, n: int) -> int:
        """Continue a string at ``i``; the index after its closing quote, or -1 when the
        chunk ends inside it (state kept) or it holds a raw control character (error)."""
        j = _STRING_BODY.match(chunk, i).end()  # type: ignore[union-attr]  # matches the empty string
        if j >= n:
            self._in_string = True
            return -1
        c = chunk[j]
        if c == '"':
            self._in_string = False
            return j + 1
        if c == "\\":  # a lone backslash can only be the chunk's last character
            self._in_string = True
            self._escape = True
            return -1
        self.error = "raw control character in a string"
        return -1
