"""Store faults in certification (the ``store_faults`` capability, ``StoreFault`` events,
the ``edges/faults`` family): the event's format, the model's two readings of a lasting
fault, the harness's redelivery after a refusal, the reference passing every fault trace,
and broken fault handling caught."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest

from callsafe.certify.checking import Checked
from callsafe.certify.harness import Options, certify, run_traces
from callsafe.generators.store_faults import store_fault_traces
from callsafe.model.builder import TraceBuilder
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import StoreFault, Trace, TraceFormatError
from callsafe.reference_impl.store import ClaimResult
from callsafe.targets.reference import ReferenceTarget

TRACES = list(store_fault_traces())


def _faulted(lasting: bool, at: int) -> Trace:
    """A confirmed payment with a store fault before event ``at``."""
    b = TraceBuilder(name="pay")
    b.tool("pay", {"type": "object"}, confirm=True)
    b.turn("t1").call("a", "pay", '{"amount":', "100}")
    b.open("k", "pay").fragment("k", '{"v":')
    events = list(b.build().events)
    events.insert(at, StoreFault(lasting=lasting))
    base = b.build()
    return Trace(events=tuple(events), tools=base.tools)


def test_the_event_reads_and_writes_and_refuses_nonsense() -> None:
    trace = _faulted(True, 3)
    again = Trace.loads(trace.dumps())
    assert again.events == trace.events
    with pytest.raises(TraceFormatError, match="after=0"):
        StoreFault(lasting=True, after=2)
    with pytest.raises(TraceFormatError, match="counts store operations"):
        StoreFault(after=-1)
    bad = trace.to_json()
    bad["events"][3]["after"] = "two"
    with pytest.raises(TraceFormatError):
        Trace.from_json(bad)


def test_a_transient_fault_changes_no_verdict_and_a_lasting_one_allows_both_readings() -> None:
    transient = judge(_faulted(False, 6))
    assert not transient.alternatives
    lasting = judge(_faulted(True, 6))  # before k's fragment: k is in flight (opened)
    assert len(lasting.alternatives) == 1
    assert lasting.alternatives[0].semantics.reading.store_fault_rolls_back
    # the model's reading fails k closed at the faulted input; the other keeps it collecting
    own = lasting.semantics.state.calls
    other = lasting.alternatives[0].semantics.state.calls
    states = {ident[3]: c.state.value for ident, c in own.items()}
    other_states = {ident[3]: c.state.value for ident, c in other.items()}
    assert states["k"] == "failed" and other_states["k"] == "collecting"
    # a call awaiting its confirmation is in flight too: failed closed, or still waiting
    assert states["a"] == "failed" and other_states["a"] == "validated"
    # the confirmation the fault meets: refused after failing closed, run after a rollback
    b = TraceBuilder()
    b.tool("pay", {"type": "object"}, confirm=True)
    b.turn("t1").call("a", "pay", '{"amount":', "100}").add(StoreFault(lasting=True)).confirm("a")
    verdict = judge(b.build()).by_short_name()["t1/a"]
    assert verdict.execute == "may" and verdict.arguments == {"amount": 100}
    assert "rolled back" in verdict.reason


def test_the_reference_passes_every_fault_trace_over_each_in_process_store() -> None:
    for store in ("memory", "sqlite-ram"):
        results = run_traces(lambda store=store: ReferenceTarget(store=store), TRACES)  # type: ignore[misc]
        bad = [(c.trace.name, c.violated, c.run.errors if c.run else None) for c in results if _broken(c)]
        assert not bad, bad[:3]
        refusals = sum(len(c.run.refusals) for c in results if c.run)
        assert refusals > 0  # the lasting faults were refused, and taken again


def _broken(checked: Checked) -> bool:
    return bool(checked.violated) or bool(checked.run is None or checked.run.errors)


def test_the_family_places_every_kind_of_fault_before_every_event() -> None:
    names = [t.name for t in TRACES]
    assert len(names) == len(set(names))
    kinds = Counter(next(e for e in t.events if isinstance(e, StoreFault)) for t in TRACES)
    assert set(kinds) == {StoreFault(after=0), StoreFault(after=1), StoreFault(after=2), StoreFault(lasting=True)}
    assert len({n.split(",")[0] for n in names}) >= 4


class _NoRetry(ReferenceTarget):
    """Gives up at the first failed write (a transient fault is not ridden out)."""

    def _boot(self) -> None:
        super()._boot()
        assert self.driver is not None
        self.driver._retries = 0


class _NoResync(ReferenceTarget):
    """After a write that stays failed, keeps its memory (ahead of the store)."""

    def _boot(self) -> None:
        super()._boot()
        assert self.driver is not None
        self.driver._after_failure = lambda failure: None  # type: ignore[method-assign]


class _SwallowWrites(ReferenceTarget):
    """Carries on as if a failed write had been written."""

    def _boot(self) -> None:
        super()._boot()
        driver = self.driver
        assert driver is not None
        write = driver._write

        def forgiving(facts: Any) -> None:
            with contextlib.suppress(Exception):
                write(facts)

        driver._write = forgiving  # type: ignore[method-assign]


class _ClaimAnyway(ReferenceTarget):
    """Takes a claim the store could not answer as taken."""

    def _boot(self) -> None:
        super()._boot()
        driver = self.driver
        assert driver is not None
        claim = driver._claim_with_retries

        def optimistic(effect: Any) -> ClaimResult:
            try:
                return claim(effect)
            except Exception:
                return ClaimResult.TAKEN

        driver._claim_with_retries = optimistic  # type: ignore[method-assign]


@pytest.mark.parametrize("variant", [_NoRetry, _NoResync, _SwallowWrites, _ClaimAnyway])
def test_broken_fault_handling_is_caught_by_the_default_certification(variant: type[ReferenceTarget]) -> None:
    cert = certify(lambda: variant(store="memory"), Options(generators=("edges",), minimize=False))
    assert not cert.ok
    assert cert.violated or cert.broken_traces, cert.verdict


def test_a_target_that_stays_refusing_after_the_store_is_back_is_a_target_error() -> None:
    class Refuses(ReferenceTarget):
        def receive(self, event: Any) -> None:
            if self._fault is not None or getattr(self, "_refusing", False):
                self._fault = None
                self._refusing = True
                raise RuntimeError("store down, still")
            super().receive(event)

    trace = next(t for t in TRACES if "lasting fault before" in t.name)
    (checked,) = run_traces(lambda: Refuses(store="memory"), [trace])
    assert checked.run is not None and checked.run.errors
    assert len(checked.run.refusals) == 4  # refused, and refused at each of the three redeliveries


def test_targets_without_the_capability_get_no_fault_traces_and_say_so() -> None:
    from toy_targets import ModelTarget

    cert = certify(ModelTarget, Options(generators=("edges",), minimize=False))
    stats = cert.generators["edges"]
    assert stats.info["not run"] == {"edges/faults": "needs the store_faults capability"}
    (checked,) = run_traces(ModelTarget, [TRACES[0]])
    assert checked.missing == ("store_faults",)
