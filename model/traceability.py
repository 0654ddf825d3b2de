"""The spec, traceable: every oracle rule and invariant check, with the spec sentence it
enforces, or marked as callsafe's own choice, and the readings the oracle allows instead.

Why: where the spec speaks, the oracle must be strict; where it is silent, every
defensible reading must be allowed. That is only reviewable when each rule says which
sentence it comes from. The sentences sit as data next to the rules themselves
(:data:`~callsafe.model.system.BROADCASTS` and :data:`~callsafe.model.system.GUARDS`
carry ``spec`` and ``own``, :data:`~callsafe.model.system.READING_SPEC` the readings,
:data:`~callsafe.model.invariants.CHECKS` the checks, each invariant its ``spec``); this
module gathers them into :func:`links` and renders ``docs/spec-traceability.md``
(:func:`render`). ``tests/test_spec_traceability.py`` finds every quoted sentence in the
spec (case and typography aside) and keeps the page current.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from callsafe.model.invariants import CHECKS, INVARIANTS
from callsafe.model.system import (
    BROADCASTS,
    GUARDS,
    OWN_DECLARATION,
    PARSE_ONCE,
    READING_SPEC,
    STOPS_ARE_INERT,
)

__all__ = ["SPEC_NAME", "Link", "find_spec", "links", "normalize_spec", "render"]

SPEC_NAME: Final = "seed-streaming-tool-call-assembly.txt"


@dataclass(frozen=True)
class Link:
    """One rule or check: what it is, where it lives, the spec sentences it enforces, and
    (where the spec is silent) callsafe's own choice; for a reading, ``reading`` names it."""

    kind: str  # "broadcast", "guard", "step", "reading", "invariant", "check"
    rule: str
    where: str
    spec: tuple[str, ...]
    own: str = ""
    reading: str = ""  # a reading: its name (a field of Reading)
    readings: tuple[str, ...] = ()  # the readings that relax this rule


# Which readings relax which rule (by the rule's event type, guard or step name).
_RELAXED_BY: Final[dict[str, tuple[str, ...]]] = {
    "StoreFault": ("store_fault_rolls_back",),
    "ToolChanged": ("keep_calls_across_catalog_change",),
    "open": ("refuse_unknown_at_open",),
    "fragment": ("reject_out_of_order", "reject_repeats", "count_after_end"),
    "parse": ("lone_surrogate_escapes", "join_split_surrogates"),
}


# The internal steps of the model (parse, validate) are rules too.
_STEPS: Final = (
    Link(
        "step",
        "parse the assembled arguments once, strictly: one JSON object, nothing after it, no duplicate keys, "
        "no NaN or Infinity",
        "model/system.py Semantics._assemble, strict_parse",
        (PARSE_ONCE, STOPS_ARE_INERT),
        own="what 'malformed' means: strict RFC 8259 JSON, never repaired",
        readings=_RELAXED_BY["parse"],
    ),
    Link(
        "step",
        "validate against the tool's declaration as it stands, then the business rules once",
        "model/system.py Semantics._validate",
        (OWN_DECLARATION, PARSE_ONCE),
    ),
)


def links() -> list[Link]:
    """Every rule and check of the oracle and the invariants, in the order of the code."""
    out: list[Link] = []
    for b in BROADCASTS:
        out.append(
            Link(
                "broadcast",
                f"{b.event_type.__name__} -> {b.call_event.value}: {b.reaches.replace(chr(10), ' ')}",
                "model/system.py BROADCASTS",
                b.spec,
                b.own,
                readings=_RELAXED_BY.get(b.event_type.__name__, ()),
            )
        )
    for g in GUARDS:
        outcomes = ", ".join(e.value for e in g.outcomes)
        relaxed = _RELAXED_BY.get(g.name, ())
        out.append(Link("guard", f"{g.name}: {outcomes}", "model/system.py GUARDS", g.spec, g.own, readings=relaxed))
    out.extend(_STEPS)
    for name, (spec, choice) in READING_SPEC.items():
        where = f"model/system.py Reading.{name}"
        out.append(Link("reading", choice, where, spec, "" if spec else choice, reading=name, readings=(name,)))
    for inv in INVARIANTS:
        sentences = tuple(re.split(r"(?<=[.;])\s+", inv.spec))
        out.append(Link("invariant", f"{inv.id}: {inv.title}", "model/invariants.py INVARIANTS", sentences))
    for check in CHECKS:
        out.append(
            Link("check", f"{check.invariant}: {check.what}", "model/invariants.py CHECKS", check.spec, check.own)
        )
    return out


def normalize_spec(text: str) -> str:
    """Text as quotes are compared with the spec: typographic quotes as plain ones, white
    space runs as one space, case-folded, without a closing period (a quote may end where
    the spec's sentence goes on)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip(".;,")


def find_spec() -> Path | None:
    """The spec file: ``$CALLSAFE_SPEC``, else the shared checkout's copy; None when absent."""
    for candidate in (os.environ.get("CALLSAFE_SPEC"), f"/work/shared/spec/{SPEC_NAME}"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """docs/spec-traceability.md: spec sentence -> the rules and checks that enforce it ->
    the readings allowed; then callsafe's own choices."""
    all_links = links()
    sentences: list[str] = []
    for link in all_links:
        for quote in link.spec:
            if quote not in sentences:
                sentences.append(quote)
    out = [
        "# Spec traceability",
        "",
        "<!-- generated by callsafe.model.traceability.render(); tests/test_spec_traceability.py checks it is "
        "current and finds every quote in the spec -->",
        "",
        "Every rule of the oracle (`model/system.py`: the broadcast rules, the guards, the parse and validation",
        "steps), every reading it allows where the spec is silent, and every check of the invariants",
        "(`model/invariants.py`), with the spec sentence it enforces, quoted as the spec writes it. Where the",
        "spec is silent the rule says so: it is callsafe's own choice, and the readings listed beside it are the",
        "alternatives the oracle allows (a call the readings judge differently is `may`: any of them, taken",
        "whole). Records (ledger, audit, status) are judged by meaning, in callsafe's, the spec's or an",
        'adapter\'s declared words (`docs/adapters.md`, "Record words").',
        "",
        "## Spec sentence, rules and checks, readings allowed",
        "",
    ]
    for quote in sentences:
        enforcing = [link for link in all_links if quote in link.spec and link.kind != "reading"]
        allowed = [link for link in all_links if quote in link.spec and link.kind == "reading"]
        out += [f"### \u201c{quote}\u201d", ""]
        out += ["| rule or check | where | readings allowed |", "| --- | --- | --- |"]
        out += [
            f"| {_cell(link.kind + ': ' + link.rule)} | `{link.where}` | "
            f"{', '.join(f'`{r}`' for r in link.readings) or '-'} |"
            for link in enforcing
        ]
        out.append("")
        if allowed:
            readings = "; ".join(f"`{link.reading}` ({link.rule})" for link in allowed)
            out += [f"Readings allowed: {readings}.", ""]
    out += ["## callsafe's own choices", "", "| rule or check | the choice | readings allowed |", "| --- | --- | --- |"]
    for link in all_links:
        if link.own or not link.spec:
            choice = link.own or link.rule
            readings = ", ".join(f"`{r}`" for r in link.readings)
            out.append(f"| {_cell(link.kind + ': ' + link.rule)} | {_cell(choice)} | {readings or '-'} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # python -m callsafe.model.traceability > docs/spec-traceability.md
    print(render(), end="")
