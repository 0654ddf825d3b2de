"""The two sections every report shows: action safety apart from the records.

Why: the spec says "Test visible status separately from action safety". What reached the
executor, the validators and the confirmation prompt (a call ran that must not, ran twice,
ran with other arguments, never ran) is one question; whether the target's ledger, audit,
logs and status tell the truth about it is another. A target that never runs a wrong call
but words its ledger differently must not read, in any report, like a target that runs
calls it must refuse; and a records finding must not hide an action one.

Each finding says which it is (:attr:`callsafe.certify.judge.Finding.about`, from
:attr:`callsafe.model.invariants.Invariant.about` unless a check says otherwise: INV-BOUNDED's
ledger check is about records, its cap check about actions). The console, ``report.json``,
the HTML report and the JUnit XML all group by :func:`sections`; docs/reading-a-report.md
says what the exit status is for each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from callsafe.certify.checking import Counterexample
    from callsafe.certify.harness import Certification, InvariantSummary

__all__ = ["SECTIONS", "Section", "sections", "status_in", "verdict_line"]

# (about, title, what it covers)
SECTIONS: Final = (
    ("action", "Action safety", "what reached the executor, the validators and the confirmation prompt"),
    ("records", "Records", "what the target recorded: ledger rows, audit entries, logs and the visible status"),
)


@dataclass
class Section:
    """One section of a report: its invariants and the counterexamples of its findings."""

    about: str
    title: str
    covers: str
    invariants: list[InvariantSummary] = field(default_factory=list)
    violated: list[str] = field(default_factory=list)  # invariants violated in this section
    counterexamples: list[tuple[str, Counterexample]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """ "violated" when any of its findings showed; "holds" when every applicable
        invariant of it holds; otherwise the weakest of its invariants' statuses."""
        if self.violated:
            return "violated"
        statuses = {s.status for s in self.invariants}
        for status in ("not_established", "holds"):
            if status in statuses:
                return status
        return "not_applicable"


def sections(cert: Certification) -> list[Section]:
    """The certification's findings in two sections (:data:`SECTIONS`); an invariant whose
    checks cover both (INV-BOUNDED) is listed in both, and its status in each section is
    what that section's findings say."""
    out: list[Section] = []
    for about, title, covers in SECTIONS:
        section = Section(about, title, covers)
        for summary in cert.invariants.values():
            if about in summary.about or summary.violated_by.get(about):
                section.invariants.append(summary)
            if summary.violated_by.get(about):
                section.violated.append(summary.id)
        for inv_id, ces in sorted(cert.counterexamples.items()):
            section.counterexamples += [(inv_id, ce) for ce in ces if ce.about == about]
        out.append(section)
    return out


def status_in(summary: InvariantSummary, about: str) -> str:
    """An invariant's status within one section: violated only by that section's findings."""
    if summary.status == "violated" and not summary.violated_by.get(about):
        return "holds" if summary.traces_checked else "not_applicable"
    return summary.status


def verdict_line(cert: Certification) -> str:
    """The verdict in words, saying which kind of violation failed the run."""
    action, records = cert.action_violated, cert.records_violated
    if not action and not records:
        return ""
    parts = []
    if action:
        parts.append(f"action safety: {', '.join(action)} violated")
    else:
        parts.append("action safety held")
    if records:
        parts.append(f"records: {', '.join(records)} untrue")
    else:
        parts.append("records held")
    return "; ".join(parts)
