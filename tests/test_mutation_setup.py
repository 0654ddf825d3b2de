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
