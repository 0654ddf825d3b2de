"""docs/adapters.md works as written: its example files are extracted and certified, the
index-keyed assembler's counterexamples are named after what they show and replay with
``callsafe replay --target``, and the guide names every event and field a target gets."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from callsafe.cli.main import main
from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.vocabulary import EVENT_TYPES, OBSERVATION_TYPES

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "adapters.md"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def guide_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The guide's ``# file:`` blocks written out, as a new user would save them."""
    text = GUIDE.read_text(encoding="utf-8")
    names = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        head = re.match(r"# file: (\S+)\n", block)
        if head:
            (tmp_path / head.group(1)).write_text(block, encoding="utf-8")
            names.append(head.group(1)[:-3])
    assert {"index_assembler", "index_adapter", "chat_wire_adapter"} <= set(names)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in names:
        sys.modules.pop(name, None)


def test_the_index_keyed_example_is_caught_and_its_counterexample_replays(guide_files: Path) -> None:
    out = guide_files / "out"
    code, text = invoke("certify", "index_adapter:factory", "--generators", "catalog", "--report", str(out))
    assert code == 1, text  # violated, not a target error: the adapter itself runs cleanly
    doc = json.loads((out / "report.json").read_text())
    assert doc["broken_traces"]["count"] == {}
    ces = [(inv["id"], ce) for inv in doc["invariants"] for ce in inv["counterexamples"]]
    assert ces
    for inv_id, ce in ces:
        name = ce["trace"]["name"]
        assert name.startswith(inv_id + " "), name  # what it shows: the invariant first,
        events = name.rpartition(": ")[2].split(", ")  # then the decisive events
        assert events and all(e.split(" ")[0] in EVENT_TYPES for e in events), name
        assert ce["trace"]["source"].startswith("shrunk from the catalog trace"), ce["trace"]["source"]
        assert ce["source"] and ce["source"] not in name  # the scenario is a field apart
    # one counterexample per cause: the one the guide shows is the business rule's refusal
    lives = [ce for inv_id, ce in ces if inv_id == "LIVE-DISPATCH"]
    assert lives, [i for i, _ in ces]
    shown = [
        (ce, refused)
        for ce in lives
        if (refused := [c for c in ce["calls"] if c["service"] == "validator" and c["answer"]])
    ]
    assert shown, [ce["trace"]["name"] for ce in lives]
    live, refused = shown[0]
    assert refused[0]["arguments"] == {"amount": 1000}  # the validator's input and answer
    assert "refused: business rule" in text and "{'amount': 1000}" in text
    trace = out / live["files"]["trace"]
    code, text = invoke("replay", str(trace), "--target", "index_adapter:factory")
    assert code == 1 and "LIVE-DISPATCH" in text, text
    assert "differ from the reference" in text and "t1/a: executed 0x" in text
    code, text = invoke("replay", str(trace))
    assert code == 2 and "--target" in text  # no silent judging of the reference


def test_the_provider_protocol_example_is_certified_on_the_wire_traces(guide_files: Path) -> None:
    out = guide_files / "wire-out"
    code, text = invoke("certify", "chat_wire_adapter:factory", "--generators", "wire", "--report", str(out))
    assert code == 0, text
    doc = json.loads((out / "report.json").read_text())
    statuses = {i["id"]: i["status"] for i in doc["invariants"]}
    assert statuses["INV-ONCE"] == statuses["LIVE-DISPATCH"] == "holds"
    assert doc["summary"]["traces_run"] > 50 and not doc["broken_traces"]["count"]


def test_the_guide_names_every_event_field_and_service() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    for cls in EVENT_TYPES.values():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{cls.__name__}`")), None)
        assert row is not None, cls.__name__
        for f in dataclasses.fields(cls):
            if f.name != "during_validation":
                assert f.name in row, (cls.__name__, f.name)
    for cls in OBSERVATION_TYPES.values():
        assert f"`{cls.__name__}`" in text, cls.__name__
    for f in dataclasses.fields(TargetEnv):
        assert f"| `{f.name}" in text, f.name
    for capability in CAPABILITIES:
        assert f"`{capability}`" in text, capability
    for method in ("start", "receive", "restart", "close", "receive_wire", "end_stream"):
        assert f"| `{method}(" in text, method
