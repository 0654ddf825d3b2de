"""The edge families for data classes (issue 29): each is in the default certification's
``edges`` generator, the reference passes them, and each kills a broken variant of the
reference that no other generator's data reaches."""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from collections.abc import Sequence
from typing import Any

import pytest

from callsafe.campaigns.domain_mutants import _CoreMutant
from callsafe.certify.harness import run_traces
from callsafe.generators.data_classes import DATA_FAMILIES
from callsafe.generators.edges import edge_traces
from callsafe.model.vocabulary import CallOpened, Confirm, Event
from callsafe.reference_impl import core as core_module
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.effects import Effect


def violated(target: Any, family: str) -> set[str]:
    return {inv for checked in run_traces(target, list(DATA_FAMILIES[family]())) for inv in checked.violated}


def test_every_family_is_in_the_default_edges_generator_and_the_reference_passes_it() -> None:
    names = {t.name for t in edge_traces()}
    for family, build in DATA_FAMILIES.items():
        traces = list(build())
        assert traces and {t.name for t in traces} <= names
        checked = run_traces("reference", traces)
        assert not [c.trace.name for c in checked if c.violated or c.judgement.errors], family


def test_a_parser_that_lets_nan_through_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_module, "strict_parse", lambda text, **_: json.loads(text))
    assert violated("reference", "json-dialect")


def test_a_parser_that_reads_numbers_as_doubles_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def doubles(text: str, **_: Any) -> Any:
        return json.loads(text, parse_int=lambda s: int(float(s)), parse_constant=lambda c: 1 / 0)

    monkeypatch.setattr(core_module, "strict_parse", doubles)
    assert "INV-EXACT-ARGS" in violated("reference", "json-dialect")


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


class _FoldedNamesCore(Core):
    """Resolves a call's tool name to a declared one equal after case folding and NFKC,
    when the call opens (what a case-insensitive tool registry does)."""

    def receive(self, event: Event) -> Sequence[Effect]:
        if isinstance(event, CallOpened) and event.tool not in self.tools:
            for declared in self.tools:
                if _fold(declared) == _fold(event.tool):
                    event = dataclasses.replace(event, tool=declared)
                    break
        return super().receive(event)


class FoldedNames(_CoreMutant):
    """Matches tool names by case and compatibility normalisation."""

    name = "folded-names"
    core = _FoldedNamesCore


class _OneAnswerForAllCore(Core):
    def _on_confirm(self, ev: Confirm) -> Sequence[Effect]:
        effects = list(super()._on_confirm(ev))
        for ident in [i for i in self._active if i[:2] == (ev.turn, ev.response)]:
            effects += super()._on_confirm(dataclasses.replace(ev, item=ident[2], call=ident[3]))
        return effects


class OneAnswerForAll(_CoreMutant):
    """Takes one confirmation answer for every call awaiting one in the response."""

    name = "one-answer-for-all"
    core = _OneAnswerForAllCore


def test_a_target_that_folds_tool_names_is_caught() -> None:
    assert violated(FoldedNames, "tool-identity")


def test_one_answer_taken_for_all_waiting_calls_is_caught() -> None:
    assert "INV-CONFIRM" in violated(OneAnswerForAll, "confirmations")
