"""The argument buffer of one call: positions, bytes, syntax state; never handed out live.

Why a class of its own: the spec asks that a buffer have "a byte limit, syntax state,
received-event sequence, and terminal status" and that it never be exposed as a live
object to an executor. This class holds the first three (the lifecycle state lives in the
core, which owns the table); nothing outside :mod:`callsafe.reference_impl.core` ever
sees it, and what leaves it is a new string (:meth:`ArgumentBuffer.assemble`).

Ordering (a choice the spec leaves open: "reject or reassemble by its documented
position"): we **reassemble by position**. A fragment at the next expected position is
appended; one further ahead waits in ``pending`` until the gap closes; the terminal event
needs exactly positions ``0..n-1`` (a gap fails the call, as in the model).

Repeats: the same position with identical text is a delivery condition; with different
text it is a conflict. To tell them apart after the buffer gave up its bytes (doomed, see
below, or sealed: parsed and waiting for a confirmation) each position keeps a 16-byte
BLAKE2b digest instead of its text.

Doomed buffers: once the :class:`~callsafe.reference_impl.scanner.SyntaxScanner` proves
that the text can never be one JSON object, the buffer drops its bytes and keeps only
digests. The call itself stays *collecting*: the model's lifecycle fails such a call at
its terminal event (or whatever stops it first), and byte caps keep counting its
fragments; failing it earlier would change which *other* calls hit the per-turn cap.

Scanning is batched: text is scanned once at least ``scan_every`` unscanned bytes have
accumulated (0: every fragment), so a small, ordinary call pays no scanning at all before
its single strict parse, while a long garbage stream is caught within ``scan_every``
bytes. Each byte is scanned at most once, by ``re`` in C.
"""

from __future__ import annotations

import hashlib
import math
from typing import Final

from callsafe.reference_impl.scanner import SyntaxScanner

__all__ = ["DEFAULT_SCAN_EVERY", "ArgumentBuffer"]

DEFAULT_SCAN_EVERY = 512
_NOT_SEEN = (False, False)
# ``fresh_from`` while positions wait beyond a gap: above every position. Not an int
# (``sys.maxsize`` was one, and a stream may send that position: a conflicting repeat of
# it went unseen).
_ANY_MAY_BE_SEEN: Final = math.inf


_DIGEST_CHUNK = 1 << 16  # characters encoded at a time for a long text


def _digest(text: str) -> str:
    if len(text) <= _DIGEST_CHUNK:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    # A repeat checked against a doomed or sealed buffer can be any size (the caps are
    # checked after this): hash it in slices, so it is never copied whole. UTF-8 encodes
    # code point by code point, so the slices' bytes are the whole text's bytes.
    h = hashlib.blake2b(digest_size=16)
    for i in range(0, len(text), _DIGEST_CHUNK):
        h.update(text[i : i + _DIGEST_CHUNK].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class ArgumentBuffer:
    """Argument text of one call, by protocol position."""

    __slots__ = (
        "_digests",
        "_parts",
        "_pending",
        "_scan_every",
        "_scanned",
        "_scanner",
        "_unscanned",
        "doomed",
        "fresh_from",
    )

    def __init__(self, scan_every: int = DEFAULT_SCAN_EVERY) -> None:
        self._parts: list[str] = []  # positions 0..len-1, text (or digest once doomed)
        self._pending: dict[int, str] = {}  # positions beyond a gap
        self._scanner: SyntaxScanner | None = None
        self._scanned = 0  # parts [0, _scanned) have been fed to the scanner
        self._unscanned = 0  # characters in parts [_scanned, len)
        self._scan_every = scan_every
        self.doomed: str | None = None  # why the text can never parse
        self._digests = False  # positions hold digests, not text (doomed or sealed)
        # Every position >= fresh_from is certainly new (``seen`` would say so): the
        # number of positions in order while none waits beyond a gap, else never. Lets
        # the core skip the repeat check for the common in-order fragment with one
        # attribute read instead of a method call.
        self.fresh_from: int | float = 0

    @property
    def count(self) -> int:
        """Distinct positions received."""
        return len(self._parts) + len(self._pending)

    @property
    def complete(self) -> bool:
        """Positions are exactly ``0..n-1`` (no gap)."""
        return not self._pending

    def seen(self, position: int, text: str) -> tuple[bool, bool]:
        """``(seen_same, seen_different)`` for a fragment at ``position``: the two facts
        :func:`callsafe.model.system.classify_fragment` needs."""
        parts = self._parts
        if position >= len(parts) and not self._pending:
            return _NOT_SEEN  # the common case: the next position, in order
        previous = parts[position] if 0 <= position < len(parts) else self._pending.get(position)
        if previous is None:
            return _NOT_SEEN
        same = previous == (_digest(text) if self._digests else text)
        return same, not same

    def add(self, position: int, text: str) -> None:
        """Store a new position (the caller checked that it is new and within the caps)."""
        if position == self.fresh_from and not self._digests:
            # the common case: the next position, in order, nothing waiting beyond a gap
            self._parts.append(text)
            self.fresh_from = position + 1
            unscanned = self._unscanned = self._unscanned + len(text)
            if unscanned >= self._scan_every:
                self._scan()
            return
        if self._digests:
            text = _digest(text)
        parts = self._parts
        if position == len(parts):
            parts.append(text)
            self._unscanned += len(text)
            if self._pending:
                pending = self._pending
                while len(parts) in pending:
                    moved = pending.pop(len(parts))
                    parts.append(moved)
                    self._unscanned += len(moved)
        else:
            self._pending[position] = text
        self.fresh_from = _ANY_MAY_BE_SEEN if self._pending else len(parts)
        if not self._digests and self._unscanned >= self._scan_every:
            self._scan()

    def _scan(self) -> None:
        parts = self._parts
        chunk = "".join(parts[self._scanned :])
        self._scanned = len(parts)
        self._unscanned = 0
        scanner = self._scanner
        if scanner is None:  # made on the first scan: a small call never scans before its parse
            scanner = self._scanner = SyntaxScanner()
        error = scanner.feed(chunk)
        if error is not None:
            self.doomed = error
            self._to_digests()

    def seal(self) -> None:
        """The text was parsed and the call waits (for a confirmation): give up the bytes,
        keep what tells a repeated fragment from a conflicting one."""
        if not self._digests:
            self._to_digests()

    def _to_digests(self) -> None:
        self._digests = True
        self._parts = [_digest(p) for p in self._parts]
        self._pending = {k: _digest(v) for k, v in self._pending.items()}

    def assemble(self) -> str | None:
        """The whole argument text as a new string, or None when it is doomed. Only for
        the one strict parse at the terminal event."""
        if self._digests:
            return None
        return "".join(self._parts)

    def drop(self) -> None:
        """Give up every byte: the call left active assembly."""
        self._parts = []
        self._pending = {}
        self.fresh_from = 0
