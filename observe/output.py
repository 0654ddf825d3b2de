"""What ``callsafe observe`` writes: the console lines, ``observe.json``, an HTML page and
JUnit XML, from one :class:`~callsafe.observe.judging.Observed`.

Why its own writers: :mod:`callsafe.reporting.report` writes a *certification* (traces,
generators, counterexamples); an observation has one set of records and per invariant a
verdict with its evidence. The HTML page takes the report's style sheet and badges, so
both look alike, and everything shown is escaped (:func:`callsafe.safe_text.printable`
for the console, :func:`html.escape` on the page): record ids come from a provider's
stream and may hold ESC, CR/LF or bidirectional overrides.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html import escape

from callsafe.model.invariants import BY_ID
from callsafe.observe.judging import Observed, ObservedFinding
from callsafe.observe.records import shown
from callsafe.reporting.report import _CSS, _badge

__all__ = ["console_lines", "finding_line", "html_page", "junit_xml", "summary_line"]

_BADGE = {"holds": "holds", "violated": "violated", "not judgeable": "not_applicable"}


def finding_line(found: ObservedFinding) -> str:
    """One finding on one line, with its evidence (escaped)."""
    f = found.finding
    where = f" [{shown(f.key.short(), 80)}]" if f.key is not None else ""
    evidence = f"; records: {', '.join(shown(e, 80) for e in found.evidence)}" if found.evidence else ""
    return f"{f.invariant}{where}: {shown(f.message, 300)}{evidence}"


def summary_line(observed: Observed) -> str:
    counts = {s: sum(1 for v in observed.verdicts.values() if v.status == s) for s in _BADGE}
    head = "VIOLATED" if counts["violated"] else "no violation found"
    return (
        f"{head}: {counts['violated']} violated, {counts['holds']} hold, {counts['not judgeable']} not judgeable "
        f"from these records"
    )


def console_lines(observed: Observed) -> list[str]:
    lines = [
        f"callsafe observe: {shown(observed.source, 120)}",
        f"records hold: {', '.join(sorted(observed.kinds)) or 'nothing the invariants read'}",
    ]
    for note in observed.notes:
        lines.append(f"note: {shown(note, 300)}")
    if observed.assumed:
        lines.append(
            f"assumed: {len(observed.assumed)} event(s) the records do not hold (each executed call given the "
            "most favourable stream: opened when its turn started, completed right before it ran)"
        )
    for verdict in observed.verdicts.values():
        status = verdict.status
        extra = f" (needs: {', '.join(verdict.missing)})" if verdict.missing else ""
        scope = f" (judged: {verdict.scope})" if verdict.scope else ""
        lines.append(f"  {verdict.invariant:<18} {status}{extra}{scope}")
        for found in verdict.findings[:20]:
            lines.append(f"      {finding_line(found)}")
        if len(verdict.findings) > 20:
            lines.append(f"      ... and {len(verdict.findings) - 20} more")
    lines.append(summary_line(observed))
    return lines


def junit_xml(observed: Observed) -> ET.ElementTree[ET.Element]:
    """One test case per invariant: a failure when violated, skipped when not judgeable."""
    suite = ET.Element(
        "testsuite",
        name=f"callsafe observe {shown(observed.source, 120)}",
        tests=str(len(observed.verdicts)),
        failures=str(len(observed.violated)),
        skipped=str(sum(1 for v in observed.verdicts.values() if v.status == "not judgeable")),
    )
    for verdict in observed.verdicts.values():
        case = ET.SubElement(suite, "testcase", classname="callsafe.observe", name=verdict.invariant)
        if verdict.status == "violated":
            failure = ET.SubElement(case, "failure", message=f"{len(verdict.findings)} finding(s)")
            failure.text = "\n".join(finding_line(f) for f in verdict.findings)
        elif verdict.status == "not judgeable":
            ET.SubElement(case, "skipped", message=f"not judgeable: the records lack {', '.join(verdict.missing)}")
    return ET.ElementTree(suite)


def html_page(observed: Observed) -> str:
    """A self-contained HTML page: the verdicts, their findings and the records shown."""
    worst = "violated" if observed.violated else "holds"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>callsafe observe: {escape(shown(observed.source, 120))}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>callsafe observe: {escape(shown(observed.source, 120))} {_badge(worst)}</h1>",
        f"<p class='muted'>records hold: {escape(', '.join(sorted(observed.kinds)))}</p>",
    ]
    if observed.notes or observed.assumed:
        parts.append("<ul>")
        parts += [f"<li>{escape(shown(n, 300))}</li>" for n in observed.notes]
        if observed.assumed:
            parts.append(
                f"<li>{len(observed.assumed)} event(s) assumed: each executed call given the most favourable "
                "stream the records allow</li>"
            )
        parts.append("</ul>")
    parts.append("<table><tr><th>invariant</th><th>verdict</th><th>what it says</th><th>findings</th></tr>")
    for verdict in observed.verdicts.values():
        inv = BY_ID[verdict.invariant]
        needs = f"<br><span class='muted'>needs {escape(', '.join(verdict.missing))}</span>" if verdict.missing else ""
        if verdict.scope:
            needs += f"<br><span class='muted'>judged: {escape(verdict.scope)}</span>"
        found = "".join(f"<div>{escape(finding_line(f))}</div>" for f in verdict.findings[:50])
        parts.append(
            f"<tr><td>{escape(verdict.invariant)}</td><td>{_badge(_BADGE[verdict.status])}{needs}</td>"
            f"<td>{escape(inv.title)}</td><td>{found}</td></tr>"
        )
    parts.append("</table></body></html>")
    return "\n".join(parts)
