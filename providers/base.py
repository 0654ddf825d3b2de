"""What every wire protocol module shares: the errors, the parser and renderer contracts,
and the bookkeeping both directions need.

A **parser** reads one stream. It is built with what the wire does not carry (the turn, and
the response id to use when the protocol names none), then fed one decoded payload at a
time; each :meth:`Parser.feed` returns the abstract events that payload means, in order.
:meth:`Parser.finish` closes the stream: what it emits for calls the protocol left open
depends on the protocol and is documented by each module (a :class:`Disconnect` for the
response where calls have terminal events of their own; a ``CallTerminal(reason="error")``
for Chat Completions, whose calls end only with the stream).

Parsers are strict and never guess. Bad input raises a :class:`ProviderError`, never a bare
exception: :class:`MalformedEvent` when a payload does not have the protocol's shape,
:class:`ProtocolViolation` when well-formed payloads arrive in an order or combination the
protocol forbids. After either, the parser is broken (every further ``feed`` raises) and
``finish`` reports the stream as disconnected, so nothing the broken stream opened can
execute.

A **renderer** turns the protocol-level abstract events (:data:`WIRE_EVENTS`) of one stream
into that protocol's payloads, and raises :class:`NotRepresentable` for what the protocol
cannot say. What is representable, and what a parse of the rendering gives back, are
documented by each module and checked by ``tests/test_providers_roundtrip.py``. Rules shared
by every renderer:

* all events belong to one turn (no wire carries the turn);
* a call is opened once, before its fragments; fragment texts are never empty (an empty
  delta carries nothing, and parsers never emit one);
* without wire positions, fragments must come in position order, each position once;
* a call stopped with any reason but ``completed`` stops with its response: the stopped
  calls' terminals come last, for every call still open, with the response's reason,
  right before the :class:`ResponseTerminal` (no protocol here gives one call a stop
  reason of its own);
* a :class:`Disconnect` ends the rendering: nothing may follow it. The caller then ends the
  parse with ``finish(clean=False)`` (see :func:`ends_cleanly`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    Disconnect,
    Event,
    Fragment,
    ResponseTerminal,
    StopReason,
    TextFragment,
)

__all__ = [
    "WIRE_EVENTS",
    "CallState",
    "MalformedEvent",
    "NotRepresentable",
    "Parser",
    "Protocol",
    "ProtocolViolation",
    "ProviderError",
    "RenderCall",
    "Renderer",
    "canonical_json",
    "ends_cleanly",
    "terminal_event_id",
]


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class ProviderError(ValueError):
    """Wire data that cannot be read, or an abstract trace that cannot be written, under a
    protocol. The message names the protocol event and what was wrong with it."""


class MalformedEvent(ProviderError):
    """A payload does not have the protocol's shape: not an object, a required field
    missing, a field of the wrong type, data that is not JSON."""


class ProtocolViolation(ProviderError):
    """Well-formed payloads the protocol forbids here: a second ``message_start`` in an
    open message, a delta for an item never added, an index bound to two items."""


class NotRepresentable(ProviderError):
    """The renderer's protocol cannot express these abstract events faithfully."""


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------

WIRE_EVENTS: Final = (CallOpened, Fragment, TextFragment, CallTerminal, ResponseTerminal, Disconnect)
"""The abstract events a wire carries. The others (turns, cancellation, confirmation,
operator controls, restarts, replays) belong to the application, not to a provider."""


def canonical_json(value: Any) -> str:
    """The one JSON text callsafe writes for structured arguments a wire carries as values
    (Gemini ``args``, an Anthropic ``tool_use`` start input): compact, keys in the order
    received, non-ASCII kept. ``NaN`` is written as such, so that the model's strict parse
    rejects it rather than this module guessing."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedEvent(f"arguments are not JSON values: {type(exc).__name__}") from None


def terminal_event_id(response: str, item: str, call: str) -> str:
    """The terminal event id a parser gives a call's terminal event.

    Wires carry no id for the terminal event itself, so parsers derive it from the call key:
    one per call, stable when a stream is parsed again, so that a replayed terminal event
    is recognised as the same event."""
    return f"{response}/{item}/{call}/end"


def ends_cleanly(events: Sequence[Event]) -> bool:
    """Whether a rendering of ``events`` ends with the transport closing normally: false
    when the events end with a :class:`Disconnect`, whose rendering simply stops."""
    return not any(isinstance(e, Disconnect) for e in events)


def describe(payload: Any) -> str:
    """The shape of a payload for error messages, never its values: a wrong-typed field may
    hold tool arguments, and an error text must not carry them (INV-LEDGER)."""
    if isinstance(payload, dict):
        keys = ", ".join(sorted(str(k) for k in payload)[:8])
        return f"an object with keys [{keys}{', ...' if len(payload) > 8 else ''}]"
    if isinstance(payload, list):
        return f"a list of {len(payload)}"
    if isinstance(payload, str):
        return f"a string of {len(payload)} characters"
    return f"a {type(payload).__name__}"


def need_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedEvent(f"{what} must be an object, got {describe(value)}")
    return value


def opt_dict(container: Mapping[str, Any], key: str, what: str) -> dict[str, Any] | None:
    value = container.get(key)
    return None if value is None else need_dict(value, f"{what}.{key}")


def need_str(container: Mapping[str, Any], key: str, what: str) -> str:
    value = container.get(key)
    if not isinstance(value, str):
        raise MalformedEvent(f"{what}.{key} must be a string, got {describe(value)}")
    return value


def opt_str(container: Mapping[str, Any], key: str, what: str) -> str | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedEvent(f"{what}.{key} must be a string, got {describe(value)}")
    return value


def need_int(container: Mapping[str, Any], key: str, what: str) -> int:
    value = container.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedEvent(f"{what}.{key} must be a non-negative integer, got {describe(value)}")
    return value


def opt_int(container: Mapping[str, Any], key: str, what: str) -> int | None:
    return None if container.get(key) is None else need_int(container, key, what)


def opt_list(container: Mapping[str, Any], key: str, what: str) -> list[Any] | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise MalformedEvent(f"{what}.{key} must be a list, got {describe(value)}")
    return value


def index_item(value: str, what: str) -> int:
    """A renderer's item that a protocol carries as an integer index."""
    if not value.isdecimal() or not value.isascii() or (len(value) > 1 and value[0] == "0"):
        raise NotRepresentable(f"{what}: this protocol addresses items by index, {value!r} is not one")
    return int(value)


# --------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------


@dataclass
class CallState:
    """What a parser tracks about one call it announced: its key and tool, the next
    arrival-order position, whether any argument text arrived, and whether its terminal
    event was emitted."""

    response: str
    item: str
    call: str
    tool: str
    next_position: int = 0
    has_text: bool = False
    ended: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.response, self.item, self.call)


class Parser(ABC):
    """One stream of one protocol, payload by payload. Subclasses implement :meth:`_feed`
    and, where the protocol's end of stream means more than a disconnect, :meth:`_eos`."""

    protocol: ClassVar[str] = ""

    def __init__(self, turn: str, response: str) -> None:
        self.turn = turn
        self.fallback_response = response
        self._calls: dict[tuple[str, str, str], CallState] = {}
        self._responses: dict[str, bool] = {}  # response id -> ended (insertion ordered)
        self._out: list[Event] = []
        self._broken = False
        self._finished = False
        self.stop_causes: dict[tuple[str, str, str], str] = {}
        """Per call key, what on the wire stopped the call, for every call given a terminal
        event with a reason other than ``completed`` (``inspect`` shows it beside the
        ledger's "stopped: error"): no finish reason, late data, an error payload, done
        events that disagree with the deltas, the provider's stop reason."""

    # -- the contract ------------------------------------------------------------------

    def feed(self, payload: Any) -> list[Event]:
        """The abstract events one decoded payload means. Raises :class:`ProviderError`."""
        if self._finished:
            raise ProtocolViolation(f"{self.protocol}: payload after the end of the stream")
        if self._broken:
            raise ProtocolViolation(f"{self.protocol}: the stream already failed; no payload is read after that")
        self._out = []
        try:
            self._feed(need_dict(payload, f"{self.protocol} payload"))
        except ProviderError:
            self._broken = True
            raise
        out, self._out = self._out, []
        return out

    def finish(self, clean: bool = True) -> list[Event]:
        """End of stream. ``clean`` is true when the transport ended normally (EOF after the
        last event, or a ``[DONE]`` sentinel); a dropped connection, or a stream that
        failed to parse, is not clean and every response still open gets a
        :class:`Disconnect`. Calling it again returns nothing."""
        if self._finished:
            return []
        self._finished = True
        self._out = []
        if clean and not self._broken:
            self._eos()
        self._disconnect_open()
        out, self._out = self._out, []
        return out

    @property
    def broken(self) -> bool:
        """Whether a payload already failed to parse."""
        return self._broken

    # -- hooks ---------------------------------------------------------------------------

    @abstractmethod
    def _feed(self, payload: dict[str, Any]) -> None:
        """Read one payload, emitting through the helpers below."""

    def _eos(self) -> None:  # noqa: B027 - optional hook, empty by default
        """The transport ended normally. By default nothing is implied: a response that did
        not end under its protocol is disconnected by :meth:`finish`."""

    # -- emitting --------------------------------------------------------------------------

    def _begin_response(self, response: str) -> None:
        if response in self._responses:
            raise ProtocolViolation(f"{self.protocol}: response {response!r} started twice in one stream")
        self._responses[response] = False

    def _response_open(self, response: str) -> bool:
        return self._responses.get(response) is False

    def _open_call(self, response: str, item: str, call: str, tool: str) -> CallState:
        """Announce a call (again, if the protocol repeats it: the repetition is emitted so
        that the model sees what the wire said, and a different tool name fails the call)."""
        key = (response, item, call)
        state = self._calls.get(key)
        if state is None:
            state = CallState(response, item, call, tool)
            self._calls[key] = state
        self._out.append(CallOpened(turn=self.turn, response=response, item=item, call=call, tool=tool))
        return state

    def _fragment(self, state: CallState, text: str, position: int | None = None) -> None:
        """Argument text at ``position`` (arrival order when None). Empty text carries
        nothing and is not emitted."""
        if not text:
            return
        if position is None:
            position = state.next_position
            state.next_position += 1
        state.has_text = True
        self._out.append(
            Fragment(
                turn=self.turn,
                response=state.response,
                item=state.item,
                call=state.call,
                position=position,
                text=text,
            )
        )

    def _text(self, response: str, item: str, text: str) -> None:
        if text:
            self._out.append(TextFragment(turn=self.turn, response=response, item=item, text=text))

    def _terminal(self, state: CallState, reason: StopReason, cause: str | None = None) -> None:
        """The call's own terminal event (emitted again, with the same id, when the wire
        repeats it); ``cause`` says what on the wire stopped it (see :attr:`stop_causes`)."""
        if reason != "completed":
            self.stop_causes.setdefault(state.key, cause or f"the response's stop reason {reason!r}")
        state.ended = True
        self._out.append(
            CallTerminal(
                turn=self.turn,
                response=state.response,
                item=state.item,
                call=state.call,
                event_id=terminal_event_id(state.response, state.item, state.call),
                reason=reason,
            )
        )

    def _open_calls(self, response: str) -> list[CallState]:
        return [c for c in self._calls.values() if c.response == response and not c.ended]

    def _stop_open_calls(self, response: str, reason: StopReason, cause: str | None = None) -> None:
        """Every call of the response still open gets a terminal event with ``reason``."""
        for state in self._open_calls(response):
            self._terminal(state, reason, cause)

    def _end_response(self, response: str, reason: StopReason, cause: str | None = None) -> None:
        """The response ended. A stop reason other than ``completed`` is the stop reason of
        every call still open; after ``completed``, a call still open never got its own
        terminal event and the model fails it on the :class:`ResponseTerminal`."""
        if reason != "completed":
            self._stop_open_calls(response, reason, cause)
        self._responses[response] = True
        self._out.append(ResponseTerminal(turn=self.turn, response=response, reason=reason))

    def _disconnect_open(self) -> None:
        for response, ended in self._responses.items():
            if not ended:
                self._responses[response] = True
                self._out.append(Disconnect(turn=self.turn, response=response))


# --------------------------------------------------------------------------------------
# Renderers
# --------------------------------------------------------------------------------------


@dataclass
class RenderCall:
    """A call as a renderer sees it: its key, tool, ordinal in its response, the fragment
    texts by position, and whether its terminal was rendered."""

    response: str
    item: str
    call: str
    tool: str
    ordinal: int
    texts: dict[int, list[str]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # fragment texts in arrival order
    next_position: int = 0
    ended: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.response, self.item, self.call)

    def arguments(self) -> str | None:
        """The complete argument text, when it is well defined: every position from 0 to
        the highest received, each with one text (repeats identical). None otherwise."""
        if not self.texts:
            return ""
        top = max(self.texts)
        parts = []
        for position in range(top + 1):
            texts = self.texts.get(position)
            if not texts or any(t != texts[0] for t in texts):
                return None
            parts.append(texts[0])
        return "".join(parts)


class Renderer(ABC):
    """Abstract events of one stream in, wire payloads out. The checks every protocol
    shares live here; subclasses write the payloads in the ``_on_*`` hooks."""

    protocol: ClassVar[str] = ""
    positional: ClassVar[bool] = False  # fragments carry their position on the wire
    calls_end_with_response: ClassVar[bool] = False  # calls have no terminal event of their own
    several_responses: ClassVar[bool] = False  # one stream may carry responses one after another
    response_reasons: ClassVar[frozenset[str]] = frozenset({"completed", "length", "content_filter", "error"})

    def render(self, events: Sequence[Event]) -> list[dict[str, Any]]:
        """The payloads for ``events``. Raises :class:`NotRepresentable`."""
        self._out: list[dict[str, Any]] = []
        self._calls: dict[tuple[str, str, str], RenderCall] = {}
        self._response: str | None = None
        self._response_ended = False
        self._seen_responses: set[str] = set()
        self._disconnected = False
        self._pending: list[CallTerminal] = []
        turn: str | None = None
        for index, event in enumerate(events):
            where = f"{self.protocol}: event {index} ({getattr(event, 'kind', type(event).__name__)})"
            if not isinstance(event, WIRE_EVENTS):
                raise NotRepresentable(f"{where}: not a wire event; the application delivers it, not the provider")
            if turn is None:
                turn = event.turn
            elif event.turn != turn:
                raise NotRepresentable(f"{where}: a stream carries one turn; got {event.turn!r} after {turn!r}")
            if self._disconnected:
                raise NotRepresentable(f"{where}: nothing follows a disconnect on the same stream")
            if self._pending and not isinstance(event, (CallTerminal, ResponseTerminal)):
                raise NotRepresentable(
                    f"{where}: a call stopped with {self._pending[0].reason!r} stops with its response; "
                    "only its response's end may follow"
                )
            self._dispatch(event, where)
        if self._pending:
            raise NotRepresentable(
                f"{self.protocol}: a call stopped with {self._pending[0].reason!r} needs its response's end"
            )
        self._on_end_of_events()
        return self._out

    # -- shared checks -----------------------------------------------------------------

    def _dispatch(self, event: Event, where: str) -> None:
        if isinstance(event, CallOpened):
            self._use_response(event.response, where)
            key = (event.response, event.item, event.call)
            if key in self._calls:
                raise NotRepresentable(f"{where}: a call is opened once")
            ordinal = sum(1 for c in self._calls.values() if c.response == event.response)
            call = RenderCall(event.response, event.item, event.call, event.tool, ordinal)
            self._calls[key] = call
            self._on_open(call, where)
        elif isinstance(event, Fragment):
            call = self._live_call(event.response, event.item, event.call, where)
            if not event.text:
                raise NotRepresentable(f"{where}: an empty fragment carries nothing on the wire")
            if event.position < 0:
                raise NotRepresentable(f"{where}: negative position")
            if not self.positional and event.position != call.next_position:
                raise NotRepresentable(
                    f"{where}: {self.protocol} has no wire positions; fragments must arrive in position "
                    f"order, each once (expected position {call.next_position}, got {event.position})"
                )
            call.next_position += 1
            call.texts.setdefault(event.position, []).append(event.text)
            call.order.append(event.text)
            self._on_fragment(call, event, where)
        elif isinstance(event, TextFragment):
            self._use_response(event.response, where)
            if not event.text:
                raise NotRepresentable(f"{where}: an empty text fragment carries nothing on the wire")
            self._on_text(event, where)
        elif isinstance(event, CallTerminal):
            call = self._live_call(event.response, event.item, event.call, where)
            if any(p.response == call.response and (p.item, p.call) == (call.item, call.call) for p in self._pending):
                raise NotRepresentable(f"{where}: one terminal event per call")
            if event.reason == "completed" and not self.calls_end_with_response and not self._pending:
                call.ended = True
                self._on_call_done(call, where)
            else:
                self._pending.append(event)
        elif isinstance(event, ResponseTerminal):
            self._use_response(event.response, where)
            self._check_response_end(event, where)
            stopped = [self._calls[(p.response, p.item, p.call)] for p in self._pending]
            for call in stopped:
                call.ended = True
            self._pending = []
            self._response_ended = True
            self._on_response_end(event, stopped, where)
        elif isinstance(event, Disconnect):
            if self._response != event.response or self._response_ended:
                raise NotRepresentable(f"{where}: a disconnect drops the response in flight, {event.response!r} is not")
            self._disconnected = True
            self._on_disconnect(event, where)

    def _check_response_end(self, event: ResponseTerminal, where: str) -> None:
        if event.reason not in self.response_reasons:
            raise NotRepresentable(f"{where}: {self.protocol} has no response end with reason {event.reason!r}")
        open_calls = [c for c in self._calls.values() if c.response == event.response and not c.ended]
        if self.calls_end_with_response or event.reason != "completed":
            expected = [(c.item, c.call) for c in open_calls]
            got = [(p.item, p.call) for p in self._pending]
            if got != expected or any(p.reason != event.reason for p in self._pending):
                raise NotRepresentable(
                    f"{where}: a response ending with {event.reason!r} stops every call still open with that "
                    f"reason, in the order they opened, right before its end: expected terminals for {expected}, "
                    f"got {[(p.item, p.call, p.reason) for p in self._pending]}"
                )
        elif self._pending:
            # a call stopped with another reason would be rendered as one the response's
            # normal end leaves open (failed without a terminal reason): not what the trace says
            raise NotRepresentable(
                f"{where}: a call stopped with {self._pending[0].reason!r} stops with its response, which must end "
                f"with that reason, not 'completed'"
            )

    def _use_response(self, response: str, where: str) -> None:
        if self._response == response:
            if self._response_ended:
                raise NotRepresentable(f"{where}: response {response!r} already ended")
            return
        if self._response is not None:
            if not self._response_ended:
                raise NotRepresentable(f"{where}: one stream carries one response at a time")
            if not self.several_responses:
                raise NotRepresentable(f"{where}: a {self.protocol} stream carries one response")
        if response in self._seen_responses:
            raise NotRepresentable(f"{where}: response {response!r} already ended")
        self._seen_responses.add(response)
        self._response = response
        self._response_ended = False
        self._on_response_start(response, where)

    def _live_call(self, response: str, item: str, call: str, where: str) -> RenderCall:
        state = self._calls.get((response, item, call))
        if state is None:
            raise NotRepresentable(f"{where}: the call was never opened; the wire names a call before its data")
        if state.ended or response != self._response or self._response_ended:
            raise NotRepresentable(f"{where}: the call already ended")
        return state

    def _open_in(self, response: str) -> list[RenderCall]:
        return [c for c in self._calls.values() if c.response == response and not c.ended]

    def _emit(self, payload: dict[str, Any]) -> None:
        self._out.append(payload)

    # -- hooks ---------------------------------------------------------------------------

    def _on_response_start(self, response: str, where: str) -> None:  # noqa: B027 - optional hook
        """A response's first event."""

    @abstractmethod
    def _on_open(self, call: RenderCall, where: str) -> None: ...

    @abstractmethod
    def _on_fragment(self, call: RenderCall, event: Fragment, where: str) -> None: ...

    @abstractmethod
    def _on_text(self, event: TextFragment, where: str) -> None: ...

    @abstractmethod
    def _on_call_done(self, call: RenderCall, where: str) -> None:
        """A call's own completed terminal event."""

    @abstractmethod
    def _on_response_end(self, event: ResponseTerminal, stopped: list[RenderCall], where: str) -> None:
        """The response ends with ``event.reason``; ``stopped`` are the calls that end with
        it (in the order they opened), already checked against the protocol's rule."""

    def _on_disconnect(self, event: Disconnect, where: str) -> None:  # noqa: B027 - optional hook
        """The connection drops: by default the rendering simply stops."""

    def _on_end_of_events(self) -> None:  # noqa: B027 - optional hook
        """After the last event."""


# --------------------------------------------------------------------------------------
# The protocol descriptor
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Protocol:
    """One wire protocol: its name, its parser and renderer, and how its payloads travel.

    ``event_name`` gives the SSE ``event:`` field for a payload (None: no event field);
    ``done_sentinel`` says whether the stream ends with ``data: [DONE]``; ``transport`` is
    the real transport (``sse``, or ``aws-eventstream`` for Bedrock, whose SSE rendering
    is a convenience of this package, not what AWS sends). ``names_responses`` is false for
    a wire that carries no response id (a client names the response itself, so a run is
    judged with its response names matched to the trace's: :mod:`callsafe.certify.wire`);
    ``whole_calls`` is true for a wire that sends each call only whole, in one message (the
    call's events happen on the wire together, at its terminal event)."""

    name: str
    parser: type[Parser]
    renderer: type[Renderer]
    event_name: Callable[[Mapping[str, Any]], str | None]
    done_sentinel: bool = False
    transport: str = "sse"
    names_responses: bool = True
    whole_calls: bool = False

    def new_parser(self, turn: str, response: str) -> Parser:
        return self.parser(turn, response)

    def new_renderer(self) -> Renderer:
        return self.renderer()


def type_field(key: str) -> Callable[[Mapping[str, Any]], str | None]:
    """An ``event_name`` that reads the payload's own type field."""

    def name(payload: Mapping[str, Any]) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) else None

    return name


def no_event_name(payload: Mapping[str, Any]) -> str | None:
    """For protocols whose SSE stream carries data lines only."""
    return None
