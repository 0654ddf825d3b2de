"""The suite stays green on a busy machine and says what it skipped (issue 32 item 4).

CI machines are loaded 2-CPU machines: a test that asserts how long something took fails
there for no fault of the code. These checks keep such bounds out of the suite, keep the
skip reasons visible in ``make test`` (``-rs``), and keep them actionable."""

from __future__ import annotations

import re
from pathlib import Path

import skips

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# an assertion on elapsed wall-clock time: "assert time.perf_counter() - started < 30"
WALL_BOUND = re.compile(r"assert\s+.*\b(?:time\.)?(?:perf_counter|monotonic|time)\(\)\s*-\s*\w+\s*[<>]")


def test_no_test_asserts_how_long_something_took() -> None:
    offenders = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(TESTS.glob("*.py"))
        if path.name != Path(__file__).name
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if WALL_BOUND.search(line)
    ]
    assert offenders == [], "wall-clock bounds break on a loaded machine: assert events or progress instead"


def test_the_wall_bound_pattern_catches_what_it_is_for() -> None:
    assert WALL_BOUND.search("    assert time.perf_counter() - started < 30")
    assert WALL_BOUND.search("assert time.monotonic() - t0 < 60")
    assert not WALL_BOUND.search("deadline = time.monotonic() + seconds")


def test_make_test_shows_the_skip_reasons() -> None:
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1].split("\n\n", 1)[0]
    pytest_line = next(line for line in recipe.splitlines() if "pytest" in line)
    assert {"-n", "2", "-q", "-rs"} <= set(pytest_line.split()), pytest_line


def test_the_postgres_skip_says_how_to_get_a_server() -> None:
    assert "tools/postgres.sh start" in skips.POSTGRES and "CALLSAFE_PG_DSN" in skips.POSTGRES
    assert (ROOT / "tools" / "postgres.sh").exists()
    for path in TESTS.glob("test_*.py"):  # no test names the variable without the way to set it
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"skip\w*\([^)]*\"CALLSAFE_PG_DSN is not set", text), path.name
