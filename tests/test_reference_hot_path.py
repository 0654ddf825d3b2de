"""The per-fragment and per-call shortcuts decide exactly what the code they replaced decided.

Like ``tests/test_reference_fast_paths.py``, each shortcut is held to a reference: the
model's guard (``classify_fragment``) for the core's within-the-caps shortcut, the
buffer's previous ``add`` (kept below verbatim) for its in-order fast path and its lazily
made scanner, and a plain recursive copy for ``copy_json``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.certify.runner import run_trace
from callsafe.model.lifecycle import CallEvent, State
from callsafe.model.system import classify_fragment
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Fragment,
    Limits,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.buffer import _ANY_MAY_BE_SEEN, ArgumentBuffer, _digest
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.redaction import copy_json
from callsafe.targets.reference import ReferenceTarget

# ------------------------------------------------------------------------------------
# the core: a new position within both caps is a plain fragment, as the guard says
# ------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300), st.integers(0, 200), st.integers(0, 200))
def test_within_the_caps_a_new_position_is_a_plain_fragment(
    call_after: int, turn_after: int, call_cap: int, turn_cap: int
) -> None:
    limits = Limits(call_bytes=call_cap, turn_bytes=turn_cap)
    shortcut = call_after <= limits.call_bytes and turn_after <= limits.turn_bytes
    guard = classify_fragment(False, False, call_after, turn_after, limits)
    assert shortcut == (guard is CallEvent.FRAGMENT)


# ------------------------------------------------------------------------------------
# the buffer: the previous add, verbatim, as the reference
# ------------------------------------------------------------------------------------


class _PreviousBuffer(ArgumentBuffer):
    __slots__ = ()

    def add(self, position: int, text: str) -> None:
        if self._digests:
            text = _digest(text)
        parts = self._parts
        if position == len(parts):
            parts.append(text)
            self._unscanned += len(text)
            if self._pending:
                pending = self._pending
                while len(parts) in pending:
                    moved = pending.pop(len(parts))
                    parts.append(moved)
                    self._unscanned += len(moved)
        else:
            self._pending[position] = text
        self.fresh_from = _ANY_MAY_BE_SEEN if self._pending else len(parts)
        if not self._digests and self._unscanned >= self._scan_every:
            self._scan()


PIECES = st.sampled_from(['{"a":', '"x\\"y"', "1,", '"b":[', "]}", "}{", " ", '"é🙂"', "tru", "e", ","])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), PIECES), max_size=14),
    st.integers(0, 8),
    st.one_of(st.none(), st.integers(0, 14)),
)
def test_the_buffer_behaves_as_before(adds: list[tuple[int, str]], scan_every: int, seal_at: int | None) -> None:
    new, old = ArgumentBuffer(scan_every), _PreviousBuffer(scan_every)
    received: set[int] = set()
    for n, (position, text) in enumerate(adds):
        if n == seal_at:
            new.seal()
            old.seal()
        for probe in range(-1, 11):
            assert new.seen(probe, text) == old.seen(probe, text)
        if position in received:  # the core adds a position once (repeats are classified)
            continue
        received.add(position)
        new.add(position, text)
        old.add(position, text)
        state = (new.fresh_from, new.count, new.complete, new.doomed, new.assemble())
        assert state == (old.fresh_from, old.count, old.complete, old.doomed, old.assemble())


def test_a_small_call_never_makes_a_scanner() -> None:
    buffer = ArgumentBuffer(scan_every=512)
    for position, text in enumerate(['{"a":', '"x"', "}"]):
        buffer.add(position, text)
    assert buffer._scanner is None
    assert buffer.assemble() == '{"a":"x"}'
    doomed = ArgumentBuffer(scan_every=4)
    doomed.add(0, "}{}{")
    assert doomed._scanner is not None
    assert doomed.doomed == "arguments do not start with an object"


# ------------------------------------------------------------------------------------
# copy_json: equal, and sharing no container with the original
# ------------------------------------------------------------------------------------

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


def _containers(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_copy_json_is_a_deep_copy(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value
    assert not set(_containers(copied)) & set(_containers(value))


# ------------------------------------------------------------------------------------
# a position no in-order stream reaches is still checked for repeats
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("second", "state"), [("B", State.FAILED), ("A", State.COLLECTING)])
def test_a_repeat_at_the_largest_int_position_is_classified(second: str, state: State) -> None:
    """While a position waits beyond a gap, ``fresh_from`` is above every position; it
    used to be ``sys.maxsize``, a position a stream can send, and a conflicting repeat of
    it was taken for a new fragment. The run agrees with the model."""
    key = CallKey("acme", "t1", "r1", "i1", "c1")
    at = {"turn": "t1", "response": "r1", "item": "i1", "call": "c1"}
    events = (
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        CallOpened(**at, tool="note"),
        Fragment(**at, position=0, text="{"),
        Fragment(**at, position=2, text="}"),
        Fragment(**at, position=sys.maxsize, text="A"),
        Fragment(**at, position=sys.maxsize, text=second),
    )
    core = Core({"note": ToolSpec()}, Limits())
    for event in events:
        core.receive(event)
    view = core.view(key)
    assert view is not None and view.state is state
    trace = Trace(events=(*events, CallTerminal(**at, event_id="e1")), tools={"note": ToolSpec()})
    run = run_trace(ReferenceTarget("memory"), trace)
    assert conformance_problems(trace, run.observations, run.errors) == []
