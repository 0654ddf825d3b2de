"""docs/target-protocol.md says what callsafe sends and expects, exactly: the messages a run
sends are valid under the published schema (the tool catalog's fields included), the page's
catalog table names the fields callsafe writes, and its answers table says how each message
from callsafe is answered (issue 29, D1)."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from callsafe.certify.checking import check_trace
from callsafe.contract.exec_protocol import FROM_HARNESS, SCHEMA, TOOL_FIELDS
from callsafe.generators.catalog import CATALOG
from callsafe.model.vocabulary import ToolSpec
from callsafe.targets import exec_target

PAGE = Path(__file__).resolve().parents[1] / "docs" / "target-protocol.md"
LIMITS = {"call_bytes": 65536, "turn_bytes": 262144}
REFERENCE = f"exec:{sys.executable} -m callsafe.adapters.reference"


def _section_table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after ``heading``."""
    body = text.split(heading, 1)[1]
    rows = []
    for line in body.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and its rule


def test_the_catalog_fields_are_toolspecs_the_schemas_and_the_pages() -> None:
    assert tuple(f.name for f in dataclasses.fields(ToolSpec)) == TOOL_FIELDS
    assert tuple(SCHEMA["$defs"]["tool"]["properties"]) == TOOL_FIELDS
    rows = _section_table(PAGE.read_text(encoding="utf-8"), "## The tool catalog")
    assert [row[0] for row in rows] == [f"`{name}`" for name in TOOL_FIELDS]


def test_the_answers_table_covers_every_message_from_callsafe_once() -> None:
    text = PAGE.read_text(encoding="utf-8")
    rows = _section_table(text, "depends on the message:")
    named = [name for row in rows for name in re.findall(r"`(\w+)`", row[0])]
    assert sorted(named) == sorted(FROM_HARNESS)
    answers = {name: row[1] for row in rows for name in re.findall(r"`(\w+)`", row[0])}
    assert answers["init"].startswith("`init_ok`") and "exits" in answers["shutdown"]
    assert answers["validation"].startswith("nothing") and answers["event"].startswith('`{"type":"done"')


def test_every_message_callsafe_sends_is_valid_under_the_published_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's traces through the protocol (tools that need confirmation, carry business
    rules or name their actors, and catalog changes among them), every message checked."""
    harness = jsonschema.Draft202012Validator({**SCHEMA, "oneOf": [{"$ref": "#/$defs/harness"}]})
    sent: list[dict[str, Any]] = []
    send = exec_target._Process.send

    def checked_send(self: Any, message: dict[str, Any]) -> int:
        mid = send(self, message)
        sent.append({**message, "id": mid})
        return mid

    monkeypatch.setattr(exec_target._Process, "send", checked_send)
    for scenario in CATALOG:
        run = check_trace(REFERENCE, scenario.trace).run
        assert run is not None and run.errors == [], scenario.name
    for message in sent:
        harness.validate(message)
    tools = [m["tools"] for m in sent if m["type"] in ("start", "event") and "tools" in m]
    fields = {name for catalog in tools for spec in catalog.values() for name in spec}
    assert fields == set(TOOL_FIELDS)  # every field was sent, and checked, at least once
    assert any(m["type"] == "event" and "tools" in m for m in sent)  # a catalog change
    with pytest.raises(jsonschema.ValidationError):  # a catalog of bare schemas is not the protocol's
        harness.validate({"type": "start", "id": 0, "tools": {"pay": {"type": "object"}}, "limits": LIMITS})
    harness.validate({"type": "start", "id": 0, "tools": {"pay": {"schema": {"type": "object"}}}, "limits": LIMITS})
