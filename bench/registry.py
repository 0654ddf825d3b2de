"""The benchmarks ``python -m bench`` knows, by name, in the order it runs them.

Why a registry and not discovery: a benchmark is added on purpose, with a name people
type (``--only assembly``); listing them here keeps the order of the results file stable.
A benchmark module has ``NAME``, ``TITLE`` and ``run(config) -> Section``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from bench.common import Config, Section

__all__ = ["BENCHMARKS", "load"]

# name -> module path; imported only when the benchmark runs (each may import heavy things)
BENCHMARKS: dict[str, str] = {
    "assembly": "bench.assembly",
    "scaling": "bench.scaling",
    "throughput": "bench.throughput",
    "durable": "bench.durable",
    "exploration": "bench.exploration",
    "bugpower": "bench.bugpower",
    "guard": "bench.guard",
    "memory": "bench.memory",
    "replicas": "bench.replicas",
    "program_rows": "bench.program_rows",
}


def load(name: str) -> Callable[[Config], Section]:
    """The ``run`` function of the benchmark called ``name``."""
    import importlib

    module: ModuleType = importlib.import_module(BENCHMARKS[name])
    runner: Callable[[Config], Section] = module.run
    return runner
