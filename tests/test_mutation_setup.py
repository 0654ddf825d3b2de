"""The mutation-testing setup (``make mutation``, ``bench/mutation.py``) works end to end on
a tiny scope: cosmic-ray mutates a copy of the tree, the certification is the killer, and
a mutant that breaks confirmation is killed while the worktree stays untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import skips
from bench_modules import bench_module

pytest.importorskip("cosmic_ray", reason=skips.missing("cosmic-ray", "pip install -e '.[mutation]'"))

CORE = Path(__file__).resolve().parent.parent / "reference_impl" / "core.py"


def test_one_mutant_of_the_confirmation_path_is_killed_by_the_certification() -> None:
    before = hashlib.sha256(CORE.read_bytes()).hexdigest()
    line = next(i for i, text in enumerate(CORE.read_text().splitlines(), 1) if text.strip() == "if ev.approved:")
    summary = bench_module("mutation").run(
        modules=["core.py"],
        sample=None,
        timeout=60,
        log=lambda *_: None,
        select=lambda module, operator, at: operator == "AddNot" and at == line,
        extra=("--generators", "catalog"),  # the catalog holds confirmed calls; fast
    )
    assert summary["ran"] == 1
    assert [m["outcome"] for m in summary["mutants"]] == ["killed"], summary["mutants"]
    assert summary["score"] == 1.0
    assert "if not ev.approved:" in summary["mutants"][0]["diff"]
    assert hashlib.sha256(CORE.read_bytes()).hexdigest() == before  # the copy was mutated, not the tree


def _diff(original: str, mutated: str) -> str:
    return f"--- a\n+++ b\n@@ -1 +1 @@\n-{original}\n+{mutated}\n"


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(CORE.read_text().splitlines(), 1) if line.strip() == text)


def test_a_reading_follows_its_line_when_the_occurrence_number_moves() -> None:
    """A survivor whose spec's occurrence number now names another line keeps the reading
    of its operator on its own line; a line nobody read stays unclassified."""
    mutation = bench_module("mutation")
    readings = bench_module("mutation_survivors").READINGS
    spec, line, kind, _ = next(r for r in readings if r[0].startswith("core.py:") and r[2] == "equivalent")
    module_operator = spec.rsplit(":", 1)[0]
    moved = f"{module_operator}:999"
    summary = {
        "mutants": [
            {"spec": moved, "module": "core.py", "line": 1, "outcome": "survived", "diff": _diff(line, line + " ")},
            {"spec": moved, "module": "core.py", "line": 1, "outcome": "survived", "diff": _diff("x = 1", "x = 2")},
        ],
        "counts": {"killed": 8, "survived": 2},
    }
    read = mutation.classify(summary)
    assert [r["class"] for r in read["survivors"]] == [kind, "unclassified"]
    assert read["equivalent"] == (kind == "equivalent")


def test_a_change_inside_an_annotation_is_read_from_the_source() -> None:
    """A mutant that changes only a type annotation (never evaluated: the module imports
    annotations from __future__) is equivalent; one on the same line outside it is not."""
    mutation = bench_module("mutation")
    text = "def business_result(self, key: CallKey, problem: str | None) -> Sequence[Effect]:"
    line = _line_of(text)
    inside = text.replace("str | None", "str ^ None")
    outside = text.replace("def business_result", "def business_resulT")
    assert mutation._in_annotation("core.py", line, text, inside)
    assert not mutation._in_annotation("core.py", line, text, outside)
    assert not mutation._in_annotation("core.py", line + 1, text, inside)  # the line as it is, not as read
