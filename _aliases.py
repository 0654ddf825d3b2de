"""The import paths of callsafe 0.1, before each folder got one role, kept working.

Why: users import ``callsafe.model.abstract``, ``callsafe.certify.contract``,
``callsafe.certify.report`` and the like from their own adapters, notebooks and test
suites. Those modules moved (``formal/``, ``contract/``, ``reporting/``, ...), and a module
left behind in the old folder to re-export the new one would import upwards, against the
folder order. Instead a finder on ``sys.meta_path`` answers an old name with the very
module object of its new home, so ``callsafe.model.abstract is callsafe.formal.abstract``:
one module, one set of classes, nothing duplicated. The project itself never imports an
old name (``tests/test_layout.py`` checks).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Final

__all__ = ["MOVED", "install"]

MOVED: Final[dict[str, str]] = {
    **{
        f"callsafe.model.{name}": f"callsafe.formal.{name}"
        for name in (
            "abstract",
            "ops",
            "compiled",
            "graph",
            "z3_encoding",
            "z3_proof",
            "lemmas",
            "tla",
            "explain",
            "summary",
            "mutants",
        )
    },
    "callsafe.model.diagram_style": "callsafe.diagrams.style",
    "callsafe.model.diagrams": "callsafe.diagrams.model",
    "callsafe.model.diagrams_coverage": "callsafe.diagrams.coverage",
    "callsafe.model.diagrams_rules": "callsafe.diagrams.rules",
    "callsafe.certify.sequence": "callsafe.diagrams.sequence",
    "callsafe.certify.contract": "callsafe.contract.target",
    "callsafe.certify.report": "callsafe.reporting.report",
    "callsafe.certify.diagrams": "callsafe.reporting.diagram_files",
    "callsafe.certify.inspect": "callsafe.inspection.inspect",
    "callsafe.certify.recording": "callsafe.inspection.recording",
    "callsafe.certify.inspect_render": "callsafe.inspection.render",
    "callsafe.certify.matrix": "callsafe.campaigns.matrix",
    "callsafe.certify.selftest": "callsafe.campaigns.selftest",
    "callsafe.certify.mutants": "callsafe.campaigns.zoo",
    "callsafe.certify.cli": "callsafe.cli.main",
    "callsafe.certify.cli_formal": "callsafe.cli.formal",
    "callsafe.certify.cli_inspect": "callsafe.cli.inspect",
    "callsafe.certify.cli_matrix": "callsafe.cli.matrix",
    # targets/ back to one role (adapters): the zoos and the findings live with the campaigns
    **{
        f"callsafe.targets.{name}": f"callsafe.campaigns.{name}"
        for name in ("mutants", "domain_mutants", "findings", "findings_frameworks", "findings_node", "finding_record")
    },
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The new home already ran its code; an alias runs nothing of its own."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``callsafe/__init__.py`` calls it)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
