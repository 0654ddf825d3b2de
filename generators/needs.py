"""Which target capabilities a trace needs, read from the trace itself.

Why here and not in the harness: every generator produces plain traces, and a trace that
exercises a cancel, an operator control or a restart cannot be judged fairly against a
target that declares it has no such thing: the harness reports it "not applicable", never
"passed". Deriving the needs from the events (rather than asking each generator to
declare them) means a hand-edited or minimised trace gets the right needs too.

The names are those of :data:`callsafe.contract.target.CAPABILITIES` (generators must
not import the harness, so the names are repeated here; a test keeps them in step).
"""

from __future__ import annotations

from typing import Final

from callsafe.model.vocabulary import (
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    QuarantineResponse,
    Restart,
    StopTenant,
    StoreFault,
    ToolChanged,
    Trace,
    TurnStarted,
)

__all__ = ["CAPABILITY_NAMES", "needed_capabilities"]

CAPABILITY_NAMES: Final = frozenset(
    {
        "cancellation",
        "operator_controls",
        "confirmation",
        "restart",
        "ledger",
        "status",
        "business_validation",
        "store_faults",
        "catalog_changes",
        "turn_binding",
    }
)


def needed_capabilities(trace: Trace) -> frozenset[str]:
    """The capabilities a target must declare for ``trace`` to apply to it.

    * a cancel, a disconnect, or a second turn in a conversation (supersession):
      ``cancellation``;
    * a quarantine, a disabled tool, a tenant stop: ``operator_controls``;
    * a confirm event, or a tool that needs confirmation: ``confirmation``;
    * a restart: ``restart``; a catalog change: ``catalog_changes``;
    * an event delivered during validation, or a tool with business rules (the harness's
      validator enforces them): ``business_validation``;
    * a tool restricted to some actors, or turns bound to different actors or tenants:
      ``turn_binding``.
    """
    needs: set[str] = set()
    conversations: set[str] = set()
    turns: set[str] = set()
    bindings: set[tuple[str, str]] = set()
    for event in trace.events:
        if isinstance(event, (CancelTurn, Disconnect)):
            needs.add("cancellation")
        elif isinstance(event, (QuarantineResponse, DisableTool, StopTenant)):
            needs.add("operator_controls")
        elif isinstance(event, Confirm):
            needs.add("confirmation")
        elif isinstance(event, Restart):
            needs.add("restart")
        elif isinstance(event, StoreFault):
            needs.add("store_faults")
        elif isinstance(event, ToolChanged):
            needs.add("catalog_changes")
        elif isinstance(event, TurnStarted) and event.turn not in turns:
            if event.conversation in conversations:
                needs.add("cancellation")  # a new turn supersedes the conversation's last one
            conversations.add(event.conversation)
            turns.add(event.turn)
            bindings.add((event.actor, event.tenant))
        if getattr(event, "during_validation", False):
            needs.add("business_validation")
    for spec in trace.tools.values():
        if spec.confirm:
            needs.add("confirmation")
        if spec.business:
            needs.add("business_validation")
        if spec.actors is not None:
            needs.add("turn_binding")
    if len(bindings) > 1:
        needs.add("turn_binding")
    return frozenset(needs)


# --------------------------------------------------------------------------------------
# Bounded configurations that fit a target: generate only what can apply to it
# --------------------------------------------------------------------------------------

# Model controls (callsafe.formal.abstract.CONTROLS) every target can face: they need no
# capability beyond assembling calls.
_BASIC_CONTROLS: Final = frozenset({"replay", "conflict", "limits", "malformed", "response_end"})
_CONTROLS_BY_CAPABILITY: Final[dict[str, frozenset[str]]] = {
    "cancellation": frozenset({"cancel", "disconnect"}),
    "operator_controls": frozenset({"quarantine", "disable_tool", "stop_tenant"}),
    "confirmation": frozenset({"confirmation"}),
    "restart": frozenset({"restart"}),
    "catalog_changes": frozenset({"catalog_change"}),
    "turn_binding": frozenset({"permission"}),
}


def model_controls(capabilities: frozenset[str]) -> frozenset[str]:
    """The state-graph controls whose traces a target with ``capabilities`` can take."""
    out = set(_BASIC_CONTROLS)
    for capability, controls in _CONTROLS_BY_CAPABILITY.items():
        if capability in capabilities:
            out |= controls
    return frozenset(out)


def exhaustive_controls(capabilities: frozenset[str]) -> frozenset[str]:
    """The exhaustive generator's controls for a target (a common subset: each control
    multiplies the number of traces)."""
    out = {"replay", "malformed"}
    if "cancellation" in capabilities:
        out.add("cancel")
    if "restart" in capabilities:
        out.add("restart")
    if "confirmation" in capabilities:
        out.add("confirmation")
    if "operator_controls" in capabilities:
        out.add("stop_tenant")
        if "business_validation" in capabilities:
            out.add("during_validation")
    return frozenset(out)
