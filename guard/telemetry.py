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
problems), and the guard logs identifiers and fixed wording only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from callsafe.model.vocabulary import AuditRow, ConfirmationRequested, LedgerRow, LogLine, Observation, StatusShown

__all__ = ["LOGGER_NAME", "Telemetry", "log_observation"]

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


def log_observation(logger: logging.Logger, obs: Observation) -> None:
    """One structured line for what the guard shows or writes (never argument values)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    if isinstance(obs, LedgerRow):
        logger.info(
            "call %s: %s",
            obs.key,
            obs.decision,
            extra={
                "callsafe_event": "decision",
                "callsafe_key": str(obs.key),
                "callsafe_decision": obs.decision,
                "callsafe_parse": obs.parse,
                "callsafe_validation": obs.validation,
                "callsafe_fragments": obs.fragments,
                "callsafe_terminal_reason": obs.terminal_reason,
            },
        )
    elif isinstance(obs, StatusShown):
        logger.info(
            "turn %s: status %s",
            obs.turn,
            obs.status,
            extra={"callsafe_event": "status", "callsafe_turn": obs.turn, "callsafe_status": obs.status},
        )
    elif isinstance(obs, AuditRow):
        logger.warning(
            "operator %s (%s): %d call(s) stopped",
            obs.action,
            obs.reason,
            len(obs.keys),
            extra={
                "callsafe_event": "operator",
                "callsafe_action": obs.action,
                "callsafe_reason": obs.reason,
                "callsafe_keys": [str(k) for k in obs.keys],
            },
        )
    elif isinstance(obs, ConfirmationRequested):
        logger.info(
            "call %s: confirmation requested",
            obs.key,
            extra={"callsafe_event": "confirmation", "callsafe_key": str(obs.key), "callsafe_tool": obs.tool},
        )
    elif isinstance(obs, LogLine):
        logger.info("%s", obs.text, extra={"callsafe_event": "note"})
