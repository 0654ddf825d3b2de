"""Build the optional compiled core: mypyc over ``callsafe._fast.COMPILED`` into ``build/fast/``.

Run by ``make fast`` (needs mypy, which ships mypyc, and a C compiler: the ``fast`` extra).
The pure modules are not touched: the build compiles them through a staging link named
``callsafe`` (as ``tools/typecheck.sh`` does, since the repository root is the package) in
a temporary folder, and writes only the extension modules and a stamp of the sources they
came from into ``build/fast/``; ``callsafe._fast.load`` refuses a build whose stamp no
longer matches the sources. Nothing imports the build unless asked to (see ``_fast.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    spec = _fast_module()
    build_dir: Path = spec.BUILD_DIR
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="callsafe-fast-") as tmp:
        stage = Path(tmp)
        (stage / "callsafe").symlink_to(ROOT, target_is_directory=True)
        paths = [f"callsafe/reference_impl/{name}.py" for name in spec.COMPILED]
        out = stage / "out"
        cwd = Path.cwd()
        os.chdir(stage)
        try:
            extensions = mypycify(paths, opt_level="3", target_dir=str(stage / "c"), group_name=spec.GROUP)
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
    stamp = {"python": sys.version.split()[0], "sources": spec.source_digests(), "modules": list(spec.COMPILED)}
    (build_dir / spec.STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    built = sorted(p.relative_to(build_dir).as_posix() for p in build_dir.rglob("*.so"))
    print(f"compiled {len(spec.COMPILED)} modules into {build_dir} in {time.perf_counter() - started:.0f} s:")
    for name in built:
        print(f"  {name}")
    return 0


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
