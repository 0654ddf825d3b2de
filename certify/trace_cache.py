"""Traces that depend only on callsafe's own source, kept on disk between processes.

Why: the z3-synthesised traces (:func:`callsafe.certify.harness._synthesised`) cost every
fresh ``callsafe certify`` process about a second of CPU (z3 solves a dozen path problems),
and their answer does not depend on the target: only on the model, the generators, the
formal encoding and z3. So the first process writes them as JSON traces (the format
``--traces DIR`` reads) and the next ones read them back.

A stale cache must never be used: the file name carries a digest of every source file of
``model/``, ``formal/``, ``generators/`` and ``certify/``, of callsafe's version and of z3's,
so any edit to the rules or the generators builds the traces afresh. A file that cannot be
read or parsed is ignored and rebuilt; a cache directory that cannot be written costs only
the time saved. ``CALLSAFE_CACHE_DIR`` chooses the directory (default
``$XDG_CACHE_HOME/callsafe``, else ``~/.cache/callsafe``); ``CALLSAFE_CACHE_DIR=off`` turns
the cache off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from callsafe import __version__
from callsafe.model.vocabulary import Trace, TraceFormatError

__all__ = ["cache_dir", "cached_traces", "source_digest"]

_ROOT = Path(__file__).resolve().parent.parent
_SOURCES = ("model", "formal", "generators", "certify")


def cache_dir() -> Path | None:
    """Where cached traces live; None when the cache is off."""
    chosen = os.environ.get("CALLSAFE_CACHE_DIR")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "no") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "callsafe"


@functools.cache
def source_digest() -> str:
    """A digest of the source the cached traces depend on (files, names and versions)."""
    h = hashlib.sha256(f"callsafe {__version__}\n".encode())
    try:
        h.update(f"z3 {metadata.version('z3-solver')}\n".encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - z3 is a dependency
        h.update(b"z3 none\n")
    for folder in _SOURCES:
        for path in sorted((_ROOT / folder).rglob("*.py")):
            h.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def cached_traces(name: str, build: Callable[[], Sequence[Trace]]) -> tuple[Trace, ...]:
    """``build()``'s traces, read from the cache when this source built them before, else
    built and written there (atomically: a concurrent reader sees the whole file or none)."""
    folder = cache_dir()
    if folder is None:
        return tuple(build())
    path = folder / f"{name}-{source_digest()}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, list):
            return tuple(Trace.from_json(item) for item in doc)
    except (OSError, ValueError, TraceFormatError):
        pass  # absent, unreadable or not ours: build afresh
    traces = tuple(build())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump([t.to_json() for t in traces], out, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full disk: the traces are built, only the saving is lost
    return traces
