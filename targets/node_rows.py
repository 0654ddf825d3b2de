"""The TypeScript rows of the conformance matrix: Node.js libraries run as programs over the
target protocol (:mod:`callsafe.targets.programs`), their SDKs reading the loopback
provider over HTTP. The programs are ``adapters/node/rows/*.ts``, compiled by
``npm run build``; the packages are pinned in ``adapters/node/package-lock.json``."""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["NODE_ROWS"]

NODE_ROWS: Final[tuple[ProgramRow, ...]] = ()
