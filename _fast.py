"""The optional mypyc build of the reference's hot modules, loaded beside the pure ones.

Why optional, and why beside: the pure-Python modules of ``reference_impl/`` are the
reference. Every test, every certification and the mutation testing run them; a compiled
copy is only ever a second, faster rendering of the same source, for an application that
embeds the core and for the benchmark that says what compiling buys. So nothing here is
ever imported by default: ``make fast`` (``tools/build_fast.py``, mypy's mypyc) builds
:data:`COMPILED` into ``build/fast/``, and :func:`load` imports that build *next to* the
pure modules, under their own names, without replacing them in ``sys.modules``. One
process can then run both, side by side, on the same input (``bench/assembly.py`` times
them against the same floor; ``tests/test_fast_build.py`` checks that both certify alike).

How: the compiled modules are one mypyc group, so the compiled core makes the compiled
effects and hands them to the compiled driver and memory store. While :func:`load` runs,
the pure modules of the group (and :data:`DEPENDENTS`, which import them) leave
``sys.modules`` and the build directory is put first on ``callsafe.reference_impl``'s
path; afterwards everything is put back as it was. Modules outside the group (the model,
``errors``, the SQL stores) stay the shared pure ones, so a ``StoreError`` is the same
class on both sides, and so is every event and observation. The compiled ``ReferenceTarget`` runs the
memory store only: the SQL stores are imported by it lazily, and would be the pure ones,
which know only the pure effects (the build types the compiled driver's store as the
compiled ``MemoryStore``, so it refuses any other store when it is built).

A build that no longer matches its sources is refused (:func:`unavailable` says why): the
build records a digest of every source file it compiled, so a compiled core can never
silently be an older core than the one the tests hold to the model.

A loose module of the package (no folder): it imports no folder at import time, only by
name when :func:`load` is called.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

__all__ = ["BUILD_DIR", "COMPILED", "DEPENDENTS", "load", "source_digests", "source_path", "unavailable"]

ROOT: Final = Path(__file__).resolve().parent
BUILD_DIR: Final = ROOT / "build" / "fast"
# The hot modules, compiled as one group (names under ``callsafe.``): everything a small
# call runs through inside reference_impl/, from the core to the memory store. The model is
# not compiled: its events, observations and states are shared with the harness and the
# oracle, and the core reads its rules duck-typed (``SystemState.turn_live`` and the
# broadcast rules take the core and its calls for the model's records), which a compiled
# model would refuse (it checks argument types).
COMPILED: Final = (
    "reference_impl.scanner",
    "reference_impl.buffer",
    "reference_impl.effects",
    "reference_impl.store",
    "reference_impl.memory_store",
    "reference_impl.redaction",
    "reference_impl.schema_check",
    "reference_impl.driver",
    "reference_impl.core",
)
# Pure modules that import the group at module level: imported again during load(), so
# they bind to the compiled classes.
DEPENDENTS: Final = ("callsafe.targets.reference",)
GROUP: Final = "callsafe_fast"  # the group's shared library: callsafe_fast__mypyc
STAMP: Final = "sources.json"  # in BUILD_DIR: module -> sha256 of the source it was built from


def source_path(name: str) -> Path:
    """The source file of a module of :data:`COMPILED`."""
    return ROOT.joinpath(*name.split(".")).with_suffix(".py")


def source_digests() -> dict[str, str]:
    """The sha256 of each compiled module's current source."""
    return {name: hashlib.sha256(source_path(name).read_bytes()).hexdigest() for name in COMPILED}


def unavailable() -> str | None:
    """Why the compiled build cannot be loaded (not built, or built from other sources),
    or None when it can."""
    stamp = BUILD_DIR / STAMP
    if not stamp.is_file():
        return f"no compiled build in {BUILD_DIR} (run `make fast`)"
    try:
        built = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"unreadable build stamp {stamp}: {exc}"
    if built.get("python") != sys.version.split()[0]:
        return f"built for Python {built.get('python')}, this is {sys.version.split()[0]} (run `make fast`)"
    stale = sorted(name for name, digest in source_digests().items() if built.get("sources", {}).get(name) != digest)
    if stale:
        return f"the compiled build is older than the source of {', '.join(stale)} (run `make fast`)"
    return None


_loaded: dict[str, ModuleType] | None = None


def load() -> dict[str, ModuleType]:
    """The compiled modules of the group and the :data:`DEPENDENTS` bound to them, by
    their full names, imported beside the pure ones (see the module docstring). Raises
    :class:`RuntimeError` with :func:`unavailable`'s reason when there is no usable build.
    Loaded once per process."""
    global _loaded
    if _loaded is not None:
        return _loaded
    why = unavailable()
    if why is not None:
        raise RuntimeError(why)
    names = [f"callsafe.{m}" for m in COMPILED]
    swapped = [*names, *DEPENDENTS]
    for name in swapped:  # the pure ones first, so that they are what is put back
        importlib.import_module(name)
    pure = {name: sys.modules.pop(name) for name in swapped}
    parents = {name: importlib.import_module(name.rpartition(".")[0]) for name in swapped}
    attributes = {name: getattr(parents[name], name.rpartition(".")[2]) for name in swapped}
    # each package of the group looks in the build first, while the group is imported
    paths = {parents[name]: str(BUILD_DIR.joinpath(*name.split(".")[:-1])) for name in names}
    for package, where in paths.items():
        package.__path__.insert(0, where)
    sys.path.insert(0, str(BUILD_DIR))
    importlib.invalidate_caches()
    try:
        fast = {name: importlib.import_module(name) for name in swapped}
    finally:
        for package, where in paths.items():
            package.__path__.remove(where)
        sys.path.remove(str(BUILD_DIR))
        for name in swapped:
            sys.modules.pop(name, None)
        sys.modules.update(pure)
        for name, value in attributes.items():
            setattr(parents[name], name.rpartition(".")[2], value)
        importlib.invalidate_caches()
    for name in names:
        origin = getattr(fast[name], "__file__", "") or ""
        if not origin.endswith((".so", ".pyd")):
            raise RuntimeError(f"{name} did not load from the compiled build (got {origin})")
    _loaded = fast
    return fast
