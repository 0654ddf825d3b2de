"""A time guard for variants that may be quadratic: stop one before a run takes too long.

Why: a benchmark that sweeps sizes (1 KiB to 1 MiB) over code it does not own cannot know in
advance which variant grows like size squared; waiting for a quadratic library at 1 MiB would
take hours, while the point (it is quadratic, and how slow it already was) is made at a
smaller size. So each variant's untimed check run (which every benchmark does anyway, to
verify the result) also serves as a probe: its time is recorded, the time at the next size is
predicted from the growth seen so far, and the variant is stopped when the prediction or the
probe itself exceeds the limit. The stop is reported in words ("stopped at 64 KiB: 3.2 s per
run"), never hidden, and never counted as a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["TimeGuard", "size_label"]


def size_label(nbytes: int) -> str:
    """``1 KiB`` ... ``1.00 MiB``: how the benchmarks print a size."""
    return f"{nbytes / 1024:.0f} KiB" if nbytes < 1 << 20 else f"{nbytes / (1 << 20):.2f} MiB"


@dataclass
class TimeGuard:
    """Per variant: the probe times seen so far by size, and why a variant was stopped.

    ``limit`` is in seconds per run. The prediction is the last probe time scaled by the
    size ratio to the power of the growth between the last two probes (at least 1: nothing
    grows slower than linearly for long), so a quadratic variant is stopped one size before
    it would take 16 times longer."""

    limit: float
    seen: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)

    def predicted(self, name: str, nbytes: int) -> float | None:
        """Predicted seconds per run of ``name`` at ``nbytes``; None before its first probe."""
        points = self.seen.get(name, [])
        if not points:
            return None
        n1, t1 = points[-1]
        slope = 1.0
        if len(points) >= 2:
            n0, t0 = points[-2]
            if n1 > n0 and t0 > 0 and t1 > 0:
                slope = max(1.0, math.log(t1 / t0) / math.log(n1 / n0))
        return float(t1 * (nbytes / n1) ** slope)

    def admit(self, name: str, nbytes: int) -> bool:
        """Whether ``name`` may run at ``nbytes``; records why not when it may not."""
        if name in self.stopped:
            return False
        guess = self.predicted(name, nbytes)
        if guess is not None and guess > self.limit:
            n1, t1 = self.seen[name][-1]
            self.stopped[name] = (
                f"stopped after {size_label(n1)}: {t1:.2f} s per run there, "
                f"{size_label(nbytes)} predicted at ~{guess:.0f} s per run"
            )
            return False
        return True

    def record(self, name: str, nbytes: int, seconds: float, where: str | None = None) -> bool:
        """Record a probe; False (and the variant stopped) when it exceeded the limit.
        ``where`` names the input when it is not a size (for example a shape)."""
        self.seen.setdefault(name, []).append((nbytes, seconds))
        if seconds > self.limit:
            self.stopped[name] = f"stopped at {where or size_label(nbytes)}: {seconds:.1f} s per run"
            return False
        return True
