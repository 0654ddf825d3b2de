"""OpenTelemetry spans and structured log lines, with no argument values in either.

Why optional: ``opentelemetry-api`` is the ``guard-otel`` extra. Without it the guard
runs the same and makes no spans; with it (and no SDK configured) the api's own no-op
tracer is used, as every instrumented library does. Spans:

* ``callsafe.guard.stream``: one per provider stream a turn reads (protocol, turn, tenant);
* ``callsafe.guard.execute``: one per call handed to the executor or yielded (tool, call
  key, the outcome); its parent is the turn's W3C ``traceparent`` when the turn has one,
  so the tool's own spans join the request's trace, else the span current at the time.

A turn started without a ``traceparent`` takes the current span's (when there is a valid
one), so the ledger rows and the executor's ``traceparent`` name the trace the agent's
request belongs to.

Log lines go to the stdlib logger ``callsafe.guard`` with ``extra=`` fields
(``callsafe_event``, ``callsafe_key``, ``callsafe_tool``, ``callsafe_decision``, ...), so a
JSON log formatter gets them as fields. Nothing logged carries an argument value: ledger
rows are value-free by construction (the reference implementation redacts schema
problems), and the guard logs identifiers and fixed wording only. Every identifier is
escaped first (:func:`log_event`): they come from the provider's stream, and a raw ESC,
CR/LF or bidirectional override in a log line would forge or hide what an operator reads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from callsafe.model.vocabulary import AuditRow, ConfirmationRequested, LedgerRow, LogLine, Observation, StatusShown
from callsafe.safe_text import printable

__all__ = ["LOGGER_NAME", "Telemetry", "log_event", "log_observation", "safe_field"]

LOGGER_NAME = "callsafe.guard"
# A library configures no output of its own: the application's logging config decides
# (without one, nothing is printed, not even warnings through logging's last resort).
logging.getLogger(LOGGER_NAME).addHandler(logging.NullHandler())

try:  # the guard-otel extra
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised only without the extra
    otel_trace = None  # type: ignore[assignment]
    otel_context = None  # type: ignore[assignment]
    TraceContextTextMapPropagator = None  # type: ignore[assignment,misc]


class Telemetry:
    """The guard's spans (no-ops without ``opentelemetry-api``)."""

    def __init__(self, tracer: Any = None) -> None:
        self.enabled = otel_trace is not None
        self._tracer: Any = tracer
        if self._tracer is None and otel_trace is not None:
            self._tracer = otel_trace.get_tracer("callsafe.guard")
        self._propagator: Any = TraceContextTextMapPropagator() if otel_trace is not None else None

    def current_traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the span current now, if there is a valid one."""
        if self._propagator is None or otel_trace is None:
            return None
        if not otel_trace.get_current_span().get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier.get("traceparent")

    def _parent(self, traceparent: str | None) -> Any:
        if traceparent is None or self._propagator is None:
            return None
        return self._propagator.extract({"traceparent": traceparent})

    def start_stream(self, traceparent: str | None, attributes: Mapping[str, str]) -> Any:
        """A started (not current) span for one stream, or None; ended by :meth:`end`."""
        if self._tracer is None:
            return None
        return self._tracer.start_span(
            "callsafe.guard.stream", context=self._parent(traceparent), attributes=attributes
        )

    @staticmethod
    def end(span: Any, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None) -> None:
        if span is None:
            return
        for name, value in (attributes or {}).items():
            span.set_attribute(name, value)
        if error is not None and otel_trace is not None:
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, type(error).__name__))
        span.end()

    @contextlib.contextmanager
    def execute(self, traceparent: str | None, attributes: Mapping[str, str]) -> Iterator[Any]:
        """The current span while a call is handed over (None without the extra)."""
        if self._tracer is None or otel_context is None:
            yield None
            return
        parent = self._parent(traceparent)
        token = otel_context.attach(parent) if parent is not None else None
        try:
            with self._tracer.start_as_current_span("callsafe.guard.execute", attributes=attributes) as span:
                yield span
        finally:
            if token is not None:
                otel_context.detach(token)


def safe_field(value: object) -> object:
    """A log field as it may reach a log: text with every control, bidirectional and
    line-separator character escaped (:func:`callsafe.safe_text.printable`, newlines and
    tabs too: a field is one line), lists and tuples item by item, numbers, booleans and
    None as they are, anything else as its escaped ``str``."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [safe_field(v) for v in value]
    return printable(str(value), newlines=False)


def log_event(logger: logging.Logger, level: int, event: str, template: str, **fields: object) -> None:
    """One log record of the guard: ``template`` is fixed wording with ``%(name)s``
    placeholders for ``fields``; every field is escaped (:func:`safe_field`) before it is
    formatted into the message, and the same escaped fields ride along as ``extra=``
    attributes ``callsafe_<name>`` beside ``callsafe_event``, so a JSON handler gets them
    as fields and a plain one the message, and neither sees a raw control character.

    Why every value: call ids, tool names, response ids, turn and tenant ids and reasons
    come from the provider's stream or the application's callers, and a log line is read
    on a terminal (ESC, OSC 8 links), split on CR/LF (forged lines) or rendered with
    bidirectional reordering."""
    if not logger.isEnabledFor(level):
        return
    safe = {name: safe_field(value) for name, value in fields.items()}
    extra: dict[str, object] = {"callsafe_event": event}
    extra.update((f"callsafe_{name}", value) for name, value in safe.items())
    # one mapping argument: logging formats ``%(name)s`` placeholders from it
    logger.log(level, template, safe, extra=extra)


def log_observation(logger: logging.Logger, obs: Observation) -> None:
    """One structured line for what the guard shows or writes (never argument values).
    Each goes through :func:`log_event`, which formats nothing for a level the logger drops
    (an operator control is a warning: it is logged by a logger set to WARNING)."""
    if isinstance(obs, LedgerRow):
        log_event(
            logger,
            logging.INFO,
            "decision",
            "call %(key)s: %(decision)s",
            key=obs.key,
            decision=obs.decision,
            parse=obs.parse,
            validation=obs.validation,
            fragments=obs.fragments,
            terminal_reason=obs.terminal_reason,
        )
    elif isinstance(obs, StatusShown):
        log_event(logger, logging.INFO, "status", "turn %(turn)s: status %(status)s", turn=obs.turn, status=obs.status)
    elif isinstance(obs, AuditRow):
        log_event(
            logger,
            logging.WARNING,
            "operator",
            "operator %(action)s (%(reason)s): %(count)d call(s) stopped",
            action=obs.action,
            reason=obs.reason,
            count=len(obs.keys),
            keys=[str(k) for k in obs.keys],
        )
    elif isinstance(obs, ConfirmationRequested):
        log_event(
            logger,
            logging.INFO,
            "confirmation",
            "call %(key)s (%(tool)s): confirmation requested",
            key=obs.key,
            tool=obs.tool,
        )
    elif isinstance(obs, LogLine):
        log_event(logger, logging.INFO, "note", "%(text)s", text=obs.text)
