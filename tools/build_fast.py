"""Build the optional compiled core: mypyc over ``callsafe._fast.COMPILED`` into ``build/fast/``.

Run by ``make fast`` (needs mypy, which ships mypyc, and a C compiler: the ``fast`` extra).
The pure modules are not touched. The build copies the package's Python files into a
temporary folder named ``callsafe`` (the repository root is the package), compiles the
:data:`~callsafe._fast.COMPILED` modules there, and writes only the extension modules and a
stamp of the sources they came from into ``build/fast/``; ``callsafe._fast.load`` refuses a
build whose stamp no longer matches the sources. Nothing imports the build unless asked to.

Three mechanical changes are made to the copies, never to the sources. First, every non-frozen
dataclass of a compiled module gets the ``__init__`` that :mod:`dataclasses` would generate,
written out (the same parameters, in the same order, with the same defaults, and a call of
``__post_init__`` when the class has one). Why: mypyc compiles a dataclass's class but not
the methods :mod:`dataclasses` generates at import time, so without this every effect, row
and call record would be built by an interpreted ``__init__`` assigning through the compiled
class's descriptors (slower than a pure instance); with it they are built natively.
``@dataclass`` still supplies ``__eq__`` and ``__repr__`` (it never replaces a method the
class defines). A class whose fields are not exactly its own annotations (inherited fields,
``field(...)``, ``ClassVar``, ``InitVar``) is left as it is.

Second, the driver's copy takes its store as a :class:`MemoryStore` instead of the
:class:`Store` protocol (:func:`with_memory_store_driver`). Why: a call through a protocol
is a generic Python method call from compiled code (the arguments boxed, the method looked
up by name), and the driver makes one per fragment (the progress write); typed with the
compiled class, it is a native call. It restricts nothing the build could do before: the
compiled group's effects are native classes only the compiled memory store knows (the SQL
stores stay pure, see :mod:`callsafe._fast`), and the compiled driver now refuses any other
store when it is built rather than at its first write.

Third, the model values a compiled module builds for every small call (the driver's status
and ledger observations, the core's key of an opened call: :data:`BUILT_DIRECTLY`) are built
by ``_built(cls, {field: value, ...})`` (:func:`with_model_values_built`), which makes the
object the class's generated ``__init__`` makes, without the interpreted
``object.__setattr__`` per field that a frozen dataclass pays.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".venv", "build", "dist", "notebooks", "reports", "out", "node_modules", ".typecheck", ".git", "tests", "bench"}


def main() -> int:
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    fast = _fast_module()
    build_dir: Path = fast.BUILD_DIR
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="callsafe-fast-") as tmp:
        stage = Path(tmp)
        _copy_package(stage / "callsafe")
        written = direct = 0
        paths = [f"callsafe/{name.replace('.', '/')}.py" for name in fast.COMPILED]
        for rel in paths:
            path = stage / rel
            source, count = with_dataclass_inits(path.read_text(encoding="utf-8"))
            if rel == DRIVER:
                source = with_memory_store_driver(source)
            if rel in BUILT_DIRECTLY:
                source, values = with_model_values_built(source, BUILT_DIRECTLY[rel])
                direct += values
            path.write_text(source, encoding="utf-8")
            written += count
        out = stage / "out"
        cwd = Path.cwd()
        os.chdir(stage)
        try:
            extensions = mypycify(paths, opt_level="3", target_dir=str(stage / "c"), group_name=fast.GROUP)
            setup(
                name="callsafe-fast",
                ext_modules=extensions,
                script_args=["-q", "build_ext", "--build-lib", str(out), "--build-temp", str(stage / "tmp")],
            )
        finally:
            os.chdir(cwd)
        if build_dir.exists():
            shutil.rmtree(build_dir)
        shutil.copytree(out, build_dir)
    stamp = {"python": sys.version.split()[0], "sources": fast.source_digests(), "modules": list(fast.COMPILED)}
    (build_dir / fast.STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    built = sorted(p.relative_to(build_dir).as_posix() for p in build_dir.rglob("*.so"))
    seconds = time.perf_counter() - started
    print(
        f"compiled {len(fast.COMPILED)} modules ({written} dataclass __init__ written out, the driver typed for the "
        f"memory store, {direct} model values built directly) into {build_dir}"
    )
    print(f"in {seconds:.0f} s:")
    for name in built:
        print(f"  {name}")
    return 0


def _copy_package(to: Path) -> None:
    """The package's Python files (what mypy reads to type the compiled modules)."""
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or any(part.startswith(".") for part in rel.parts):
            continue
        (to / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, to / rel)
    shutil.copyfile(ROOT / "py.typed", to / "py.typed")


def _is_dataclass_decorator(node: ast.expr) -> tuple[bool, bool]:
    """(is ``@dataclass`` or ``@dataclass(...)``, is frozen)."""
    if isinstance(node, ast.Name) and node.id == "dataclass":
        return True, False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dataclass":
        frozen = any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords
        )
        init_off = any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords
        )
        return not init_off, frozen
    return False, False


def _init_for(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The ``__init__`` :mod:`dataclasses` would generate for ``cls``, or None when the
    class is not one this writes out (see the module docstring)."""
    if cls.bases and not all(isinstance(b, ast.Name) and b.id in {"Effect", "Fact"} for b in cls.bases):
        return None  # fields may be inherited: only the effect bases, which have none
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    if "__init__" in methods:
        return None
    fields: list[ast.AnnAssign] = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign):
            text = ast.unparse(node.annotation)
            if not isinstance(node.target, ast.Name) or "ClassVar" in text or "InitVar" in text:
                return None
            if isinstance(node.value, ast.Call):  # field(...) or any computed default
                return None
            fields.append(node)
    args = [ast.arg("self")] + [ast.arg(f.target.id, f.annotation) for f in fields]  # type: ignore[union-attr]
    defaults = [f.value for f in fields if f.value is not None]
    if any(f.value is None for f in fields[len(fields) - len(defaults) :]):
        return None  # a field without a default after one with a default: not a valid dataclass anyway
    body: list[ast.stmt] = [
        ast.Assign(
            [ast.Attribute(ast.Name("self", ast.Load()), f.target.id, ast.Store())],  # type: ignore[union-attr]
            ast.Name(f.target.id, ast.Load()),  # type: ignore[union-attr]
        )
        for f in fields
    ]
    if "__post_init__" in methods:
        call = ast.Call(ast.Attribute(ast.Name("self", ast.Load()), "__post_init__", ast.Load()), [], [])
        body.append(ast.Expr(call))
    if not body:
        body = [ast.Pass()]
    return ast.FunctionDef(
        "__init__",
        ast.arguments([], args, None, [], [], None, defaults),
        body,
        [],
        ast.Constant(None),
    )


def with_dataclass_inits(source: str) -> tuple[str, int]:
    """``source`` with the ``__init__`` of each non-frozen dataclass written out at the end
    of its class (every other line, comments and ``type: ignore`` included, as it was),
    and how many were written."""
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef) or node.end_lineno is None:
            continue
        marks = [_is_dataclass_decorator(d) for d in node.decorator_list]
        if not any(is_dc and not frozen for is_dc, frozen in marks):
            continue
        init = _init_for(node)
        if init is not None:
            indent = " " * (node.col_offset + 4)
            text = ast.unparse(ast.fix_missing_locations(init))
            inserts.append((node.end_lineno, "".join(f"{indent}{line}\n" for line in text.splitlines())))
    for end, text in sorted(inserts, reverse=True):
        lines.insert(end, text)
    return "".join(lines), len(inserts)


DRIVER = "callsafe/reference_impl/driver.py"
_STORE_PARAMETER = "        store: Store,\n"
_STORE_IMPORT = "from callsafe.reference_impl.store import ClaimResult, Store\n"


def with_memory_store_driver(source: str) -> str:
    """The driver's source with its store typed as the :class:`MemoryStore` it is given in
    the compiled build (see the module docstring); raises ValueError when the lines this
    rewrites are not there (the driver changed: the build must not silently skip it)."""
    if source.count(_STORE_PARAMETER) != 1 or source.count(_STORE_IMPORT) != 1:
        raise ValueError("driver.py no longer declares `store: Store` as this build expects")
    source = source.replace(_STORE_PARAMETER, "        store: MemoryStore,\n")
    return source.replace(
        _STORE_IMPORT, _STORE_IMPORT + "from callsafe.reference_impl.memory_store import MemoryStore\n"
    )


CORE = "callsafe/reference_impl/core.py"
# The model values a compiled module builds for every small call: the driver's observations
# (a status twice, a ledger row), the core's key of each opened call. Model classes, shared
# with the harness, so never compiled (see callsafe._fast); frozen dataclasses, so each
# field costs an interpreted ``object.__setattr__`` when built by the class.
BUILT_DIRECTLY: dict[str, tuple[str, ...]] = {DRIVER: ("LedgerRow", "StatusShown"), CORE: ("CallKey",)}
_BUILT_HELPER = """

import typing as _typing

_Built = _typing.TypeVar("_Built")


def _built(cls: type[_Built], fields: dict[str, Any]) -> _Built:
    # written by tools/build_fast.py: the object dataclasses' __init__ would build
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    return obj
"""


def observation_fields(name: str) -> tuple[str, ...]:
    """The fields of the model's class ``name`` (an observation, or the call key), in order,
    checked to be a class whose generated ``__init__`` does nothing but set them: a frozen
    dataclass with a ``__dict__``, no ``__post_init__``, every field an ``__init__`` parameter."""
    import dataclasses

    from callsafe.model import vocabulary

    cls = getattr(vocabulary, name)
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    if (
        params is None
        or not params.frozen
        or hasattr(cls, "__slots__")
        or hasattr(cls, "__post_init__")
        or cls.__init__.__code__.co_filename != "<string>"
        or not all(f.init for f in fields)
    ):
        raise ValueError(f"{name} is no longer a plain frozen dataclass: its __init__ cannot be written out")
    return tuple(f.name for f in fields)


def with_model_values_built(source: str, names: tuple[str, ...]) -> tuple[str, int]:
    """``source`` with each call of a model class in ``names`` (:data:`BUILT_DIRECTLY`) that
    passes every field by position replaced by ``_built(cls, {field: value, ...})``, which
    builds the very object the class's generated ``__init__`` builds (the same class, the
    same instance dictionary in the same order) without its ``object.__setattr__`` per
    field, interpreted, that a frozen dataclass pays; and how many calls it replaced.
    Arguments are evaluated in the same order, once each."""
    fields = {name: observation_fields(name) for name in names}
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in fields):
            continue
        names = fields[node.func.id]
        if node.keywords or len(node.args) != len(names) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        values = [ast.get_source_segment(source, a) for a in node.args]
        if node.end_lineno is None or node.end_col_offset is None or any(v is None for v in values):
            continue
        pairs = ", ".join(f"{n!r}: {v}" for n, v in zip(names, values, strict=True))
        start = starts[node.lineno - 1] + len(lines[node.lineno - 1].encode()[: node.col_offset].decode())
        end = starts[node.end_lineno - 1] + len(lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode())
        edits.append((start, end, f"_built({node.func.id}, {{{pairs}}})"))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return (source + _BUILT_HELPER if edits else source), len(edits)


def _fast_module() -> Any:
    """``callsafe._fast`` read from this tree by path (the tree being built, whichever
    callsafe the interpreter would import)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_callsafe_fast_build", ROOT / "_fast.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    raise SystemExit(main())
