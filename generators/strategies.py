"""Hypothesis strategies for traces, for use in your own test suite.

Why public: the catalog and the exhaustive generator are fixed; hypothesis explores the
space around them with data a person would not write (unicode, escapes, numbers that
change meaning when a fragment is repeated) and shrinks a failure to a small example.

    from hypothesis import given
    from callsafe.generators.strategies import adversarial_traces
    from callsafe.certify.harness import check_trace

    @given(adversarial_traces(capabilities=MyTarget.capabilities))
    def test_my_target(trace):
        assert not check_trace("mypkg.adapter:factory", trace).violated

* :func:`argument_objects`, :func:`json_texts`: call arguments and their JSON text;
* :func:`fragmentations`: a text split into fragments anywhere, inside escapes and
  multi-byte characters included;
* :func:`well_formed_traces`: calls that are each opened, sent in full and ended, possibly
  interleaved: the oracle says every one must execute;
* :func:`adversarial_traces`: the same, then perturbed the ways streams go wrong
  (duplicates, drops, reorders, conflicts, early terminals, stop reasons, cancels, new
  turns, operator stops, stops during validation, restarts, replays), limited to what a
  target with the given capabilities can take.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from hypothesis import strategies as st

from callsafe.generators.needs import CAPABILITY_NAMES
from callsafe.model.vocabulary import (
    CallOpened,
    CallTerminal,
    CancelTurn,
    Disconnect,
    Event,
    Fragment,
    Limits,
    QuarantineResponse,
    Replay,
    Restart,
    StopReason,
    StopTenant,
    TextFragment,
    ToolSpec,
    Trace,
    TurnStarted,
)

__all__ = [
    "PERTURBATIONS",
    "adversarial_traces",
    "argument_objects",
    "fragmentations",
    "json_texts",
    "json_values",
    "well_formed_traces",
]

DEFAULT_TOOLS: Final[Mapping[str, ToolSpec]] = {"note": ToolSpec(schema={"type": "object"})}


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """JSON values: strings (any unicode but lone surrogates), integers, finite floats,
    booleans, null, and small lists and objects of them."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(10**12), 10**12)
        | st.floats(allow_nan=False, allow_infinity=False, width=64)
        | st.text(max_size=12)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=max_leaves,
    )


def argument_objects() -> st.SearchStrategy[dict[str, Any]]:
    """A call's arguments: a JSON object."""
    return st.dictionaries(st.text(min_size=1, max_size=8), json_values(), max_size=4)


def json_texts(objects: st.SearchStrategy[dict[str, Any]] | None = None) -> st.SearchStrategy[str]:
    """The JSON text of an arguments object, with or without ``\\u`` escapes."""
    return st.tuples(objects or argument_objects(), st.booleans()).map(
        lambda pair: json.dumps(pair[0], ensure_ascii=pair[1])
    )


def fragmentations(text: str, max_pieces: int = 6) -> st.SearchStrategy[list[str]]:
    """``text`` split into 1..``max_pieces`` non-empty fragments at any code points
    (inside strings, escapes and multi-byte characters too)."""
    if len(text) <= 1:
        return st.just([text])
    cuts = st.lists(st.integers(1, len(text) - 1), max_size=max_pieces - 1, unique=True).map(sorted)
    return cuts.map(lambda cs: [text[a:b] for a, b in zip([0, *cs], [*cs, len(text)], strict=True)])


@st.composite
def _calls(draw: st.DrawFn, tools: Mapping[str, ToolSpec], max_calls: int) -> list[tuple[str, str, list[str]]]:
    n = draw(st.integers(1, max_calls))
    out = []
    for i in range(n):
        tool = draw(st.sampled_from(sorted(tools)))
        text = draw(json_texts())
        out.append((f"c{i}", tool, draw(fragmentations(text))))
    return out


@st.composite
def well_formed_traces(
    draw: st.DrawFn, tools: Mapping[str, ToolSpec] | None = None, max_calls: int = 3, interleave: bool = True
) -> Trace:
    """One turn with up to ``max_calls`` well-formed calls (tools whose schema any object
    satisfies), their events interleaved when ``interleave``, with assistant text mixed in."""
    tools = dict(tools or DEFAULT_TOOLS)
    calls = draw(_calls(tools, max_calls))
    streams: list[list[Event]] = []
    for call, tool, pieces in calls:
        key = ("t1", "r1", f"i-{call}", call)
        stream: list[Event] = [CallOpened(*key, tool=tool)]
        stream += [Fragment(*key, position=k, text=p) for k, p in enumerate(pieces)]
        stream.append(CallTerminal(*key, event_id=f"end-{call}"))
        streams.append(stream)
    events: list[Event] = [TurnStarted("t1", "u1", "acme")]
    if interleave:
        while any(streams):
            live = [s for s in streams if s]
            pick = draw(st.integers(0, len(live) - 1))
            events.append(live[pick].pop(0))
            if draw(st.integers(0, 9)) == 0:
                events.append(TextFragment("t1", "r1", "msg", draw(st.text(max_size=8))))
    else:
        for s in streams:
            events += s
    return Trace(events=tuple(events), tools=tools, name="hypothesis: well-formed", source="hypothesis strategy")


# Perturbations and the capability each needs (None: any target).
PERTURBATIONS: Final[dict[str, str | None]] = {
    "duplicate": None,
    "drop": None,
    "swap": None,
    "conflict": None,
    "early_terminal": None,
    "stop_reason": None,
    "replay": None,
    "unannounced": None,
    "cancel": "cancellation",
    "disconnect": "cancellation",
    "new_turn": "cancellation",
    "stop_tenant": "operator_controls",
    "quarantine": "operator_controls",
    "stop_during_validation": "operator_controls",
    "restart": "restart",
}


def _perturb(draw: st.DrawFn, events: list[Event], kind: str) -> list[Event]:
    """One perturbation of a replay-free event list (the first event is the turn start)."""
    n = len(events)
    at = draw(st.integers(1, n)) if n > 1 else 1
    fragments = [i for i, e in enumerate(events) if isinstance(e, Fragment)]
    terminals = [i for i, e in enumerate(events) if isinstance(e, CallTerminal)]
    opens = [i for i, e in enumerate(events) if isinstance(e, CallOpened)]
    out = list(events)
    if kind == "duplicate" and fragments:
        i = draw(st.sampled_from(fragments))
        out.insert(draw(st.integers(i + 1, n)), events[i])
    elif kind == "drop" and fragments:
        del out[draw(st.sampled_from(fragments))]
    elif kind == "swap" and n > 2:
        i = draw(st.integers(1, n - 2))
        out[i], out[i + 1] = out[i + 1], out[i]
    elif kind == "conflict" and fragments:
        f = events[draw(st.sampled_from(fragments))]
        assert isinstance(f, Fragment)
        out.insert(at, Fragment(f.turn, f.response, f.item, f.call, f.position, f.text + "}"))
    elif kind == "early_terminal" and terminals and fragments:
        i = draw(st.sampled_from(terminals))
        out.insert(draw(st.integers(1, i)), out.pop(i))
    elif kind == "stop_reason" and terminals:
        i = draw(st.sampled_from(terminals))
        t = events[i]
        assert isinstance(t, CallTerminal)
        reason: StopReason = draw(st.sampled_from(["length", "content_filter", "error"]))
        out[i] = CallTerminal(t.turn, t.response, t.item, t.call, t.event_id, reason)
    elif kind == "unannounced" and opens:
        del out[draw(st.sampled_from(opens))]
    elif kind == "cancel":
        out.insert(at, CancelTurn("t1"))
    elif kind == "disconnect":
        out.insert(at, Disconnect("t1", "r1"))
    elif kind == "new_turn":
        out.insert(at, TurnStarted("t2", "u1", "acme"))
    elif kind == "stop_tenant":
        out.insert(at, StopTenant("acme"))
    elif kind == "quarantine":
        out.insert(at, QuarantineResponse("r1"))
    elif kind == "stop_during_validation" and terminals:
        out.insert(draw(st.sampled_from(terminals)) + 1, StopTenant("acme", during_validation=True))
    elif kind == "restart":
        out.insert(at, Restart())
    return out


@st.composite
def adversarial_traces(
    draw: st.DrawFn,
    tools: Mapping[str, ToolSpec] | None = None,
    max_calls: int = 3,
    max_perturbations: int = 3,
    capabilities: frozenset[str] = CAPABILITY_NAMES,
) -> Trace:
    """A well-formed trace perturbed 0..``max_perturbations`` times, using only the
    perturbations a target with ``capabilities`` can take (a stop during validation also
    needs ``business_validation``)."""
    base = draw(well_formed_traces(tools, max_calls))
    allowed = [k for k, need in PERTURBATIONS.items() if need is None or need in capabilities]
    if "business_validation" not in capabilities and "stop_during_validation" in allowed:
        allowed.remove("stop_during_validation")
    kinds = draw(st.lists(st.sampled_from(allowed), max_size=max_perturbations))
    events = list(base.events)
    replays = 0
    for kind in kinds:
        if kind == "replay":
            replays += 1
            continue
        events = _perturb(draw, events, kind)
    for _ in range(replays):  # left to right, so earlier replays keep their ranges
        stop = draw(st.integers(1, len(events)))
        start = draw(st.integers(0, stop - 1))
        events.insert(stop, Replay(start, stop))
    return Trace(
        events=tuple(events),
        tools=base.tools,
        limits=Limits(),
        name="hypothesis: " + (", ".join(kinds) or "unperturbed"),
        source="hypothesis strategy",
    )
