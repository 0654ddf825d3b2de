"""The Python agent-framework rows of the conformance matrix: frameworks that run the tools
themselves, run as programs over the target protocol (:mod:`callsafe.targets.programs`),
their HTTP clients reading the loopback provider. The programs are
``callsafe.adapters.frameworks.*``; the frameworks are pinned in the ``frameworks`` extra."""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["FRAMEWORK_ROWS"]

FRAMEWORK_ROWS: Final[tuple[ProgramRow, ...]] = ()
