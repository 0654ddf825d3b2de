"""The optional compiled core (``make fast``) certifies exactly like the pure reference.

The pure modules stay the reference (every other test runs them); this file checks the
compiled build, when one is there, against them: the same certification report for the
same small run, and the same executions on the benchmark's streams. Without a build (the
default: CI does not compile) it is skipped, with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_modules import bench_module

from callsafe import _fast
from callsafe.certify.harness import Options, certify
from callsafe.reference_impl import core as pure_core
from callsafe.reporting.report import comparable_text, report_json
from callsafe.targets import reference as pure_reference

ROOT = Path(__file__).resolve().parent.parent
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


def _module_of(source: str, name: str) -> ModuleType:
    """``source`` (a build's copy of module ``name``) run as a module of its own, beside the
    pure one (named ``..._copy_of_X`` in the same package, so its relative names resolve)."""
    package, _, short = name.rpartition(".")
    copy = ModuleType(f"{package}._copy_of_{short}")
    sys.modules[copy.__name__] = copy
    try:
        exec(compile(source, f"<copy of {name}>", "exec"), copy.__dict__)
    finally:
        del sys.modules[copy.__name__]
    return copy


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_fast", ROOT / "tools" / "build_fast.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", _fast.COMPILED)
def test_the_written_out_dataclass_inits_are_the_generated_ones(name: str) -> None:
    """The build's one change to the compiled copies (no build needed to check it): each
    written-out ``__init__`` takes the parameters, order and defaults of the one
    :mod:`dataclasses` generates, and builds an equal object."""
    pure = importlib.import_module(f"callsafe.{name}")
    source, count = _build_script().with_dataclass_inits(_fast.source_path(name).read_text())
    copy = _module_of(source, f"callsafe.{name}")
    generated = {  # the pure classes whose __init__ dataclasses generated (code from a string)
        cls.__name__
        for cls in vars(pure).values()
        if isinstance(cls, type)
        and cls.__module__ == pure.__name__
        and dataclasses.is_dataclass(cls)
        and cls.__init__.__code__.co_filename == "<string>"
    }
    written = {name for name in generated if getattr(copy, name).__init__.__code__.co_filename != "<string>"}
    assert len(written) == count
    if name == "reference_impl.effects":
        assert count >= 20  # every effect and fact: the objects made per fragment and per call
    for cls_name in sorted(written):
        ours, theirs = getattr(copy, cls_name), getattr(pure, cls_name)
        assert inspect.signature(ours.__init__).parameters == inspect.signature(theirs.__init__).parameters, cls_name
        assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]


def test_a_missing_or_stale_build_is_refused_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled core older than its sources would be a different core than the one the
    tests hold to the model: it is never loaded."""
    monkeypatch.setattr(_fast, "BUILD_DIR", tmp_path)
    assert "no compiled build" in (_fast.unavailable() or "")
    sources = _fast.source_digests()
    stamp = tmp_path / _fast.STAMP
    stamp.write_text(json.dumps({"python": sys.version.split()[0], "sources": sources}))
    assert _fast.unavailable() is None
    stale = {**sources, "reference_impl.core": "0" * 64}
    stamp.write_text(json.dumps({"python": sys.version.split()[0], "sources": stale}))
    assert "older than the source of reference_impl.core" in (_fast.unavailable() or "")
    stamp.write_text(json.dumps({"python": "3.0.0", "sources": sources}))
    assert "built for Python 3.0.0" in (_fast.unavailable() or "")


def test_the_compiled_driver_is_typed_for_the_memory_store() -> None:
    """The build's second change (no build needed to check it): the driver's copy takes a
    :class:`MemoryStore`, the only store the compiled group's effects fit, so its store
    calls are native; a driver whose source no longer has the line is refused, not
    silently compiled without it."""
    script = _build_script()
    original = _fast.source_path("reference_impl.driver").read_text()
    source = script.with_memory_store_driver(original)
    assert source != original
    copy = _module_of(source, "callsafe.reference_impl.driver")
    assert inspect.signature(copy.Driver.__init__).parameters["store"].annotation == "MemoryStore"
    assert copy.MemoryStore is importlib.import_module("callsafe.reference_impl.memory_store").MemoryStore
    with pytest.raises(ValueError, match="store: Store"):
        script.with_memory_store_driver(original.replace("        store: Store,\n", "        store: Any,\n"))


def test_the_compiled_driver_refuses_another_store(fast: dict[str, ModuleType]) -> None:
    """Typed for the memory store, the compiled driver says so at once for any other
    store (the SQL stores know only the pure effects), rather than failing mid-stream."""
    from callsafe.model.vocabulary import Limits

    core = fast["callsafe.reference_impl.core"].Core({}, Limits())
    driver_class = fast["callsafe.reference_impl.driver"].Driver
    store_class = fast["callsafe.reference_impl.memory_store"].MemoryStore
    services: dict[str, Any] = {
        "executor": lambda *a: None,
        "business_validator": lambda *a: None,
        "observe": lambda o: None,
        "step": lambda: 0,
        "clock": lambda: 0.0,
    }
    assert driver_class(core, store_class(), **services).store is not None
    with pytest.raises(TypeError):
        driver_class(core, pure_memory_store(), **services)


def pure_memory_store() -> Any:
    from callsafe.reference_impl.memory_store import MemoryStore

    return MemoryStore()


def test_the_driver_copy_builds_the_observations_the_model_classes_build() -> None:
    """The build's third change (no build needed to check it): in the driver's copy, each
    status and ledger row is built by ``_built``; run, the copy's driver reports
    observations equal to the pure driver's, of the same classes, with the same instance
    dictionaries (fields in the same order), so the harness cannot tell them apart."""
    from callsafe.model.vocabulary import CallKey, LedgerRow, StatusShown
    from callsafe.reference_impl.effects import Ledger, LedgerEntry, Status

    script = _build_script()
    original = _fast.source_path("reference_impl.driver").read_text()
    source, count = script.with_model_values_built(original, script.BUILT_DIRECTLY[script.DRIVER])
    assert count == 2 and "_built(LedgerRow, {" in source and "_built(StatusShown, {" in source
    copy = _module_of(source, "callsafe.reference_impl.driver")
    key = CallKey("acme", "t1", "r1", "i1", "c1")
    effects = [
        Status("t1", "done"),
        Ledger(LedgerEntry(key, 3, None, "ok", "ok", "dispatched", "00-ab")),
        Status("t1", "x"),
    ]
    seen: dict[str, list[Any]] = {"pure": [], "copy": []}
    for side, module in (("pure", importlib.import_module("callsafe.reference_impl.driver")), ("copy", copy)):
        steps = iter(range(100)).__next__
        driver = module.Driver(
            object.__new__(module.Core),
            pure_memory_store(),
            executor=lambda *a: None,
            business_validator=lambda *a: None,
            observe=seen[side].append,
            step=steps,
            clock=lambda: 0.0,
        )
        for effect in effects:
            driver._perform(effect)
    assert [type(o) for o in seen["copy"]] == [StatusShown, LedgerRow, StatusShown]
    assert seen["copy"] == seen["pure"]
    assert [list(vars(o).items()) for o in seen["copy"]] == [list(vars(o).items()) for o in seen["pure"]]
    assert [hash(o) for o in seen["copy"]] == [hash(o) for o in seen["pure"]]
    with pytest.raises(ValueError, match="plain frozen dataclass"):
        script.observation_fields("TraceFormatError")  # not a dataclass: its __init__ is not the generated one


def test_the_core_copy_builds_the_keys_the_model_class_builds() -> None:
    """The same change in the core's copy: the key of an opened call is built by ``_built``;
    run over a small conversation, the copy's core gives effects equal to the pure core's,
    and its keys are of the model's class with the same instance dictionary and hash."""
    from callsafe.model.vocabulary import CallKey, CallOpened, CallTerminal, Fragment, Limits, ToolSpec, TurnStarted

    script = _build_script()
    original = _fast.source_path("reference_impl.core").read_text()
    source, count = script.with_model_values_built(original, script.BUILT_DIRECTLY[script.CORE])
    assert count >= 1 and "_built(CallKey, {'tenant': turn.tenant, 'turn': turn_id," in source
    copy = _module_of(source, "callsafe.reference_impl.core")
    events = [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(turn="t1", response="r1", item="i1", call="c1", tool="book"),
        Fragment(turn="t1", response="r1", item="i1", call="c1", position=0, text='{"day": "Mon"}'),
        CallTerminal(turn="t1", response="r1", item="i1", call="c1", event_id="e1"),
    ]
    tools = {"book": ToolSpec(schema={"type": "object"})}
    effects = {}
    for side, module in (("pure", pure_core), ("copy", copy)):
        core = module.Core(tools, Limits())
        effects[side] = [list(core.receive(ev)) for ev in events]
    assert effects["copy"] == effects["pure"]
    keys = [e.key for e in effects["copy"][1] if hasattr(e, "key")]
    pure_keys = [e.key for e in effects["pure"][1] if hasattr(e, "key")]
    assert keys and all(type(k) is CallKey for k in keys)
    assert [list(vars(k).items()) for k in keys] == [list(vars(k).items()) for k in pure_keys]
    assert [hash(k) for k in keys] == [hash(k) for k in pure_keys]
