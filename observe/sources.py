"""Which reader a record source needs: the guard's store, an OTLP JSON span file, or a
JSONL log, told apart by what the source is (a DSN, SQLite's header, a first JSON object
with ``resourceSpans``), unless the caller names the format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from callsafe.observe.guard_store import DEFAULT_NAMESPACE, read_store
from callsafe.observe.jsonl_log import LogReader, read_log
from callsafe.observe.otlp import SpanReader, read_spans
from callsafe.observe.records import RecordError, Records

__all__ = ["FORMATS", "detect_format", "line_reader", "read_source"]

FORMATS: Final = ("log", "spans", "store")
_SQLITE: Final = b"SQLite format 3\x00"


def detect_format(location: str) -> str:
    if location.startswith(("postgresql://", "postgres://")):
        return "store"
    try:
        with open(location, "rb") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise RecordError(f"{location}: cannot read: {exc.strerror or exc}") from None
    if head.startswith(_SQLITE):
        return "store"
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
    if b'"resourceSpans"' in first[:4096]:
        return "spans"
    if first.startswith(b"{") and not first.rstrip().endswith(b"}"):
        try:  # a pretty-printed OTLP document: its first line is "{"
            doc = json.loads(Path(location).read_bytes())
        except (OSError, ValueError):
            return "log"
        return "spans" if isinstance(doc, dict) and "resourceSpans" in doc else "log"
    return "log"


def read_source(location: str, fmt: str | None = None, namespace: str = DEFAULT_NAMESPACE) -> Records:
    """The records at ``location`` in format ``fmt`` (detected when None); ``namespace``:
    a PostgreSQL store's schema."""
    fmt = fmt or detect_format(location)
    if fmt == "store":
        return read_store(location, namespace)
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise RecordError(f"{location}: cannot read: {exc.strerror or exc}") from None
    name = Path(location).name
    if fmt == "spans":
        return read_spans(data, f"spans {name}")
    return read_log(data, f"log {name}")


class _SpanLines:
    """A span reader fed line by line (the Collector's file exporter writes a document a
    line)."""

    def __init__(self, source: str) -> None:
        self._reader = SpanReader(source)
        self.records = self._reader.records

    def feed(self, line: bytes, number: int) -> None:
        self._reader.feed(line, f"line {number}")

    def forget(self, turn: str) -> None:
        for ident in [i for i in self.records.calls if i[0] == turn]:
            del self.records.calls[ident]


def line_reader(fmt: str, source: str) -> LogReader | _SpanLines:
    """A reader that takes one line at a time, for ``--follow``."""
    if fmt == "spans":
        return _SpanLines(f"spans {source}")
    if fmt == "log":
        return LogReader(f"log {source}")
    raise RecordError("--follow reads a growing file: a JSONL log or an OTLP JSON-lines span file, not a store")
