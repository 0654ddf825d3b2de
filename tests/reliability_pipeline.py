"""Hostile bytes, all the way through: SSE bytes of a protocol -> its parser -> the
reference implementation's core, driver and a store; and the check that nothing invalid
ran. Shared by the hypothesis and mutation fuzzers (``tests/test_reliability_fuzz.py``)
and the atheris harness (``tests/atheris_pipeline.py``).

Why a check of its own, beside the model's oracle: the oracle is what certification uses,
but a fuzzer must also hold when the oracle itself cannot judge an input (a model bug is
a finding too, not a reason to stop looking). So :func:`invalid_executions` states
"nothing invalid ran" from the events alone: every execution is of a call whose
completed terminal event was delivered before it, whose fragments were positions
``0..n-1`` each received with one text, whose joined text strict-parses to exactly the
executed arguments, whose tool is declared and whose schema accepts them, for the actor
its turn is bound to.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
from capture_files import FOLDERS, capture_streams

from callsafe.inspection.budget import OutOfTime, time_budget
from callsafe.model.system import strict_parse
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Event,
    Fragment,
    Limits,
    ToolSpec,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.providers.base import ProviderError
from callsafe.providers.sse import encode_payloads
from callsafe.providers.streams import ParsedStream, parse_sse, render_sse
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.errors import AssemblerError
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.store import Store

PROTOCOLS = list(FOLDERS)


class Hang(Exception):
    """One input took longer than its time allowance."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this (main) thread after ``seconds``."""

    try:
        with time_budget(seconds):
            yield
    except OutOfTime:
        raise Hang(f"no answer within {seconds} s") from None


@cache
def seeds(protocol: str) -> list[bytes]:
    """Real SSE streams of a protocol: the captures (when ``shared/`` is beside the repo),
    and a rendering of a small trace with two interleaved calls (always)."""
    spec = registry.get(protocol)
    out: list[bytes] = []
    for payloads in capture_streams(protocol):
        out.append(encode_payloads(payloads, spec.event_name, done=spec.done_sentinel))
    events: list[Event] = [
        CallOpened(turn="t1", response="r1", item="0", call="call_a", tool="book"),
        Fragment(turn="t1", response="r1", item="0", call="call_a", position=0, text='{"day":'),
        CallTerminal(turn="t1", response="r1", item="0", call="call_a", event_id="x"),
    ]
    try:
        events.insert(2, Fragment(turn="t1", response="r1", item="0", call="call_a", position=1, text='"Tue"}'))
        out.append(render_sse(protocol, events))
    except ProviderError:
        pass
    return out


def mutate(data: bytes, rng: random.Random, pool: Sequence[bytes]) -> bytes:
    """One to four byte-level mutations: flip, delete, duplicate, insert junk or a piece
    of another stream, truncate."""
    buf = bytearray(data)
    junk = [b"\n\n", b"data: ", b"{", b"}", b'"', b"\\u", b"\xff", b"\xc3", b"0" * 40, b"[DONE]", b"\r", b":"]
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(i, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            del buf[i : i + rng.randint(1, 64)]
        elif op == 2:
            buf[i:i] = buf[i : i + rng.randint(1, 200)]
        elif op == 3:
            buf[i:i] = rng.choice(junk)
        elif op == 4 and pool:
            other = rng.choice(pool)
            j = rng.randrange(len(other) + 1)
            buf[i:i] = other[j : j + rng.randint(1, 400)]
        else:
            del buf[i:]
    return bytes(buf)


def cuts(data: bytes, rng: random.Random) -> list[bytes]:
    """The bytes in chunks cut anywhere (inside a character, a line, a CRLF)."""
    points = sorted({rng.randrange(len(data) + 1) for _ in range(rng.randint(0, 6))})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@dataclass
class Outcome:
    """What one input did."""

    parsed: ParsedStream
    events: list[Event]
    executed: list[tuple[int, CallKey, str, str, Any]] = field(default_factory=list)  # index, key, actor, tool, args
    typed_errors: list[str] = field(default_factory=list)


def tools_for(events: Sequence[Event]) -> dict[str, ToolSpec]:
    """A catalog declaring every tool the stream names, half of them with a schema that
    needs a property (so that schema failures happen too)."""
    names = sorted({e.tool for e in events if isinstance(e, CallOpened)})
    return {
        name: ToolSpec(schema={"type": "object", "required": ["day"]} if i % 2 else {"type": "object"})
        for i, name in enumerate(names)
    }


def run_core(
    events: Sequence[Event], tools: dict[str, ToolSpec], limits: Limits, store: Store | None = None
) -> tuple[list[tuple[int, CallKey, str, str, Any]], list[str]]:
    """Deliver ``events`` to a fresh core and driver; an :class:`AssemblerError` is noted
    and delivery goes on (as an application would); anything else propagates."""
    store = store if store is not None else MemoryStore()
    executed: list[tuple[int, CallKey, str, str, Any]] = []
    typed: list[str] = []
    index = [0]

    def execute(key: CallKey, actor: str, tool: str, args: Any, tp: str | None = None) -> None:
        executed.append((index[0], key, actor, tool, args))

    core = Core(tools, limits, store.load())
    driver = Driver(
        core,
        store,
        executor=execute,
        business_validator=lambda key, tool, arguments: None,
        observe=lambda obs: None,
        step=lambda: index[0],
        clock=lambda: 0.0,
    )
    for i, event in enumerate(events):
        index[0] = i
        try:
            driver.run(core.receive(event))
        except AssemblerError as exc:
            typed.append(type(exc).__name__)
    return executed, typed


def through(protocol: str, chunks: Sequence[bytes], limits: Limits | None = None) -> Outcome:
    """SSE bytes -> parser -> core. Raises whatever is not the implementations' typed
    error (a finding)."""
    parsed = parse_sse(protocol, chunks, turn="t1", response="r-fallback")
    if parsed.error is not None and not isinstance(parsed.error, ProviderError):
        raise TypeError(f"parse_sse returned a {type(parsed.error).__name__}")
    events: list[Event] = [TurnStarted(turn="t1", actor="u1", tenant="acme"), *parsed.events]
    executed, typed = run_core(events, tools_for(events), limits or Limits())
    return Outcome(parsed, events, executed, typed)


def invalid_executions(
    events: Sequence[Event], tools: dict[str, ToolSpec], executed: Sequence[tuple[int, CallKey, str, str, Any]]
) -> list[str]:
    """Every execution that the events do not justify (see the module docstring)."""
    bindings: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    seen: set[CallKey] = set()
    for index, key, actor, tool, arguments in executed:
        if key in seen:
            problems.append(f"{key}: ran twice")
        seen.add(key)
        texts: dict[int, str] = {}
        conflict = False
        opened_as: str | None = None
        completed = False
        bindings.clear()
        for event in events[: index + 1]:
            if isinstance(event, TurnStarted):
                bindings.setdefault(event.turn, (event.actor, event.tenant))
            if getattr(event, "turn", None) != key.turn or not hasattr(event, "call"):
                continue
            if (event.response, event.item, event.call) != (key.response, key.item, key.call):  # type: ignore[attr-defined,unused-ignore]
                continue
            if isinstance(event, CallOpened):
                opened_as = opened_as or event.tool
            elif isinstance(event, Fragment) and not completed:
                previous = texts.setdefault(event.position, event.text)
                conflict |= previous != event.text
            elif isinstance(event, CallTerminal) and event.reason == "completed":
                completed = True
        binding = bindings.get(key.turn)
        if binding != (actor, key.tenant):
            problems.append(f"{key}: ran for {actor}/{key.tenant}, the turn is bound to {binding}")
        if not completed or opened_as != tool or conflict or sorted(texts) != list(range(len(texts))):
            problems.append(f"{key}: ran without a completed, conflict-free, gapless call of that tool")
            continue
        try:
            expected = strict_parse("".join(texts[p] for p in range(len(texts))))
        except (ValueError, RecursionError):
            problems.append(f"{key}: ran with arguments that do not parse")
            continue
        if expected != arguments:
            problems.append(f"{key}: ran with other arguments than its fragments")
        spec = tools.get(tool)
        if spec is None or not jsonschema.validators.validator_for(spec.schema)(spec.schema).is_valid(arguments):
            problems.append(f"{key}: ran for an undeclared tool or with arguments its schema rejects")
    return problems
