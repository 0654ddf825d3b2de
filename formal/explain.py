"""Counterexamples as people read them: "action results in <what changed>".

Why its own module: a path of abstract states is unreadable as tuples, and every checker
(the explorer's shortest violations, z3's bounded model checking, TLC's traces, the
synthesised hazards) prints paths. One rendering, in the style of Stateright's
counterexamples, keeps them comparable side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

from callsafe.formal.abstract import AbsCall, AbsState, Action

__all__ = ["describe_change", "render_path"]

_FLAGS = {
    "terminal_seen": "terminal seen",
    "parsed": "parsed",
    "confirm_requested": "confirmation requested",
    "confirmed": "confirmed",
    "was_stopped": "stopped",
}


def _call_change(before: AbsCall, after: AbsCall) -> list[str]:
    parts = []
    if before.state != after.state:
        parts.append(f"{before.state.value} -> {after.state.value}")
    if before.frags != after.frags:
        parts.append(f"fragments {before.frags} -> {after.frags}")
    for name, label in _FLAGS.items():
        b, a = getattr(before, name), getattr(after, name)
        if b != a:
            parts.append(label if a else f"not {label}")
    if before.validations != after.validations:
        parts.append(f"validations {before.validations} -> {after.validations}")
    if before.executions != after.executions:
        parts.append(f"executions {before.executions} -> {after.executions}")
    if before.bad_dispatch != after.bad_dispatch:
        parts.append(after.bad_dispatch or "no bad dispatch")
    return parts


def describe_change(before: AbsState, after: AbsState) -> str:
    """What differs between two states, in words; "nothing changes" when nothing does."""
    parts = []
    for i, (b, a) in enumerate(zip(before.calls, after.calls, strict=True)):
        change = _call_change(b, a)
        if change:
            parts.append(f"call {i} " + ", ".join(change))
    for t, (was, now) in enumerate(zip(before.turns, after.turns, strict=True)):
        if was != now:
            parts.append(f"turn {t} {was} -> {now}")
    for t, (flag, new_flag) in enumerate(zip(before.ended, after.ended, strict=True)):
        if flag != new_flag:
            parts.append(f"response {t} {'ended' if new_flag else 'flag forgotten'}")
    for t, (flag, new_flag) in enumerate(zip(before.quarantined, after.quarantined, strict=True)):
        if flag != new_flag:
            parts.append(f"response {t} {'quarantined' if new_flag else 'quarantine flag forgotten'}")
    if before.tool_disabled != after.tool_disabled:
        parts.append("tool disabled" if after.tool_disabled else "tool flag forgotten")
    if before.tool_changed != after.tool_changed:
        parts.append("tool changed" if after.tool_changed else "catalog flag forgotten")
    if before.restarts != after.restarts:
        parts.append(f"restarts {before.restarts} -> {after.restarts}")
    return "; ".join(parts) if parts else "nothing changes"


def render_path(initial: AbsState, steps: Sequence[tuple[Action, AbsState]]) -> list[str]:
    """One numbered line per step: ``3. cancel(0) results in call 0 collecting -> cancelled``."""
    lines = []
    before = initial
    for n, (action, after) in enumerate(steps, 1):
        lines.append(f"{n}. {action} results in {describe_change(before, after)}")
        before = after
    return lines
