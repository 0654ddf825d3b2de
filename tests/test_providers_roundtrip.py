"""Render, then parse: each protocol gives back the abstract events it was given.

For generated streams (optional text, one or two calls whose fragments join into a JSON
object, an end: completed, length, content filter, error or a dropped connection), the
events are arranged in the shape each protocol documents (written out here, independently
of the modules):

* calls with terminal events of their own (Responses, Anthropic, Bedrock, Cohere,
  Interactions): a completed call's terminal follows its fragments; a response that ends
  with another reason stops every call still open with that reason, right before its end;
* Chat Completions: every call ends with the response, after all fragments;
* Gemini: calls one at a time; the arguments come back as compact JSON cut at the leaves,
  so consecutive fragments of one call are compared joined;
* Gemini Live: calls arrive whole (one ``toolCall`` each), so every call completes, one at
  a time, and its arguments come back as one fragment of compact JSON (compared joined).

The rendering goes to SSE bytes, is cut at random offsets, decoded and parsed: the parse
must equal the arrangement (terminal event ids are derived from call keys by both sides).

Then the documented limits: a fragment repeated, reordered or missing is representable
only where the wire carries positions (Responses' sequence numbers, exactly), and raises
:class:`NotRepresentable` everywhere else; so do two turns in one stream and application
events.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Disconnect,
    Event,
    Fragment,
    ResponseTerminal,
    StopReason,
    TextFragment,
)
from callsafe.providers import registry
from callsafe.providers.base import NotRepresentable, canonical_json, ends_cleanly, terminal_event_id
from callsafe.providers.gemini import GeminiRenderer
from callsafe.providers.sse import cut, encode_payloads
from callsafe.providers.streams import parse_sse

T, R = "t1", "r1"

# how each protocol names things (from the modules' documentation)
OWN_TERMINALS = {
    "openai-responses",
    "anthropic-messages",
    "bedrock-converse",
    "cohere-v2",
    "gemini-interactions",
    "openai-realtime",
    "gemini-live",
}
POSITIONAL = {"openai-responses"}
REASONS: dict[str, tuple[str, ...]] = {
    "openai-responses": ("completed", "length", "content_filter", "error"),
    "openai-chat": ("completed", "length", "content_filter", "error"),
    "anthropic-messages": ("completed", "length", "content_filter", "error"),
    "bedrock-converse": ("completed", "length", "content_filter", "error"),
    "gemini": ("completed", "length", "content_filter", "error"),
    "cohere-v2": ("completed", "length", "error"),
    "gemini-interactions": ("completed", "length", "error"),
    "openai-realtime": ("completed", "length", "content_filter", "error"),
    "gemini-live": ("completed", "error"),
}
WHOLE = {"gemini", "gemini-live"}  # arguments come back re-cut: compared joined


def names(protocol: str, has_text: bool, i: int) -> tuple[str, str, str]:
    """(text item, call item, call id) for call ``i``."""
    if protocol in ("openai-responses", "openai-realtime"):
        return "msg_t", f"fc_{i}", f"call_{i}"
    if protocol in ("openai-chat", "gemini", "gemini-live"):
        call = f"{R}#{i}" if protocol == "gemini" else f"call_{i}"
        return "text", str(i), call
    if protocol == "cohere-v2":
        return "0", str(i), f"cohere_{i}"
    return "0", str(i + 1 if has_text else i), f"toolu_{i}"


@dataclass(frozen=True)
class Scenario:
    text: str | None
    calls: tuple[tuple[str, tuple[str, ...]], ...]  # (tool, fragments joining into a JSON object)
    interleave: bool
    ending: str  # a stop reason, or "disconnect"
    completing: int  # how many calls (the first ones) complete before a non-completed end
    drop_terminal: bool  # completed end: the last call never gets its own terminal
    text_last: bool = False  # the text comes after the calls, right before the end


leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8)
leaf = leaf | st.floats(allow_nan=False, allow_infinity=False, width=32)
values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3) | st.dictionaries(st.text(max_size=5), inner, min_size=1, max_size=3)
    ),
    max_leaves=6,
)
objects = st.dictionaries(st.text(max_size=6), values, max_size=3)


@st.composite
def fragments(draw: st.DrawFn) -> tuple[str, ...]:
    text = canonical_json(draw(objects))
    points = sorted(draw(st.sets(st.integers(1, len(text) - 1), max_size=4)))
    bounds = [0, *points, len(text)]
    return tuple(text[a:b] for a, b in itertools.pairwise(bounds))


@st.composite
def scenarios(draw: st.DrawFn, protocol: str) -> Scenario:
    calls = tuple(
        (draw(st.sampled_from(["lookup", "book_slot", "pay"])), draw(fragments()))
        for _ in range(draw(st.integers(1, 2)))
    )
    ending = draw(st.sampled_from([*REASONS[protocol], "disconnect"]))
    return Scenario(
        text=draw(st.none() | st.text(min_size=1, max_size=10)),
        calls=calls,
        interleave=protocol not in WHOLE and draw(st.booleans()),
        ending=ending,
        completing=draw(st.integers(0, len(calls))),
        drop_terminal=draw(st.booleans()),
        text_last=draw(st.booleans()),
    )


def arrange(protocol: str, sc: Scenario) -> list[Event]:
    """The abstract events of ``sc`` in the shape ``protocol`` documents."""
    has_text = sc.text is not None
    events: list[Event] = []
    text = [] if sc.text is None else [TextFragment(turn=T, response=R, item=names(protocol, True, 0)[0], text=sc.text)]
    if not sc.text_last:
        events.extend(text)
    n = len(sc.calls)
    if protocol == "openai-chat":
        completes = 0
    elif protocol == "gemini-live":
        completes = n  # a call reaches the Live wire only whole
    elif sc.ending == "completed":
        completes = n - 1 if sc.drop_terminal and protocol in OWN_TERMINALS else n
    elif protocol == "gemini":
        completes = max(sc.completing, n - 1)  # calls go one at a time: only the last stays open
    else:
        completes = sc.completing
    keys = [names(protocol, has_text, i)[1:] for i in range(n)]

    def opened(i: int) -> Event:
        return CallOpened(turn=T, response=R, item=keys[i][0], call=keys[i][1], tool=sc.calls[i][0])

    def frags(i: int) -> list[Event]:
        if protocol == "gemini" and i >= completes:
            return []  # a call left open sends no pieces (its closing brackets would be lost)
        item, call = keys[i]
        return [
            Fragment(turn=T, response=R, item=item, call=call, position=p, text=text)
            for p, text in enumerate(sc.calls[i][1])
        ]

    def terminal(i: int, reason: StopReason) -> Event:
        item, call = keys[i]
        return CallTerminal(
            turn=T, response=R, item=item, call=call, event_id=terminal_event_id(R, item, call), reason=reason
        )

    if sc.interleave:
        events.extend(opened(i) for i in range(n))
        pending = [frags(i) for i in range(n)]
        while any(pending):
            for queue in pending:
                if queue:
                    events.append(queue.pop(0))
        events.extend(terminal(i, "completed") for i in range(completes))
    else:
        for i in range(n):
            events.append(opened(i))
            events.extend(frags(i))
            if i < completes:
                events.append(terminal(i, "completed"))
    if sc.text_last:
        events.extend(text)
    if sc.ending == "disconnect":
        events.append(Disconnect(turn=T, response=R))
    else:
        reason: StopReason = sc.ending
        if reason != "completed" or protocol == "openai-chat":
            events.extend(terminal(i, reason) for i in range(completes, n))
        events.append(ResponseTerminal(turn=T, response=R, reason=reason))
    return events


def joined(events: Sequence[Event]) -> list[Event]:
    """Consecutive fragments of one call as one (Gemini re-cuts arguments at the leaves)."""
    out: list[Event] = []
    for e in events:
        last = out[-1] if out else None
        if isinstance(e, Fragment) and isinstance(last, Fragment) and (last.item, last.call) == (e.item, e.call):
            out[-1] = Fragment(
                turn=T, response=R, item=e.item, call=e.call, position=last.position, text=last.text + e.text
            )
        else:
            out.append(e)
    return out


def roundtrip(protocol: str, events: list[Event], cuts: list[int], renderer: Any = None) -> list[Event]:
    spec = registry.get(protocol)
    payloads = (renderer or spec.new_renderer()).render(events)
    clean = ends_cleanly(events)
    data = encode_payloads(payloads, spec.event_name, done=spec.done_sentinel and clean)
    parsed = parse_sse(protocol, cut(data, cuts), turn=T, response=R, clean=clean)
    assert parsed.error is None, parsed.error
    return parsed.events


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("protocol", registry.names())
@SETTINGS
@given(data=st.data())
def test_render_then_parse_gives_the_events_back(protocol: str, data: st.DataObject) -> None:
    sc = data.draw(scenarios(protocol))
    events = arrange(protocol, sc)
    cuts = data.draw(st.lists(st.integers(1, 4000), max_size=5))
    back = roundtrip(protocol, events, cuts)
    if protocol in WHOLE:
        assert joined(back) == joined(events)
    else:
        assert back == events


@SETTINGS
@given(data=st.data())
def test_gemini_complete_args_form(data: st.DataObject) -> None:
    sc = data.draw(scenarios("gemini"))
    sc = Scenario(sc.text, sc.calls, False, "completed", len(sc.calls), False, sc.text_last)
    events = arrange("gemini", sc)
    assert joined(roundtrip("gemini", events, [], GeminiRenderer(stream_arguments=False))) == joined(events)


def perturb(events: list[Event], how: str, which: int) -> list[Event] | None:
    """A fragment repeated, two fragments of a call swapped, or a fragment dropped."""
    frags = [i for i, e in enumerate(events) if isinstance(e, Fragment)]
    if not frags:
        return None
    out = list(events)
    at = frags[which % len(frags)]
    target = events[at]
    assert isinstance(target, Fragment)
    same_call = [i for i in frags if (events[i].item, events[i].call) == (target.item, target.call)]
    if how == "repeat":
        out.insert(at + 1, target)
        return out
    if len(same_call) < 2:
        return None
    first, second = same_call[0], same_call[1]
    if how == "swap":
        out[first], out[second] = out[second], out[first]
        return out
    del out[first]  # "drop": position 0 goes missing
    return out


@pytest.mark.parametrize("protocol", registry.names())
@SETTINGS
@given(data=st.data())
def test_positions_are_representable_only_where_the_wire_carries_them(protocol: str, data: st.DataObject) -> None:
    sc = data.draw(scenarios(protocol))
    events = perturb(
        arrange(protocol, sc), data.draw(st.sampled_from(["repeat", "swap", "drop"])), data.draw(st.integers(0, 20))
    )
    if events is None:
        return
    if protocol in POSITIONAL:
        assert roundtrip(protocol, events, data.draw(st.lists(st.integers(1, 4000), max_size=3))) == events
    else:
        with pytest.raises(NotRepresentable):
            registry.get(protocol).new_renderer().render(events)


@pytest.mark.parametrize("protocol", registry.names())
def test_a_stream_carries_one_turn_and_wire_events_only(protocol: str) -> None:
    renderer = registry.get(protocol).new_renderer()
    text_item = names(protocol, True, 0)[0]
    one = TextFragment(turn=T, response=R, item=text_item, text="hi")
    other_turn = TextFragment(turn="t2", response=R, item=text_item, text="hi")
    with pytest.raises(NotRepresentable):
        renderer.render([one, other_turn])
    with pytest.raises(NotRepresentable):
        renderer.render([one, CancelTurn(turn=T)])
    with pytest.raises(NotRepresentable):
        renderer.render([one, Disconnect(turn=T, response=R), one])


@pytest.mark.parametrize("protocol", registry.names())
def test_an_early_stop_is_the_response_s(protocol: str) -> None:
    """No protocol gives one call a stop reason of its own while its response goes on."""
    _, item, call = names(protocol, False, 0)
    events: list[Event] = [
        CallOpened(turn=T, response=R, item=item, call=call, tool="lookup"),
        Fragment(turn=T, response=R, item=item, call=call, position=0, text="{}"),
        CallTerminal(turn=T, response=R, item=item, call=call, event_id="e", reason="length"),
        TextFragment(turn=T, response=R, item=names(protocol, False, 0)[0], text="more"),
    ]
    with pytest.raises(NotRepresentable):
        registry.get(protocol).new_renderer().render(events)


@pytest.mark.parametrize("protocol", ["openai-responses", "anthropic-messages", "cohere-v2", "openai-realtime"])
def test_responses_one_after_another_in_one_stream(protocol: str) -> None:
    """Recorded multi-step streams (and Responses' WebSocket mode) carry several responses."""
    events: list[Event] = []
    for response, reason in (("r1", "completed"), ("r2", "length")):
        _, item, call = names(protocol, False, 0)
        key = {"turn": T, "response": response, "item": item, "call": call}
        events += [
            CallOpened(**key, tool="lookup"),
            Fragment(**key, position=0, text='{"q":1}'),
            CallTerminal(**key, event_id=terminal_event_id(response, item, call), reason=reason),
            ResponseTerminal(turn=T, response=response, reason=reason),
        ]
    assert roundtrip(protocol, events, [7, 99]) == events
    with pytest.raises(NotRepresentable):  # one response at a time
        registry.get(protocol).new_renderer().render([events[0], events[4]])
