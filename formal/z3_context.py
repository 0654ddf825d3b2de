"""A fresh z3 context for each search whose answer callsafe keeps.

Why: z3's answers (which model ``check`` returns, which optimum ``Optimize`` picks among
equals) depend on everything the process did with z3 before: the default context's term
ids, caches and counters. The synthesised traces of a certification came out different in
a test worker that had run z3 proofs first than in a fresh process, so the same options
gave different traces and different verdicts (the default certification caught a zoo mutant
in one and passed it in the other). Every search that produces data (synthesised hazard
traces, z3-chosen fragmentations) runs in :func:`isolated_z3`: its default context is a new
one, so the answer is a function of the query alone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import z3
import z3.z3 as _core

__all__ = ["isolated_z3"]

_LOCK = threading.RLock()


@contextlib.contextmanager
def isolated_z3() -> Iterator[None]:
    """Inside the block, z3's default context (what ``z3.Int``, ``z3.Solver`` ... use when no
    ``ctx`` is given) is a new one; the previous one is restored after. Terms made inside
    must not be mixed with terms made outside (z3 refuses that with an error). One thread at
    a time (the swap is process-wide)."""
    with _LOCK:
        saved = _core._main_ctx
        _core._main_ctx = z3.Context()
        try:
            yield
        finally:
            _core._main_ctx = saved
