"""Finding argument values in ledger, audit, log and status lines (INV-LEDGER).

Why a module of its own: "no ledger, audit or log line contains argument values" must be
judged on values of any length, parsed or not, and a short value ("7", "ab") occurs by
chance in the words a line is made of: a call key, a count, a state name. So the search
has two halves that must stay honest together:

* **what is looked for** (:func:`argument_values`): every scalar of every call's parsed
  arguments, and the scalars of the text the stream sent for each call whether or not it
  was ever parsed (a call stopped while collecting, a malformed one, fragments that arrived
  after the call was over), read by a tolerant scanner (:func:`scalar_tokens`) that keeps
  string values and number literals and drops object keys, ``true``, ``false`` and
  ``null`` (one bit is no recognisable value);
* **what a line may hold of its own** (:class:`OwnWords`): the ledger's vocabulary (state,
  event, decision, status names, the model's explanations), common words of log
  sentences, the trace's identifiers, call keys, tool names, declared property names,
  business bounds and byte caps, operator reasons, the model's own parse and validation
  messages, exception class names, and numbers that are counts ("2 call(s)", "5000
  digits", "line 1 column 5") or array indices in a schema path.

A value is found in a line when it occurs there as a whole token (or, six characters or
longer, anywhere) and that occurrence is not inside one of the line's own words. A value
that *is* one of those words (a memo that says "cancelled") cannot be told from them and
is not counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from callsafe.model.lifecycle import TRANSITIONS, CallEvent, Ignored, Rejected, State
from callsafe.model.system import BROADCASTS, CallRecord
from callsafe.model.vocabulary import (
    EVENT_TYPES,
    AuditRow,
    Fragment,
    LedgerRow,
    LogLine,
    Observation,
    StatusShown,
    ToolChanged,
    ToolSpec,
    Trace,
)

# Fields of input events whose text a line may repeat: identifiers, names, reasons.
_EVENT_WORDS: Final = (
    "tenant",
    "turn",
    "response",
    "item",
    "call",
    "actor",
    "conversation",
    "event_id",
    "reason",
    "traceparent",
    "tool",
    "new_name",
)

__all__ = ["OwnWords", "argument_values", "leaked_value", "observation_texts", "scalar_tokens", "withhold_path"]

# Values at least this long are looked for anywhere in a line, not only as whole tokens.
_ANYWHERE: Final = 6

# Words of ordinary log sentences ("business answer ignored, the call is no longer being
# validated"): a one-word value equal to one of them cannot be told from the sentence.
_LOG_WORDS_TEXT: Final = """
    a an the and or not no nor is are was were be been being has have had do does did of to for by in on
    at with from into after before while since again already another other first last one this that these
    those it its as so but if then when whether which who than any all none each ran run runs running
    call calls tool tools turn turns tenant response item key keys fragment fragments position positions
    byte bytes limit limits answer claim claimed pending worker outcome outcomes recorded record unknown
    ignored dropped rejected accepted refused announced binding stands changed change flight executor raised
    executing execute executed dispatch dispatched cancel cancelled failed fail validated validation
    validating business schema parse parsed longer ok error errors value values arguments argument reason
    stopped stop operator audit ledger log status user actor conversation event events id ids restart
    quarantine quarantined disabled disable tenant stop confirm confirmed confirmation denied request
    requested awaiting s"""
_LOG_WORDS: Final = frozenset(_LOG_WORDS_TEXT.split())

_COUNT_NOUNS: Final = (
    r"calls?|call\(s\)|fragments?|fragment\(s\)|bytes?|digits?|positions?|characters?|chars?|items?|rows?"
    r"|events?|keys?|times?|attempts?|tries|lines?|columns?|levels?|containers?|ms|seconds?"
)
_COUNT_PATTERNS: Final = (
    re.compile(rf"\b\d+\s*(?:{_COUNT_NOUNS})(?!\w)", re.IGNORECASE),  # "2 call(s)", "5000 digits"
    re.compile(r"\b(?:line|column|char|position|pos|index|step|level|offset|count)\s*[=:]?\s*\d+\b", re.IGNORECASE),
    re.compile(r"(?<=/)\d+\b|\b\d+(?=/)"),  # array indices in a path: "tags/0/name"
    re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning)\b"),  # exception class names
)


@cache
def _vocabulary() -> tuple[tuple[str, ...], frozenset[str]]:
    """The ledger's own phrases (lower case) and their words: state, event, reason,
    decision and status names and the model's explanations."""
    phrases: list[str] = [s.value for s in State] + [e.value for e in CallEvent] + list(EVENT_TYPES)
    phrases += ["awaiting_confirmation", "preparing", "done", "retry", "handoff", "completed", "length"]
    phrases += ["content_filter", "error", "malformed", "missing fragment", "schema", "business rule", "unknown tool"]
    phrases += ["not parsed", "not validated", "permission", "operator", "quarantined", "superseded", "disconnected"]
    phrases += ["rename", "remove", "unknown or disabled tool", "(path withheld)", "(root)"]
    phrases += [b.why for b in BROADCASTS]
    for row in TRANSITIONS.values():
        phrases += [r.why for r in row.values() if isinstance(r, (Ignored, Rejected))]
    lowered = sorted({p.lower() for p in phrases}, key=len, reverse=True)
    words = {w for p in lowered for w in re.findall(r"\w+", p)}
    return tuple(lowered), frozenset(words | _LOG_WORDS)


# --------------------------------------------------------------------------------------
# What is looked for
# --------------------------------------------------------------------------------------

_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def scalar_tokens(text: str, keys: list[str] | None = None) -> list[str]:
    """The string values and number literals of a piece of JSON text, which may be
    partial (a call cut off while collecting) or broken: strings that are object keys are
    left out (collected into ``keys`` when given), an unfinished string counts as a value
    unless it stands where a key does, escapes are decoded where they are complete."""
    out: list[str] = []
    stack: list[str] = []
    last = ""  # the last structural character: tells a key from a value
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            raw = text[i + 1 : min(j, n)]
            try:
                value = json.loads('"' + raw + '"')
            except ValueError:
                value = raw
            is_key = bool(stack) and stack[-1] == "{" and last in ("{", ",")
            if not is_key:
                out.append(value)
            elif keys is not None:
                keys.append(value)
            last = "v"
            i = j + 1
            continue
        if c in "{[":
            stack.append(c)
            last = c
        elif c in "}]":
            if stack:
                stack.pop()
            last = "v"
        elif c in ",:":
            last = c
        elif c == "-" or c.isdigit():
            m = _NUMBER.match(text, i)
            if m is not None:
                out.append(m.group())
                last = "v"
                i = m.end()
                continue
        i += 1
    return out


def _walk(value: Any, out: set[str], keys: set[str]) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            keys.update(str(k) for k in v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str):
            out.add(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(str(v))


def argument_values(trace: Trace, records: Iterable[CallRecord]) -> set[str]:
    """Every argument value the trace carries, parsed or not, that is worth looking for
    (with a letter or a digit), and every object key the arguments hold that no tool
    declares: such a key came from the stream (``additionalProperties``), not from the
    tool's author, and is the user's data as much as a value."""
    out: set[str] = set()
    keys: set[str] = set()
    for record in records:
        _walk(record.arguments, out, keys)
    first: dict[tuple[str, str, str, str], dict[int, str]] = {}
    latest: dict[tuple[str, str, str, str], dict[int, str]] = {}
    for event in trace.events:
        if isinstance(event, Fragment):
            ident = (event.turn, event.response, event.item, event.call)
            first.setdefault(ident, {}).setdefault(event.position, event.text)
            latest.setdefault(ident, {})[event.position] = event.text
    found_keys: list[str] = []
    for texts in (*first.values(), *latest.values()):
        out.update(scalar_tokens("".join(texts[p] for p in sorted(texts)), found_keys))
    keys.update(found_keys)
    declared: set[str] = set()
    for spec in trace.tools.values():
        _declared(spec, declared, set())
    for event in trace.events:
        if isinstance(event, ToolChanged) and event.schema:
            _declared(ToolSpec(schema=dict(event.schema)), declared, set())
    out.update(keys - declared)
    # only values with a letter or digit: punctuation alone (":" from a broken stream)
    # cannot be told from a line's own separators
    return {v for v in out if any(ch.isalnum() for ch in v)}


# --------------------------------------------------------------------------------------
# What a line may hold of its own
# --------------------------------------------------------------------------------------


def declared_names(schema: Any) -> set[str]:
    """Every property name a JSON Schema declares (``properties`` keys, ``required``
    entries), at any depth: words a line may hold of its own (and the reference
    implementation's redaction keeps exactly these in what it logs)."""
    names: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            props = node.get("properties")
            if isinstance(props, Mapping):
                names.update(str(k) for k in props)
            required = node.get("required")
            if isinstance(required, list):
                names.update(str(r) for r in required)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def withhold_path(problem: str, schema: Any) -> str:
    """A ``schema: <keyword> at <path>`` message as a ledger may hold it: the path kept
    only when it is made of declared property names and array indices. A path can hold
    keys that came from the arguments (matched by ``patternProperties`` or refused by
    ``additionalProperties``), and those are values. (What the reference implementation's
    redaction does; the model's ideal ledger rows must not break its own INV-LEDGER.)"""
    head, sep, path = problem.partition(" at ")
    if not sep or path == "(root)":
        return problem
    allowed = declared_names(schema)
    if all(part.isdigit() or part in allowed for part in path.split("/")):
        return problem
    return f"{head} at (path withheld)"


def _declared(spec: ToolSpec, names: set[str], numbers: set[str]) -> None:
    names.update(declared_names(spec.schema))
    for field_name, bound in spec.business.get("max", {}).items():
        names.add(str(field_name))
        numbers.add(str(bound))
    names.update(str(f) for f in spec.business.get("forbid", {}))


@dataclass
class OwnWords:
    """The words one trace's lines may hold without leaking anything (see the module
    docstring): matched whole (``tokens``) or anywhere (``phrases``)."""

    phrases: set[str] = field(default_factory=set)  # matched anywhere, case-sensitive
    tokens: set[str] = field(default_factory=set)  # matched as whole tokens, case-sensitive
    _longest: int = 0

    @classmethod
    def of(cls, trace: Trace, records: Iterable[CallRecord]) -> OwnWords:
        names: set[str] = set()
        numbers: set[str] = {str(trace.limits.call_bytes), str(trace.limits.turn_bytes)}
        for spec in trace.tools.values():
            _declared(spec, names, numbers)
        phrases: set[str] = set(trace.tools)
        for event in trace.events:
            for attr in _EVENT_WORDS:
                value = getattr(event, attr, None)
                if isinstance(value, str):
                    phrases.add(value)
            if isinstance(event, ToolChanged) and event.schema:
                _declared(ToolSpec(schema=dict(event.schema)), names, numbers)
        for record in records:
            # a schema message's path may name keys the stream made up: only its head
            # is the model's own wording (declared names and indices are matched apart)
            validation = record.validation.partition(" at ")[0]
            phrases.update({str(record.key), record.key.short(), record.parse, validation, record.why})
            phrases.update(p for p in (record.tool, record.terminal_reason) if p)
        # one-character identifiers (item "0") are covered by the call keys they stand in
        return cls({p for p in phrases if len(p) >= 2}, names | numbers)

    def covered_by_phrase(self, text: str, a: int, b: int) -> bool:
        """Whether ``text[a:b]`` lies inside one of the trace's phrases (an identifier, a
        call key, a reason) as it occurs in ``text``. Looked up, not searched: every
        stretch of ``text`` around the occurrence that starts and ends at a token
        boundary is tried in the phrase set, so the cost does not grow with the number of
        phrases (thousands in a long trace; searching each made judging quadratic)."""
        if not self.phrases:
            return False
        longest = self._longest or max(len(p) for p in self.phrases)
        self._longest = longest
        starts = [i for i in range(max(0, b - longest), a + 1) if _boundary(text, i)]
        ends = [j for j in range(b, min(len(text), a + longest) + 1) if _boundary(text, j)]
        return any(text[i:j] in self.phrases for i in starts for j in ends if j - i <= longest)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the line's own vocabulary, names, numbers and counts are (the trace's
        phrases are looked up apart: :meth:`covered_by_phrase`)."""
        out: list[tuple[int, int]] = []
        lowered = text.lower()
        phrases, words = _vocabulary()
        for phrase in phrases:
            start = lowered.find(phrase)
            while start >= 0:
                out.append((start, start + len(phrase)))
                start = lowered.find(phrase, start + 1)
        for m in re.finditer(r"\w+", text):
            if m.group().lower() in words or m.group() in self.tokens:
                out.append(m.span())
        for pattern in _COUNT_PATTERNS:
            out.extend(m.span() for m in pattern.finditer(text))
        return out


def _boundary(text: str, i: int) -> bool:
    """A phrase may start or end at ``i``: the text's ends, or a change between a word
    character and another."""
    if i <= 0 or i >= len(text):
        return True
    return text[i - 1].isalnum() != text[i].isalnum()


def _occurrences(value: str, text: str) -> Iterable[tuple[int, int]]:
    if len(value) >= _ANYWHERE:
        start = text.find(value)
        while start >= 0:
            yield start, start + len(value)
            start = text.find(value, start + 1)
        return
    numeric = _NUMBER.fullmatch(value) is not None
    left = r"(?<![\w.])" if numeric else (r"(?<!\w)" if re.match(r"\w", value) else "")
    right = r"(?!\w|\.\d)" if numeric else (r"(?!\w)" if re.search(r"\w$", value) else "")
    for m in re.finditer(left + re.escape(value) + right, text):
        yield m.span()


def leaked_value(values: Iterable[str], text: str, own: OwnWords) -> str | None:
    """The first of ``values`` that occurs in ``text`` outside the line's own words."""
    spans: list[tuple[int, int]] | None = None
    for value in sorted(values, key=lambda v: (-len(v), v)):
        if value not in text:
            continue
        for a, b in _occurrences(value, text):
            if spans is None:
                spans = own.spans(text)
            if not any(s <= a and b <= e for s, e in spans) and not own.covered_by_phrase(text, a, b):
                return value
    return None


def observation_texts(obs: Observation) -> list[str]:
    """The free text an observation carries: what must hold no argument value."""
    if isinstance(obs, LedgerRow):
        return [obs.parse, obs.validation, obs.decision, obs.terminal_reason or ""]
    if isinstance(obs, AuditRow):
        return [obs.action, obs.reason]
    if isinstance(obs, LogLine):
        return [obs.text]
    if isinstance(obs, StatusShown):
        return [obs.status]
    return []
