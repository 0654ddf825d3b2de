"""What the words of an implementation's records mean: ledger decisions, parse and
validation results, and the visible status.

Why: the invariants judge records by what they *mean* (does this row say the call was
dispatched, awaits confirmation, or will never run; does this status offer a retry or a
hand-off), never by callsafe's own spelling. The spec writes its ledger example in its own
words ("Dispatch: inert / await confirmation / reject", states "collecting / validated /
cancelled / failed") and its status in others ("a non-actionable 'preparing request' cue",
"a truthful retry or handoff route"); callsafe's reference writes lifecycle state names.
Both work out of the box (:data:`DEFAULT_WORDS`), and an adapter names its own words
through the Target contract's ``record_words`` (or ``record_words`` in the target
protocol's ``init_ok``): a mapping from each section (``decision``, ``status``,
``result``) to ``{word: meaning}``, added to the defaults (a declared word wins).

Words are compared after :func:`normalize` (case, ``_`` and ``-`` as spaces, runs of
white space), so ``await_confirmation``, ``Await confirmation`` and ``await-confirmation``
are one word.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "DEFAULT_WORDS",
    "Dispatch",
    "RecordWords",
    "RecordWordsError",
    "Result",
    "StatusMeaning",
    "normalize",
    "record_words_of",
]


class Dispatch(enum.Enum):
    """What a ledger row's ``decision`` says about the call (the spec's "dispatch
    decision")."""

    DISPATCHED = "dispatched"  # the call was handed to the executor
    AWAITING_CONFIRMATION = "awaiting_confirmation"  # validated, waiting for the user
    NOT_DISPATCHED = "not_dispatched"  # it will never run: cancelled, failed, rejected, inert
    PENDING = "pending"  # no decision yet: still collecting, or a candidate being validated


class StatusMeaning(enum.Enum):
    """What a visible status tells the user."""

    PREPARING = "preparing"  # the non-actionable cue
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    DONE = "done"  # an action ran
    RETRY = "retry"  # a retry route is offered
    HANDOFF = "handoff"  # a hand-off route is offered


class Result(enum.Enum):
    """What a ledger row's ``parse`` or ``validation`` field says."""

    OK = "ok"  # parsed, or passed schema and business validation
    FAILED = "failed"  # refused (free text such as "malformed: ..." or "schema: ..." means this)
    NOT_RUN = "not_run"  # never parsed or validated
    # validation passed, and the permission boundary or the dispatcher's re-check refused
    # the call (the reference writes "refused at dispatch: permission" there)
    DISPATCH_REFUSED = "dispatch_refused"


class RecordWordsError(ValueError):
    """A declared record vocabulary that cannot be read (an unknown section or meaning,
    or a word that is not text)."""


def normalize(word: str) -> str:
    """A word as compared: case-folded, ``_`` and ``-`` read as spaces, white space runs
    as one space, trimmed."""
    return re.sub(r"\s+", " ", word.casefold().replace("_", " ").replace("-", " ")).strip()


def _table(meanings: Mapping[Any, tuple[str, ...]]) -> dict[str, Any]:
    return {normalize(word): meaning for meaning, words in meanings.items() for word in words}


# callsafe's words (the lifecycle state names the reference writes) and the spec's own.
_DECISIONS: Final = _table(
    {
        Dispatch.DISPATCHED: ("dispatched", "dispatch", "executed", "ran"),
        Dispatch.AWAITING_CONFIRMATION: (
            "awaiting_confirmation",
            "await confirmation",  # the spec's ledger example
            "confirmation requested",
        ),
        Dispatch.NOT_DISPATCHED: (
            "cancelled",
            "canceled",
            "failed",
            "reject",  # the spec's ledger example
            "rejected",
            "refused",
            "denied",
            "blocked",
            "inert",  # the spec: "make cancellation inert", "inert cancellation"
        ),
        Dispatch.PENDING: ("collecting", "terminal candidate", "candidate", "validated", "absent"),
    }
)
_STATUS: Final = _table(
    {
        StatusMeaning.PREPARING: ("preparing", "preparing request"),  # the spec's cue
        StatusMeaning.AWAITING_CONFIRMATION: ("awaiting_confirmation", "await confirmation", "confirm"),
        StatusMeaning.DONE: ("done", "completed", "ran"),
        StatusMeaning.RETRY: ("retry",),  # the spec: "a truthful retry or handoff route"
        StatusMeaning.HANDOFF: ("handoff", "hand off"),
    }
)
_RESULTS: Final = _table(
    {
        Result.OK: ("ok", "passed", "pass", "valid", "parsed", "success", "succeeded"),
        Result.NOT_RUN: ("not parsed", "not validated", "not run", "skipped", "none", "n/a", ""),
        Result.FAILED: ("failed", "invalid", "malformed", "rejected"),
        Result.DISPATCH_REFUSED: (
            "refused at dispatch",
            "permission",
            "permission denied",
            "permission rejection",  # the spec's word
            "not permitted",
            "forbidden",
        ),
    }
)

_SECTIONS: Final[dict[str, type[enum.Enum]]] = {"decision": Dispatch, "status": StatusMeaning, "result": Result}


@dataclass(frozen=True)
class RecordWords:
    """A record vocabulary: word -> meaning, per section."""

    decision: Mapping[str, Dispatch] = field(default_factory=lambda: dict(_DECISIONS))
    status: Mapping[str, StatusMeaning] = field(default_factory=lambda: dict(_STATUS))
    result: Mapping[str, Result] = field(default_factory=lambda: dict(_RESULTS))

    def decision_of(self, word: str) -> Dispatch | None:
        """The meaning of a ledger decision (None: a word the vocabulary does not know)."""
        return self.decision.get(normalize(word))

    def status_of(self, word: str) -> StatusMeaning | None:
        """The meaning of a visible status (None: unknown)."""
        return self.status.get(normalize(word))

    def result_of(self, text: str | None) -> Result:
        """The meaning of a parse or validation field: the whole text, else its head before
        a colon ("refused at dispatch: permission"). Text the vocabulary does not know is a
        reason, and a reason is a refusal ("malformed: ...", "schema: required at (root)",
        "business rule: ..."): :attr:`Result.FAILED`."""
        if text is None:
            return Result.NOT_RUN
        word = normalize(text)
        found = self.result.get(word)
        if found is None and ":" in word:
            found = self.result.get(word.split(":", 1)[0].strip())
        return found if found is not None else Result.FAILED

    def with_declared(self, declared: Mapping[str, Any]) -> RecordWords:
        """These words with an adapter's declaration added (``{section: {word: meaning}}``,
        meanings by value: ``"dispatched"``, ``"not_dispatched"``, ``"retry"``, ...)."""
        if not isinstance(declared, Mapping):
            raise RecordWordsError(f"record_words must be a mapping of sections, got {type(declared).__name__}")
        tables: dict[str, dict[str, Any]] = {
            "decision": dict(self.decision),
            "status": dict(self.status),
            "result": dict(self.result),
        }
        for section, words in declared.items():
            meanings = _SECTIONS.get(section)
            if meanings is None:
                raise RecordWordsError(f"unknown record_words section {section!r}; known: {sorted(_SECTIONS)}")
            if not isinstance(words, Mapping):
                raise RecordWordsError(f"record_words[{section!r}] must map words to meanings")
            by_value = {m.value: m for m in meanings}
            for word, meaning in words.items():
                if not isinstance(word, str) or not isinstance(meaning, str) or meaning not in by_value:
                    raise RecordWordsError(
                        f"record_words[{section!r}][{word!r}]: the meaning must be one of {sorted(by_value)}"
                    )
                tables[section][normalize(word)] = by_value[meaning]
        return RecordWords(tables["decision"], tables["status"], tables["result"])

    def declared_json(self) -> dict[str, dict[str, str]]:
        """The vocabulary as a declaration (every word, by meaning value)."""
        return {
            "decision": {w: m.value for w, m in self.decision.items()},
            "status": {w: m.value for w, m in self.status.items()},
            "result": {w: m.value for w, m in self.result.items()},
        }


DEFAULT_WORDS: Final = RecordWords()


def record_words_of(target: object) -> RecordWords:
    """The vocabulary a target declared (its ``record_words`` attribute), over the
    defaults; the defaults when it declared none."""
    declared = getattr(target, "record_words", None)
    if not declared:
        return DEFAULT_WORDS
    return DEFAULT_WORDS.with_declared(declared)
