"""The openai SDK's realtime client certified over the loopback's WebSocket, judged at the
tool, as programs over the target protocol (wire mode, live streams, byte acks):

* ``callsafe.adapters.guard_sdk --protocol openai-realtime``: ``callsafe.guard`` reading
  the client's events holds every invariant;
* ``callsafe.adapters.openai_realtime_example``: the pattern of OpenAI's Realtime guide
  (run a call at ``response.function_call_arguments.done``) runs a call the user
  interrupted: the API sends that event for interrupted calls too."""

from __future__ import annotations

import sys

import pytest
import skips

from callsafe.certify.checking import check_trace
from callsafe.certify.harness import Options, certify
from callsafe.model.builder import TraceBuilder
from callsafe.model.invariants import INVARIANTS
from callsafe.reporting.report import report_json

pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
pytest.importorskip("openai", reason=skips.missing("openai"))
pytest.importorskip("websockets", reason=skips.missing("websockets"))

WIRE = Options(depth=1, walks=5, generators=("wire",), minimize=True, minimize_budget=10)
GUARD = f"exec:{sys.executable} -m callsafe.adapters.guard_sdk --protocol openai-realtime"
EXAMPLE = f"exec:{sys.executable} -m callsafe.adapters.openai_realtime_example"


def test_the_guard_fed_realtime_payloads_holds_every_invariant() -> None:
    """``guard:memory:openai-realtime``: the guard's Realtime reader in process, over the
    wire traces and the wire adversities (those the Realtime wire can say)."""
    cert = certify(
        "guard:memory:openai-realtime",
        Options(depth=1, walks=5, generators=("wire", "wire-adversities", "catalog"), minimize_budget=10),
    )
    assert cert.traces_run > 50
    assert {inv.id: cert.invariants[inv.id].status for inv in INVARIANTS} == {inv.id: "holds" for inv in INVARIANTS}


def test_the_guard_behind_the_sdk_realtime_client_holds_every_invariant() -> None:
    doc = report_json(certify(GUARD, WIRE))
    assert doc["target"]["run"]["mode"] == "exec, wire mode" and doc["target"]["run"]["wire"] == "http"
    assert doc["target_errors"] == []
    assert doc["summary"]["traces_run"] > 50
    for inv in doc["invariants"]:
        assert inv["status"] == "holds", (inv["id"], inv.get("counterexamples"))
    assert {inv["id"] for inv in doc["invariants"]} == {inv.id for inv in INVARIANTS}


def _barge_in() -> object:
    """A refund streamed whole, then the user speaks over the model: the response is
    cancelled (``error``) before the call's item completes."""
    b = TraceBuilder(tools={"refund": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    b = b.open("call_1", "refund", item="fc_1").fragment("call_1", '{"amount":').fragment("call_1", "10}")
    return b.terminal("call_1", reason="error").response_end(reason="error").build()


def test_the_guides_pattern_runs_a_call_the_user_interrupted() -> None:
    example = check_trace(EXAMPLE, _barge_in())  # type: ignore[arg-type]
    assert example.run is not None
    assert [o.kind for o in example.run.observations if o.kind == "executed"] == ["executed"]
    assert "INV-CANCEL" in example.violated, example.explain()
    guarded = check_trace(GUARD, _barge_in())  # type: ignore[arg-type]
    assert guarded.run is not None and not any(o.kind == "executed" for o in guarded.run.observations)
    assert guarded.violated == set(), guarded.explain()


@pytest.mark.slow
def test_the_guides_pattern_is_certified_and_found_out() -> None:
    doc = report_json(certify(EXAMPLE, WIRE))
    assert doc["target_errors"] == []
    statuses = {inv["id"]: inv["status"] for inv in doc["invariants"]}
    assert statuses["INV-TERMINAL"] == "violated" and statuses["INV-CANCEL"] == "violated"
    assert statuses["INV-ONCE"] == "holds" and statuses["INV-EXACT-ARGS"] == "holds"
