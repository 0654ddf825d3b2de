"""callsafe.guard certified end to end: an agent program reads its stream with the real
``openai`` or ``anthropic`` SDK from the loopback provider (real HTTP, SSE cut inside
``data:`` fields and UTF-8 characters, keep-alives, dropped connections) and hands it to the
guard (``adapters/guard_sdk.py``); every invariant holds, over each protocol."""

from __future__ import annotations

import sys

import pytest
import skips

from callsafe.certify.harness import Options, certify
from callsafe.model.invariants import INVARIANTS
from callsafe.reporting.report import report_json

pytest.importorskip("uvicorn", reason=skips.missing("uvicorn", "pip install -e '.[serve]'"))
pytest.importorskip("openai", reason=skips.missing("openai"))
pytest.importorskip("anthropic", reason=skips.missing("anthropic"))

WIRE = Options(generators=("wire",), minimize=True, minimize_budget=10)


@pytest.mark.parametrize("protocol", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_the_guard_behind_the_real_sdk_over_http_holds_every_invariant(protocol: str) -> None:
    cert = certify(f"exec:{sys.executable} -m callsafe.adapters.guard_sdk --protocol {protocol}", WIRE)
    doc = report_json(cert)
    assert doc["target"]["run"]["mode"] == "exec, wire mode" and doc["target"]["run"]["wire"] == "http"
    assert doc["target_errors"] == []
    assert doc["summary"]["traces_run"] > 50
    for inv in doc["invariants"]:
        assert inv["status"] == "holds", (inv["id"], inv.get("counterexamples"))
        assert inv["traces_checked"] > 50
    assert {inv["id"] for inv in doc["invariants"]} == {inv.id for inv in INVARIANTS}
