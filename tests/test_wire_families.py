"""Issue 30: the bug classes a direct feed of the SDKs found and the matrix missed, as
wire-adversity families (``callsafe.providers.adversities``): a surrogate pair split across
two events, data after the final stop event, a reused Anthropic block index with a new id,
and a body that ends with any of its closing events missing. Each family's streams kill a
broken implementation written here, and the reference implementation (reading the wire
through callsafe's parser) passes every one of them.

The broken implementations are the shapes of what the libraries did: run a call with the
pair's halves dropped, run at the end of the body whatever arrived after the stop, run a
block whose index another block took, run a call whose stream ended before it stopped."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
from wire_targets import ParsedReference

from callsafe.certify.checking import Checked, run_checked
from callsafe.certify.wire_adversities import adversity_traces
from callsafe.contract.target import TargetEnv
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallKey, Event
from callsafe.providers.adversities import WireTrace

NONE: frozenset[str] = frozenset()
PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")


class RunsAtEnd:
    """Runs fixed calls with fixed arguments at the end of each body, whatever it said."""

    capabilities = NONE

    def __init__(self, protocol: str, runs: list[tuple[CallKey, Any]]) -> None:
        self.name, self.protocol, self.runs = "runs-at-end", protocol, runs
        self.env: TargetEnv | None = None

    def start(self, env: TargetEnv) -> None:
        self.env = env

    def receive(self, event: Event) -> None: ...

    def receive_wire(self, payload: Mapping[str, Any]) -> None: ...

    def end_stream(self) -> None:
        assert self.env is not None
        for key, arguments in self.runs:
            self.env.executor(key, "u1", "pay", arguments)

    def restart(self) -> None: ...

    def close(self) -> None: ...


def _family(operator: str, protocol: str, phrase: str = "") -> list[WireTrace]:
    out = [t for t in adversity_traces((protocol,), sse=False) if t.operator == operator and phrase in t.name]
    assert out, (operator, protocol, phrase)
    return out


def _keys(trace: WireTrace) -> list[CallKey]:
    return sorted(judge(trace).verdicts, key=lambda k: (k.item, k.call))


def _ran(trace: WireTrace, runs: list[tuple[CallKey, Any]]) -> Checked:
    return run_checked(partial(RunsAtEnd, trace.protocol, runs), NONE, trace)


def _reference_passes(trace: WireTrace) -> None:
    checked = run_checked(partial(ParsedReference, trace.protocol, NONE), NONE, trace)
    assert not checked.violated, (trace.name, checked.explain())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_surrogate_pair_split_across_events_may_be_joined_or_refused_but_never_mangled(protocol: str) -> None:
    """The reference refuses the call (lone surrogates); a library that joins the pair runs
    it with the character; one that drops the halves runs other arguments, and is caught."""
    for trace in _family("surrogate-pair-split-across-events", protocol, "base: wire: 1 call"):
        _reference_passes(trace)
        key = _keys(trace)[0]
        joined = _ran(trace, [(key, {"amount": 100, "memo": "\U0001f600"})])
        assert not joined.violated, (trace.name, joined.explain())
        halves = "\ud83d\ude00"  # a Python library's str after concatenating the two halves
        pair = _ran(trace, [(key, {"amount": 100, "memo": halves})])
        assert not pair.violated, (trace.name, pair.explain())
        dropped = _ran(trace, [(key, {"amount": 100, "memo": ""})])
        assert dropped.violated, trace.name


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_data_after_the_final_stop_event_changes_nothing_that_runs(protocol: str) -> None:
    """A late delta appended to a call, or a whole call after the stop: the reference runs
    what the stream held at its stop; a library that runs what the body held at its end
    (the late '0' appended, the late call run) is caught."""
    late_delta = _family("data-after-final-stop", protocol, "a delta after the final stop event")
    late_call = (
        _family("data-after-final-stop", protocol, "a new call after the final stop event")
        if protocol != "openai-responses"
        else []
    )
    for trace in (*late_delta, *late_call):
        _reference_passes(trace)
    for trace in late_delta:
        key = _keys(trace)[0]
        appended = _ran(trace, [(key, {"amount": 1000})])
        assert appended.violated, trace.name
    for trace in late_call:
        verdicts = judge(trace).verdicts
        done = [(k, {"amount": 100}) for k, v in verdicts.items() if v.execute == "must"]
        assert not _ran(trace, done).violated, trace.name
        late = next((k for k in verdicts if k.call.endswith("-late")), CallKey("acme", "t1", "r1", "9", "late"))
        with_late = [*done, (late, {"amount": 5})]
        assert _ran(trace, with_late).violated, trace.name


def test_a_second_block_at_a_reused_index_with_a_new_id() -> None:
    """Anthropic: the reference never runs a merged block; a library that runs the first
    call with the second's input, or the second as an empty call, is caught."""
    for trace in _family("reused-block-index-new-id", "anthropic-messages"):
        _reference_passes(trace)
        first = CallKey("acme", "t1", "r1", "0", "call_a")
        merged = _ran(trace, [(first, {"amount": 5})])
        assert merged.violated, trace.name


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_body_that_ends_with_a_closing_event_missing(protocol: str) -> None:
    """Every cut from the last delta to the last payload, cleanly and as a drop: the
    reference runs only what completed; a library that runs every call at the end of the
    body is caught on the cut before the call's own end."""
    family = _family("ends-without-closing-events", protocol)
    caught = 0
    for trace in family:
        _reference_passes(trace)
        runs = [(k, {"amount": 100}) for k in _keys(trace)]
        caught += bool(_ran(trace, runs).violated)
    assert caught
    # each closing event is missing in turn: more cuts than the two the family had
    assert len({t.name.split(";")[0] for t in family}) > 4
