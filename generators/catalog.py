"""The named scenarios: awkward event orders from the spec and from public bug reports.

Why a catalog next to the exhaustive and coverage generators: those find what the model
says is reachable; these are the orders people actually shipped bugs for, written as the
story they tell, each with the spec sentence or the public report it comes from
(``source``), the verdicts its author expects (``trace.verdicts``, checked against the
oracle by ``tests/test_generators_catalog.py``), and the capabilities a target needs for
it to apply (derived from the trace by :func:`~callsafe.generators.needs.needed_capabilities`).

Every scenario is plain data: ``scenario.trace.dumps()`` is the JSON a person can read,
edit and replay with ``callsafe replay``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from callsafe.generators.needs import needed_capabilities
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Limits, ToolSpec, Trace

__all__ = ["CATALOG", "Scenario", "by_name", "scenarios"]


@dataclass(frozen=True)
class Scenario:
    """One named scenario: where it comes from, its trace, and what a target needs."""

    name: str
    source: str
    trace: Trace
    origin: str  # "spec" (the spec's fixtures and acceptance checks) or "bug" (a public report)

    @property
    def needs(self) -> frozenset[str]:
        return needed_capabilities(self.trace)


# --------------------------------------------------------------------------------------
# Tools the scenarios use
# --------------------------------------------------------------------------------------

BOOK: Final = {
    "type": "object",
    "required": ["day", "time"],
    "properties": {"day": {"type": "string"}, "time": {"type": "string"}},
}
PAY: Final = {
    "type": "object",
    "required": ["amount"],
    "properties": {"amount": {"type": "number"}, "to": {"type": "string"}, "card": {"type": "string"}},
}
LOOKUP: Final = {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}}
WRITE: Final = {
    "type": "object",
    "required": ["path", "content"],
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
}


def _tools(**extra: ToolSpec) -> dict[str, ToolSpec]:
    tools = {
        "book_slot": ToolSpec(schema=BOOK),
        "pay": ToolSpec(schema=PAY, business={"max": {"amount": 500}}),
        "lookup": ToolSpec(schema=LOOKUP),
        "write_file": ToolSpec(schema=WRITE),
    }
    tools.update(extra)
    return tools


def _b(**extra: ToolSpec) -> TraceBuilder:
    return TraceBuilder(tools=_tools(**extra))


def _plain() -> TraceBuilder:
    """Tools without business rules, for scenarios that should not need a business validator."""
    return TraceBuilder(
        tools={"book_slot": ToolSpec(schema=BOOK), "lookup": ToolSpec(schema=LOOKUP), "pay": ToolSpec(schema=PAY)}
    )


_CONFIRMED_PAY: Final = ToolSpec(schema=PAY, confirm=True)

_REGISTRY: list[Scenario] = []


_Build = Callable[[], tuple[TraceBuilder, Mapping[str, Any]]]


def _scenario(name: str, source: str, origin: str = "spec") -> Callable[[_Build], _Build]:
    """Register the scenario a function builds: ``(builder, expected verdicts)``."""

    def register(build: _Build) -> _Build:
        builder, verdicts = build()
        trace = dataclasses.replace(builder.build(), name=name, source=source, verdicts=dict(verdicts))
        _REGISTRY.append(Scenario(name, source, trace, origin))
        return build

    return register


def _yes(arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"execute": True} if arguments is None else {"execute": True, "arguments": dict(arguments)}


def _may(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call the spec's readings differ on (a repeated position: "reject or reassemble by
    its documented position"): it may run, and if it runs, with exactly ``arguments``."""
    return {"execute": "may", "arguments": dict(arguments)}


def _no(reason: str) -> dict[str, Any]:
    return {"execute": False, "reason": reason}


# --------------------------------------------------------------------------------------
# From the spec: "Fixtures should cover two calls interleaved, duplicate deltas, terminal
# before a missing fragment, malformed JSON, cancellation before terminal, reconnection
# replay, a tool renamed mid-release, and a new user turn while old fragments arrive."
# --------------------------------------------------------------------------------------


@_scenario(
    "two-calls-interleaved",
    "spec: Fixtures should cover two calls interleaved. Never concatenate all argument deltas into a single "
    "response-wide string.",
)
def _two_calls_interleaved() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "book_slot")
        .open("b", "pay")
        .fragment("a", '{"day":')
        .fragment("b", '{"amount":')
        .fragment("a", '"Tue","time":"09:00"}')
        .fragment("b", "100}")
        .terminal("b")
        .terminal("a")
    )
    return b, {"t1/a": _yes({"day": "Tue", "time": "09:00"}), "t1/b": _yes({"amount": 100})}


@_scenario(
    "duplicate-deltas",
    "spec: A repeated delta is a delivery condition, not evidence that the user requested the action twice.",
)
def _duplicate_deltas() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":10')
        .fragment("a", "0")
        .fragment("a", "0", position=1)
        .fragment("a", "}")
        .terminal("a")
    )
    return b, {"t1/a": _may({"amount": 100})}


@_scenario(
    "terminal-before-missing-fragment",
    "spec: Fixtures should cover ... terminal before a missing fragment.",
)
def _terminal_before_missing_fragment() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue",')
        .terminal("a")
        .fragment("a", '"time":"10:00"}', position=1)
    )
    return b, {"t1/a": _no("malformed")}


@_scenario("malformed-json", "spec: Fixtures should cover ... malformed JSON. Parse the assembled arguments once.")
def _malformed_json() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "book_slot", '{"day":"Tue",', '"time":"10:00"')
    return b, {"t1/a": _no("malformed")}


@_scenario(
    "cancel-before-terminal",
    'spec: fragments for book_slot arrive as {"day":"Tue" and later ,"time":"10:00"}; it must not '
    "reserve anything after the first fragment. Fixtures should cover ... cancellation before terminal.",
)
def _cancel_before_terminal() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t8")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue"')
        .cancel()
        .fragment("a", ',"time":"10:00"}')
        .terminal("a")
    )
    return b, {"t8/a": _no("cancelled")}


@_scenario(
    "late-delta-completes-payment-after-stop",
    "spec: Counterexample: a user says stop, then a delayed final delta completes a payment call. A late terminal "
    "event for a cancelled turn must be rejected by turn ownership, not revived because its JSON happens to parse.",
)
def _late_delta_after_stop() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":').cancel().fragment("a", "250}").terminal("a")
    return b, {"t1/a": _no("cancelled")}


@_scenario(
    "reconnection-replay",
    "spec: Persist the terminal event ID so reconnect delivery cannot dispatch it twice.",
)
def _reconnection_replay() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":', "42}").replay()
    return b, {"t1/a": _yes({"amount": 42})}


@_scenario(
    "reconnection-replay-mid-call",
    "spec: Fixtures should cover ... reconnection replay. A repeated delta is a delivery condition.",
)
def _replay_mid_call() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "lookup").fragment("a", '{"q":"op')
    b.replay(0, 3).fragment("a", 'en hours"}').terminal("a")
    return b, {"t1/a": _may({"q": "open hours"})}


@_scenario(
    "reconnect-after-restart-replays-executed-call",
    "spec: Persist the terminal event ID so reconnect delivery cannot dispatch it twice.",
)
def _restart_then_replay() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":7}')
    b.restart().replay(0, 4)
    return b, {"t1/a": _yes({"amount": 7})}


@_scenario(
    "tool-renamed-mid-release",
    "spec: Fixtures should cover ... a tool renamed mid-release. Validate each call against its own tool declaration.",
)
def _tool_renamed() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue","time":"1"}')
        .rename_tool("book_slot", "reserve_slot")
        .terminal("a")
        .call("b", "book_slot", '{"day":"Tue","time":"1"}')
        .call("c", "reserve_slot", '{"day":"Wed","time":"2"}')
    )
    return b, {"t1/a": _no("changed"), "t1/b": _no("unknown"), "t1/c": _yes({"day": "Wed", "time": "2"})}


@_scenario(
    "new-turn-while-old-fragments-arrive",
    "spec: Fixtures should cover ... a new user turn while old fragments arrive. Assert that an old tuple cannot "
    "affect a newer turn.",
)
def _new_turn_old_fragments() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":')
    b.turn("t2").open("a", "pay").fragment("a", '{"amount":2}')
    b.at("a", turn="t1", response="r-t1", item="i-a").fragment("a", "1}", position=1).terminal("a")
    b.at("a", turn="t2", response="r-t2", item="i-a").terminal("a")
    return b, {"t1/a": _no("superseded"), "t2/a": _yes({"amount": 2})}


# --------------------------------------------------------------------------------------
# From the spec's operator section: "Acceptance checks include an emergency stop during
# collecting and during terminal validation ... Inspect the quarantine audit after restart."
# --------------------------------------------------------------------------------------


@_scenario(
    "emergency-stop-during-collecting",
    "spec: an emergency stop during collecting: no executor receives the call, and a subsequent new turn starts "
    "with a fresh call identity rather than inheriting partial arguments.",
)
def _stop_collecting() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t8")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .stop_tenant()
        .fragment("a", "100}")
        .terminal("a")
        .turn("t9")
        .open("a", "pay")
        .fragment("a", '{"amount":7}')
        .terminal("a")
    )
    return b, {"t8/a": _no("tenant stopped"), "t9/a": _yes({"amount": 7})}


@_scenario(
    "emergency-stop-during-validation",
    "spec: an emergency stop ... during terminal validation: no executor receives the call.",
)
def _stop_validation() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t8").call("a", "pay", '{"amount":100}').stop_tenant(during_validation=True)
    return b, {"t8/a": _no("tenant stopped")}


@_scenario(
    "cancel-during-validation",
    "spec: The dispatcher must additionally check the current turn's cancellation and confirmation state at "
    "execution time.",
)
def _cancel_validation() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":60}').cancel(during_validation=True)
    return b, {"t1/a": _no("cancelled")}


@_scenario(
    "new-turn-during-validation",
    "spec: bind them to the active turn; an old tuple cannot affect a newer turn.",
)
def _turn_validation() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":60}').turn("t2", during_validation=True)
    return b, {"t1/a": _no("superseded")}


@_scenario(
    "quarantine-during-validation",
    "spec: Expose a bounded operator control that can quarantine a response.",
)
def _quarantine_validation() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":60}').quarantine(during_validation=True)
    return b, {"t1/a": _no("quarantined")}


@_scenario(
    "quarantine-across-restart",
    "spec: Inspect the quarantine audit after restart: buffers must stay terminal, never become candidates because "
    "an adapter reconnects.",
)
def _quarantine_restart() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":3}').quarantine()
    b.restart().replay(0, 3).terminal("a").open("b", "pay").fragment("b", '{"amount":4}').terminal("b")
    return b, {"t1/a": _no("quarantined"), "t1/b": _no("stopped")}


@_scenario(
    "disable-tool-mid-call",
    "spec: Expose a bounded operator control that can ... disable a named tool.",
)
def _disable_tool() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .disable_tool("pay")
        .fragment("a", "9}")
        .terminal("a")
        .call("b", "lookup", '{"q":"still fine"}')
    )
    return b, {"t1/a": _no("tool disabled"), "t1/b": _yes({"q": "still fine"})}


@_scenario(
    "tenant-isolation",
    "spec: force all in-flight buffers for a tenant into inert cancellation (and only that tenant's).",
)
def _tenant_isolation() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1", actor="u1", tenant="acme").open("a", "pay").fragment("a", '{"amount":5}')
    b.turn("t2", actor="v1", tenant="globex", conversation="other").open("b", "pay").fragment("b", '{"amount":6}')
    b.stop_tenant("acme").at("a", turn="t1", response="r-t1", item="i-a").terminal("a")
    b.at("b", turn="t2", response="r-t2", item="i-b").terminal("b")
    return b, {"t1/a": _no("tenant stopped"), "t2/b": _yes({"amount": 6})}


@_scenario(
    "restart-fails-unfinished-call",
    "spec: buffers must stay terminal, never become candidates because an adapter reconnects.",
)
def _restart_unfinished() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":3}').restart().replay(0, 3).terminal("a")
    return b, {"t1/a": _no("restart")}


@_scenario(
    "disconnect-mid-call",
    "spec: Cancellation, supersession, connection loss ... all move the buffer to a non-dispatching terminal state.",
)
def _disconnect() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":"x"}').disconnect().terminal("a")
    return b, {"t1/a": _no("connection lost")}


@_scenario(
    "response-ends-without-call-terminal",
    "spec: fragments must remain inert until the adapter knows that one call has ended under its protocol.",
)
def _response_ends() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":"x"}').response_end()
    return b, {"t1/a": _no("response ended")}


@_scenario(
    "open-after-response-ended",
    "spec: Key each buffer by the response or turn identity; fragments must remain inert.",
)
def _open_after_end() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").response_end().call("a", "lookup", '{"q":"late"}')
    return b, {"t1/a": _no("stopped")}


@_scenario(
    "no-terminal-no-execution",
    "spec: A terminal event permits parsing; fragments must remain inert until one call has ended.",
)
def _no_terminal() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":"x"}')
    return b, {"t1/a": _no("never ended")}


# --------------------------------------------------------------------------------------
# Confirmation: "Only the completed, validated proposal can request a confirmation."
# --------------------------------------------------------------------------------------


@_scenario(
    "confirm-then-execute",
    "spec: pass them through the existing permission and confirmation boundary. Only the completed, validated "
    "proposal can request a confirmation.",
)
def _confirm() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t1").call("a", "transfer", '{"amount":', "5}").confirm("a")
    return b, {"t1/a": _yes({"amount": 5})}


@_scenario(
    "awaiting-confirmation",
    "spec: turn-8/call-a validated, completed, await confirmation.",
)
def _awaiting() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t8").call("a", "transfer", '{"amount":5}')
    return b, {"t8/a": _no("awaiting confirmation")}


@_scenario("deny-confirmation", "spec: pass them through the existing permission and confirmation boundary.")
def _deny() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t1").call("a", "transfer", '{"amount":5}').deny("a").confirm("a")
    return b, {"t1/a": _no("denied")}


@_scenario(
    "cancel-before-confirm",
    "spec: The dispatcher must additionally check the current turn's cancellation and confirmation state at "
    "execution time.",
)
def _cancel_before_confirm() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t1").call("a", "transfer", '{"amount":5}').cancel().confirm("a")
    return b, {"t1/a": _no("cancelled")}


@_scenario(
    "restart-while-awaiting-confirmation",
    "spec: buffers must stay terminal, never become candidates because an adapter reconnects.",
)
def _restart_awaiting() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t1").call("a", "transfer", '{"amount":5}').restart().confirm("a")
    return b, {"t1/a": _no("restart")}


@_scenario(
    "confirm-before-terminal",
    "spec: Only the completed, validated proposal can request a confirmation.",
)
def _confirm_early() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b(transfer=_CONFIRMED_PAY).turn("t1").open("a", "transfer").fragment("a", '{"amount":5}').confirm("a")
    b.terminal("a")
    return b, {"t1/a": _no("awaiting confirmation")}


@_scenario(
    "permission-denied",
    "spec: bind them to the active turn and authenticated actor, and pass them through the existing permission "
    "boundary.",
)
def _permission() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b(admin_pay=ToolSpec(schema=PAY, actors=("admin",)))
        .turn("t1", actor="u1")
        .call("a", "admin_pay", '{"amount":1}')
    )
    b.turn("t2", actor="admin").call("b", "admin_pay", '{"amount":2}')
    return b, {"t1/a": _no("refused at execution time"), "t2/b": _yes({"amount": 2})}


# --------------------------------------------------------------------------------------
# Validation per call
# --------------------------------------------------------------------------------------


@_scenario(
    "validate-per-call",
    "spec: Validate each call against its own tool declaration, sequence, size allowance, and policy. Each final "
    "call is schema- and business-validated exactly once.",
)
def _validate_per_call() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .call("a", "pay", '{"amount":"ten"}')
        .call("b", "pay", '{"amount":900}')
        .call("c", "pay", '{"amount":50}')
    )
    return b, {"t1/a": _no("schema"), "t1/b": _no("business"), "t1/c": _yes({"amount": 50})}


@_scenario("unknown-tool", "spec: malformed data, unknown tool name, and size limit all move the buffer to failed.")
def _unknown_tool() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").call("a", "delete_everything", "{}")
    return b, {"t1/a": _no("unknown")}


@_scenario(
    "schema-changed-mid-call",
    "spec: Validate each call against its own tool declaration (a catalog change mid-release stops the call).",
)
def _schema_changed() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "lookup").fragment("a", '{"q":')
    b.change_schema("lookup", {"type": "object", "required": ["query"]}).fragment("a", '"x"}').terminal("a")
    b.call("b", "lookup", '{"query":"y"}')
    return b, {"t1/a": _no("changed"), "t1/b": _yes({"query": "y"})}


@_scenario(
    "text-interleaved-with-arguments",
    "spec: Keep text output and tool arguments separate even when they arrive interleaved.",
)
def _text_interleaved() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":')
        .text("Paying now, ")
        .fragment("a", "12}")
        .text('{"amount":999}')
        .terminal("a")
    )
    return b, {"t1/a": _yes({"amount": 12})}


@_scenario("stop-after-execution-is-harmless", "spec: every cancellation prevents dispatch (of what has not run).")
def _stop_after() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":1}').stop_tenant().cancel()
    return b, {"t1/a": _yes({"amount": 1})}


@_scenario("replay-after-cancel", "spec: every cancellation prevents dispatch; nothing revives it.")
def _replay_after_cancel() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":1}').cancel().replay(0, 3).terminal("a")
    return b, {"t1/a": _no("cancelled")}


@_scenario(
    "conflicting-repeat",
    "spec: Append only fragments from that exact tuple; a buffer has a received-event sequence.",
)
def _conflict() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", '{"amount":1')
        .fragment("a", '{"amount":9', position=0)
        .fragment("a", "0}")
        .terminal("a")
    )
    return b, {"t1/a": _no("conflicting")}


@_scenario(
    "gap-in-positions",
    "spec: reject or reassemble by its documented position rather than guessing from arrival time.",
)
def _gap() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":', position=0).fragment("a", '"x"}', position=2)
    b.terminal("a")
    return b, {"t1/a": _no("missing fragment")}


@_scenario(
    "out-of-order-positions",
    "spec: If ordering is not guaranteed by a protocol, reject or reassemble by its documented position rather than "
    "guessing from arrival time.",
)
def _out_of_order() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _b()
        .turn("t1")
        .open("a", "pay")
        .fragment("a", "100}", position=1)
        .fragment("a", '{"amount":', position=0)
        .terminal("a")
    )
    return b, {"t1/a": {"execute": "may", "arguments": {"amount": 100}}}


@_scenario(
    "fragment-for-unopened-call",
    "spec: Append only fragments from that exact tuple (data for a call never announced is not a call).",
)
def _unopened() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").at("a").fragment("a", '{"q":"x"}').open("a", "lookup").terminal("a")
    return b, {"t1/a": _no("never opened")}


@_scenario(
    "content-filter-stop",
    "spec: fragments must remain inert until the adapter knows that one call has ended under its protocol.",
)
def _content_filter() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").call("a", "lookup", '{"q":"x"}', reason="content_filter")
    return b, {"t1/a": _no("content_filter")}


@_scenario(
    "byte-cap-per-call",
    "spec: A buffer should have a byte limit. Size limit moves the buffer to a non-dispatching terminal state.",
)
def _byte_cap() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = TraceBuilder(tools={"lookup": ToolSpec(schema=LOOKUP)}, limits=Limits(call_bytes=24, turn_bytes=64))
    b.turn("t1").call("a", "lookup", '{"q":"', "x" * 40, '"}').call("b", "lookup", '{"q":"small"}')
    return b, {"t1/a": _no("byte limit"), "t1/b": _yes({"q": "small"})}


@_scenario(
    "flood-over-turn-cap",
    "spec: Validate each call against its own ... size allowance (a flood of parallel calls, each under the per-call "
    "cap, must not bypass the per-turn cap).",
)
def _flood() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = TraceBuilder(tools={"lookup": ToolSpec(schema=LOOKUP)}, limits=Limits(call_bytes=20, turn_bytes=40)).turn("t1")
    names = "abcdef"
    for name in names:
        b.open(name, "lookup", item="0")
    for name in names:
        b.fragment(name, '{"q":"123456789"}')  # 17 bytes each
    for name in names:
        b.terminal(name)
    verdicts = {f"t1/{n}": (_yes({"q": "123456789"}) if i < 2 else _no("byte limit")) for i, n in enumerate(names)}
    return b, verdicts


# --------------------------------------------------------------------------------------
# INV-LEDGER: argument values never appear in ledger, audit or log lines
# --------------------------------------------------------------------------------------


@_scenario(
    "secret-in-arguments",
    "spec: distinguish a malformed stream from a permission rejection without retaining sensitive argument values "
    "in broad logs.",
)
def _secret() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":5,"card":"4111-1111-', '1111-1111","to":"Alice Liddell"}')
    return b, {"t1/a": _yes({"amount": 5, "card": "4111-1111-1111-1111", "to": "Alice Liddell"})}


@_scenario(
    "secret-in-rejected-call",
    "spec: The control must not itself re-run the fragment or reveal arguments to a broad audience.",
)
def _secret_rejected() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":9000,"card":"5500-0000-0000-0004"}')
    b.open("b", "pay").fragment("b", '{"amount":5,"card":"3782-822463-10005"}').quarantine().terminal("b")
    return b, {"t1/a": _no("business"), "t1/b": _no("quarantined")}


# --------------------------------------------------------------------------------------
# From public bug reports
# --------------------------------------------------------------------------------------


@_scenario(
    "index-collision-distinct-ids",
    "bug: parallel tool calls that share one stream index (item) but have distinct call ids were merged into one "
    'call, e.g. arguments {"query": "Emma Bull"}{"query": "Virginia Woolf"} (huggingface/smolagents#1958, '
    "langchain-ai/langchain#34811, mcowger/plexus#691).",
    "bug",
)
def _index_collision() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _plain()
        .turn("t1")
        .open("a", "lookup", item="0")
        .open("b", "lookup", item="0")
        .open("c", "lookup", item="0")
        .fragment("a", '{"q":"Emma ')
        .fragment("b", '{"q":"Virginia ')
        .fragment("a", 'Bull"}')
        .fragment("c", '{"q":"Ursula K. Le Guin"}')
        .fragment("b", 'Woolf"}')
        .terminal("c")
        .terminal("a")
        .terminal("b")
    )
    return b, {
        "t1/a": _yes({"q": "Emma Bull"}),
        "t1/b": _yes({"q": "Virginia Woolf"}),
        "t1/c": _yes({"q": "Ursula K. Le Guin"}),
    }


@_scenario(
    "glued-calls-in-one-buffer",
    "bug: a call whose buffer holds two JSON objects glued as }{ must fail, never be split or repaired "
    '(google/adk-python#1038: \'{"project_id": 3}{"project_id": 9}\'; simonw/llm#1130: "Extra data").',
    "bug",
)
def _glued() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").call("a", "lookup", '{"q":"Emma Bull"}', '{"q":"Virginia Woolf"}')
    return b, {"t1/a": _no("malformed")}


@_scenario(
    "repeated-name-fragments",
    "bug: some providers resend the tool name in every streamed chunk and clients concatenated it into "
    "read_fileread_file (NousResearch/hermes-agent#8259, maximhq/bifrost#1829): a repeated announcement of the "
    "same call is a delivery condition.",
    "bug",
)
def _repeated_name() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":').open("a", "lookup")
    b.fragment("a", '"x"}', position=1).open("a", "lookup").terminal("a")
    return b, {"t1/a": _yes({"q": "x"})}


@_scenario(
    "call-reannounced-with-another-tool",
    "bug: an interleaved delta re-announced a call id with another tool name, so the call ran under the wrong name "
    "(maximhq/bifrost#1829, su-kaka/gcli2api#406): a call's id and name are set once.",
    "bug",
)
def _reannounced() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "lookup").fragment("a", '{"q":"x",')
    b.open("a", "pay").fragment("a", '"amount":5}', position=1).terminal("a")
    return b, {"t1/a": _no("another tool")}


@_scenario(
    "truncated-number-at-max-tokens",
    "bug: a call cut off at max_tokens executed with truncated arguments that still parse, e.g. amount 10 for "
    "100 (ahwurm/localharness#77, vllm-project/vllm#46303): a length stop reason fails the call.",
    "bug",
)
def _truncated_number() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":10').fragment("a", "}").terminal("a", "length")
    return b, {"t1/a": _no("length")}


@_scenario(
    "truncated-json-reported-as-completed",
    "bug: routers rewrote finish_reason length to tool_calls, so a cut-off call arrived as 'completed' with "
    "unterminated JSON (MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#55, NousResearch/hermes-agent#7693).",
    "bug",
)
def _truncated_completed() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "write_file", '{"path":"README.md",', '"content":"# Title\\n\\nSection 1')
    return b, {"t1/a": _no("malformed")}


@_scenario(
    "second-response-start",
    "bug: a second message_start with a new message id arrived while the first message was still open, and the "
    "parser merged both generations into one; the cut-off tool_use block of the first never ended "
    "(vercel/ai#18331).",
    "bug",
)
def _second_response() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1", response="m1").open("a1", "pay", item="0").fragment("a1", '{"amount":1')
    b.response("m2").open("a2", "pay", item="0").fragment("a2", '{"amount":')
    b.fragment("a2", "2}").terminal("a2").response_end(response="m2")
    return b, {"t1/a1": _no("never ended"), "t1/a2": _yes({"amount": 2})}


@_scenario(
    "multibyte-characters-split-across-fragments",
    "bug: multi-byte characters split across stream chunks were decoded as U+FFFD "
    "(braintrustdata/braintrust-sdk-javascript#2091, danielmiessler/Fabric#2203, kekzl/imp#1667); here fragment "
    "boundaries fall inside strings with é, € and an emoji, and inside a \\u escape.",
    "bug",
)
def _multibyte() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = (
        _plain()
        .turn("t1")
        .call("a", "lookup", '{"q":"Malm', "ö café ", "€5 ", '😀"}')
        .call("b", "lookup", '{"q":"caf\\u00', 'e9"}')
    )
    return b, {"t1/a": _yes({"q": "Malmö café €5 😀"}), "t1/b": _yes({"q": "café"})}


@_scenario(
    "surrogate-pair-split-across-fragments",
    "bug: an emoji sent as a JSON surrogate-pair escape split between chunks (kekzl/imp#1667): the two halves "
    "belong together; a half that never gets its partner is a reading the spec leaves open (refused as "
    "malformed, or the code point it names: RFC 8259 section 8.2), never anything else.",
    "bug",
)
def _surrogates() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").call("a", "lookup", '{"q":"\\ud83d', '\\ude00"}').call("b", "lookup", '{"q":"\\ud83d', '"}')
    return b, {"t1/a": _yes({"q": "😀"}), "t1/b": {"execute": "may", "arguments": {"q": "\ud83d"}}}


@_scenario(
    "finish-reason-repeated",
    "bug: a finish_reason sent on more than one chunk (RayBytes/ChatMock#114, sgl-project/sglang#8417): the "
    "same terminal event delivered again is a delivery condition, not a second call.",
    "bug",
)
def _finish_repeated() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").call("a", "pay", '{"amount":', "3}")
    b.terminal("a").terminal("a").terminal("a", event_id="other-finish")
    return b, {"t1/a": _yes({"amount": 3})}


@_scenario(
    "finish-reason-on-every-chunk",
    "bug: finish_reason set on intermediate tool-call chunks made clients end the call early "
    "(BerriAI/litellm#31634, BerriAI/litellm#27139): a terminal before the last fragment ends the call, and "
    "the fragments after it must not revive it.",
    "bug",
)
def _finish_every_chunk() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _b().turn("t1").open("a", "pay").fragment("a", '{"amount":').terminal("a", event_id="f1")
    b.fragment("a", "3}").terminal("a", event_id="f2")
    return b, {"t1/a": _no("malformed")}


@_scenario(
    "arguments-duplicated-on-final-chunk",
    "bug: the client appended the complete arguments sent again on the final chunk, producing "
    '\'{"x": 3, "y": 2}{"x": 3, "y": 2}\' (simonw/llm#1130): the final chunk repeats a position already received.',
    "bug",
)
def _duplicated_final() -> tuple[TraceBuilder, Mapping[str, Any]]:
    b = _plain().turn("t1").open("a", "lookup").fragment("a", '{"q":"x"}').fragment("a", '{"q":"x"}', position=0)
    b.terminal("a")
    return b, {"t1/a": _may({"q": "x"})}


CATALOG: Final[tuple[Scenario, ...]] = tuple(_REGISTRY)


def scenarios(origin: str | None = None) -> Iterator[Scenario]:
    """The catalog in a stable order, optionally only ``spec`` or ``bug`` scenarios."""
    return (s for s in CATALOG if origin is None or s.origin == origin)


def by_name(name: str) -> Scenario:
    """One scenario by its name (``KeyError`` names the known ones)."""
    for s in CATALOG:
        if s.name == name:
            return s
    raise KeyError(f"no scenario {name!r}; known: {', '.join(s.name for s in CATALOG)}")
