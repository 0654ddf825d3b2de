"""The optional compiled core (``make fast``) certifies exactly like the pure reference.

The pure modules stay the reference (every other test runs them); this file checks the
compiled build, when one is there, against them: the same certification report for the
same small run, and the same executions on the benchmark's streams. Without a build (the
default: CI does not compile) it is skipped, with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from bench_modules import bench_module

from callsafe import _fast
from callsafe.certify.harness import Options, certify
from callsafe.reference_impl import core as pure_core
from callsafe.reporting.report import comparable_text, report_json
from callsafe.targets import reference as pure_reference

SMALL = Options(depth=2, walks=40, generators=("catalog", "walks", "exhaustive"), seed=0)


@pytest.fixture(scope="module")
def fast() -> dict[str, ModuleType]:
    why = _fast.unavailable()
    if why is not None:
        pytest.skip(f"no usable compiled build: {why}")
    return _fast.load()


def _factory(module: ModuleType) -> Callable[[], Any]:
    def reference_memory() -> Any:
        return module.ReferenceTarget("memory")

    return reference_memory


def test_the_compiled_build_loads_beside_the_pure_modules(fast: dict[str, ModuleType]) -> None:
    compiled = fast["callsafe.reference_impl.core"]
    assert compiled is not pure_core and compiled.__file__ and compiled.__file__.endswith(".so")
    assert pure_core.__file__ and pure_core.__file__.endswith(".py")
    assert sys.modules["callsafe.reference_impl.core"] is pure_core  # the pure one stays the default
    assert fast["callsafe.targets.reference"].Core is compiled.Core
    assert pure_reference.Core is pure_core.Core


def test_the_compiled_core_certifies_exactly_like_the_pure_one(fast: dict[str, ModuleType]) -> None:
    pure = certify(_factory(pure_reference), SMALL)
    compiled = certify(_factory(fast["callsafe.targets.reference"]), SMALL)
    assert pure.ok and sum(g.ran for g in pure.generators.values()) > 100
    assert comparable_text(report_json(compiled)) == comparable_text(report_json(pure))


def test_the_compiled_core_executes_the_benchmark_streams_alike(fast: dict[str, ModuleType]) -> None:
    assembly = bench_module("assembly")
    for trace, expected in (assembly.many_calls(20), assembly.growing_call(4 << 10)[:2]):
        assert dict(assembly.embedded_core(trace)) == expected
        assert dict(assembly.embedded_core(trace, fast)) == expected
