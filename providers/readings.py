"""Other defensible readings of a stream the protocol's own parser refuses.

Why: callsafe's parsers are strict (:mod:`callsafe.providers.base`): on a shape the protocol
forbids, or one it does not describe, they stop reading and the stream ends as broken, so
nothing it opened runs. That is one defensible reading ("refuse: nothing runs"). Where the
protocol's documentation does not say how such a stream is to be read, a client that
assembles by the identity the protocol documents (the Chat Completions tool-call ``index``,
the Responses ``item_id`` or ``output_index``, the Anthropic block ``index``) reads it
another way, just as defensibly. The project's rule is the oracle's ``may``: where the spec
or the protocol is silent, every defensible reading is allowed; where it speaks, be strict.
So each :class:`WireReading` here is such a reading of one protocol: it rewrites the
payloads of one stream (holding, dropping or re-addressing what the strict parser refuses)
and hands them to the same strict parser, so that its events, and the oracle's verdicts on
them, come from the one mapping callsafe already has. A reading never invents data: every
fragment it yields is text the stream sent for the identity the reading keys by.

The harness (:mod:`callsafe.certify.wire_readings`) judges a library's run under callsafe's
parser and, when that finds a violation, under each reading of the run's protocol; a run
that one reading finds correct is correct, and the cell says which reading the library took.
Glued ``{..}{..}`` arguments, a run on a ``length`` stop, two executions of one call or an
execution of a prefix stay violations under every reading, since no reading yields them.

The readings, with the documentation they rest on (each is silent on the shape the strict
parser refuses or fails, and documents the identity or the value the reading goes by):

* **Chat Completions, index-keyed assembly**: arguments for an ``index`` that has no name
  yet belong to the call the index names next (the late name is taken). The API reference
  types every streamed tool-call delta with a required ``index`` and an optional ``id`` and
  ``function`` (openai-python ``ChoiceDeltaToolCall``), and the function-calling guide
  accumulates streamed tool calls by ``index``; neither says what a client does with
  arguments that come before the chunk with the id and name (vercel/ai #14722).
* **Responses, items keyed by ``item_id``**: ``output_index`` only orders items, so a second
  item at an ``output_index`` already used is its own item. The API reference: a delta's
  ``item_id`` is "the ID of the output item that the function-call arguments delta is added
  to".
* **Responses, items keyed by ``output_index``**: the same reference says the same of
  ``output_index`` ("the index of the output item ..."), so a second item that reuses an
  item id at another ``output_index`` is its own item (its own ``call_id``).
* **Responses, the done events' arguments are final**: the reference calls a delta "a partial
  function-call arguments delta" and ``function_call_arguments.done`` the event "emitted when
  function-call arguments are finalized", carrying "the function-call arguments"; where the
  deltas disagree with it (a resent delta, a proxy's rewrite), the strict parser fails the
  call (two texts for one call) and a client that takes the finalized arguments runs them.
* **Responses, the arguments' done event ends the call**: the reference calls
  ``response.function_call_arguments.done`` the event "emitted when function-call arguments
  are finalized", and the function-calling guide's streaming example runs a call from it;
  callsafe's own parser ends a call at ``response.output_item.done``, the event that carries
  the item's status. Neither the reference nor the guide says that a call whose arguments are
  final may still not run, so both are terminal points a client may take: under this reading
  the call ends (completed) at its arguments' done event, and the item's own done event that
  follows is only its record (its ``sequence_number`` is still used, as the parser counts
  them). A stream in which such an item then ends ``incomplete`` is not read this way: the
  item's status says the call did not finish. The events read are the same; only the
  payload at which the call ends moves, so the harness places a run in the stream by the
  payload at which the target acted.
* **Responses, replays by ``sequence_number``**: an event repeated with its sequence number
  ("the sequence number of this event") is the same event delivered twice, dropped; the
  strict parser already reads replayed deltas and done events that way, and refuses only a
  replayed ``response.created``.
* **Anthropic, a replayed start is the same message or block**: the streaming guide's flow
  is one ``message_start``, then per block one ``content_block_start`` whose ``index`` is the
  block's place in the final ``content`` array; a ``message_start`` repeating the open
  message's id, or a ``content_block_start`` repeating a started block (same index, id and
  name), names what is already open and is dropped. A ``message_start`` with *another* id
  inside the open message is a second message spliced in, never the same one: no reading
  here merges it (``campaigns/repro/anthropic_second_message_start.py``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from callsafe.model.vocabulary import CallTerminal, Event
from callsafe.providers import registry
from callsafe.providers.base import Parser, ProviderError, terminal_event_id
from callsafe.providers.streams import ParsedStream, feed_all

__all__ = ["READINGS", "ReadingParser", "WireReading", "differing_readings", "read_under", "readings_for"]

Payload = dict[str, Any]


class _Rewriter:
    """One stream's rewriting under a reading: each payload rewritten (``None``: dropped),
    and the events the strict parser reads from the rewritten payloads mapped back to the
    wire's own identities."""

    def payload(self, payload: Payload) -> Payload | None:
        return payload

    def events(self, events: list[Event]) -> list[Event]:
        return events


@dataclass(frozen=True)
class WireReading:
    """A defensible reading of ``protocol`` streams: its ``name`` (what a cell's note
    says), what it does, and the documentation it rests on."""

    name: str
    protocol: str
    description: str
    source: str
    rewriter: Callable[[], _Rewriter]
    # whether the reading reads a whole stream at all (None: every stream)
    applies: Callable[[Sequence[Any]], bool] | None = None

    def parser(self, turn: str, response: str) -> ReadingParser:
        """A parser for one stream under this reading."""
        return ReadingParser(registry.get(self.protocol).new_parser(turn, response), self.rewriter())


class ReadingParser:
    """The strict parser of the protocol, fed the payloads as the reading rewrites them; it
    has the parser's contract (``feed``, ``finish``, ``broken``)."""

    def __init__(self, inner: Parser, rewriter: _Rewriter) -> None:
        self.inner = inner
        self.rewriter = rewriter

    @property
    def broken(self) -> bool:
        return self.inner.broken

    def feed(self, payload: Any) -> list[Event]:
        rewritten = self.rewriter.payload(copy.deepcopy(payload)) if isinstance(payload, dict) else payload
        if rewritten is None:
            return []
        return self.rewriter.events(self.inner.feed(rewritten))

    def finish(self, clean: bool = True) -> list[Event]:
        return self.rewriter.events(self.inner.finish(clean))


def read_under(
    reading: WireReading, payloads: Iterable[Any], *, turn: str, response: str, clean: bool = True
) -> ParsedStream:
    """What ``reading`` reads from a whole stream (as :func:`~callsafe.providers.streams.parse_payloads`)."""
    return feed_all(reading.parser(turn, response), payloads, clean=clean)


# --------------------------------------------------------------------------------------
# Chat Completions
# --------------------------------------------------------------------------------------


class _ChatIndexKeyed(_Rewriter):
    """Arguments for an index not yet named are held, and prepended to the arguments of the
    entry that names the index (the first entry with a ``name`` there)."""

    def __init__(self) -> None:
        self.named: set[Any] = set()
        self.held: dict[Any, str] = {}

    def payload(self, payload: Payload) -> Payload | None:
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict) or (choice.get("index") or 0) != 0:
                continue
            delta = choice.get("delta")
            entries = delta.get("tool_calls") if isinstance(delta, dict) else None
            for place, entry in enumerate(entries if isinstance(entries, list) else []):
                if not isinstance(entry, dict) or not isinstance(entry.get("function"), dict):
                    continue
                index = entry.get("index", place)
                function = entry["function"]
                arguments = function.get("arguments")
                if function.get("name"):
                    self.named.add(index)
                    if index in self.held:
                        function["arguments"] = self.held.pop(index) + (arguments if isinstance(arguments, str) else "")
                elif index not in self.named and isinstance(arguments, str) and arguments:
                    self.held[index] = self.held.get(index, "") + arguments
                    function["arguments"] = ""
        return payload


# --------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------

_ITEM_EVENTS: Final = frozenset({"response.output_item.added", "response.output_item.done"})


class _ResponsesByItemId(_Rewriter):
    """``output_index`` dropped: items are their ids."""

    def payload(self, payload: Payload) -> Payload | None:
        payload.pop("output_index", None)
        return payload


_SEP: Final = "\x00@"  # no item id on any wire contains a NUL


class _ResponsesByOutputIndex(_Rewriter):
    """Item ids qualified by the ``output_index`` they come with, so two items that share an
    id at two indexes are two items; the events name the wire's own item id again."""

    def payload(self, payload: Payload) -> Payload | None:
        index = payload.get("output_index")
        if not isinstance(index, int):
            return payload
        if payload.get("type") in _ITEM_EVENTS and isinstance(payload.get("item"), dict):
            item = payload["item"]
            if isinstance(item.get("id"), str):
                item["id"] = f"{item['id']}{_SEP}{index}"
        elif isinstance(payload.get("item_id"), str):
            payload["item_id"] = f"{payload['item_id']}{_SEP}{index}"
        return payload

    def events(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            item = getattr(event, "item", None)
            if isinstance(item, str) and _SEP in item:
                event = dataclasses.replace(event, item=item.split(_SEP, 1)[0])  # type: ignore[call-arg]
                if isinstance(event, CallTerminal):
                    event = dataclasses.replace(
                        event, event_id=terminal_event_id(event.response, event.item, event.call)
                    )
            out.append(event)
        return out


class _ResponsesDoneIsFinal(_Rewriter):
    """Argument deltas dropped: each call's arguments are what its done events carry (the
    strict parser takes them as the call's one fragment when no delta carried text)."""

    def payload(self, payload: Payload) -> Payload | None:
        return None if payload.get("type") == "response.function_call_arguments.delta" else payload


_ENDED_ITEM: Final = "callsafe.reading.item-already-ended"  # no server sends this type: the parser ignores it


class _ResponsesArgumentsDoneEnds(_Rewriter):
    """A function call's ``function_call_arguments.done`` becomes its ``output_item.done``
    (status completed, the done event's arguments); the item's own ``output_item.done``
    after it becomes an event of no type the parser knows, keeping its sequence number."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}  # item id -> the function_call item as added
        self.ended: set[str] = set()

    def payload(self, payload: Payload) -> Payload | None:
        kind = payload.get("type")
        item = payload.get("item")
        if kind == "response.output_item.added" and isinstance(item, dict) and item.get("type") == "function_call":
            if isinstance(item.get("id"), str):
                self.items[item["id"]] = item
                self.ended.discard(item["id"])
        elif kind == "response.function_call_arguments.done":
            item_id = payload.get("item_id")
            added = self.items.get(item_id) if isinstance(item_id, str) else None
            if added is None or not isinstance(item_id, str) or item_id in self.ended:
                return payload  # what the parser makes of it as it is (a replay, an item never added)
            self.ended.add(item_id)
            body: dict[str, Any] = {k: added[k] for k in ("id", "type", "call_id", "name") if k in added}
            if "arguments" in payload:
                body["arguments"] = payload["arguments"]
            done: Payload = {"type": "response.output_item.done", "item": {**body, "status": "completed"}}
            for field_name in ("sequence_number", "output_index"):
                if field_name in payload:
                    done[field_name] = payload[field_name]
            return done
        elif (
            kind == "response.output_item.done"
            and isinstance(item, dict)
            and item.get("id") in self.ended
            and item.get("type") == "function_call"
        ):
            seq = payload.get("sequence_number")
            return None if seq is None else {"type": _ENDED_ITEM, "sequence_number": seq}
        return payload


def _no_item_ends_otherwise(payloads: Sequence[Any]) -> bool:
    """Whether every function call whose arguments' done event came also ends, if its
    ``output_item.done`` comes, with status completed: a stream whose item turns out
    incomplete after its arguments were finalized is not one this reading reads (the
    item's status is the provider's word that the call did not finish)."""
    done: set[Any] = set()
    for p in payloads:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "response.function_call_arguments.done":
            done.add(p.get("item_id"))
        item = p.get("item")
        if (
            p.get("type") == "response.output_item.done"
            and isinstance(item, dict)
            and item.get("id") in done
            and item.get("status") not in (None, "completed")
        ):
            return False
    return True


class _ResponsesReplays(_Rewriter):
    """A payload equal to an earlier one that carried the same sequence number is dropped."""

    def __init__(self) -> None:
        self.seen: dict[Any, Payload] = {}

    def payload(self, payload: Payload) -> Payload | None:
        seq = payload.get("sequence_number")
        if not isinstance(seq, int):
            return payload
        if seq in self.seen:
            return None if self.seen[seq] == payload else payload
        self.seen[seq] = copy.deepcopy(payload)
        return payload


# --------------------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------------------


class _AnthropicSameStart(_Rewriter):
    """A ``message_start`` with the open message's id, and a ``content_block_start`` equal to
    the start of a block already started in the open message, are dropped."""

    def __init__(self) -> None:
        self.message: str | None = None
        self.blocks: dict[Any, Any] = {}

    def payload(self, payload: Payload) -> Payload | None:
        kind = payload.get("type")
        if kind == "message_start":
            body = payload.get("message")
            rid = body.get("id") if isinstance(body, dict) else None
            if self.message is not None and rid == self.message:
                return None
            self.message, self.blocks = rid if isinstance(rid, str) else None, {}
        elif kind == "content_block_start":
            index = payload.get("index")
            block = payload.get("content_block")
            if index in self.blocks and self.blocks[index] == block:
                return None
            self.blocks.setdefault(index, copy.deepcopy(block))
        elif kind == "message_stop":
            self.message, self.blocks = None, {}
        return payload


class _Both(_Rewriter):
    """Two readings at once: the payload rewritten by the first, then by the second; the
    events mapped back by the second, then by the first."""

    def __init__(self, first: _Rewriter, second: _Rewriter) -> None:
        self.first, self.second = first, second

    def payload(self, payload: Payload) -> Payload | None:
        rewritten = self.first.payload(payload)
        return None if rewritten is None else self.second.payload(rewritten)

    def events(self, events: list[Event]) -> list[Event]:
        return self.first.events(self.second.events(events))


def _both_of(first: Callable[[], _Rewriter], second: Callable[[], _Rewriter]) -> Callable[[], _Rewriter]:
    return lambda: _Both(first(), second())


def _with_terminal_point(readings: tuple[WireReading, ...]) -> tuple[WireReading, ...]:
    """Each reading, and each reading of assembly taken together with a reading of where a
    call ends (the Responses arguments' done event): a client that takes the finalized
    arguments and runs the call at their done event takes both, and neither excludes the
    other."""
    ends = [r for r in readings if r.rewriter is _ResponsesArgumentsDoneEnds]
    out = list(readings)
    for end in ends:
        for other in readings:
            if other.protocol != end.protocol or other is end:
                continue
            out.append(
                WireReading(
                    f"{other.name}; {end.name}",
                    other.protocol,
                    f"{other.description}; and {end.description}",
                    f"{other.source}; {end.source}",
                    _both_of(other.rewriter, end.rewriter),
                    end.applies,
                )
            )
    return tuple(out)


# --------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------

_OPENAI_REFERENCE: Final = (
    "OpenAI API reference, Responses streaming events (response.function_call_arguments.delta: item_id "
    "'the ID of the output item that the function-call arguments delta is added to', output_index 'the "
    "index of the output item ...', sequence_number 'the sequence number of this event')"
)

READINGS: Final[tuple[WireReading, ...]] = _with_terminal_point(
    (
        WireReading(
            "index-keyed assembly",
            "openai-chat",
            "arguments that come before the chunk naming their index belong to the call that index names next "
            "(the late name is taken); the call runs once with all of them",
            "OpenAI Chat Completions reference (every streamed tool-call delta has a required index, an optional id "
            "and function: openai-python ChoiceDeltaToolCall) and function-calling guide (streamed tool calls are "
            "accumulated by index); silent on arguments before the id and name (vercel/ai #14722)",
            _ChatIndexKeyed,
        ),
        WireReading(
            "items keyed by item_id",
            "openai-responses",
            "a second item at an output_index already used is its own item (output_index only orders items)",
            _OPENAI_REFERENCE + "; silent on an output_index used twice",
            _ResponsesByItemId,
        ),
        WireReading(
            "items keyed by output_index",
            "openai-responses",
            "a second item reusing an item id at another output_index is its own item, with its own call_id",
            _OPENAI_REFERENCE + "; silent on an item id used twice",
            _ResponsesByOutputIndex,
        ),
        WireReading(
            "the done events' arguments are final",
            "openai-responses",
            "when the deltas disagree with the arguments of function_call_arguments.done and output_item.done, the "
            "done events' arguments are the call's (the deltas were a preview of them)",
            "OpenAI API reference: response.function_call_arguments.delta is 'a partial function-call arguments "
            "delta', response.function_call_arguments.done is 'emitted when function-call arguments are finalized' "
            "and carries 'the function-call arguments'; silent on deltas that disagree with them",
            _ResponsesDoneIsFinal,
        ),
        WireReading(
            "the arguments' done event ends the call",
            "openai-responses",
            "a function call ends, completed, at its response.function_call_arguments.done (its arguments are final "
            "there); the response.output_item.done after it is the item's record",
            "OpenAI API reference: response.function_call_arguments.done is 'emitted when function-call arguments are "
            "finalized'; the function-calling guide's streaming section reads a call's final arguments from it; "
            "neither says a call whose arguments are final waits for output_item.done",
            _ResponsesArgumentsDoneEnds,
            _no_item_ends_otherwise,
        ),
        WireReading(
            "replays by sequence_number",
            "openai-responses",
            "an event repeated with its sequence number (a replayed response.created) is one event delivered twice",
            _OPENAI_REFERENCE + "; silent on an event delivered twice",
            _ResponsesReplays,
        ),
        WireReading(
            "a replayed start is the same message or block",
            "anthropic-messages",
            "a message_start repeating the open message's id, or a content_block_start repeating a started block "
            "(same index, id and name), names what is already open",
            "Anthropic streaming messages guide (one message_start; per content block one content_block_start, its "
            "index the block's place in the final content array); silent on a start delivered twice",
            _AnthropicSameStart,
        ),
    )
)


def readings_for(protocol: str) -> tuple[WireReading, ...]:
    """The other defensible readings of ``protocol`` streams (none for most protocols)."""
    return tuple(r for r in READINGS if r.protocol == protocol)


def differing_readings(
    protocol: str, payloads: Sequence[Any], primary: Sequence[Event], *, turn: str, response: str, clean: bool = True
) -> list[tuple[WireReading, list[Event]]]:
    """Each reading of ``protocol`` that reads ``payloads`` otherwise than the strict parser
    (whose events are ``primary``), with what it reads: other events, or the same events at
    other payloads (a call that ends at an earlier payload)."""
    out: list[tuple[WireReading, list[Event]]] = []
    own: list[list[Event]] | None = None
    for reading in readings_for(protocol):
        if reading.applies is not None and not reading.applies(payloads):
            continue
        events = read_under(reading, payloads, turn=turn, response=response, clean=clean).events
        if list(events) != list(primary):
            out.append((reading, events))
            continue
        if own is None:
            own = _per_payload(registry.get(protocol).new_parser(turn, response), payloads, clean)
        if _per_payload(reading.parser(turn, response), payloads, clean) != own:
            out.append((reading, events))
    return out


def _per_payload(parser: Any, payloads: Sequence[Any], clean: bool) -> list[list[Event]]:
    """What ``parser`` reports at each payload, and at the end of the stream (last)."""
    out: list[list[Event]] = []
    try:
        for payload in payloads:
            out.append(list(parser.feed(copy.deepcopy(payload))))
    except ProviderError:
        out.append(list(parser.finish(clean=False)))
        return out
    out.append(list(parser.finish(clean=clean)))
    return out
