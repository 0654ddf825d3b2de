"""The production install: ``callsafe-guard`` holds the guard and none of the certifier.

``packaging/guard/pyproject.toml`` builds a second distribution from the same tree: only
the packages the guard imports at runtime, and only their dependencies. The test builds
its wheel offline (``--no-isolation``: setuptools from this environment), checks its
files and its declared dependencies, and runs a guard from the unpacked wheel in a
subprocess where the certifier's dependencies cannot be imported at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CERTIFIER_ONLY = ("z3", "hypothesis", "networkx", "graphviz", "uvicorn", "rich", "click")
SHIPPED = {"guard", "model", "providers", "reference_impl"}

# Both packaging modules build a wheel from the same source tree (setuptools writes build/
# and *.egg-info into it): one worker runs them, one after the other (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("wheel-build")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "-o", str(out), str(ROOT / "packaging" / "guard")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("callsafe_guard-*.whl")
    return built


def test_the_wheel_holds_only_what_the_guard_imports(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    folders = {n.split("/")[1] for n in names if n.startswith("callsafe/") and n.count("/") >= 2}
    assert folders == SHIPPED
    assert "callsafe/guard/guard.py" in names and "callsafe/reference_impl/postgres_store.py" in names
    assert "callsafe/safe_text.py" in names and "callsafe/py.typed" in names
    assert not any(n.startswith(("callsafe/cli/", "callsafe/certify/", "callsafe/formal/")) for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    requires = sorted(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:"))
    assert requires == [
        "fastjsonschema>=2.19",
        "jsonschema>=4.20",
        'opentelemetry-api>=1.20; extra == "otel"',
        'psycopg[binary]>=3.1; extra == "postgres"',
    ]
    assert not any(n.endswith("entry_points.txt") for n in names)  # no `callsafe` command


def test_the_guard_runs_from_the_wheel_with_the_certifiers_dependencies_blocked(wheel: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    program = textwrap.dedent(
        f"""
        import importlib.abc, json, sys
        BLOCKED = {CERTIFIER_ONLY!r}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked: {{name}}")
                return None

        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {str(unpacked)!r})
        import callsafe.guard
        from callsafe.guard import Guard
        from callsafe.providers.streams import render_payloads  # noqa: F401 - parsers too
        from callsafe.reference_impl import sqlite_store, postgres_store  # noqa: F401 - the stores

        ran = []
        guard = Guard({{"f": {{"type": "object"}}}}, executor=lambda call: ran.append(call.id), store="memory:")
        chunks = [
            {{"id": "r1", "choices": [{{"index": 0, "delta": {{"tool_calls": [{{"index": 0, "id": "c1",
              "type": "function", "function": {{"name": "f", "arguments": "{{}}"}}}}]}}}}]}},
            {{"id": "r1", "choices": [{{"index": 0, "delta": {{}}, "finish_reason": "tool_calls"}}]}},
        ]
        list(guard.turn("t", "u", "acme").stream(chunks))
        print(json.dumps({{
            "file": callsafe.__file__,
            "ran": ran,
            "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED),
            "callsafe": sorted(m for m in sys.modules if m.startswith("callsafe.")),
        }}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=tmp_path, env={}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["file"].startswith(str(unpacked)), seen["file"]  # the wheel's copy, not this checkout
    assert seen["ran"] == ["c1"] and seen["loaded"] == []
    assert {m.split(".")[1] for m in seen["callsafe"]} <= SHIPPED | {"_aliases", "safe_text"}
