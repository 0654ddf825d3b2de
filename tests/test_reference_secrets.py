"""A planted secret in the arguments never appears in a ledger, audit or log observation,
nor anywhere in the durable store; only the executor (and the validator) get it."""

from __future__ import annotations

from pathlib import Path

import pytest

from callsafe.certify.runner import run_trace
from callsafe.model.vocabulary import (
    AuditRow,
    CallOpened,
    CallTerminal,
    CancelTurn,
    DisableTool,
    Event,
    Executed,
    Fragment,
    LedgerRow,
    LogLine,
    QuarantineResponse,
    Replay,
    Restart,
    StatusShown,
    StopTenant,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.conformance import conformance_problems
from callsafe.targets.reference import ReferenceTarget

SECRET = "sk-live-PLANTED-4242-do-not-log"
TOOLS = {
    "charge": ToolSpec(
        schema={
            "type": "object",
            "required": ["card", "amount"],
            "properties": {"card": {"type": "string"}, "amount": {"type": "integer"}},
        },
        business={"max": {"amount": 100}},
    ),
    "confirmed_charge": ToolSpec(schema={"type": "object"}, confirm=True),
    "notes": ToolSpec(schema={"type": "object", "additionalProperties": {"type": "string"}}),
}


def call(c: str, text: str, tool: str = "charge", r: str = "r1", parts: int = 3) -> list[Event]:
    size = max(1, -(-len(text) // parts))
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    return [
        CallOpened(turn="t1", response=r, item=f"i-{c}", call=c, tool=tool),
        *[Fragment(turn="t1", response=r, item=f"i-{c}", call=c, position=i, text=p) for i, p in enumerate(chunks)],
        CallTerminal(turn="t1", response=r, item=f"i-{c}", call=c, event_id=f"ev-{c}"),
    ]


GOOD = '{"card":"' + SECRET + '","amount":5}'
EVENTS: list[Event] = [
    TurnStarted(turn="t1", actor="u1", tenant="acme"),
    *call("ok", GOOD),
    *call("schema", '{"card":"' + SECRET + '","amount":"five"}'),
    *call("business", '{"card":"' + SECRET + '","amount":500}'),
    *call("malformed", '{"card":"' + SECRET + '",'),
    *call("glued", GOOD + GOOD),
    *call("key", '{"' + SECRET + '": 7}', "notes"),
    *call("confirm", GOOD, "confirmed_charge"),
    *call("conflict", GOOD)[:2],
    Fragment(turn="t1", response="r1", item="i-conflict", call="conflict", position=0, text=SECRET),
    *call("quarantined", GOOD, r="rq")[:3],
    QuarantineResponse(response="rq", reason="fraud review"),
    *call("disabled", GOOD, "notes", r="rd")[:3],
    DisableTool(tool="notes", reason="bug"),
    Restart(),
    Replay(start=0, stop=8),
    *call("late", GOOD, r="r9")[:2],
    StopTenant(tenant="acme", reason="incident"),
    CancelTurn(turn="t1"),
]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_planted_secret_never_leaks(store: str, tmp_path: Path) -> None:
    trace = Trace(events=tuple(EVENTS), tools=TOOLS, name="secrets")
    run = run_trace(ReferenceTarget(store=store), trace, store_dir=tmp_path)
    assert conformance_problems(trace, run.observations, run.errors) == []
    executed = [o for o in run.observations if isinstance(o, Executed)]
    assert [e.key.call for e in executed] == ["ok"] and executed[0].arguments["card"] == SECRET
    texts: list[str] = []
    for obs in run.observations:
        if isinstance(obs, LedgerRow):
            texts += [obs.parse, obs.validation, obs.decision, obs.terminal_reason or "", str(obs.key)]
        elif isinstance(obs, AuditRow):
            texts += [obs.action, obs.reason, *map(str, obs.keys)]
        elif isinstance(obs, (LogLine, StatusShown)):
            texts.append(repr(obs))
    assert texts and not [t for t in texts if SECRET in t]
    assert any(isinstance(o, LedgerRow) and "withheld" in o.validation for o in run.observations), (
        "a schema error whose instance path is an argument key is reported without the key"
    )
    if store == "sqlite":
        leaked = [p.name for p in tmp_path.iterdir() if SECRET.encode() in p.read_bytes()]
        assert leaked == [], "the durable store holds argument values"
