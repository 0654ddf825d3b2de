"""The findings of the Python agent frameworks (:mod:`callsafe.targets.framework_rows`): each a
:class:`~callsafe.targets.finding_record.Finding` with its witnesses, the surfaces and
invariants they violate, and its standalone script; :data:`callsafe.targets.findings.FINDINGS`
lists them after the Python libraries'."""

from __future__ import annotations

from typing import Final

from callsafe.targets.finding_record import Finding

__all__ = ["FRAMEWORK_FINDINGS"]

FRAMEWORK_FINDINGS: Final[tuple[Finding, ...]] = ()
