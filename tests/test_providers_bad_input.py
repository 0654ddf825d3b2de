"""Bad input never crashes a parser: it raises a ProviderError subclass, or it is read.

Three sources of bad input, for every protocol: arbitrary JSON values built from the keys
and type names real streams use (so that they reach deep into each parser); real captured
streams with parts replaced, dropped, repeated or reordered; and payloads that are not
objects at all. Whatever happens, ``finish`` then ends the stream without raising, and
everything emitted is an abstract event.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from capture_files import FOLDERS, capture_streams
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal, TextFragment
from callsafe.providers import registry
from callsafe.providers.base import MalformedEvent, ProviderError


@cache
def streams(protocol: str) -> list[list[dict[str, Any]]]:
    """The captured streams of a protocol, as lists of payloads (lines that are not JSON
    objects left out: this test makes its own bad input). A protocol with no captures
    (the Realtime API's WebSocket is not in the vercel-ai captures) is seeded with its own
    renderer's streams instead."""
    if protocol not in FOLDERS:
        return rendered_streams(protocol)
    return [payloads[:60] for payloads in capture_streams(protocol)]


def rendered_streams(protocol: str) -> list[list[dict[str, Any]]]:
    """Text and two interleaved calls, ended each way the protocol says, as its payloads
    (on a wire that sends calls only whole, Gemini Live's, the calls one after the other)."""
    if registry.get(protocol).whole_calls:
        return [registry.get(protocol).new_renderer().render(whole_stream(reason)) for reason in ("completed", "error")]
    out = []
    for reason in ("completed", "length", "error"):
        events: list[Event] = [TextFragment("t1", "r1", "msg", "ok")]
        for n in (0, 1):
            events.append(CallOpened("t1", "r1", f"fc_{n}", f"call_{n}", tool="pay"))
        for n in (0, 1):
            events += [
                Fragment("t1", "r1", f"fc_{n}", f"call_{n}", position=p, text=t) for p, t in enumerate(('{"a"', ":1}"))
            ]
        if reason == "completed":
            events.append(CallTerminal("t1", "r1", "fc_0", "call_0", event_id="e0"))
            events.append(CallTerminal("t1", "r1", "fc_1", "call_1", event_id="e1"))
        else:
            events += [
                CallTerminal("t1", "r1", f"fc_{n}", f"call_{n}", event_id=f"e{n}", reason=reason) for n in (0, 1)
            ]
        events.append(ResponseTerminal("t1", "r1", reason))
        out.append(registry.get(protocol).new_renderer().render(events))
    return out


def whole_stream(reason: str) -> list[Event]:
    events: list[Event] = [TextFragment("t1", "r1", "text", "ok")]
    for n in (0, 1):
        events += [
            CallOpened("t1", "r1", str(n), f"call_{n}", tool="pay"),
            Fragment("t1", "r1", str(n), f"call_{n}", position=0, text='{"a":1}'),
            CallTerminal("t1", "r1", str(n), f"call_{n}", event_id=f"e{n}"),
        ]
    return [*events, ResponseTerminal("t1", "r1", reason)]  # type: ignore[arg-type]


@cache
def vocabulary() -> tuple[list[str], list[str], list[str]]:
    """Every key, every short string value, and every top-level key in the captures."""
    keys: set[str] = set()
    words: set[str] = set()
    top: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                keys.add(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and len(value) < 40:
            words.add(value)

    for protocol in registry.names():
        for stream in streams(protocol):
            walk(stream)
            top.update(k for payload in stream for k in payload)
    return sorted(keys), sorted(words), sorted(top)


@cache
def json_values() -> st.SearchStrategy[Any]:
    keys, words, _ = vocabulary()
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(-3, 2**40)
        | st.floats(allow_nan=True)
        | st.sampled_from(words)
        | st.text(max_size=6)
    )
    key = st.sampled_from(keys) | st.text(max_size=4)
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(key, inner, max_size=5),
        max_leaves=6,
    )


@cache
def objects() -> st.SearchStrategy[dict[str, Any]]:
    """Payloads with the top-level keys of real streams, their type fields mostly set to
    real event names, so that they get past the first dispatch."""
    _, words, top = vocabulary()
    body = st.dictionaries(st.sampled_from(top), json_values(), min_size=1, max_size=4)
    named = st.fixed_dictionaries({}, optional={"type": st.sampled_from(words), "event_type": st.sampled_from(words)})
    return st.builds(lambda a, b: {**a, **b}, body, named)


def run(protocol: str, payloads: list[Any]) -> None:
    parser = registry.get(protocol).new_parser("t1", "r-fallback")
    emitted: list[Event] = []
    clean = True
    for payload in payloads:
        try:
            emitted.extend(parser.feed(payload))
        except ProviderError:
            clean = False
            break
    emitted.extend(parser.finish(clean=clean))
    assert all(isinstance(e, Event) for e in emitted)
    assert parser.finish() == []


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("protocol", registry.names())
@SETTINGS
@given(data=st.data())
def test_random_payloads(protocol: str, data: st.DataObject) -> None:
    run(protocol, data.draw(st.lists(objects(), min_size=1, max_size=5)))


def mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """``value`` with one part replaced by arbitrary JSON, or a key removed."""
    if isinstance(value, dict) and value and depth < 6:
        key = data.draw(st.sampled_from(sorted(value)))
        copy = dict(value)
        action = data.draw(st.sampled_from(["descend", "replace", "delete"]))
        if action == "delete":
            del copy[key]
        elif action == "replace":
            copy[key] = data.draw(json_values())
        else:
            copy[key] = mutate(value[key], data, depth + 1)
        return copy
    if isinstance(value, list) and value and depth < 6:
        copy = list(value)
        at = data.draw(st.integers(0, len(copy) - 1))
        copy[at] = mutate(copy[at], data, depth + 1)
        return copy
    return data.draw(json_values())


@pytest.mark.parametrize("protocol", registry.names())
@SETTINGS
@given(data=st.data())
def test_mutated_captures(protocol: str, data: st.DataObject) -> None:
    stream = list(data.draw(st.sampled_from(streams(protocol))))
    for _ in range(data.draw(st.integers(1, 3))):
        if not stream:
            break
        at = data.draw(st.integers(0, len(stream) - 1))
        how = data.draw(st.sampled_from(["mutate", "drop", "repeat", "move"]))
        if how == "mutate":
            stream[at] = mutate(stream[at], data)
        elif how == "drop":
            del stream[at]
        elif how == "repeat":
            stream.insert(at, stream[at])
        else:
            stream.insert(data.draw(st.integers(0, len(stream) - 1)), stream.pop(at))
    run(protocol, stream)


@pytest.mark.parametrize("protocol", registry.names())
@pytest.mark.parametrize("payload", [None, [], "data", 3, 2.5, True, [{"type": "x"}]])
def test_payloads_that_are_not_objects(protocol: str, payload: Any) -> None:
    parser = registry.get(protocol).new_parser("t1", "r")
    with pytest.raises(MalformedEvent):
        parser.feed(payload)
    assert parser.broken
    with pytest.raises(ProviderError):
        parser.feed({})  # a broken stream reads nothing more
