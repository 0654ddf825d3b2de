"""Every oracle rule and invariant check names the spec sentence it enforces (found in the
spec, case and typography aside) or is marked as callsafe's own choice, and
docs/spec-traceability.md is generated from them and current."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from callsafe.model.invariants import CHECKS, INVARIANTS
from callsafe.model.system import BROADCASTS, GUARDS, READING_SPEC, Reading
from callsafe.model.traceability import find_spec, links, normalize_spec, render

DOC = Path(__file__).resolve().parent.parent / "docs" / "spec-traceability.md"


def test_the_page_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), "run: python -m callsafe.model.traceability > " + str(DOC)


def test_every_rule_and_check_names_a_sentence_or_its_own_choice() -> None:
    assert all(b.spec or b.own for b in BROADCASTS)
    assert all(g.spec or g.own for g in GUARDS)
    assert set(READING_SPEC) == {f.name for f in dataclasses.fields(Reading)}
    assert {c.invariant for c in CHECKS} == {inv.id for inv in INVARIANTS}
    found = links()
    assert all(link.spec or link.own for link in found)
    # every reading is listed as relaxing some rule of the oracle
    relaxed = {r for link in found if link.kind != "reading" for r in link.readings}
    assert relaxed == set(READING_SPEC)
    page = render()
    assert "store_fault_rolls_back" in page and "keep_calls_across_catalog_change" in page


def test_every_quote_is_in_the_spec() -> None:
    path = find_spec()
    if path is None:
        pytest.skip("the spec file is not here (set CALLSAFE_SPEC to its path)")
    spec = normalize_spec(path.read_text(encoding="utf-8"))
    missing = [(link.rule, q) for link in links() for q in link.spec if normalize_spec(q) not in spec]
    assert missing == []
    # the comparison can fail: a paraphrase is not the spec
    assert normalize_spec("A repeated delta is a delivery problem.") not in spec
    assert normalize_spec("The dispatcher must additionally check the current turn\u2019s cancellation") in spec
