"""Recording a target's own OpenTelemetry spans, as OTLP JSON, while it is certified.

Why: ``callsafe observe`` judges production records with certify's invariants; the way to
know what an instrumentation's spans establish is to record them while certify runs the
same program, and compare the two verdicts (``tests/test_observe_frameworks.py``). The
agent frameworks instrument themselves (pydantic-ai's ``InstrumentationSettings``, Strands'
tracer, google-adk's) through the OpenTelemetry API; this installs the SDK with one local
exporter and nothing else, so recording stays offline: no OTLP network exporter is ever
made, whatever ``OTEL_*`` variables say.

* ``CALLSAFE_RECORD_SPANS=PATH`` (:func:`record_spans_from_environment`, called by the
  framework programs and by in-process targets that instrument themselves): a file gets
  one OTLP JSON document per export, a line each (what the Collector's file exporter
  writes, what ``callsafe observe --format spans`` reads); a directory gets one such file
  per run of the target (:func:`begin_run`, called when the harness starts a trace), named
  ``spans-<pid>-<n>.otlp.jsonl``.
* :func:`record_spans` with no path keeps the spans in memory (:attr:`Recording.memory`),
  for a test that reads them back per trace.
* Every span started while a turn is bound (:func:`bind_turn`, called when a target
  receives a turn) carries ``callsafe.turn``, ``callsafe.tenant`` and ``callsafe.actor``: a
  framework starts a new trace per agent run, and a turn that reads two streams (a
  reconnect) is two runs, so without the binding the two runs of one call would look like
  two turns' calls.

``keep_offline`` (``offline.py``) sets ``OTEL_SDK_DISABLED=true`` so that no library's own
exporter starts; the provider made here is built with the SDK switched on for its own
construction only (the variable is put back), so a program's libraries still see it off.

Optional: ``opentelemetry-sdk``. Without it :func:`record_spans` raises ``RuntimeError``
and :func:`record_spans_from_environment` says why on standard error and records nothing.
A loose module: nothing of callsafe's folders is imported.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "ENVIRONMENT",
    "Recording",
    "any_value",
    "begin_run",
    "bind_turn",
    "otlp_json",
    "record_spans",
    "record_spans_from_environment",
    "recording",
    "stop_recording",
]

ENVIRONMENT: Final = "CALLSAFE_RECORD_SPANS"

_lock = threading.Lock()
_active: Recording | None = None
_bound: dict[str, str] = {}


def any_value(value: Any) -> dict[str, Any]:
    """An attribute value as an OTLP JSON ``AnyValue`` (integers as strings, as the OTLP
    JSON mapping writes 64-bit integers)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _attributes(value)}}
    return {"stringValue": str(value)}


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": str(k), "value": any_value(v)} for k, v in (attributes or {}).items()]


def _span(span: Any) -> dict[str, Any]:
    context = span.context
    out: dict[str, Any] = {
        "traceId": format(context.trace_id, "032x"),
        "spanId": format(context.span_id, "016x"),
        "name": span.name,
        "kind": int(span.kind.value) + 1,  # the API's INTERNAL is 0; OTLP's SPAN_KIND_INTERNAL is 1
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": _attributes(span.attributes),
        "status": {"code": int(span.status.status_code.value)},
    }
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _attributes(e.attributes)}
            for e in span.events
        ]
    return out


def otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """Finished SDK spans (``ReadableSpan``) as one OTLP JSON ``ExportTraceServiceRequest``
    document, grouped by resource and instrumentation scope in the order first seen."""
    resources: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope
        entry = resources.setdefault(id(resource), (resource, {}))
        name = (scope.name, scope.version or "") if scope is not None else ("", "")
        entry[1].setdefault(name, []).append(_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(dict(resource.attributes) if resource is not None else {})},
                "scopeSpans": [
                    {"scope": {"name": n, "version": v}, "spans": taken} for (n, v), taken in scopes.items()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


@dataclass
class Recording:
    """The installed recording: where spans go, and the spans kept in memory."""

    path: Path | None
    memory: list[Any] = field(default_factory=list)
    runs: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    current: Path | None = None
    provider: Any = None
    local: bool = False  # not the global provider: :func:`stop_recording` may end it

    def keep(self, spans: Sequence[Any]) -> None:
        """An export: to memory, or one OTLP JSON line appended to the current file."""
        if self.path is None:
            self.memory.extend(spans)
            return
        target = self.current or self.path
        if target.is_dir():
            target = self.current = target / f"spans-{os.getpid()}-{next(self.runs)}.otlp.jsonl"
        with target.open("a", encoding="utf-8") as out:
            out.write(json.dumps(otlp_json(spans), ensure_ascii=True) + "\n")

    def take(self) -> list[Any]:
        """The spans kept in memory since the last take, forgotten here (a test reads each
        trace's on its own)."""
        self.flush()
        with _lock:
            taken, self.memory[:] = list(self.memory), []
        return taken

    def flush(self) -> None:
        if self.provider is not None:
            self.provider.force_flush()


def record_spans(path: str | Path | None = None, *, global_provider: bool = True) -> Recording:
    """Make the SDK's tracer provider with the turn stamp and one exporter: to ``path`` (a
    file or a directory), or in memory; and install it as the global one (what Strands and
    google-adk trace to), unless ``global_provider`` is false (a test's in-process recording,
    which instrumentations that take a provider use: :attr:`Recording.provider`; ended by
    :func:`stop_recording`, as a global provider cannot be). Once per process: a second call
    returns the recording already made."""
    global _active
    with _lock:
        if _active is not None:
            return _active
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
        except ImportError as exc:
            raise RuntimeError(f"recording spans needs opentelemetry-sdk ({exc})") from None

        chosen = Recording(Path(path) if path is not None else None)

        class Stamp(SpanProcessor):
            """Binds each span to the turn bound when it started."""

            def on_start(self, span: Any, parent_context: Any = None) -> None:
                for name, value in tuple(_bound.items()):
                    span.set_attribute(name, value)

        class Keep(SpanExporter):
            def export(self, spans: Sequence[Any]) -> Any:
                with _lock:
                    chosen.keep(spans)
                return SpanExportResult.SUCCESS

            def shutdown(self) -> None:
                return None

        saved = os.environ.get("OTEL_SDK_DISABLED")
        os.environ["OTEL_SDK_DISABLED"] = "false"
        try:
            provider = TracerProvider()
        finally:
            if saved is None:
                del os.environ["OTEL_SDK_DISABLED"]
            else:
                os.environ["OTEL_SDK_DISABLED"] = saved
        provider.add_span_processor(Stamp())
        provider.add_span_processor(SimpleSpanProcessor(Keep()))
        if global_provider:
            trace.set_tracer_provider(provider)
        else:
            chosen.local = True
        chosen.provider = provider
        _active = chosen
        return chosen


def record_spans_from_environment() -> Recording | None:
    """:func:`record_spans` to the path ``CALLSAFE_RECORD_SPANS`` names, when it is set."""
    path = os.environ.get(ENVIRONMENT)
    if not path:
        return None
    try:
        return record_spans(path)
    except RuntimeError as exc:
        print(f"callsafe: {ENVIRONMENT} is set but {exc}; no spans are recorded", file=sys.stderr)
        return None


def stop_recording() -> None:
    """End a recording that is not the global provider (a test's); a global one stays."""
    global _active
    with _lock:
        if _active is None or not _active.local:
            return
        ended, _active = _active, None
    _bound.clear()
    ended.provider.shutdown()


def recording() -> Recording | None:
    """The recording installed in this process, if any."""
    return _active


def begin_run() -> None:
    """A run of the target starts (a trace): a directory recording starts a new file, and
    no turn is bound."""
    _bound.clear()
    if _active is not None and _active.path is not None and _active.path.is_dir():
        with _lock:
            _active.current = None


def bind_turn(turn: str, tenant: str, actor: str) -> None:
    """Spans started from now on belong to this turn (a no-op cost when nothing records)."""
    if _active is None:
        return
    _bound.update({"callsafe.turn": turn, "callsafe.tenant": tenant, "callsafe.actor": actor})
