"""The registry of mutants for ``callsafe selftest``.

Why: a certifier is only as good as the bugs it catches. A mutant is a deliberately
broken target (one classic bug: dispatch on the first parse, no dedupe, a cancel ignored,
...) named like any target (``module:factory``); ``callsafe selftest`` certifies each one
and reports which invariant caught it, how long it took and how small the minimal
counterexample was. The list is filled by the mutant zoo; it starts empty.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MUTANTS", "Mutant", "registry"]


@dataclass(frozen=True)
class Mutant:
    """A broken target and the invariants expected to catch it (empty: any invariant)."""

    name: str
    target: str  # "module:factory", as for `callsafe certify`
    description: str = ""
    expect: tuple[str, ...] = ()


MUTANTS: list[Mutant] = []


def registry() -> list[Mutant]:
    """The registered mutants, in order."""
    return list(MUTANTS)
