"""Records judged by meaning: callsafe's words, the spec's own, and an adapter's declared
vocabulary (the Target contract's ``record_words``, the target protocol's ``init_ok``);
and the correct variants that choose what the spec leaves open, each shown making its
choice on a trace and passing there while the reference makes the other."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from callsafe.campaigns.domain_mutants import DeclaredWords
from callsafe.certify.checking import check_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.record_words import (
    DEFAULT_WORDS,
    Dispatch,
    RecordWordsError,
    Result,
    StatusMeaning,
    normalize,
    record_words_of,
)
from callsafe.model.vocabulary import Executed, LedgerRow, StatusShown
from callsafe.targets.exec_target import ProtocolError, _handshake

PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "adapters.md"


def _guide_table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after ``heading`` in the guide."""
    rows: list[list[str]] = []
    for line in text.split(heading, 1)[1].splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def test_the_guides_word_tables_are_the_vocabularys() -> None:
    """docs/adapters.md, "Record words": every meaning of each section with exactly the
    words callsafe reads for it (``""`` is the empty text), and every ledger row field."""
    text = GUIDE.read_text(encoding="utf-8")
    sections = {
        "decision": ("A row's `decision` (section `decision`) means one of:", DEFAULT_WORDS.decision),
        "result": ("A row's `parse` and `validation` (section `result`) mean one of:", DEFAULT_WORDS.result),
        "status": ("A `StatusShown`'s `status` (section `status`) means one of:", DEFAULT_WORDS.status),
    }
    for section, (heading, table) in sections.items():
        documented: dict[str, str] = {}
        for row in _guide_table(text, heading):
            (meaning,) = re.findall(r"`([^`]*)`", row[0])
            for word in re.findall(r"`([^`]*)`", row[-1]):
                documented[normalize("" if word == '""' else word)] = meaning
        assert documented == {word: m.value for word, m in table.items()}, section
    fields = [row[0] for row in _guide_table(text, "A `LedgerRow` has these fields:")]
    assert fields == [f"`{f.name}`" for f in dataclasses.fields(LedgerRow) if f.name != "step"]


def test_the_spec_words_and_callsafes_mean_the_same() -> None:
    # the spec's ledger example: "inert / await confirmation / reject"
    assert DEFAULT_WORDS.decision_of("reject") is Dispatch.NOT_DISPATCHED
    assert DEFAULT_WORDS.decision_of("cancelled") is Dispatch.NOT_DISPATCHED
    assert DEFAULT_WORDS.decision_of("inert") is Dispatch.NOT_DISPATCHED
    assert DEFAULT_WORDS.decision_of("Await confirmation") is Dispatch.AWAITING_CONFIRMATION
    assert DEFAULT_WORDS.decision_of("awaiting_confirmation") is Dispatch.AWAITING_CONFIRMATION
    assert DEFAULT_WORDS.decision_of("collecting") is Dispatch.PENDING
    assert DEFAULT_WORDS.decision_of("splendid") is None
    # "a non-actionable 'preparing request' cue", "a truthful retry or handoff route"
    assert DEFAULT_WORDS.status_of("preparing request") is StatusMeaning.PREPARING
    assert DEFAULT_WORDS.status_of("hand-off") is StatusMeaning.HANDOFF
    assert DEFAULT_WORDS.status_of("finished?") is None
    assert normalize("  Await_Confirmation ") == "await confirmation"


def test_results_read_free_text_reasons_as_refusals() -> None:
    assert DEFAULT_WORDS.result_of("ok") is Result.OK
    assert DEFAULT_WORDS.result_of("not validated") is Result.NOT_RUN
    assert DEFAULT_WORDS.result_of("schema: type at amount") is Result.FAILED
    assert DEFAULT_WORDS.result_of("business rule: amount over 10") is Result.FAILED
    assert DEFAULT_WORDS.result_of("refused at dispatch: permission") is Result.DISPATCH_REFUSED


def test_a_declaration_adds_words_and_bad_ones_are_typed_errors() -> None:
    words = DEFAULT_WORDS.with_declared({"decision": {"sent": "dispatched"}, "status": {"try again": "retry"}})
    assert words.decision_of("SENT") is Dispatch.DISPATCHED
    assert words.status_of("try-again") is StatusMeaning.RETRY
    assert words.decision_of("reject") is Dispatch.NOT_DISPATCHED  # the defaults stay
    for bad in ({"verdict": {}}, {"decision": {"sent": "launched"}}, {"decision": ["sent"]}, ["decision"]):
        with pytest.raises(RecordWordsError):
            DEFAULT_WORDS.with_declared(bad)  # type: ignore[arg-type]
    assert record_words_of(object()) is DEFAULT_WORDS
    assert record_words_of(DeclaredWords()).decision_of("held") is Dispatch.AWAITING_CONFIRMATION


def test_the_target_protocol_handshake_reads_record_words() -> None:
    base = {"type": "init_ok", "id": 0, "version": 1, "name": "n", "reads": "abstract", "capabilities": ["ledger"]}
    shake = _handshake({**base, "record_words": {"decision": {"sent": "dispatched"}}})
    assert shake.record_words == {"decision": {"sent": "dispatched"}}
    assert _handshake(base).record_words is None
    with pytest.raises(ProtocolError, match="meaning must be one of"):
        _handshake({**base, "record_words": {"decision": {"sent": "maybe"}}})


def test_declared_words_are_judged_by_meaning_and_still_judged() -> None:
    """Without its declaration the same records are unknown words (a violation); with it
    they pass, and a row whose declared word says the wrong thing is still caught."""
    trace = TraceBuilder(tools={"pay": PAY}).turn("t1").call("a", "pay", '{"amount":5}').build()
    ok = check_trace("callsafe.campaigns.domain_mutants:DeclaredWords", trace)
    assert ok.violated == set(), ok.judgement.explain()
    assert any(isinstance(o, LedgerRow) and o.decision == "sent" for o in ok.run.observations)

    class Undeclared(DeclaredWords):
        record_words: ClassVar[Mapping[str, Mapping[str, str]]] = {}

    blamed = check_trace(lambda: Undeclared(), trace)
    assert {"INV-LEDGER", "INV-STATUS"} <= blamed.violated

    class Lying(DeclaredWords):
        # says "dropped" (not dispatched) for a call that ran
        decisions: ClassVar[Mapping[str, str]] = {**DeclaredWords.decisions, "dispatched": "dropped"}

    lying = check_trace(lambda: Lying(), trace)
    assert "INV-LEDGER" in lying.violated
    assert any(isinstance(o, Executed) for o in lying.run.observations)


def _variant(name: str) -> str:
    return f"callsafe.campaigns.domain_mutants:{name}"


def test_fail_on_repeat_fails_where_the_reference_drops_the_repeat_and_both_pass() -> None:
    trace = (
        TraceBuilder(tools={"pay": PAY})
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .fragment("a", '{"amount":', position=0)
        .fragment("a", "5}")
        .terminal("a")
        .build()
    )
    reference = check_trace("reference:memory", trace)
    variant = check_trace(_variant("FailOnRepeat"), trace)
    assert reference.violated == set() and variant.violated == set(), variant.judgement.explain()
    assert any(isinstance(o, Executed) for o in reference.run.observations)
    assert not any(isinstance(o, Executed) for o in variant.run.observations)


def test_keeping_a_call_across_an_identical_redeclaration_passes_as_cancelling_it_does() -> None:
    trace = (
        TraceBuilder(tools={"pay": PAY})
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .change_schema("pay", dict(PAY))
        .fragment("a", "5}")
        .terminal("a")
        .build()
    )
    reference = check_trace("reference:memory", trace)
    variant = check_trace(_variant("KeepCallsAcrossCatalogChange"), trace)
    assert reference.violated == set() and variant.violated == set(), variant.judgement.explain()
    assert not any(isinstance(o, Executed) for o in reference.run.observations)
    assert [o.arguments for o in variant.run.observations if isinstance(o, Executed)] == [{"amount": 5}]


def test_a_disabled_tools_call_ended_at_its_opening_passes() -> None:
    trace = (
        TraceBuilder(tools={"pay": PAY})
        .turn("t1")
        .disable_tool("pay")
        .open("a", "pay")
        .fragment("a", '{"amount":5}')
        .terminal("a")
        .build()
    )
    variant = check_trace(_variant("RefuseUnknownAtOpen"), trace)
    assert variant.violated == set(), variant.judgement.explain()
    rows = [o for o in variant.run.observations if isinstance(o, LedgerRow)]
    assert rows and rows[0].decision == "cancelled" and rows[0].step == 2


def test_preparing_after_a_retry_offer_passes_and_is_shown() -> None:
    trace = (
        TraceBuilder(tools={"pay": PAY})
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .disconnect()
        .response("r2")
        .open("b", "pay")
        .fragment("b", '{"amount":5}')
        .terminal("b")
        .build()
    )
    variant = check_trace(_variant("PreparingAfterRetry"), trace)
    assert variant.violated == set(), variant.judgement.explain()
    shown = [o.status for o in variant.run.observations if isinstance(o, StatusShown)]
    assert shown[:3] == ["preparing", "retry", "preparing"]


def test_a_target_with_an_unreadable_declaration_is_refused_before_it_runs() -> None:
    from callsafe.certify.targets import TargetSpecError, check_target

    class Garbled(DeclaredWords):
        record_words: ClassVar[Mapping[str, Mapping[str, str]]] = {"decision": {"sent": "launched"}}

    with pytest.raises(TargetSpecError, match="record_words"):
        check_target(Garbled(), "garbled")
    check_target(DeclaredWords(), "declared")  # a readable one passes
