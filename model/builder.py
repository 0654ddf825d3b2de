"""A small builder for traces, so scenarios read like the story they tell.

    trace = (
        TraceBuilder(tools={"book_slot": {"type": "object", "required": ["day", "time"]}})
        .turn("t8", actor="u1", tenant="acme")
        .open("a", "book_slot")
        .fragment("a", '{"day":"Tue"')
        .cancel()
        .fragment("a", ',"time":"10:00"}')
        .terminal("a")
        .build()
    )

A call is named once by its call id; the builder remembers its turn, response and item,
and numbers its fragments' positions unless a position is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Confirm,
    DisableTool,
    Disconnect,
    Event,
    Fragment,
    Limits,
    QuarantineResponse,
    Replay,
    ResponseTerminal,
    Restart,
    StopReason,
    StopTenant,
    TextFragment,
    ToolChanged,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = ["TraceBuilder"]


@dataclass
class _Call:
    turn: str
    response: str
    item: str
    next_position: int = 0


class TraceBuilder:
    """Accumulates events; every method returns the builder."""

    def __init__(
        self,
        tools: Mapping[str, Mapping[str, Any] | ToolSpec] | None = None,
        limits: Limits | None = None,
        name: str = "",
        source: str = "",
    ) -> None:
        self.tools: dict[str, ToolSpec] = {}
        for tool, decl in (tools or {}).items():
            self.tools[tool] = decl if isinstance(decl, ToolSpec) else ToolSpec(schema=dict(decl))
        self.limits = limits or Limits()
        self.name = name
        self.source = source
        self.events: list[Event] = []
        self.calls: dict[str, _Call] = {}
        self.current_turn = ""
        self.current_response = "r1"
        self.tenants: dict[str, str] = {}

    def tool(self, name: str, schema: Mapping[str, Any] | None = None, **options: Any) -> Self:
        """Declare a tool: ``confirm=True``, ``business={...}``, ``actors=(...)``."""
        self.tools[name] = ToolSpec(schema=dict(schema or {"type": "object"}), **options)
        return self

    def add(self, event: Event) -> Self:
        self.events.append(event)
        return self

    # -- turns and responses ----------------------------------------------------------

    def turn(
        self,
        turn: str,
        actor: str = "u1",
        tenant: str = "acme",
        conversation: str = "main",
        traceparent: str | None = None,
        response: str | None = None,
        during_validation: bool = False,
    ) -> Self:
        self.current_turn = turn
        self.current_response = response or f"r-{turn}"
        self.tenants[turn] = tenant
        return self.add(TurnStarted(turn, actor, tenant, conversation, traceparent, during_validation))

    def response(self, response: str) -> Self:
        """Later calls open in this response."""
        self.current_response = response
        return self

    # -- calls ------------------------------------------------------------------------

    def _where(self, call: str) -> _Call:
        if call not in self.calls:
            raise KeyError(f"call {call!r} was never opened in this builder; use open() or at()")
        return self.calls[call]

    def at(self, call: str, turn: str | None = None, response: str | None = None, item: str | None = None) -> Self:
        """Name a call's identity without emitting an event (for data about unopened calls)."""
        self.calls[call] = _Call(turn or self.current_turn, response or self.current_response, item or f"i-{call}")
        return self

    def open(
        self, call: str, tool: str, turn: str | None = None, response: str | None = None, item: str | None = None
    ) -> Self:
        self.at(call, turn, response, item)  # an open binds the call id to the current turn
        c = self.calls[call]
        return self.add(CallOpened(c.turn, c.response, c.item, call, tool))

    def fragment(self, call: str, text: str, position: int | None = None) -> Self:
        c = self._where(call)
        pos = c.next_position if position is None else position
        c.next_position = max(c.next_position, pos + 1)
        return self.add(Fragment(c.turn, c.response, c.item, call, pos, text))

    def fragments(self, call: str, *texts: str) -> Self:
        for text in texts:
            self.fragment(call, text)
        return self

    def terminal(self, call: str, reason: StopReason = "completed", event_id: str | None = None) -> Self:
        c = self._where(call)
        return self.add(CallTerminal(c.turn, c.response, c.item, call, event_id or f"done-{c.turn}-{call}", reason))

    def call(self, call: str, tool: str, *texts: str, reason: StopReason = "completed") -> Self:
        """Open, fragments in order, terminal: a well-formed call."""
        return self.open(call, tool).fragments(call, *texts).terminal(call, reason)

    def text(self, text: str, turn: str | None = None, response: str | None = None, item: str = "msg") -> Self:
        return self.add(TextFragment(turn or self.current_turn, response or self.current_response, item, text))

    def confirm(self, call: str, approved: bool = True) -> Self:
        c = self._where(call)
        return self.add(Confirm(c.turn, c.response, c.item, call, approved))

    def deny(self, call: str) -> Self:
        return self.confirm(call, approved=False)

    # -- stops and controls -----------------------------------------------------------

    def response_end(
        self, reason: StopReason = "completed", turn: str | None = None, response: str | None = None
    ) -> Self:
        return self.add(ResponseTerminal(turn or self.current_turn, response or self.current_response, reason))

    def cancel(self, turn: str | None = None, during_validation: bool = False) -> Self:
        return self.add(CancelTurn(turn or self.current_turn, during_validation))

    def disconnect(self, turn: str | None = None, response: str | None = None, during_validation: bool = False) -> Self:
        return self.add(Disconnect(turn or self.current_turn, response or self.current_response, during_validation))

    def quarantine(
        self, response: str | None = None, reason: str = "operator", during_validation: bool = False
    ) -> Self:
        return self.add(QuarantineResponse(response or self.current_response, reason, during_validation))

    def disable_tool(self, tool: str, reason: str = "operator", during_validation: bool = False) -> Self:
        return self.add(DisableTool(tool, reason, during_validation))

    def stop_tenant(self, tenant: str | None = None, reason: str = "operator", during_validation: bool = False) -> Self:
        return self.add(StopTenant(tenant or self.tenants.get(self.current_turn, "acme"), reason, during_validation))

    def rename_tool(self, tool: str, new_name: str, during_validation: bool = False) -> Self:
        return self.add(ToolChanged(tool, "rename", new_name, None, during_validation))

    def remove_tool(self, tool: str, during_validation: bool = False) -> Self:
        return self.add(ToolChanged(tool, "remove", None, None, during_validation))

    def change_schema(self, tool: str, schema: Mapping[str, Any], during_validation: bool = False) -> Self:
        return self.add(ToolChanged(tool, "schema", None, dict(schema), during_validation))

    def restart(self) -> Self:
        return self.add(Restart())

    def replay(self, start: int = 0, stop: int | None = None) -> Self:
        """Re-deliver the events ``[start, stop)`` so far (default: all of them)."""
        return self.add(Replay(start, len(self.events) if stop is None else stop))

    def build(self) -> Trace:
        return Trace(
            events=tuple(self.events), tools=dict(self.tools), limits=self.limits, name=self.name, source=self.source
        )
