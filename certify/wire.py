"""Abstract traces on the wire: what the runner delivers to a provider-protocol target.

A target whose ``protocol`` is a provider name (``"openai-chat"``, ``"openai-responses"``,
``"anthropic-messages"``, ...) reads that provider's payloads, as a client library does,
through ``receive_wire(payload)``; it gets the application events (turns, cancels,
confirmations, operator controls, restarts, disconnects) through ``receive(event)``, and
``end_stream()`` when the body of a stream ends normally. The generators write abstract
traces, so the harness renders each trace with the protocol's own renderer
(:mod:`callsafe.providers`) before it runs, and judges the run against the same abstract
trace, with the same oracle, as for an abstract target. Why it is done this way:

* **Identities follow the protocol** (:func:`relabel`). Generated traces name items
  ``i0``, ``i-a``; Chat Completions and Anthropic address a call's item by an integer index,
  and Chat and Gemini text has no item of its own. The trace is relabelled first (in each
  response, items numbered in order of first appearance; text under the protocol's text
  item), and that relabelled trace is what runs, what is judged and what a report shows.
  Identities are names to the model, so this changes no verdict. A trace whose items are
  already valid for the protocol is left as it is.
* **One stream at a time** (:func:`plan_wire`). Each response is one stream (one HTTP
  body): it opens with its first wire event and ends with its
  :class:`~callsafe.model.vocabulary.ResponseTerminal` (a clean end: ``end_stream()``
  follows its payloads) or its :class:`~callsafe.model.vocabulary.Disconnect` (delivered to
  ``receive()``, as the connection dropping; the adapter abandons the stream). A target
  reads one stream at a time, so a trace that interleaves two responses, reopens a
  response that ended, continues a stream across a restart (the connection is gone), or
  opens a stream for a turn other than the one in force (no wire names its turn: a target
  binds a stream to the turn in force when it opens) is **not representable**, as is
  anything the protocol's renderer refuses (:class:`~callsafe.providers.base.NotRepresentable`):
  the harness reports such a trace as not applicable to the target, never as passed. A
  stream still open when the trace ends stays open; the target's ``close()`` ends the run.
* **A reconnect that replays** (``reconnects``, :func:`reconnects`). A target that reads
  its stream over HTTP with its own SDK (an ``exec:`` program with ``wire: "http"``) can
  reconnect: after a :class:`~callsafe.model.vocabulary.Disconnect` of a response, the next
  wire events of that response (the events a :class:`~callsafe.model.vocabulary.Replay`
  re-delivers, and whatever follows them) are a **new stream**, the body of the program's
  next request, rendered by the protocol from its start. That is what Chat Completions and
  Anthropic Messages give a client that asks again (neither resumes a stream: a reconnect
  is a new request), and what a proxy that replays a stream to a reconnecting client sends
  (``docs/target-protocol.md`` says what each provider documents). For every other target
  a stream still does not reopen: a library object fed payloads has no request to repeat.
* **Observation steps index the abstract events.** Every payload is mapped to the abstract
  event whose rendering produced it (the renderer is instrumented, one event at a time),
  so what the executor receives while a payload is delivered carries that event's index,
  exactly as for an abstract target. One refinement keeps the providers' terminal points
  strict: within the payloads of one event, those *before* the first payload on which the
  protocol's own parser reports anything are still delivered at the previous step (the
  event has not happened on the wire yet). The case that matters is OpenAI Responses:
  a completed call renders as ``response.function_call_arguments.done`` then
  ``response.output_item.done``, and :mod:`callsafe.providers.openai_responses` ends the
  call at ``output_item.done``, the event that carries the item's status (an item can
  still end ``incomplete``). A target that runs the tool at ``arguments.done`` therefore
  runs it one step before the call's terminal event, and INV-TERMINAL says so. Payloads
  the parser reads as nothing at all (the Chat Completions chunk with the finish reason,
  which the parser acts on only when the body ends, right after) are at the event's step.
* **What real servers always send.** The providers' renderers write what their parsers
  read; two fields every real server sends, and the SDKs read, are left out, and their
  absence would make a library fail for a reason no server gives it: Anthropic's
  ``message_delta`` always carries ``usage`` (the SDK adds its ``output_tokens`` to the
  message), and a Responses ``response.completed`` / ``incomplete`` / ``failed`` carries
  the response's ``output`` items (the SDK's final response is built from them).
  :func:`callsafe.providers.streams.as_servers_send` adds them (``usage`` with zero tokens; ``output`` from the
  stream's own ``response.output_item.done`` items, by ``output_index``). Neither changes
  what the providers' parser reads, which a test checks.
* **Liveness waits for the response's end** (:func:`response_deferred_liveness`). A
  library presents calls when the model's response ends (its final message), which the
  spec allows. A call whose response never ended normally in the trace (the trace stops
  first, or the response was cut off by a stop reason or a dropped connection) is not
  counted as a liveness shortfall for a provider-protocol target. Safety findings are
  never filtered.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar, cast

from callsafe.model.system import ParseFailure, strict_parse
from callsafe.model.vocabulary import (
    AuditRow,
    CallAddressed,
    CallKey,
    CallOpened,
    CallTerminal,
    Disconnect,
    Event,
    Fragment,
    Observation,
    QuarantineResponse,
    ResponseTerminal,
    Restart,
    TextFragment,
    Trace,
    TurnStarted,
)
from callsafe.providers import registry
from callsafe.providers.adversities import WireTrace
from callsafe.providers.base import WIRE_EVENTS, NotRepresentable, ProviderError, canonical_json
from callsafe.providers.registry import unnamed_response
from callsafe.providers.streams import as_servers_send

__all__ = [
    "ABSTRACT",
    "NotRepresentable",
    "WireDelivery",
    "WirePlan",
    "WireTrace",
    "align_responses",
    "not_applicable_reason",
    "plan_recorded",
    "plan_wire",
    "prepare",
    "reconnects",
    "relabel",
    "response_deferred_liveness",
    "whole_calls",
]

ABSTRACT: Final = "abstract"

ItemRule = Literal["keep", "index", "shared_index"]
ParserFactory = Callable[[str, str], Any]  # (turn, response) -> a parser with feed/finish
TextRule = Literal["keep", "text", "shared_index"]

# How each protocol addresses a call's item and a text item (see each provider module):
# "index": call items are integer indexes, text has the protocol's single text item;
# "shared_index": calls and text blocks share one integer index space per response.
_ITEMS: Final[dict[str, tuple[ItemRule, TextRule]]] = {
    "openai-responses": ("keep", "keep"),
    "openai-chat": ("index", "text"),
    "gemini": ("index", "text"),
    "gemini-live": ("index", "text"),
    "anthropic-messages": ("shared_index", "shared_index"),
    "bedrock-converse": ("shared_index", "shared_index"),
    "cohere-v2": ("shared_index", "shared_index"),
    "gemini-interactions": ("shared_index", "shared_index"),
}
_TEXT_ITEM: Final = "text"


def not_applicable_reason(protocol: str) -> str:
    """The key under which a certification counts traces the protocol cannot express
    (beside the capability names of the other not-applicable traces)."""
    return f"{protocol} rendering"


def _is_index(item: str) -> bool:
    return item.isascii() and item.isdecimal() and (len(item) == 1 or item[0] != "0")


def relabel(trace: Trace, protocol: str) -> Trace:
    """``trace`` with its item identities in the form ``protocol`` addresses them.

    Per response, when an item is not already valid (an integer index where the protocol
    wants one, the text item where text has no item of its own), every item of that kind
    in the response is numbered in order of first appearance. Items are names to the model,
    so the verdicts are the same up to the renaming."""
    call_rule, text_rule = _ITEMS.get(protocol, ("keep", "keep"))
    trace = _name_responses(trace, protocol)
    if call_rule == "keep" and text_rule == "keep":
        return trace
    calls: dict[tuple[str, str], list[str]] = {}  # (turn, response) -> call items in order
    texts: dict[tuple[str, str], list[str]] = {}
    for event in trace.events:
        if isinstance(event, (CallOpened, Fragment, CallTerminal)):
            _note(calls, (event.turn, event.response), event.item)
        elif isinstance(event, TextFragment):
            _note(texts, (event.turn, event.response), event.item)
    mapping: dict[tuple[str, str, str, bool], str] = {}  # (turn, response, item, is_text) -> new item
    for where in {*calls, *texts}:
        call_items, text_items = calls.get(where, []), texts.get(where, [])
        if call_rule == "shared_index":
            every = list(dict.fromkeys([*call_items, *text_items]))
            if not all(_is_index(i) for i in every):
                for n, item in enumerate(every):
                    mapping[(*where, item, False)] = mapping[(*where, item, True)] = str(n)
            continue
        if not all(_is_index(i) for i in call_items):
            for n, item in enumerate(call_items):
                mapping[(*where, item, False)] = str(n)
        if text_rule == "text":
            for item in text_items:
                mapping[(*where, item, True)] = _TEXT_ITEM
    if not mapping:
        return trace

    def item_of(event: Event) -> Event:
        if isinstance(event, (CallOpened, Fragment, CallTerminal, TextFragment)):
            key = (event.turn, event.response, event.item, isinstance(event, TextFragment))
            new = mapping.get(key)
            if new is not None and new != event.item:
                return dataclasses.replace(event, item=new)
        return event

    events = tuple(item_of(e) for e in trace.events)
    return dataclasses.replace(trace, events=events)


# Where a protocol's wire names no response (providers.registry.unnamed_response), a target
# names the n-th stream of a turn, and the trace's responses are named so before it runs.
_T = TypeVar("_T", bound=Trace)
_STREAMED: Final = (CallOpened, Fragment, CallTerminal, TextFragment, ResponseTerminal)


def _name_responses(trace: _T, protocol: str) -> _T:
    """For a protocol whose wire names no response (Bedrock): each turn's responses named
    in order of their first wire event, as the target numbers the streams it reads for the
    turn (one stream per response: :func:`prepare` never reopens one of these). A response
    that never streams (only disconnected or quarantined) keeps its name, which matches no
    stream. Response ids are names to the model, so this changes no verdict."""
    name = unnamed_response(protocol)
    if name is None:
        return trace
    mapping: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}
    for event in trace.events:
        if isinstance(event, _STREAMED) and (event.turn, event.response) not in mapping:
            nth = counts.get(event.turn, 0)
            counts[event.turn] = nth + 1
            mapping[(event.turn, event.response)] = name(event.turn, nth)
    taken = set(mapping.values())
    if all(new == response for (_, response), new in mapping.items()):
        return trace

    def renamed(event: Event) -> Event:
        turn, response = getattr(event, "turn", None), getattr(event, "response", None)
        if not isinstance(turn, str) or not isinstance(response, str):
            return event
        new = mapping.get((turn, response))
        if new is None and response in taken:
            new = f"{response}~"  # a name the renaming gave another response: kept apart
        if new is None or new == response:
            return event
        if isinstance(event, CallTerminal) and event.event_id.startswith(f"{response}/"):
            # a terminal's id a parser made from the response's name (a recorded stream's): renamed with it
            return dataclasses.replace(event, response=new, event_id=new + event.event_id[len(response) :])
        return cast(Event, dataclasses.replace(cast(Any, event), response=new))

    return dataclasses.replace(trace, events=tuple(renamed(e) for e in trace.events))


def _note(seen: dict[tuple[str, str], list[str]], where: tuple[str, str], item: str) -> None:
    items = seen.setdefault(where, [])
    if item not in items:
        items.append(item)


# --------------------------------------------------------------------------------------
# The plan: what each delivered abstract event becomes on the wire
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WireDelivery:
    """What the runner does for one event of the delivered sequence.

    ``payloads`` go to ``receive_wire``; the first ``early`` of them at the previous step
    (the event has not happened on the wire yet, see the module docstring), the rest at the
    event's own step. ``end_stream`` follows when the body ends cleanly after them.
    ``receive`` says the event itself goes to ``receive()`` (application events, and a
    disconnect, which is the connection dropping rather than a payload)."""

    payloads: tuple[Mapping[str, Any], ...] = ()
    early: int = 0
    end_stream: bool = False
    receive: bool = False

    def fresh_payloads(self) -> list[Mapping[str, Any]]:
        """Copies of the payloads, so that nothing a target does to one can leak into the
        next run of the same plan."""
        return [copy.deepcopy(p) for p in self.payloads]


@dataclass(frozen=True)
class WirePlan:
    """The deliveries of one trace's delivered events, one per event, in order."""

    protocol: str
    deliveries: tuple[WireDelivery, ...]
    streams: int = 0

    @property
    def payload_count(self) -> int:
        return sum(len(d.payloads) for d in self.deliveries)


@dataclass
class _Stream:
    turn: str
    response: str
    events: list[tuple[int, Event]] = field(default_factory=list)
    clean_end: int | None = None  # delivered index of the ResponseTerminal


def reconnects(target: object) -> bool:
    """Whether ``target`` reads a reconnect as a new stream (its ``reconnects`` attribute;
    a target that reads over HTTP sets it). Other targets never see a stream reopen."""
    return getattr(target, "reconnects", False) is True


def _streams(events: Sequence[Event], reconnect: bool = False) -> tuple[list[_Stream], list[bool]]:
    """Split the wire events into streams; also which events go to ``receive()``. With
    ``reconnect``, a response whose connection dropped opens again as a new stream."""
    streams: list[_Stream] = []
    receive = [False] * len(events)
    current: _Stream | None = None
    closed: set[tuple[str, str]] = set()
    dropped: set[tuple[str, str]] = set()  # closed by a Disconnect: a reconnect may reopen them
    in_force: str | None = None  # the turn of the last TurnStarted
    for index, event in enumerate(events):
        where = f"event {index} ({event.kind})"
        if isinstance(event, TurnStarted):
            in_force = event.turn
        if isinstance(event, Restart):
            if current is not None:  # the connection is gone with the process
                closed.add((current.turn, current.response))
                current = None
            receive[index] = True
        elif isinstance(event, Disconnect):
            receive[index] = True
            key = (event.turn, event.response)
            if current is not None:
                if (current.turn, current.response) != key:
                    raise NotRepresentable(
                        f"{where}: drops response {event.response!r} while the target reads {current.response!r}; "
                        "a target reads one stream at a time"
                    )
                current.events.append((index, event))
                closed.add(key)
                dropped.add(key)
                current = None
        elif isinstance(event, WIRE_EVENTS):
            key = (event.turn, event.response)
            if current is None:
                if reconnect and key in dropped:
                    dropped.discard(key)  # the reconnect: the program's next request, a new body
                    closed.discard(key)
                if key in closed:
                    raise NotRepresentable(
                        f"{where}: response {event.response!r} already ended or lost its connection; "
                        "a stream does not reopen"
                    )
                if event.turn != in_force:
                    raise NotRepresentable(
                        f"{where}: a stream of turn {event.turn!r} opens while turn {in_force!r} is in force; no "
                        "wire names its turn, so a target binds a stream to the turn in force when it opens"
                    )
                current = _Stream(event.turn, event.response)
                streams.append(current)
            elif (current.turn, current.response) != key:
                raise NotRepresentable(
                    f"{where}: turn {event.turn!r} response {event.response!r} interleaves with turn "
                    f"{current.turn!r} response {current.response!r}; a target reads one stream at a time"
                )
            current.events.append((index, event))
            if isinstance(event, ResponseTerminal):
                current.clean_end = index
                closed.add(key)
                current = None
        else:
            receive[index] = True
    return streams, receive


def _render_grouped(protocol: str, events: Sequence[Event]) -> list[list[dict[str, Any]]]:
    """The protocol's payloads for ``events`` (one stream), grouped by the event whose
    rendering produced them. The renderer is instrumented rather than run on prefixes:
    some renderers look at the whole stream first (Responses numbers each call's deltas
    in a block sized by its last position), so a prefix would render differently."""
    renderer = registry.get(protocol).new_renderer()
    groups: list[list[dict[str, Any]]] = [[] for _ in events]
    current = -1
    dispatch: Callable[[Event, str], None] = renderer._dispatch
    emit: Callable[[dict[str, Any]], None] = renderer._emit

    def traced_dispatch(event: Event, where: str) -> None:
        nonlocal current
        current += 1
        dispatch(event, where)

    def traced_emit(payload: dict[str, Any]) -> None:
        groups[max(current, 0)].append(payload)
        emit(payload)

    renderer._dispatch = traced_dispatch  # type: ignore[method-assign]
    renderer._emit = traced_emit  # type: ignore[method-assign]
    payloads = renderer.render(events)
    flat = [p for g in groups for p in g]
    if len(flat) != len(payloads) or any(a is not b for a, b in zip(flat, payloads, strict=True)):
        raise RuntimeError(f"{protocol}: the renderer emitted payloads outside its events")  # pragma: no cover
    return groups


def _early_counts(
    protocol: str, stream: _Stream, groups: list[list[dict[str, Any]]], parser: ParserFactory | None = None
) -> tuple[list[int], list[Event]]:
    """Per group: how many payloads come before the first one on which the protocol's
    parser (or ``parser``, another reading's) reports an abstract event (0 when it reports
    nothing in the group); and every event it reported."""
    reader = (parser or registry.get(protocol).new_parser)(stream.turn, stream.response)
    out: list[int] = []
    said_all: list[Event] = []
    broken = False
    for group in groups:
        early = 0
        reported = False
        for k, payload in enumerate(group):
            if broken:
                break
            try:
                said = reader.feed(copy.deepcopy(payload))
            except ProviderError:
                broken = True  # a rendering the parser refuses: keep the renderer's attribution
                break
            said_all.extend(said)
            if said and not reported:
                early, reported = k, True
        out.append(early)
    return out, said_all


def plan_wire(
    protocol: str, events: Sequence[Event], reconnect: bool = False, parser: ParserFactory | None = None
) -> WirePlan:
    """The deliveries for ``events`` (a trace's delivered events, already relabelled).
    Raises :class:`NotRepresentable` when the protocol, or a one-stream-at-a-time target,
    cannot carry them. ``reconnect``: the target reconnects after a dropped connection (a
    response's next events are a new stream, see the module docstring). ``parser``: the
    parser of another reading of the protocol (:mod:`callsafe.providers.readings`), which
    decides at which payload of each event the event happens; a reading that reads other
    events from the rendered payloads than the protocol's own parser is
    :class:`NotRepresentable` here (it has no plan of these events)."""
    registry.get(protocol)  # an unknown protocol is a KeyError naming the known ones
    streams, receive = _streams(events, reconnect)
    payloads: list[list[dict[str, Any]]] = [[] for _ in events]
    early = [0] * len(events)
    ends: set[int] = set()
    for stream in streams:
        groups = _render_grouped(protocol, [e for _, e in stream.events])
        as_servers_send(protocol, groups)
        counts, said = _early_counts(protocol, stream, groups, parser)
        if parser is not None and said != _early_counts(protocol, stream, groups)[1]:
            raise NotRepresentable("this reading reads other events from the rendered stream")
        for (index, _), group, count in zip(stream.events, groups, counts, strict=True):
            payloads[index] = group
            early[index] = count
        if stream.clean_end is not None:
            ends.add(stream.clean_end)
    deliveries = tuple(WireDelivery(tuple(payloads[i]), early[i], i in ends, receive[i]) for i in range(len(events)))
    return WirePlan(protocol, deliveries, len(streams))


def plan_recorded(trace: WireTrace, parser: Callable[[str, str], Any] | None = None) -> WirePlan:
    """The deliveries of a :class:`WireTrace`: each payload goes with the first event it
    makes the parser report (the payloads before it, which report nothing, are delivered
    with it, at the previous step, as :func:`plan_wire` does); when one payload makes the
    parser report several events, it is delivered at the last of them (the others get no
    payload: nothing on the wire happened between them), and so are the end of the body
    (or the connection dropping) and the events the end of the stream reports. After a payload the parser
    refuses, the parse ends as a disconnect, but a library still gets every later payload
    and the end of the body, as an application's read loop goes on: the disconnect is what
    the oracle judges, not something the target is told. ``parser`` makes the parser that
    reads the payloads (by default the protocol's own; another reading of them, see
    :mod:`callsafe.providers.readings`, for a trace whose events are that reading's)."""
    events = trace.delivered()
    make = parser or registry.get(trace.protocol).new_parser
    reader = make(_turn_of(events), _response_of(events))
    deliveries: list[WireDelivery] = []
    read: list[Event] = []
    pending: list[Mapping[str, Any]] = []
    broken = False
    for payload in trace.payloads:
        pending.append(payload)
        if broken:
            continue
        try:
            said = reader.feed(copy.deepcopy(dict(payload)))
        except ProviderError:
            broken = True
            continue
        if said:
            deliveries.extend(WireDelivery() for _ in said[1:])
            deliveries.append(WireDelivery(tuple(pending), len(pending) - 1))
            read.extend(said)
            pending = []
    ended = reader.finish(clean=trace.clean and not broken)
    clean_end = trace.clean
    if ended:
        deliveries.extend(WireDelivery() for _ in ended[1:])
        deliveries.append(WireDelivery(tuple(pending), 0, clean_end, receive=not clean_end))
        read.extend(ended)
    elif deliveries:
        last = deliveries[-1]
        deliveries[-1] = WireDelivery((*last.payloads, *pending), last.early, clean_end, receive=not clean_end)
    head = [e for e in events if not isinstance(e, WIRE_EVENTS)]
    if list(events) != [*head, *read] or any(isinstance(e, WIRE_EVENTS) for e in head):
        raise NotRepresentable(f"{trace.name or 'a wire trace'}: its events are not what its payloads parse to")
    return WirePlan(trace.protocol, (*(WireDelivery(receive=True) for _ in head), *deliveries), 1)


def _turn_of(events: Sequence[Event]) -> str:
    return next((e.turn for e in events if isinstance(e, TurnStarted)), "")


def _response_of(events: Sequence[Event]) -> str:
    """The response the wire events name first: what a wire that names none was read as
    (``r1`` by :func:`callsafe.providers.adversities.read_back`, or the name
    :func:`_name_responses` gave it)."""
    return next((e.response for e in events if isinstance(e, _STREAMED)), "r1")


def prepare(trace: Trace, protocol: str, reconnect: bool = False) -> tuple[Trace, WirePlan]:
    """The trace as it runs against a ``protocol`` target (relabelled) and its wire plan;
    ``reconnect`` for a target that reconnects (:func:`reconnects`). Raises
    :class:`NotRepresentable`."""
    if isinstance(trace, WireTrace):
        if trace.protocol != protocol:
            raise NotRepresentable(f"a {trace.protocol} stream; this target reads {protocol}")
        named = _name_responses(trace, protocol)  # the payloads name no response: only the events change
        return named, plan_recorded(named)
    if registry.get(protocol).whole_calls:  # first: the calls then open in the order they are numbered
        trace = whole_calls(trace, protocol)
    relabelled = relabel(trace, protocol)
    delivered = relabelled.delivered()
    if not registry.get(protocol).names_responses and any(isinstance(e, QuarantineResponse) for e in delivered):
        raise NotRepresentable(f"{protocol} names no response on the wire: a quarantine by response id reaches nothing")
    # a response the wire does not name cannot be continued by a second request: no reopening
    reopen = reconnect and unnamed_response(protocol) is None
    return relabelled, plan_wire(protocol, delivered, reopen)


def whole_calls(trace: Trace, protocol: str) -> Trace:
    """``trace`` as a wire that sends each call only whole carries it (Gemini Live's
    ``toolCall``): every call opens, carries its arguments as one fragment (the parser's
    compact JSON of them) and completes together, where its terminal event was. The call
    exists for the client only from then on, so an application event that came between the
    call's opening and its terminal event meets no call, in the model as at the client
    (a cancel there refuses the call when it arrives). Replays are expanded first. A call
    that never completes never reaches such a wire: not representable. Arguments are values
    to the model, so the verdicts on what runs are the same up to this regrouping."""
    pending: dict[tuple[str, str, str, str], list[Event]] = {}
    events: list[Event] = []
    for event in trace.delivered():
        if isinstance(event, (CallOpened, Fragment)):
            pending.setdefault((event.turn, event.response, event.item, event.call), []).append(event)
            continue
        if isinstance(event, Disconnect) and any(k[:2] == (event.turn, event.response) for k in pending):
            raise NotRepresentable(f"{protocol} sends a call only whole: the connection drops before it completes")
        if isinstance(event, CallTerminal):
            held = pending.pop((event.turn, event.response, event.item, event.call), [])
            if event.reason != "completed" or not held or not isinstance(held[0], CallOpened):
                raise NotRepresentable(f"{protocol} sends a call only whole, when it completes")
            opened = held[0]
            parts = [e for e in held if isinstance(e, Fragment)]
            if [f.position for f in parts] != list(range(len(parts))) or not parts:
                raise NotRepresentable(f"{protocol} sends arguments whole: fragments in position order, each once")
            text = "".join(f.text for f in parts)
            with contextlib.suppress(ParseFailure):  # not one JSON value: the renderer refuses it
                text = canonical_json(strict_parse(text))
            events.append(opened)
            if text:
                events.append(dataclasses.replace(parts[0], position=0, text=text))
        events.append(event)
    if pending:
        raise NotRepresentable(f"{protocol} sends a call only whole: a call that never completes never reaches it")
    # the wire numbers a turn's calls in the order they arrive, which is now their order here
    numbers: dict[tuple[str, str, str], str] = {}
    counts: dict[tuple[str, str], int] = {}
    for event in events:
        if isinstance(event, CallOpened) and (event.turn, event.response, event.item) not in numbers:
            n = counts.get((event.turn, event.response), 0)
            numbers[(event.turn, event.response, event.item)] = str(n)
            counts[(event.turn, event.response)] = n + 1

    def numbered(event: Event) -> Event:
        if isinstance(event, CallAddressed):
            item = numbers.get((event.turn, event.response, event.item))
            if item is not None and item != event.item:
                return dataclasses.replace(event, item=item)
        return event

    return dataclasses.replace(trace, events=tuple(numbered(e) for e in events))


def align_responses(trace: Trace, protocol: str, observations: Sequence[Observation]) -> list[Observation]:
    """A run's observations with its response names matched to the trace's, for a protocol
    whose wire names no response (``names_responses`` false): there the client names each
    response itself (the guard, a random id per stream), and the trace's own name is one
    it could not know. Per turn, each response name the run used is matched, in the order
    the run first used it, to the response of the trace not yet matched that shares the
    most calls (item and call id) with what the run put under that name (the first of
    them on a tie). Observations of other protocols, and names that share no call, are
    left as they are (a call the trace never carried stays one)."""
    if registry.get(protocol).names_responses:
        return list(observations)
    calls: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (turn, response) -> (item, call)
    order: dict[str, list[str]] = {}  # turn -> its responses in order
    for event in trace.delivered():
        if isinstance(event, WIRE_EVENTS) and event.response not in order.setdefault(event.turn, []):
            order[event.turn].append(event.response)
        if isinstance(event, CallOpened):
            calls.setdefault((event.turn, event.response), set()).add((event.item, event.call))
    used: dict[tuple[str, str], set[tuple[str, str]]] = {}
    first_use: list[tuple[str, str]] = []
    for obs in observations:
        for key in _keys_of(obs):
            where = (key.turn, key.response)
            if where not in used:
                used[where] = set()
                first_use.append(where)
            used[where].add((key.item, key.call))
    mapping: dict[tuple[str, str], str] = {}
    taken: set[tuple[str, str]] = set()
    for turn, response in first_use:
        if response in order.get(turn, []):
            taken.add((turn, response))
            continue  # already the trace's name
        free = [c for c in order.get(turn, []) if (turn, c) not in taken]
        shared = [len(used[(turn, response)] & calls.get((turn, c), set())) for c in free]
        if shared and max(shared) > 0:
            candidate = free[shared.index(max(shared))]  # the first with the most calls in common
            mapping[(turn, response)] = candidate
            taken.add((turn, candidate))
    if not mapping:
        return list(observations)

    def renamed(key: CallKey) -> CallKey:
        new = mapping.get((key.turn, key.response))
        return key if new is None else dataclasses.replace(key, response=new)

    out: list[Observation] = []
    for obs in observations:
        if isinstance(obs, AuditRow):
            out.append(dataclasses.replace(obs, keys=tuple(renamed(k) for k in obs.keys)))
        elif isinstance(getattr(obs, "key", None), CallKey):
            out.append(dataclasses.replace(obs, key=renamed(obs.key)))  # type: ignore[attr-defined,call-arg]
        else:
            out.append(obs)
    return out


def _keys_of(obs: Observation) -> tuple[CallKey, ...]:
    if isinstance(obs, AuditRow):
        return obs.keys
    key = getattr(obs, "key", None)
    return (key,) if isinstance(key, CallKey) else ()


def response_deferred_liveness(trace: Trace) -> Callable[[Any], bool]:
    """A predicate over findings' call keys: true when a liveness finding for that call
    counts for a provider-protocol target, that is when the call's response ended with
    ``completed`` in ``trace`` (see the module docstring)."""
    ended = {
        (e.turn, e.response) for e in trace.delivered() if isinstance(e, ResponseTerminal) and e.reason == "completed"
    }

    def counts(key: Any) -> bool:
        return key is None or (key.turn, key.response) in ended

    return counts
