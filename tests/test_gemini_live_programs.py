"""google-genai's Live client certified over the loopback's WebSocket (TLS), judged at the
tool, as programs over the target protocol (wire mode, live streams, byte acks):

* ``guard:memory:gemini-live``: the guard's Live reader in process holds every invariant
  over the wire traces, the Live adversities and the catalog;
* ``callsafe.adapters.guard_sdk --protocol gemini-live``: ``callsafe.guard`` reading the
  SDK's messages holds every invariant;
* ``callsafe.adapters.gemini_live_example``: the pattern of Google's Live tool-use guide
  (run each function call of a ``toolCall`` as it arrives) runs a call the stream repeats
  twice (mastra #22969), where the guard runs it once."""

from __future__ import annotations

import sys

import pytest
import skips

from callsafe.certify.checking import check_trace
from callsafe.certify.harness import Options, certify
from callsafe.certify.wire_adversities import adversity_traces
from callsafe.model.invariants import INVARIANTS
from callsafe.reporting.report import report_json

pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
pytest.importorskip("google.genai", reason=skips.missing("google-genai"))
pytest.importorskip("websockets", reason=skips.missing("websockets"))
pytest.importorskip("cryptography", reason=skips.missing("cryptography"))

LIVE = Options(depth=1, walks=5, generators=("wire", "wire-adversities"), minimize=True, minimize_budget=10)
GUARD = f"exec:{sys.executable} -m callsafe.adapters.guard_sdk --protocol gemini-live"
EXAMPLE = f"exec:{sys.executable} -m callsafe.adapters.gemini_live_example"
ALL_HOLD = {inv.id: "holds" for inv in INVARIANTS}


def test_the_guard_fed_live_messages_holds_every_invariant() -> None:
    cert = certify(
        "guard:memory:gemini-live",
        Options(depth=1, walks=5, generators=("wire", "wire-adversities", "catalog"), minimize_budget=10),
    )
    assert cert.traces_run > 40
    assert {inv.id: cert.invariants[inv.id].status for inv in INVARIANTS} == ALL_HOLD


def test_the_guard_behind_the_sdk_live_client_holds_every_invariant() -> None:
    doc = report_json(certify(GUARD, LIVE))
    assert doc["target"]["run"]["mode"] == "exec, wire mode" and doc["target"]["run"]["wire"] == "http"
    assert doc["target_errors"] == []
    assert doc["summary"]["traces_run"] >= 20
    assert {inv["id"]: inv["status"] for inv in doc["invariants"]} == ALL_HOLD


def test_the_guides_pattern_runs_a_repeated_call_twice() -> None:
    trace = next(t for t in adversity_traces(("gemini-live",), sse=False) if t.operator == "live-call-repeated")
    example = check_trace(EXAMPLE, trace)
    assert example.run is not None
    assert [o.kind for o in example.run.observations if o.kind == "executed"] == ["executed", "executed"]
    assert "INV-ONCE" in example.violated, example.explain()
    guarded = check_trace(GUARD, trace)
    assert guarded.run is not None
    assert [o.kind for o in guarded.run.observations if o.kind == "executed"] == ["executed"]
    assert guarded.violated == set(), guarded.explain()
