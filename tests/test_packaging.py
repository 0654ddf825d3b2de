"""The repository's folders install under the one import namespace ``callsafe``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ("model", "generators", "providers", "reference_impl", "targets", "certify")


def test_pyproject_lists_every_package_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {"callsafe"} | {
        "callsafe." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in ROOT.glob("*/**/__init__.py")
        if not p.parent.relative_to(ROOT).parts[0].startswith(".")
        and p.parent.relative_to(ROOT).parts[0] not in {"tests", "bench", "notebooks", "build"}
    }
    assert listed == found
    assert {f"callsafe.{name}" for name in LAYOUT} <= listed


def test_built_wheel_holds_only_the_callsafe_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("callsafe-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"callsafe", next(t for t in tops if t.endswith(".dist-info"))}
    for name in LAYOUT:
        assert f"callsafe/{name}/__init__.py" in names
        assert not any(n.startswith(f"{name}/") for n in names)
    assert "callsafe/model/lifecycle.py" in names and "callsafe/py.typed" in names
    assert not any(n.startswith("callsafe/tests/") or "/.venv/" in n for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "callsafe = callsafe.cli.main:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_package_imports_by_namespace() -> None:
    import callsafe.model.lifecycle as lifecycle

    assert Path(lifecycle.__file__).resolve() == ROOT / "model" / "lifecycle.py"
    out = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('model'), u.find_spec('generators'))"],
        capture_output=True,
        text=True,
        cwd="/",
        check=True,
    )
    assert out.stdout.strip() == "None None"
