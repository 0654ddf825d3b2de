"""The order a program sees over HTTP is the trace's order, whatever the load (issue 30).

A control event (a restart, a catalog change) that follows stream bytes in a trace must reach
the program after its SDK has handled those bytes. ``adapters/guard_sdk.py`` acknowledges
the body bytes its SDK has read (``"acks": "bytes"``, ``adapters/http_reads.py``) and the
harness holds every later step until the program has read past what was written before it
(``docs/target-protocol.md``, "Order"). Before that, ``turn open(c0) restart`` violated
INV-BOUNDED, INV-LEDGER and INV-STATUS over HTTP on every protocol while the same trace held
in process. These tests run those traces over HTTP, unloaded and under injected latency
(the loopback's writes delayed) and CPU load (busy processes), and require the verdicts of
each run to equal each other and the in-process verdicts.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Iterator

import pytest
from loaded import injected_latency_and_load

from callsafe.certify.harness import Options, certify, exhaustive_bound, run_traces
from callsafe.certify.targets import describe, resolve_target
from callsafe.generators.catalog import by_name
from callsafe.generators.exhaustive import exhaustive_traces
from callsafe.model.vocabulary import CallTerminal, Disconnect, Fragment, Restart, ToolChanged, Trace
from callsafe.reporting.report import report_json

pytest.importorskip("uvicorn")
pytest.importorskip("openai")
pytest.importorskip("anthropic")

PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")
# a control event right after a call's first bytes, with and without what follows
ORDER = re.compile(r"^exhaustive: (turn )?open\(c0\) restart( turn| cancel| stop_tenant)?$")


def _program(protocol: str) -> str:
    return f"exec:{sys.executable} -m callsafe.adapters.guard_sdk --protocol {protocol}"


def _traces(spec: str, protocol: str) -> list[Trace]:
    """The exhaustive generator's restarts right after a call opened, and each again with a
    catalog change (the opened call's tool removed, or renamed) in the restart's place."""
    info = describe(resolve_target(spec), spec)
    bound = exhaustive_bound(3, info.capabilities, protocol)
    restarts = [t for t in exhaustive_traces(bound) if ORDER.match(t.name)]
    out = list(restarts)
    for trace in restarts:
        for change in (ToolChanged("op", "remove"), ToolChanged("op", "rename", new_name="op_v2")):
            events = tuple(change if isinstance(e, Restart) else e for e in trace.events)
            name = trace.name.replace("restart", f"tool_changed:{change.change}")
            out.append(dataclasses.replace(trace, events=events, name=name))
    return out


def _verdicts(spec: str, traces: list[Trace]) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Per trace: the violated invariants, and whether it ran at all (not applicable: no)."""
    return {c.trace.name: (tuple(sorted(c.violated)), not c.note) for c in run_traces(spec, traces)}


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Injected latency and CPU load (:func:`loaded.injected_latency_and_load`)."""
    with injected_latency_and_load(monkeypatch):
        yield


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_control_after_stream_bytes_reaches_the_program_after_them(protocol: str) -> None:
    spec = _program(protocol)
    traces = _traces(spec, protocol)
    assert len(traces) >= 3, [t.name for t in traces]
    over_http = _verdicts(spec, traces)
    in_process = _verdicts(f"guard:memory:{protocol}", traces)
    assert over_http == in_process
    ran = [name for name, (_, applicable) in over_http.items() if applicable]
    assert ran, "no trace ran: nothing was certified"
    assert all(not violated for violated, _ in over_http.values()), over_http


def test_verdicts_over_http_are_the_same_under_latency_and_load(loaded: None) -> None:
    spec = _program("anthropic-messages")
    traces = _traces(spec, "anthropic-messages")
    assert _verdicts(spec, traces) == _verdicts("guard:memory:anthropic-messages", traces)
    # the reference over the protocol (stdio) keeps the in-process reference's verdicts too
    reference = f"exec:{sys.executable} -m callsafe.adapters.reference"
    abstract = _traces(reference, "abstract")
    assert abstract
    assert _verdicts(reference, abstract) == _verdicts("reference:memory", abstract)


def _after_restart(name: str, *tail: dict[str, object]) -> Trace:
    """A call opened in turn t1, a restart while its response streams, then a second turn
    whose response r2 opens call c1, and ``tail`` after it."""
    opened = {"turn": "t1", "response": "r1", "item": "0", "call": "c0", "tool": "op"}
    events: list[object] = [
        {"turn_started": {"turn": "t1", "actor": "u1", "tenant": "acme"}},
        {"call_opened": opened},
        {"restart": {}},
        {"turn_started": {"turn": "t2", "actor": "u1", "tenant": "acme"}},
    ]
    events += list(tail)
    tools = {"op": {"schema": {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}}}}
    return Trace.from_json({"name": name, "tools": tools, "events": events})


OPEN_C1 = {"call_opened": {"turn": "t2", "response": "r2", "item": "0", "call": "c1", "tool": "op"}}
# the shrunk counterexamples of the default certification before the fix (INV-BOUNDED,
# INV-LEDGER, INV-STATUS): r2's bytes went into the body of r1, which the process before the
# restart was reading, so c1 never reached the new guard
AFTER_RESTART = (
    _after_restart("cancel, then r2 opens c1", {"cancel_turn": {"turn": "t2"}}, OPEN_C1),
    _after_restart("r2 opens c1, stop_tenant", OPEN_C1, {"stop_tenant": {"tenant": "acme"}}),
    _after_restart("r2 opens c1, quarantine r2", OPEN_C1, {"quarantine_response": {"response": "r2"}}),
)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_response_after_a_restart_is_a_new_stream_to_the_new_process(protocol: str) -> None:
    """After a restart, the next response is a new request read by the restarted program's
    guard (the harness ends the body the old process was reading): the verdicts over HTTP
    are the in-process guard's, with nothing violated."""
    traces = list(AFTER_RESTART)
    over_http = _verdicts(_program(protocol), traces)
    assert over_http == _verdicts(f"guard:memory:{protocol}", traces)
    assert all(applicable and not violated for violated, applicable in over_http.values()), over_http


def _during_validation() -> list[Trace]:
    """The catalog's events delivered while the validator runs, a call put up for
    confirmation at the end of a trace, and a drop and a restart inside the validator."""
    names = (
        "emergency-stop-during-validation",
        "cancel-during-validation",
        "new-turn-during-validation",
        "awaiting-confirmation",
    )
    out = [by_name(name).trace for name in names]
    base = _after_restart("unused").tools
    head = list(_after_restart("unused").events[:2])
    fragment = Fragment("t1", "r1", "0", "c0", 0, '{"v":100}')
    terminal = CallTerminal("t1", "r1", "0", "c0", "e0")
    for name, last in (
        ("a drop inside the validator", Disconnect("t1", "r1", during_validation=True)),
        ("a restart inside the validator", Restart(during_validation=True)),
    ):
        out.append(Trace(events=(*head, fragment, terminal, last), tools=base, name=name))
    return out


def test_what_arrives_inside_the_validator_over_http_is_handled_as_in_process() -> None:
    """The program's validator runs on its stream's thread, holding the guard's lock: an
    event or a restart delivered inside it reaches that thread (it deadlocked on the main
    thread), a drop ends the stream at once (the SDK would see it only after the answer),
    and cutting the body left open at a trace's end records nothing for the trace."""
    traces = _during_validation()
    spec = _program("openai-responses")
    over_http = _verdicts(spec, traces)
    assert over_http == _verdicts("guard:memory:openai-responses", traces)
    assert all(applicable and not violated for violated, applicable in over_http.values()), over_http


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("CALLSAFE_LONG") != "1", reason="long variant (minutes a protocol): set CALLSAFE_LONG=1"
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_guard_over_http_is_certified_with_the_default_options(protocol: str) -> None:
    doc = report_json(certify(_program(protocol), Options()))
    assert doc["target_errors"] == []
    assert doc["summary"]["traces_run"] > 500
    for inv in doc["invariants"]:
        assert inv["status"] in ("holds", "not_applicable"), (inv["id"], inv.get("counterexamples"))
