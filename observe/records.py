"""Production records in the model's vocabulary: input events and observations, in the
order the records put them, each with where it came from.

Why one intermediate form: the three record formats (the guard's store, OpenTelemetry
spans, JSONL logs) hold different subsets of what happened, and the judge must treat them
alike. A reader lists what it read as :class:`Entry` items (an input event, or an
observation whose step the order fixes) and says which *kinds* of record the file holds
(:data:`KINDS`): the judge (:mod:`callsafe.observe.judging`) judges an invariant only
when every kind it reads is there, and says "not judgeable" otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.model.vocabulary import Event, Limits, Observation, ToolSpec
from callsafe.safe_text import printable

__all__ = ["KINDS", "CompletedCall", "Entry", "RecordError", "Records", "shown"]

# What a set of records can hold. "stream": the provider's events for the calls (openings,
# argument fragments, terminal events); "calls": only the calls the model completed, as an
# instrumentation recorded them (no fragments, no terminal events of their own); "turns":
# turn bindings (actor, tenant) and stops; "executions": what reached the executor;
# "arguments": the executed arguments; the rest are the harness's capabilities of the same
# names (the guard's ledger and audit rows, the visible status, confirmation requests,
# business-validator calls).
KINDS: Final = (
    "stream",
    "calls",
    "turns",
    "executions",
    "arguments",
    "ledger",
    "status",
    "confirmation",
    "business_validation",
)


class RecordError(ValueError):
    """A record file cannot be read (not the format, a record of the wrong shape). The
    message is one line with every control character escaped, and names where."""

    def __init__(self, message: str) -> None:
        super().__init__(shown(message, 400))


def shown(text: object, limit: int = 200) -> str:
    """``text`` fit for a terminal or a log line: control, bidirectional and line-separator
    characters escaped, cut to ``limit`` characters."""
    out = printable(str(text), newlines=False)
    return out if len(out) <= limit else out[: limit - 1] + "…"


@dataclass(frozen=True)
class Entry:
    """One record in record order: an input event, or an observation (its ``step`` is
    refixed from the order: the index of the last event before it). ``where`` names the
    record (``line 12``, ``span 5f2c… (execute_tool)``, ``ledger row 7``); ``made`` marks an
    event the records do not hold but the judge assumed (see :mod:`callsafe.observe.judging`)."""

    where: str
    event: Event | None = None
    observation: Observation | None = None
    made: bool = False


@dataclass(frozen=True)
class CompletedCall:
    """A call the model completed, as an instrumentation recorded it (a chat span's tool
    call: its id, tool and arguments, no fragments). ``index``: the number of entries read
    before it, where it goes when nothing ran it."""

    tenant: str
    actor: str
    tool: str
    arguments: Any
    index: int
    where: str


@dataclass
class Records:
    """What a reader read: the entries in order, the kinds of record present, the tool
    catalog when the records declare one, and notes on what the reader could not use."""

    source: str
    entries: list[Entry] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    tools: Mapping[str, ToolSpec] | None = None
    limits: Limits = field(default_factory=Limits)
    notes: list[str] = field(default_factory=list)
    # (turn, response, item, call) -> the call as an instrumentation recorded it ("calls")
    calls: dict[tuple[str, str, str, str], CompletedCall] = field(default_factory=dict)

    def add_event(self, event: Event, where: str) -> None:
        self.entries.append(Entry(where, event=event))

    def add_observation(self, observation: Observation, where: str) -> None:
        self.entries.append(Entry(where, observation=observation))
