"""``callsafe.guard``: the certified assembler as a library an agent loop runs in production.

Give it the tool catalog, the executor (or none, to get the calls yielded), the business
validator, the limits and a store; hand it the stream objects the OpenAI or Anthropic SDK
gives you (or raw SSE bytes of any protocol callsafe reads), synchronously or with
``async for``; it runs (or yields) only finished, validated, bound, permitted calls, once::

    guard = Guard(tools={"get_weather": schema}, executor=run_tool, store="sqlite:///guard.db", create=True)
    with guard.turn("turn-1", actor="user-7", tenant="acme") as turn:
        for call in turn.stream(client.chat.completions.create(..., stream=True)):
            messages.append(tool_result(call.id, call.result))

See ``docs/guard.md``. The guard is certified by the toolkit like any target:
``callsafe certify guard:sqlite:openai-chat``.

Role: the reference implementation as a library. Imports :mod:`callsafe.reference_impl`,
:mod:`callsafe.providers` and :mod:`callsafe.model`.
"""

from callsafe.guard.errors import (
    ClosedGuard,
    ConfigError,
    GuardError,
    GuardStoreError,
    LimitExceeded,
    StreamError,
    UnknownInput,
    UnknownProtocol,
    UnknownTurn,
)
from callsafe.guard.guard import Executor, Guard, LedgerRecord, StreamReader, ToolCall, Turn, Validator
from callsafe.model.vocabulary import CallKey, Limits, ToolSpec
from callsafe.reference_impl.retention import Retention

__all__ = [
    "CallKey",
    "ClosedGuard",
    "ConfigError",
    "Executor",
    "Guard",
    "GuardError",
    "GuardStoreError",
    "LedgerRecord",
    "LimitExceeded",
    "Limits",
    "Retention",
    "StreamError",
    "StreamReader",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "UnknownInput",
    "UnknownProtocol",
    "UnknownTurn",
    "Validator",
]
