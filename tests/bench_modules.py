"""Import a module of ``bench/`` from a test.

Why a helper: ``bench/`` is not part of the installed package, so the repository root goes
on ``sys.path`` while the module is imported, and only then (left there, it would make the
package's own folders, ``model``, ``certify``, ..., importable a second time under
top-level names)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def bench_module(name: str) -> ModuleType:
    """``bench.<name>``, imported from the repository root."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(f"bench.{name}")
    finally:
        sys.path.remove(str(ROOT))
