"""Secrets: a value planted in the arguments never appears in the ledger, the audit, the
logs, the store, the status, an error message or an exception text, on any path that
fails a call; and the certification reports show it only as the test data it is.

Where ``tests/test_reference_secrets.py`` stops (observations and the SQLite file of a
harness run), this forces every failure the implementation has a message for: a business
validator that *returns* the secret in its reason or *raises* with it, an executor that
raises with it, schema failures of every keyword (a secret as a value, as a key, as an
undeclared nested key), malformed, glued, conflicting, over-limit, too deep and too long
arguments, a closed store in the middle of a run, and unsupported events; it reads the
PostgreSQL tables as well as the SQLite file, Python's logging, stdout and stderr.

The certification report decision: a counterexample's trace is test data the user wrote,
and a report that cannot show it cannot be replayed, so a report may show argument text
inside a counterexample (its trace, the target's observations of it, its sequence diagram,
the generated files and the JUnit failure body that carries the trace). It must not show
it anywhere else: not in the summary, the invariant and generator tables, the findings'
messages, the JUnit failure messages, the target errors, or the diagrams of a run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skips

from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    CallTerminal,
    Confirm,
    DisableTool,
    Event,
    Executed,
    Fragment,
    Limits,
    LogLine,
    Observation,
    QuarantineResponse,
    Replay,
    StopTenant,
    ToolSpec,
    Trace,
    TurnStarted,
)
from callsafe.reference_impl.core import Core
from callsafe.reference_impl.driver import Driver
from callsafe.reference_impl.errors import AssemblerError
from callsafe.reference_impl.memory_store import MemoryStore
from callsafe.reference_impl.sqlite_store import SqliteStore
from callsafe.reference_impl.store import Store

SECRET = "sk-live-PLANTED-7319-never-log-me"
DSN = os.environ.get("CALLSAFE_PG_DSN", "")
CARD = {"type": "object", "required": ["card"], "properties": {"card": {"type": "string"}, "amount": {}}}
TOOLS = {
    "charge": ToolSpec(schema=CARD),
    "explode": ToolSpec(schema=CARD),
    "fragile": ToolSpec(schema=CARD),
    "confirmed": ToolSpec(schema=CARD, confirm=True),
    "enum": ToolSpec(schema={"type": "object", "properties": {"card": {"enum": ["visa", "amex"]}}}),
    "const": ToolSpec(schema={"type": "object", "properties": {"card": {"const": "visa"}}}),
    "pattern": ToolSpec(schema={"type": "object", "properties": {"card": {"pattern": "^[0-9]+$"}}}),
    "short": ToolSpec(schema={"type": "object", "properties": {"card": {"maxLength": 4}}}),
    "closed": ToolSpec(schema={"type": "object", "properties": {"card": {}}, "additionalProperties": False}),
    "names": ToolSpec(schema={"type": "object", "propertyNames": {"pattern": "^[a-z]{1,8}$"}}),
    "nested": ToolSpec(
        schema={
            "type": "object",
            "properties": {"meta": {"type": "object", "additionalProperties": {"type": "integer"}}},
        }
    ),
    "typed": ToolSpec(schema={"type": "object", "properties": {"card": {"type": "integer"}}}),
}
GOOD = '{"card":"' + SECRET + '","amount":5}'


def call(c: str, text: str, tool: str = "charge", response: str = "r1", parts: int = 3) -> list[Event]:
    size = max(1, -(-len(text) // parts))
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    return [
        CallOpened(turn="t1", response=response, item=f"i-{c}", call=c, tool=tool),
        *[
            Fragment(turn="t1", response=response, item=f"i-{c}", call=c, position=i, text=p)
            for i, p in enumerate(chunks)
        ],
        CallTerminal(turn="t1", response=response, item=f"i-{c}", call=c, event_id=f"ev-{c}"),
    ]


def events() -> list[Event]:
    deep = '{"card":"' + SECRET + '","x":' + "[" * 3000 + "]" * 3000 + "}"
    return [
        TurnStarted(turn="t1", actor="u1", tenant="acme"),
        *call("ok", GOOD),
        *call("business-returns", '{"card":"' + SECRET + '","amount":500}'),
        *call("business-raises", GOOD, "explode"),
        *call("executor-raises", GOOD, "fragile"),
        *call("enum", GOOD, "enum"),
        *call("const", GOOD, "const"),
        *call("pattern", GOOD, "pattern"),
        *call("short", GOOD, "short"),
        *call("closed-key", '{"card":"x","' + SECRET + '":1}', "closed"),
        *call("names-key", '{"' + SECRET + '":1}', "names"),
        *call("nested-key", '{"meta":{"' + SECRET + '":"x"}}', "nested"),
        *call("typed", GOOD, "typed"),
        *call("truncated", '{"card":"' + SECRET),
        *call("glued", GOOD + GOOD),
        *call("trailing", GOOD + " " + SECRET),
        *call("escape", '{"card":"\\q' + SECRET + '"}'),
        *call("deep", deep, parts=20),
        *call("long-int", '{"card":"' + SECRET + '","n":' + "9" * 5000 + "}"),
        *call("over-limit", '{"card":"' + SECRET * 3000 + '"}', parts=30),
        *call("conflict", GOOD)[:2],
        Fragment(turn="t1", response="r1", item="i-conflict", call="conflict", position=0, text=SECRET),
        *call("confirmed", GOOD, "confirmed"),
        *call("quarantined", GOOD, response="rq")[:3],
        QuarantineResponse(response="rq", reason="fraud review"),
        *call("disabled", GOOD, "typed", response="rd")[:3],
        DisableTool(tool="typed", reason="bug 12"),
        Confirm(turn="t1", response="r1", item="i-confirmed", call="confirmed"),
        *call("stopped", GOOD, response="rs")[:3],
        StopTenant(tenant="acme", reason="incident 9"),
    ]


def validate(key: CallKey, tool: str, arguments: Any) -> str | None:
    if tool == "explode":
        raise ValueError(f"card {arguments.get('card')} is blocked")
    if arguments.get("amount", 0) > 100:
        return f"card {arguments.get('card')} over its limit"
    return None


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Any]]:
    """A store, and a function that returns every byte it holds as text."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory, lambda: repr(vars(memory))
    elif request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "s.sqlite3", create=True)
        yield sqlite, lambda: "".join(p.read_bytes().decode("latin-1") for p in tmp_path.iterdir())
        sqlite.close()
    else:
        if not DSN:
            pytest.skip(skips.POSTGRES)
        from callsafe.reference_impl.postgres_store import PostgresStore

        pg = PostgresStore(DSN, f"callsafe_secrets_{uuid.uuid4().hex[:12]}", create=True)
        tables = ["turns", "current_turns", "calls", "terminal_ids", "ended_responses", "quarantined"]
        tables += ["disabled_tools", "tenant_stops", "ledger", "audit", "outcomes"]
        yield pg, lambda: repr([list(pg.rows(t)) for t in tables])
        pg.close()  # the test may have closed it already
        cleanup = PostgresStore(DSN, pg.namespace)
        cleanup.drop()
        cleanup.close()


def test_forced_failures_leak_nothing(
    backend: tuple[Store, Any], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    store, contents = backend
    caplog.set_level(logging.DEBUG)
    seen: list[Observation] = []
    raised: list[str] = []
    ran: list[tuple[CallKey, Any]] = []

    def execute(key: CallKey, actor: str, tool: str, arguments: Any, tp: str | None = None) -> None:
        ran.append((key, arguments))
        if tool == "fragile":
            raise RuntimeError(f"gateway refused {arguments['card']}")

    core = Core(TOOLS, Limits(call_bytes=64 * 1024, turn_bytes=4 * 1024 * 1024), store.load())
    driver = Driver(
        core,
        store,
        executor=execute,
        business_validator=validate,
        observe=seen.append,
        step=lambda: 0,
        clock=lambda: 0.0,
    )
    for event in [*events(), Replay(start=0, stop=3)]:
        try:
            driver.run(core.receive(event))
        except AssemblerError as exc:
            raised.append(f"{type(exc).__name__}: {exc}")
    assert sorted(k.call for k, _ in ran) == ["confirmed", "executor-raises", "ok"]
    assert all(args["card"] == SECRET for _, args in ran)
    assert raised == ["UnsupportedEvent: no rule for a 'replay' event (replays are expanded before delivery)"]
    reasons = {entry.key.call: (entry.validation, why) for entry, why in store.ledger()}
    assert reasons["business-returns"] == ("business: rejected", "business rule rejected the call")
    assert reasons["business-raises"][0] == "business: rejected"
    for name in ("closed-key", "names-key", "nested-key"):
        assert SECRET not in reasons[name][0]
    assert [o.text for o in seen if isinstance(o, LogLine) and "executor raised" in o.text] == [
        "acme/t1/r1/i-executor-raises/executor-raises: executor raised RuntimeError"
    ]
    # a store that fails in the middle of a run: its typed error names no value
    if not isinstance(store, MemoryStore):
        text = contents()
        store.close()
        for event in [TurnStarted(turn="t2", actor="u1", tenant="acme"), *call("after-close", GOOD)]:
            try:
                driver.run(core.receive(event))
            except AssemblerError as exc:
                raised.append(f"{type(exc).__name__}: {exc}")
        assert any(r.startswith("StoreError") for r in raised)
    else:
        text = contents()
    told = [repr(o) for o in seen if not isinstance(o, Executed)]
    out = capsys.readouterr()
    channels = {
        "observations": "\n".join(told),
        "exceptions": "\n".join(raised),
        "store": text,
        "logging": "\n".join(r.getMessage() for r in caplog.records),
        "stdout": out.out,
        "stderr": out.err,
    }
    leaks = {name: text.count(SECRET) for name, text in channels.items() if SECRET in text}
    assert leaks == {}, f"the planted secret appears in: {leaks}"
    assert len(told) > 60  # the check looked at something


def test_provider_errors_name_no_argument_value() -> None:
    from callsafe.providers.streams import parse_payloads

    chat = {
        "id": "x",
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "type": "function"}]}}],
    }
    chat["choices"][0]["delta"]["tool_calls"][0]["function"] = {"name": "pay", "arguments": {"card": SECRET}}  # type: ignore[index]
    parsed = parse_payloads("openai-chat", [chat], turn="t1", response="r1")
    assert parsed.error is not None
    assert SECRET not in str(parsed.error)


# -- the certification reports ------------------------------------------------------------------


class _Leaky:
    """The reference implementation with one bug: it logs what it runs (INV-LEDGER)."""

    def __new__(cls, **options: Any) -> Any:
        from callsafe.contract.target import TargetEnv
        from callsafe.targets.reference import ReferenceTarget

        class Leaky(ReferenceTarget):
            def start(self, env: TargetEnv) -> None:
                inner = env.executor

                def executor(key: CallKey, actor: str, tool: str, arguments: Any, tp: str | None = None) -> None:
                    env.observe(LogLine(env.step(), f"ran {tool} with {json.dumps(arguments)}"))
                    inner(key, actor, tool, arguments, tp)

                super().start(TargetEnv(**{**vars(env), "executor": executor}))

        target = Leaky(store="memory")
        target.name = "leaky-reference"
        return target


def _certify_with_secret_traces(factory: Any, out: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from callsafe.certify import harness
    from callsafe.generators.catalog import Scenario
    from callsafe.reporting.report import write_reports

    trace = Trace(
        events=(
            TurnStarted(turn="t1", actor="u1", tenant="acme"),
            *call("ok", GOOD),
            *call("business-returns", '{"card":"' + SECRET + '","amount":500}'),
            *call("glued", GOOD + GOOD),
            *call("stopped", GOOD, response="rs")[:3],
            StopTenant(tenant="acme", reason="incident 9"),
        ),
        tools={"charge": ToolSpec(schema=CARD, business={"max": {"amount": 100}})},
        name="secret in the arguments",
    )
    monkeypatch.setattr(harness, "CATALOG", [Scenario("secret", "test", trace, "spec")])
    options = harness.Options(generators=("catalog",), minimize=True, minimize_budget=5.0)
    cert = harness.certify(factory, options)
    write_reports(cert, out)
    return cert


def _outside_counterexamples(out: Path) -> dict[str, str]:
    """Every report text with the counterexample sections cut out."""
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    for inv in doc["invariants"]:
        for ce in inv["counterexamples"]:
            for shown in ("trace", "observations", "calls", "explanation"):  # the run: test data
                ce.pop(shown, None)
    html = (out / "report.html").read_text(encoding="utf-8")
    html = re.sub(r"<div class='ce'.*?</details></div>", "", html, flags=re.DOTALL)
    junit = ET.parse(out / "junit.xml").getroot()
    messages = [el.get("message", "") for el in junit.iter()]
    texts = {"report.json": json.dumps(doc, ensure_ascii=False), "report.html": html, "junit": "\n".join(messages)}
    for path in out.glob("lifecycle-coverage.*"):
        texts[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def test_certification_reports_show_a_secret_only_as_test_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("callsafe.reporting.report")
    from callsafe.targets.reference import ReferenceTarget

    # the reference passes: no counterexample, and the secret is nowhere in the reports
    passed = _certify_with_secret_traces(lambda: ReferenceTarget(store="memory"), tmp_path / "pass", monkeypatch)
    assert passed.ok
    files = [p for p in (tmp_path / "pass").rglob("*") if p.is_file()]
    assert files and not [p.name for p in files if SECRET.encode() in p.read_bytes()]

    # a leaking target fails INV-LEDGER: its counterexample shows the trace (test data),
    # and the secret appears nowhere outside the counterexample sections
    failed = _certify_with_secret_traces(_Leaky, tmp_path / "fail", monkeypatch)
    assert not failed.ok and "INV-LEDGER" in failed.violated
    everything = "".join(p.read_text(errors="replace") for p in (tmp_path / "fail").rglob("*") if p.is_file())
    assert SECRET in everything, "the counterexample should carry its trace"
    leaks = [name for name, text in _outside_counterexamples(tmp_path / "fail").items() if SECRET in text]
    assert leaks == [], f"the secret appears outside a counterexample in {leaks}"
