"""The repository's folders install under the one import namespace ``callsafe``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from netguard import guarded_env

# Both packaging modules build a wheel from the same source tree (setuptools writes build/
# and *.egg-info into it): one worker runs them, one after the other (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("wheel-build")

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
        # the guard's wheel (tests/test_packaging_guard.py) is built in packaging/guard/build
        and "build" not in p.parent.relative_to(ROOT).parts
    }
    assert listed == found
    assert {f"callsafe.{name}" for name in LAYOUT} <= listed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once for the tests below, offline (no build isolation)."""
    out = tmp_path_factory.mktemp("wheel")
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
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=out,
    )
    (built,) = out.glob("callsafe-*.whl")
    return built


def test_built_wheel_holds_only_the_callsafe_namespace(wheel: Path) -> None:
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


def test_the_wheel_installs_offline_and_its_command_runs(wheel: Path, tmp_path: Path) -> None:
    """The install route docs/install.md gives (build a wheel, pip install it), without the
    network: the wheel goes into a folder of its own, its dependencies are this environment's,
    and the installed `callsafe` command and package are the wheel's, not this checkout."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = guarded_env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)})
    where = subprocess.run(
        [sys.executable, "-c", "import callsafe.guard, callsafe.model.lifecycle as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    assert Path(where.stdout.strip()).resolve() == (target / "callsafe" / "model" / "lifecycle.py").resolve()
    command = target / "bin" / "callsafe"
    version = subprocess.run([str(command), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr
    listed = subprocess.run(
        [str(command), "scenarios", "list"], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    assert "duplicate-deltas" in listed.stdout


def test_the_git_url_route_installs_the_package(tmp_path: Path) -> None:
    """`pip install 'callsafe @ git+URL'`, the route docs/install.md gives first, with this
    repository as the URL (git+file://, so nothing leaves the machine): pip clones what is
    committed, builds it with the project's own build backend and installs the one namespace."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (or no git): the git URL route needs one")
    target = tmp_path / "site"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--target",
            str(target),
            f"callsafe @ git+file://{ROOT}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (target / "callsafe" / "model" / "lifecycle.py").is_file()
    assert (target / "callsafe" / "guard" / "__init__.py").is_file()
    assert not (target / "model").exists()
    assert (target / "bin" / "callsafe").is_file()
