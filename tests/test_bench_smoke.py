"""The benchmarks run: ``python -m bench --quick`` finishes, prints the machine, the
command and ratios against the floor, and writes its section of the results file.

Only that they run and report, never how fast: times depend on the machine, and a smoke
test that asserted them would fail on a busy one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ratios(stdout: str) -> dict[str, float]:
    lines = [line for line in stdout.splitlines() if line.startswith("ratios: ")]
    assert lines, stdout[-2000:]
    out: dict[str, float] = {}
    for item in lines[-1].removeprefix("ratios: ").split(", "):
        name, value = item.split("=")
        out[name] = float(value)
    return out


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    results = tmp_path_factory.mktemp("bench") / "RESULTS.md"
    results.write_text("# old\n\n<!-- end of header -->\n<!-- bench:other -->\nkept\n<!-- /bench:other -->\n")
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "assembly", "--results", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout, results


def test_quick_run_reports_ratios_against_the_floor(quick_run: tuple[str, Path]) -> None:
    stdout, _ = quick_run
    ratios = _ratios(stdout)
    assert ratios["many/floor"] == 1.0
    for variant in ("core", "target-memory", "target-sqlite"):
        for name in (f"many/{variant}", f"many/{variant}@cpu", f"grow/{variant}", f"grow/{variant}@cpu"):
            assert ratios[name] > 0, name
        assert ratios[f"slope/{variant}"] > 0
    assert "command: `" in stdout and "python" in stdout and "cpu: " in stdout
    assert "time per byte" in stdout and "ratio (CPU)" in stdout


def test_quick_run_writes_its_own_section_and_keeps_the_others(quick_run: tuple[str, Path]) -> None:
    _, results = quick_run
    text = results.read_text()
    assert text.startswith("# Benchmark results")
    assert text.count("<!-- bench:assembly -->") == 1 and text.count("<!-- /bench:assembly -->") == 1
    assert "<!-- bench:other -->\nkept\n<!-- /bench:other -->" in text
    assert "## Assembly cost" in text and "(quick)" in text


def test_a_section_is_replaced_not_repeated(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from bench.common import Section, update_results
    finally:
        sys.path.remove(str(ROOT))
    path = tmp_path / "RESULTS.md"
    update_results(path, "# head", [Section("a", "A", "first"), Section("b", "B", "bee")])
    update_results(path, "# head 2", [Section("a", "A", "second")])
    text = path.read_text()
    assert text.startswith("# head 2") and "second" in text and "first" not in text and "bee" in text
    assert text.index("second") < text.index("bee")
