"""What each surviving mutant of ``make mutation`` was read to be, by its spec
(``module:operator:occurrence``) and the original line it changes.

``equivalent``: no behaviour the spec judges differs (an annotation never evaluated, a
cache or a fast path whose slow path gives the same answer, a cue the spec makes optional,
a state only a second replica can reach). ``generator``: a trace the default certification
does not generate kills it (named in the reason; bench/RESULTS.md lists them).
"""

from __future__ import annotations

from typing import Final

__all__ = ["SURVIVORS"]

# spec -> (original line, class, reason)
SURVIVORS: Final[dict[str, tuple[str, str, str]]] = {}
