"""The registry of mutants for ``callsafe selftest``.

Why: a certifier is only as good as the bugs it catches. A mutant is a deliberately
broken target (one classic bug: dispatch on the first parse, no dedupe, a cancel ignored,
...) named like any target (``module:factory``); ``callsafe selftest`` certifies each one
and reports which invariant caught it, how long it took and how small the minimal
counterexample was.
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


def _zoo(name: str, factory: str, expect: tuple[str, ...], description: str) -> Mutant:
    return Mutant(name, f"callsafe.targets.mutants:{factory}", description, expect)


# The zoo (callsafe.targets.mutants): each reproduces one real failure class, and names the
# invariants that must catch it.
MUTANTS: list[Mutant] = [
    _zoo("dispatch-on-parse", "dispatch_on_parse", ("INV-TERMINAL",), "runs a call as soon as its buffer parses"),
    _zoo("merge-by-index", "merge_by_index", ("INV-EXACT-ARGS",), "glues parallel calls that share an index"),
    _zoo("concatenate-names", "concatenate_names", ("LIVE-DISPATCH",), "a re-sent tool name becomes paypay"),
    _zoo("no-dedupe", "no_dedupe", ("INV-EXACT-ARGS", "LIVE-DISPATCH"), "a repeated delta turns 100 into 1000"),
    _zoo("accept-late-fragments", "accept_late_fragments", ("INV-TERMINAL",), "data after the terminal is ignored"),
    _zoo("no-turn-check", "no_turn_check", ("INV-TURN",), "an old call runs after a newer turn started"),
    _zoo("revive-after-restart", "revive_after_restart", ("INV-ONCE", "INV-CANCEL"), "forgets decisions on restart"),
    _zoo("validate-twice", "validate_twice", ("INV-VALIDATE-ONCE",), "business-validates every call twice"),
    _zoo("leak-arguments", "leak_arguments", ("INV-LEDGER",), "logs argument values"),
    _zoo("bypass-confirmation", "bypass_confirmation", ("INV-CONFIRM",), "runs without asking for confirmation"),
    _zoo("execute-on-length", "execute_on_length", ("INV-CANCEL",), "runs a call cut off at max_tokens"),
    _zoo("ignore-cancel", "ignore_cancel", ("INV-CANCEL",), "never hears the user's stop"),
    _zoo("never-execute", "never_execute", ("LIVE-DISPATCH",), "safe by doing nothing"),
]


def registry() -> list[Mutant]:
    """The registered mutants, in order."""
    return list(MUTANTS)
