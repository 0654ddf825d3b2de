"""A certification run written as production records: the JSONL log, the OTLP JSON
spans and the guard's store tables that a deployment of the same code would have left.

Why: ``callsafe observe`` must give certify's verdicts on records of a run certify judged
(``tests/test_observe_equivalence.py``), and the worked incident of ``docs/observe.md``
is a run written this way. Each writer keeps only what its format carries: the log keeps
everything; the spans keep the executions (and, as chat spans, the calls the model
completed); the store keeps turns, ledger and audit rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from callsafe.model.vocabulary import Observation, Trace, event_to_json, observation_to_json

__all__ = ["log_lines", "otlp_document", "otlp_from_sdk", "write_store"]


def _observation_line(obs: Observation) -> str:
    doc = observation_to_json(obs)
    body = next(iter(doc.values()))
    body.pop("step", None)
    return json.dumps(doc, ensure_ascii=False)


def log_lines(trace: Trace, observations: Sequence[Observation], *, tools: bool = True) -> Iterator[str]:
    """The JSONL log of a run: the catalog, then each delivered event followed by the
    observations made while it was being delivered (an observation's step is the index of
    the delivery in progress). ``tools=False`` leaves the catalog out, as a log that never
    wrote it."""
    if tools:
        yield json.dumps({"tools": {n: s.to_json() for n, s in trace.tools.items()}}, ensure_ascii=False)
    if trace.limits.to_json() != type(trace.limits)().to_json():
        yield json.dumps({"limits": trace.limits.to_json()})
    ordered = sorted(observations, key=lambda o: o.step)
    at = 0
    while at < len(ordered) and ordered[at].step < 0:
        yield _observation_line(ordered[at])
        at += 1
    for index, event in enumerate(trace.delivered()):
        yield json.dumps(event_to_json(event), ensure_ascii=False)
        while at < len(ordered) and ordered[at].step <= index:
            yield _observation_line(ordered[at])
            at += 1
    for obs in ordered[at:]:
        yield _observation_line(obs)


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def otlp_document(
    trace: Trace, observations: Sequence[Observation], *, arguments: bool = True, chat: bool = False
) -> dict[str, Any]:
    """The run as OTLP JSON: an ``execute_tool`` span per execution (its start the step it
    ran at; the turn is the span's trace, as one agent request is one trace), with
    ``gen_ai.tool.call.arguments`` when ``arguments``; with ``chat``, a chat span per
    response whose ``gen_ai.output.messages`` hold the calls the oracle completed, ending
    at the call's terminal event."""
    from callsafe.model.oracle import judge
    from callsafe.model.vocabulary import CallTerminal, Executed

    spans: list[dict[str, Any]] = []
    trace_ids: dict[str, str] = {}

    def trace_id(turn: str) -> str:
        return trace_ids.setdefault(turn, f"{len(trace_ids) + 1:032x}")

    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    for n, obs in enumerate(o for o in observations if isinstance(o, Executed)):
        attrs = [
            attr("gen_ai.operation.name", "execute_tool"),
            attr("gen_ai.tool.name", obs.tool),
            attr("gen_ai.tool.call.id", obs.key.call),
            attr("callsafe.tenant", obs.key.tenant),
            attr("callsafe.actor", obs.actor),
        ]
        if arguments:
            attrs.append(attr("gen_ai.tool.call.arguments", json.dumps(_plain(obs.arguments))))
        start = (obs.step + 1) * 1000 + 500 + n
        spans.append(
            {
                "traceId": trace_id(obs.key.turn),
                "spanId": f"{n + 1:016x}",
                "name": f"execute_tool {obs.tool}",
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + 1),
                "attributes": attrs,
            }
        )
    if chat:
        oracle = judge(trace)
        ended: dict[tuple[str, str, str, str], int] = {}
        for i, event in enumerate(trace.delivered()):
            if isinstance(event, CallTerminal):
                ended.setdefault((event.turn, event.response, event.item, event.call), i)
        for m, (key, verdict) in enumerate(oracle.verdicts.items()):
            record = oracle.semantics.state.calls.get((key.turn, key.response, key.item, key.call))
            at = ended.get((key.turn, key.response, key.item, key.call))
            if record is None or record.parse != "ok" or at is None:
                continue
            part = {"type": "tool_call", "id": key.call, "name": record.tool, "arguments": _plain(verdict.arguments)}
            messages = [{"role": "assistant", "parts": [part], "finish_reason": "tool_call"}]
            spans.append(
                {
                    "traceId": trace_id(key.turn),
                    "spanId": f"{m + 1:08x}c0ffee00",
                    "name": "chat model",
                    "startTimeUnixNano": "1",
                    "endTimeUnixNano": str((at + 1) * 1000),
                    "attributes": [
                        attr("gen_ai.operation.name", "chat"),
                        attr("gen_ai.response.id", key.response),
                        attr("gen_ai.output.messages", json.dumps(messages)),
                        attr("callsafe.tenant", key.tenant),
                    ],
                }
            )
    return {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]
    }


def write_store(path: Any, trace: Trace, observations: Sequence[Observation]) -> None:
    """The run as the guard's SQLite store would hold it (schema made by the store class
    itself): the turns, one *dispatched* ledger row (the claim) per execution and the other
    ledger rows, the audit rows and the operator controls, each ``at`` its step."""
    import sqlite3

    from callsafe.model.vocabulary import (
        AuditRow,
        CancelTurn,
        DisableTool,
        Executed,
        LedgerRow,
        QuarantineResponse,
        StopTenant,
        TurnStarted,
    )
    from callsafe.reference_impl.sqlite_store import SqliteStore

    SqliteStore(path, create=True, witness=False).close()
    db = sqlite3.connect(str(path))
    cancelled = {e.turn for e in trace.delivered() if isinstance(e, CancelTurn)}
    for i, event in enumerate(trace.delivered()):
        if isinstance(event, TurnStarted):
            status = "cancelled" if event.turn in cancelled else "live"
            db.execute(
                "INSERT OR IGNORE INTO turns (turn_id, actor, tenant, conversation, traceparent, status) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (event.turn, event.actor, event.tenant, event.conversation, event.traceparent, status),
            )
        elif isinstance(event, QuarantineResponse):
            db.execute("INSERT OR IGNORE INTO quarantined VALUES (?, ?, ?)", (event.response, event.reason, i))
        elif isinstance(event, DisableTool):
            db.execute("INSERT OR IGNORE INTO disabled_tools VALUES (?, ?, ?)", (event.tool, event.reason, i))
        elif isinstance(event, StopTenant):
            db.execute(
                "INSERT INTO tenant_stops (tenant, reason, at) VALUES (?, ?, ?)", (event.tenant, event.reason, i)
            )
    row_sql = (
        "INSERT INTO ledger (tenant, turn_id, response_id, item_id, call_id, fragments, terminal_reason, parse, "
        "validation, decision, traceparent, reason, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?)"
    )
    for obs in sorted(observations, key=lambda o: o.step):
        if isinstance(obs, Executed):
            k = obs.key
            db.execute(
                "INSERT OR IGNORE INTO calls (turn_id, response_id, item_id, call_id, tenant, tool, state) "
                "VALUES (?, ?, ?, ?, ?, ?, 'dispatched')",
                (k.turn, k.response, k.item, k.call, k.tenant, obs.tool),
            )
            db.execute(
                row_sql,
                (
                    k.tenant,
                    k.turn,
                    k.response,
                    k.item,
                    k.call,
                    0,
                    "completed",
                    "ok",
                    "ok",
                    "dispatched",
                    None,
                    obs.step,
                ),
            )
        elif isinstance(obs, LedgerRow) and obs.decision != "dispatched":
            k = obs.key
            db.execute(
                row_sql,
                (
                    k.tenant,
                    k.turn,
                    k.response,
                    k.item,
                    k.call,
                    obs.fragments,
                    obs.terminal_reason,
                    obs.parse,
                    obs.validation,
                    obs.decision,
                    obs.traceparent,
                    obs.step,
                ),
            )
        elif isinstance(obs, AuditRow):
            keys = json.dumps([key.to_json() for key in obs.keys])
            db.execute(
                "INSERT INTO audit (action, reason, keys, at) VALUES (?, ?, ?, ?)",
                (obs.action, obs.reason, keys, obs.step),
            )
    db.commit()
    db.close()


def otlp_from_sdk(spans: Sequence[Any]) -> dict[str, Any]:
    """Finished spans of the OpenTelemetry SDK (``ReadableSpan``: what an in-memory exporter
    holds) as one OTLP JSON document, the form the Collector's file exporter writes, so
    that the spans an instrumentation really made can be observed."""

    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, (list, tuple)):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": str(v)}

    out = []
    for span in spans:
        context = span.get_span_context()
        out.append(
            {
                "traceId": f"{context.trace_id:032x}",
                "spanId": f"{context.span_id:016x}",
                "name": span.name,
                "startTimeUnixNano": str(span.start_time),
                "endTimeUnixNano": str(span.end_time),
                "attributes": [{"key": k, "value": value(v)} for k, v in (span.attributes or {}).items()],
            }
        )
    return {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "sdk"}, "spans": out}]}]
    }
