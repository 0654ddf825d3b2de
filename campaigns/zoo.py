"""The registry of mutants for ``callsafe selftest``.

Why: a certifier is only as good as the bugs it catches. A mutant is a deliberately
broken target (one classic bug: dispatch on the first parse, no dedupe, a cancel ignored,
...) named like any target (``module:factory``); ``callsafe selftest`` certifies each one
and reports which invariant caught it, how long it took and how small the minimal
counterexample was.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORRECT_VARIANTS", "MUTANTS", "Mutant", "correct_variants", "registry"]


@dataclass(frozen=True)
class Mutant:
    """A broken target and the invariants expected to catch it (empty: any invariant)."""

    name: str
    target: str  # "module:factory", as for `callsafe certify`
    description: str = ""
    expect: tuple[str, ...] = ()
    # A correct variant (a choice the spec leaves open): it must pass, and the selftest
    # fails when the certifier blames it.
    correct: bool = False


def _zoo(name: str, factory: str, expect: tuple[str, ...], description: str) -> Mutant:
    return Mutant(name, f"callsafe.campaigns.mutants:{factory}", description, expect)


# The zoo (callsafe.campaigns.mutants): each reproduces one real failure class, and names the
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


def _domain(name: str, cls: str, expect: tuple[str, ...], description: str) -> Mutant:
    return Mutant(name, f"callsafe.campaigns.domain_mutants:{cls}", description, expect)


# Written against the rich concrete domain (callsafe.generators.domain), one or more per
# part of it: identities and tools, values and fragmentation, byte caps, and application
# and operator events repeated, re-announced and followed by a restart.
MUTANTS += [
    # identities: tenants, shared ids, agent loops; tools with rules and confirmation
    _domain(
        "arguments-by-call-id",
        "ArgumentsByCallId",
        ("INV-EXACT-ARGS",),
        "caches validated arguments by call id: another tenant's call with that id overwrites them",
    ),
    _domain(
        "conversation-without-tenant",
        "ConversationWithoutTenant",
        ("LIVE-DISPATCH",),
        "keys conversations by name: another tenant's turn supersedes this one",
    ),
    _domain("stop-every-tenant", "StopEveryTenant", ("LIVE-DISPATCH",), "a tenant stop reaches every tenant"),
    _domain(
        "confirm-another-turn",
        "ConfirmAnotherTurn",
        ("INV-CONFIRM",),
        "matches a confirmation by ids whatever its turn: a confirmation of another turn runs this call",
    ),
    _domain(
        "item-without-response",
        "ItemWithoutResponse",
        ("INV-LEDGER", "INV-EXACT-ARGS", "LIVE-DISPATCH"),
        "keys buffers without the response: an agent loop's next call at index 0 is taken for the first",
    ),
    _domain(
        "response-end-by-id",
        "ResponseEndById",
        ("LIVE-DISPATCH",),
        "a response's end is recorded by id alone: another turn's response with that id ends too",
    ),
    _domain(
        "skip-rules-when-confirmed",
        "SkipRulesWhenConfirmed",
        ("INV-VALIDATE-ONCE",),
        "skips business rules for tools that need confirmation",
    ),
    _domain(
        "rules-of-first-tool",
        "RulesOfFirstTool",
        ("INV-TERMINAL",),
        "validates every tool with the business rules of the first tool validated",
    ),
    _domain(
        "disable-new-calls-only",
        "DisableNewCallsOnly",
        ("INV-CANCEL", "INV-BOUNDED"),
        "disabling a tool stops only calls opened after it (the stopped call's buffer stays open)",
    ),
    _domain(
        "cached-catalog",
        "CachedCatalog",
        ("INV-CANCEL", "INV-BOUNDED"),
        "reads tools through a cache a catalog change does not invalidate",
    ),
    # values and fragmentation
    _domain(
        "dedupe-by-text",
        "DedupeByText",
        ("INV-EXACT-ARGS",),
        "drops a delta equal to the previous one: 111111 becomes 111",
    ),
    _domain(
        "latin1-deltas",
        "Latin1Deltas",
        ("INV-EXACT-ARGS",),
        "decodes a delta with multi-byte UTF-8 as Latin-1: é arrives as Ã©",
    ),
    # byte caps placed by the trace's own sizes
    _domain("chars-for-bytes", "CharsForBytes", ("INV-BOUNDED",), "counts characters, not bytes, against the caps"),
    _domain("cap-off-by-one", "CapOffByOne", ("INV-BOUNDED",), "refuses only two bytes over a cap"),
    _domain(
        "turn-cap-per-response",
        "TurnCapPerResponse",
        ("INV-BOUNDED",),
        "counts the per-turn cap per response: an agent loop's responses each start at zero",
    ),
    _domain(
        "turn-bytes-reset-on-restart",
        "TurnBytesResetOnRestart",
        ("INV-BOUNDED",),
        "a turn's byte count starts at zero after a restart",
    ),
    # application and operator events: repeated, re-announced, then a restart
    _domain(
        "forget-quarantine-on-restart",
        "ForgetQuarantineOnRestart",
        ("INV-CANCEL", "INV-VALIDATE-ONCE"),
        "quarantined responses are not reloaded at start: a new call there is validated",
    ),
    _domain(
        "forget-disable-on-restart",
        "ForgetDisableOnRestart",
        ("INV-CONFIRM",),
        "disabled tools are not reloaded at start: a call of one is validated and put up for confirmation",
    ),
    _domain(
        "tenant-stop-sticks",
        "TenantStopSticks",
        ("LIVE-DISPATCH",),
        "a stopped tenant's later turns are stopped too",
    ),
    _domain(
        "latest-binding-wins",
        "LatestBindingWins",
        ("INV-TURN",),
        "a turn announced again with another actor and tenant takes the latest binding",
    ),
    _domain("confirm-runs-again", "ConfirmRunsAgain", ("INV-ONCE",), "a repeated confirmation runs the tool again"),
    _domain("deny-ignored", "DenyIgnored", ("INV-CONFIRM",), "a denial is ignored; a later confirmation runs the call"),
    _domain(
        "quarantine-only-collecting",
        "QuarantineOnlyCollecting",
        ("INV-CANCEL", "INV-BOUNDED"),
        "a quarantine does not hold a call already waiting for confirmation",
    ),
    _domain(
        "cancel-by-conversation",
        "CancelByConversation",
        ("LIVE-DISPATCH",),
        "a cancel reaches every turn of the conversation's name, another tenant's too",
    ),
]

# Correct variants: choices the spec leaves open. They must pass (selftest fails if the
# certifier blames one: a false alarm).
CORRECT_VARIANTS: list[Mutant] = [
    Mutant(
        "reject-out-of-order",
        "callsafe.campaigns.domain_mutants:RejectOutOfOrder",
        "fails a call when a fragment arrives below a position already received (the spec: reject or reassemble)",
        correct=True,
    ),
    Mutant(
        "defer-executions",
        "callsafe.campaigns.domain_mutants:DeferExecutions",
        "runs executions after the event that caused them was handled (an outbox)",
        correct=True,
    ),
    Mutant(
        "fail-doomed-early",
        "callsafe.campaigns.domain_mutants:FailDoomedEarly",
        "fails a call as soon as its text can never parse, not at its terminal event",
        correct=True,
    ),
    *(
        Mutant(name, f"callsafe.campaigns.domain_mutants:{cls}", description, correct=True)
        for name, cls, description in (
            (
                "fail-on-repeat",
                "FailOnRepeat",
                "fails a call on any repeated position, same bytes or not (the spec: reject or reassemble)",
            ),
            (
                "refuse-unknown-at-open",
                "RefuseUnknownAtOpen",
                "cancels a call for an unknown or disabled tool at its opening, not at its validation",
            ),
            (
                "keep-calls-across-catalog-change",
                "KeepCallsAcrossCatalogChange",
                "a catalog change stops no call; each validates against the catalog as it stands",
            ),
            ("spec-words", "SpecWords", "ledger and status in the spec's words: inert / await confirmation / reject"),
            ("declared-words", "DeclaredWords", "ledger and status in its own words, declared as record_words"),
            (
                "preparing-after-retry",
                "PreparingAfterRetry",
                "shows preparing for a new call of a turn that was offered a retry",
            ),
        )
    ),
]


def registry() -> list[Mutant]:
    """The registered mutants, in order."""
    return list(MUTANTS)


def correct_variants() -> list[Mutant]:
    """The registered correct variants, in order."""
    return list(CORRECT_VARIANTS)
