"""What a finding is: one behaviour of one library that breaks an invariant, with its
witnesses and its standalone script. Kept apart from the tables of findings
(:mod:`callsafe.campaigns.findings` and the per-ecosystem modules beside it) so that each
table can import it without importing the others."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from callsafe.model.vocabulary import Trace

__all__ = ["REPRO_DIR", "Finding"]

REPRO_DIR: Final = "campaigns/repro"


@dataclass(frozen=True)
class Finding:
    """One behaviour of one library that breaks an invariant (safety) or loses a valid call
    (liveness)."""

    id: str
    library: str  # distribution (PyPI), or npm package
    summary: str
    # The reproduction: a file name in campaigns/repro (Python), or a path from the
    # repository root for a script in another language (adapters/node/repro/x.mjs).
    script: str | None
    witnesses: tuple[Trace, ...]
    surfaces: Mapping[str, frozenset[str]]  # catalog name -> invariants the witnesses violate there
    issue: str | None = None  # the public report it matches (owner/repo#N or a URL), where one exists

    @property
    def script_path(self) -> str | None:
        if not self.script:
            return None
        return self.script if "/" in self.script else f"{REPRO_DIR}/{self.script}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "summary": self.summary}
        if self.script_path:
            out["script"] = self.script_path
        if self.issue:
            out["issue"] = self.issue
        return out
