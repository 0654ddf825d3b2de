"""``callsafe inspect``: replay one recorded provider stream through the reference
implementation and through every installed library adapter of its protocol, side by side.

Why: an incident report is usually a recorded stream ("the agent booked twice", "the call
ran with half its arguments"). Inspecting it answers three questions at once: what a safe
assembler executes from these exact bytes (and what it refuses, with the ledger's reason);
what each client library the project certifies would have presented as finished tool
calls from the same bytes, with every difference from the reference marked; and, with
:func:`to_trace`, the recording as an abstract trace in the format ``callsafe replay`` reads, so the
incident becomes a regression scenario in one step.

The path, and what each step reuses:

1. :mod:`callsafe.inspection.recording` reads the file (JSON lines or raw SSE) and detects
   its protocol.
2. The protocol's parser (:mod:`callsafe.providers`) turns the payloads into abstract
   events, exactly as :func:`callsafe.providers.streams.parse_sse` does (the first error
   stops reading and the stream ends unclean), keeping which payload gave which event.
3. The trace (a :class:`~callsafe.model.vocabulary.TurnStarted`, the parsed events, the
   tools) runs through :class:`~callsafe.targets.reference.ReferenceTarget` over a memory
   store with :func:`callsafe.certify.runner.run_trace`; the store's ledger gives each
   refusal its reason, and the oracle (:func:`callsafe.model.oracle.judge`) checks the
   reference's bottom line (:func:`callsafe.certify.judge.oracle_findings`).
4. Each library adapter of the protocol (:data:`callsafe.targets.libraries.LIBRARY_TARGETS`)
   gets the same payloads through :func:`callsafe.targets._common.run_wire`, a connection
   drop where the file breaks, and what it presents is compared call by call (by call id)
   with what the reference executed.

The machine-readable form is :meth:`Inspection.to_json`, whose shape is :data:`JSON_SCHEMA`
(versioned by :data:`SCHEMA_VERSION`; documented in ``docs/inspect.md``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Final, Literal

from callsafe.certify.judge import Finding, oracle_findings
from callsafe.certify.runner import run_trace
from callsafe.inspection.budget import LIBRARY_BUDGET, OutOfTime, time_budget
from callsafe.inspection.recording import Detection, Recording, RecordingError, detect_protocol
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallKey,
    CallOpened,
    Disconnect,
    Event,
    Executed,
    LedgerRow,
    Observation,
    ToolSpec,
    Trace,
    TraceFormatError,
    iter_keys,
)
from callsafe.providers import registry
from callsafe.providers.base import ProviderError
from callsafe.targets._common import DEFAULT_TURN  # the turn the adapters bind: the same call keys

__all__ = [
    "DEFAULT_TURN",
    "JSON_SCHEMA",
    "SCHEMA_VERSION",
    "Difference",
    "Inspection",
    "LibraryCall",
    "LibraryResult",
    "ReferenceCall",
    "StreamError",
    "adapters_for",
    "inspect_recording",
    "load_tools",
    "to_trace",
]

SCHEMA_VERSION: Final = "callsafe.inspect/1"
"""The version of :meth:`Inspection.to_json`'s shape: a change that removes or renames a
field, or changes a field's meaning, bumps the number; adding a field does not."""

FALLBACK_RESPONSE: Final = "r1"
"""The response id given to a protocol's parser for streams whose wire names none (Bedrock)."""


Outcome = Literal["executed", "refused", "awaiting_confirmation", "undecided"]
DifferenceKind = Literal["missing", "extra", "arguments", "tool", "repeated", "not_runnable"]


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


def load_tools(text: str) -> dict[str, ToolSpec]:
    """Tool declarations from a ``--tools`` file.

    Accepted shapes, so that an application's own declarations can be used unchanged:

    * callsafe's, as in a trace: ``{"name": {"schema": {...}, "confirm": true}}``, also
      wrapped as ``{"tools": {...}}`` (so a trace file works);
    * a list of provider tool definitions: OpenAI Chat (``{"type": "function", "function":
      {"name", "parameters"}}``), OpenAI Responses (``{"type": "function", "name",
      "parameters"}``), Anthropic (``{"name", "input_schema"}``), each optionally with
      ``"confirm": true``;
    * a plain map of names to JSON Schemas, ``{"pay": {"type": "object", ...}}`` (issue 18):
      a value with none of a declaration's keys but a JSON Schema keyword is that tool's
      schema. A value that is neither is refused with how to wrap it.

    Raises :class:`~callsafe.inspection.recording.RecordingError` with one line on anything else.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"--tools: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise RecordingError("--tools: JSON nested too deeply to be read") from None
    if isinstance(data, dict) and isinstance(data.get("tools"), (dict, list)):
        data = data["tools"]
    try:
        if isinstance(data, dict):
            return {str(name): _declared(str(name), spec) for name, spec in data.items()}
        if isinstance(data, list):
            return dict(_provider_tool(entry, n) for n, entry in enumerate(data))
    except TraceFormatError as exc:
        raise RecordingError(f"--tools: {exc}") from None
    except RecursionError:
        raise RecordingError("--tools: a schema nested too deeply to be read") from None
    raise RecordingError("--tools: expected an object of tool declarations or a list of tool definitions")


_DECLARATION_KEYS: Final = frozenset({"schema", "confirm", "business", "actors"})
_SCHEMA_KEYWORDS: Final = frozenset(
    {"type", "properties", "required", "$schema", "$ref", "anyOf", "oneOf", "allOf", "items", "enum", "const"}
    | {"additionalProperties", "patternProperties", "not", "$defs", "definitions", "title", "description"}
)


def _declared(name: str, spec: Any) -> ToolSpec:
    if isinstance(spec, dict) and spec and not spec.keys() & _DECLARATION_KEYS:
        if spec.keys() & _SCHEMA_KEYWORDS:
            spec = {"schema": spec}  # a plain {name: JSON Schema} map
        else:
            raise TraceFormatError(
                f"tool {name!r}: neither a declaration nor a JSON Schema (keys {sorted(spec)[:6]}); "
                f'write {{"{name}": {{"schema": <its JSON Schema>}}}} or {{"{name}": <its JSON Schema>}}'
            )
    try:
        return ToolSpec.from_json(spec)
    except TraceFormatError as exc:
        raise TraceFormatError(f"tool {name!r}: {exc}") from None


def _provider_tool(entry: Any, n: int) -> tuple[str, ToolSpec]:
    if not isinstance(entry, dict):
        raise TraceFormatError(f"tool {n} must be an object")
    function = entry.get("function")
    body: dict[str, Any] = function if isinstance(function, dict) else entry
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise TraceFormatError(f"tool {n} has no name")
    schema = body.get("parameters", body.get("input_schema", {"type": "object"}))
    spec = {"schema": schema} | ({"confirm": True} if entry.get("confirm") or body.get("confirm") else {})
    return name, _declared(name, spec)


def open_tools(events: Sequence[Event]) -> dict[str, ToolSpec]:
    """Every tool the stream names, declared with an open schema (``{"type": "object"}``):
    the calls the wire completed, not a judgement of the application's catalog."""
    return {e.tool: ToolSpec() for e in events if isinstance(e, CallOpened)}


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamError:
    """What stopped reading the stream: its error class (``MalformedEvent``,
    ``ProtocolViolation``), message, where, and whether the file itself is damaged."""

    kind: str
    message: str
    where: str
    damaged: bool

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "where": self.where, "damaged": self.damaged}


@dataclass(frozen=True)
class ReferenceCall:
    """One call the stream announced, and what the reference implementation did with it.

    ``arguments`` are what the executor received (executed calls only); ``reason`` is the
    ledger's reason for its decision; ``where`` names the payload after which it happened
    (``end of stream`` when the end did it)."""

    key: CallKey
    tool: str
    outcome: Outcome
    arguments: Any
    reason: str
    decision: str | None
    ledger: Mapping[str, Any] | None
    where: str | None
    executions: int

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.key.call,
            "response": self.key.response,
            "item": self.key.item,
            "tool": self.tool,
            "outcome": self.outcome,
            "arguments": _plain(self.arguments) if self.outcome == "executed" else None,
            "reason": self.reason,
            "decision": self.decision,
            "ledger": dict(self.ledger) if self.ledger is not None else None,
            "where": self.where,
            "executions": self.executions,
        }


@dataclass(frozen=True)
class LibraryCall:
    """One call a library presented as finished: its key and tool as the library presented
    them, its parsed arguments (``raw`` when it gave a string), whether an application would
    run it (``would_execute``; ``note`` says why not), and after which payload."""

    key: CallKey
    tool: str
    arguments: Any
    raw: str | None
    would_execute: bool
    note: str
    where: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.key.call,
            "response": self.key.response,
            "item": self.key.item,
            "tool": self.tool,
            "arguments": _plain(self.arguments),
            "raw": self.raw,
            "would_execute": self.would_execute,
            "note": self.note,
            "where": self.where,
        }


@dataclass(frozen=True)
class Difference:
    """One way a library's presentation differs from the reference's decision for a call.

    Kinds: ``missing`` (the reference executed it; the library never presented it),
    ``extra`` (presented; the reference refused it, or the stream never announced that id),
    ``arguments`` and ``tool`` (presented with other arguments or another tool name),
    ``repeated`` (presented more than once), ``not_runnable`` (presented, but an application
    could not run it: arguments that do not parse, an unknown tool)."""

    kind: DifferenceKind
    call: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "call": self.call, "message": self.message}


@dataclass(frozen=True)
class LibraryResult:
    """One library adapter on the recording: ``ran``, or ``unavailable`` (its library is not
    installed; ``reason`` says so), ``failed`` (the adapter itself broke), or ``stopped``
    (it ran out of its time budget; ``reason`` says after how long)."""

    name: str
    library: str
    surface: str
    version: str | None
    status: Literal["ran", "unavailable", "failed", "stopped"]
    reason: str | None = None
    presented: tuple[LibraryCall, ...] = ()
    differences: tuple[Difference, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool | None:
        return None if self.status != "ran" else not self.differences

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "library": self.library,
            "surface": self.surface,
            "version": self.version,
            "status": self.status,
            "reason": self.reason,
            "agrees": self.agrees,
            "presented": [c.to_json() for c in self.presented],
            "differences": [d.to_json() for d in self.differences],
            "errors": list(self.errors),
        }


@dataclass
class Inspection:
    """Everything ``callsafe inspect`` found about one recording."""

    file: str
    recording: Recording
    protocol: str
    protocol_source: Literal["detected", "option"]
    detection: Detection | None
    detection_note: str | None
    tools: dict[str, ToolSpec]
    tools_source: Literal["open", "file"]
    events: list[Event]
    origins: list[int | None]  # per parsed event: the index of the payload that gave it
    stream_error: StreamError | None
    trace: Trace
    reference: list[ReferenceCall]
    reference_errors: list[str]
    oracle_findings: list[Finding]
    reference_observations: list[Observation] = field(default_factory=list)
    libraries: list[LibraryResult] = field(default_factory=list)
    # (response, item, call) -> what on the wire stopped the call (the parser's stop_causes)
    stop_causes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # the other defensible readings of the stream (callsafe.providers.readings) that judge a
    # call otherwise than callsafe's parse, each with the calls it would let run
    readings: list[dict[str, Any]] = field(default_factory=list)
    library_selection: list[str] | None = None  # --library entries (None: every adapter)

    def no_library_reason(self) -> str | None:
        """Why no library adapter ran at all, or ``None`` when some did."""
        if self.libraries:
            return None
        if self.library_selection is not None:
            return "no library adapter selected" + ("" if not self.library_selection else " for this protocol")
        return f"no library adapter consumes {self.protocol}"

    @property
    def executed(self) -> list[ReferenceCall]:
        return [c for c in self.reference if c.outcome == "executed"]

    @property
    def damaged(self) -> str | None:
        """How the file is damaged (``callsafe inspect`` then exits 1), or ``None``."""
        return self.recording.damage

    def where_of_step(self, step: int) -> str | None:
        """The payload after which the event at ``step`` of the trace was delivered."""
        if step <= 0 or step - 1 >= len(self.origins):
            return None
        origin = self.origins[step - 1]
        return "end of stream" if origin is None else self.recording.payloads[origin].where

    def to_json(self) -> dict[str, Any]:
        """The versioned machine-readable report (:data:`JSON_SCHEMA`)."""
        rec = self.recording
        differing = [lib for lib in self.libraries if lib.status == "ran" and lib.differences]
        return {
            "schema": SCHEMA_VERSION,
            "file": self.file,
            "format": rec.format,
            "protocol": {
                "name": self.protocol,
                "source": self.protocol_source,
                "rule": self.detection.signature if self.detection else None,
                "where": self.detection.where if self.detection else None,
                "note": self.detection_note,
            },
            "tools": {
                "source": self.tools_source,
                "declared": {name: spec.to_json() for name, spec in self.tools.items()},
            },
            "stream": {
                "payloads": len(rec.payloads),
                "events": len(self.events),
                "done_sentinel": rec.done,
                "clean": rec.clean and self.stream_error is None,
                "damaged": rec.damage,
                "error": self.stream_error.to_json() if self.stream_error else None,
                "readings": list(self.readings),
            },
            "reference": {
                "target": "reference-memory",
                "calls": [c.to_json() for c in self.reference],
                "agrees_with_oracle": not self.oracle_findings,
                "oracle_findings": [f.describe() for f in self.oracle_findings],
                "errors": list(self.reference_errors),
            },
            "libraries": [lib.to_json() for lib in self.libraries],
            "summary": {
                "executed": len(self.executed),
                "refused": sum(c.outcome == "refused" for c in self.reference),
                "awaiting_confirmation": sum(c.outcome == "awaiting_confirmation" for c in self.reference),
                "libraries_ran": sum(lib.status == "ran" for lib in self.libraries),
                "libraries_differing": [lib.name for lib in differing],
            },
        }


# --------------------------------------------------------------------------------------
# The inspection
# --------------------------------------------------------------------------------------


def adapters_for(protocol: str, chosen: Sequence[str] | None = None) -> list[str]:
    """The library adapters (catalog names) that consume ``protocol``. ``chosen`` keeps only
    names equal to, or starting with ``<entry>:``, one of its entries (``openai`` selects
    every openai adapter); ``None`` keeps all. An entry that names no adapter at all (of
    any protocol) is a :class:`~callsafe.inspection.recording.RecordingError`: a typo must not
    silently inspect nothing. Importing the catalog imports no library."""
    from callsafe.targets.libraries import LIBRARY_TARGETS

    def picked(name: str, entry: str) -> bool:
        return name == entry or name.startswith(entry + ":")

    if chosen is None:
        return [name for name in LIBRARY_TARGETS if name.split(":")[1] == protocol]
    for entry in chosen:
        if not any(picked(name, entry) for name in LIBRARY_TARGETS):
            raise RecordingError(f"unknown library adapter {entry!r}; known: {', '.join(LIBRARY_TARGETS)}")
    return [n for n in LIBRARY_TARGETS if n.split(":")[1] == protocol and any(picked(n, c) for c in chosen)]


def inspect_recording(
    recording: Recording,
    *,
    protocol: str | None = None,
    tools: Mapping[str, ToolSpec] | None = None,
    libraries: Sequence[str] | None = None,
    file: str = "",
    library_budget: float | None = LIBRARY_BUDGET,
) -> Inspection:
    """Inspect ``recording``: detect its protocol (unless ``protocol`` names it), parse it,
    run it through the reference implementation and through the library adapters
    ``libraries`` selects (see :func:`adapters_for`; ``()`` for none), each for at most
    ``library_budget`` seconds (``None``: no limit; see :mod:`callsafe.inspection.budget`). Raises
    :class:`~callsafe.inspection.recording.RecordingError` when the protocol is unknown,
    ambiguous or mixed."""
    detection: Detection | None = None
    note: str | None = None
    if protocol is None:
        detection = detect_protocol(recording)
        chosen = detection.protocol
    else:
        if protocol not in registry.names():
            raise RecordingError(f"unknown protocol {protocol!r}; known: {', '.join(registry.names())}")
        chosen = protocol
        try:
            detection = detect_protocol(recording)
        except RecordingError as exc:
            note = f"read as {protocol}, as --protocol says; detection alone would fail: {exc}"
        else:
            if detection.protocol != protocol:
                note = f"read as {protocol}, as --protocol says; the events look like {detection.protocol}"
    adapters = adapters_for(chosen, libraries)  # an unknown --library fails before any work
    events, origins, error, causes = _parse(chosen, recording)
    declared = dict(tools) if tools is not None else open_tools(events)
    trace = Trace(
        events=(DEFAULT_TURN, *events),
        tools=declared,
        name=f"inspect {PurePath(file).name}" if file else "inspect",
        source=f"recorded {chosen} stream {file}".rstrip() + ", turned into a trace by callsafe inspect",
    )
    inspection = Inspection(
        file=file,
        recording=recording,
        protocol=chosen,
        protocol_source="detected" if protocol is None else "option",
        detection=detection,
        detection_note=note,
        tools=declared,
        tools_source="open" if tools is None else "file",
        events=events,
        origins=origins,
        stream_error=error,
        trace=trace,
        reference=[],
        reference_errors=[],
        oracle_findings=[],
    )
    inspection.library_selection = None if libraries is None else list(libraries)
    inspection.stop_causes = causes
    inspection.readings = _other_readings(chosen, recording, trace, open_schemas=tools is None)
    _run_reference(inspection)
    for name in adapters:
        inspection.libraries.append(_run_library(name, inspection, library_budget))
    return inspection


def _parse(
    protocol: str, recording: Recording
) -> tuple[list[Event], list[int | None], StreamError | None, dict[tuple[str, str, str], str]]:
    """The abstract events, each with the index of the payload that gave it (``None``: the
    end of the stream), and the error that stopped reading. The same policy as
    :func:`callsafe.providers.streams.parse_sse`: the first error, the parser's or the
    reader's, stops reading, and the stream then ends unclean. Last: what on the wire stopped
    each call the parser stopped (its ``stop_causes``)."""
    parser = registry.get(protocol).new_parser(DEFAULT_TURN.turn, FALLBACK_RESPONSE)
    events: list[Event] = []
    origins: list[int | None] = []
    error: StreamError | None = None
    for index, payload in enumerate(recording.payloads):
        try:
            out = parser.feed(payload.data)
        except ProviderError as exc:
            error = StreamError(type(exc).__name__, f"{payload.where}: {exc}", payload.where, damaged=False)
            break
        events.extend(out)
        origins.extend([index] * len(out))
    else:
        stop = recording.stop
        if stop is not None:
            error = StreamError(type(stop.error).__name__, str(stop.error), stop.where, stop.damaged)
    tail = parser.finish(clean=recording.clean and error is None)
    events.extend(tail)
    origins.extend([None] * len(tail))
    return events, origins, error, dict(parser.stop_causes)


def _other_readings(protocol: str, recording: Recording, trace: Trace, *, open_schemas: bool) -> list[dict[str, Any]]:
    """Where the protocol's documentation is silent on a shape callsafe's parser refuses (or
    fails), the other defensible readings (:mod:`callsafe.providers.readings`) whose verdicts
    differ from the parse's: their names, what they do, their sources and the calls each
    would let run (with ``open_schemas``, the tools the reading's events name are declared
    open, as the stream's are). A library that runs those calls took that reading, and the
    matrix judges it so (:mod:`callsafe.certify.wire_readings`)."""
    from callsafe.providers.readings import read_under, readings_for

    readings = readings_for(protocol)
    if not readings:
        return []
    own = {k: (v.execute, v.arguments) for k, v in judge(trace).verdicts.items()}
    payloads = [p.data for p in recording.payloads]
    clean = recording.clean and recording.stop is None
    out: list[dict[str, Any]] = []
    for reading in readings:
        read = read_under(reading, payloads, turn=DEFAULT_TURN.turn, response=FALLBACK_RESPONSE, clean=clean)
        tools = {**open_tools(read.events), **trace.tools} if open_schemas else trace.tools
        other = judge(dataclasses.replace(trace, events=(DEFAULT_TURN, *read.events), tools=tools)).verdicts
        if {k: (v.execute, v.arguments) for k, v in other.items()} == own:
            continue
        runs = [
            {"call": k.short(), "execute": v.execute, "arguments": v.arguments}
            for k, v in other.items()
            if v.execute != "must_not"
        ]
        out.append({"name": reading.name, "description": reading.description, "source": reading.source, "runs": runs})
    return out


def _run_reference(inspection: Inspection) -> None:
    from callsafe.reference_impl.memory_store import MemoryStore
    from callsafe.targets.reference import ReferenceTarget

    store = MemoryStore()
    run = run_trace(ReferenceTarget(store="memory", memory=store), inspection.trace)
    inspection.reference_errors = [e.describe() for e in run.errors]
    inspection.reference_observations = list(run.observations)
    inspection.oracle_findings = oracle_findings(judge(inspection.trace), run.observations)
    executed: dict[CallKey, list[Executed]] = {}
    for obs in run.observations:
        if isinstance(obs, Executed):
            executed.setdefault(obs.key, []).append(obs)
    ledger = {entry.key: (entry, why) for entry, why in store.ledger()}  # the last row per call
    tools: dict[tuple[str, str, str, str], str] = {}
    for event in inspection.trace.events:
        if isinstance(event, CallOpened):
            tools.setdefault((event.turn, event.response, event.item, event.call), event.tool)
    tenant = DEFAULT_TURN.tenant
    for ident in iter_keys(inspection.trace.events):
        key = CallKey(tenant, *ident)
        runs = executed.get(key, [])
        row = ledger.get(key)
        entry_json = None if row is None else _ledger_json(row[0])
        decision = None if row is None else row[0].decision
        if runs:
            outcome: Outcome = "executed"
            reason = row[1] if row is not None else "dispatched"
            where = inspection.where_of_step(runs[0].step)
        elif row is not None:
            outcome = "awaiting_confirmation" if decision == "awaiting_confirmation" else "refused"
            reason = _with_cause(row[1], inspection, ident[1:])
            where = inspection.where_of_step(_row_step(run.observations, key))
        else:
            outcome, reason, where = "undecided", "no decision recorded", None
        inspection.reference.append(
            ReferenceCall(
                key=key,
                tool=tools.get(ident, ""),
                outcome=outcome,
                arguments=runs[0].arguments if runs else None,
                reason=reason,
                decision=decision,
                ledger=entry_json,
                where=where,
                executions=len(runs),
            )
        )


def _with_cause(reason: str, inspection: Inspection, call: tuple[str, str, str]) -> str:
    """The ledger's reason, with the rule on the wire that stopped the call: the parser's
    cause for a stopped call, or the protocol violation that ended the stream for a call it
    left disconnected (issue 18: "stopped: error" alone does not say which)."""
    cause = inspection.stop_causes.get(call)
    if cause is None and inspection.stream_error is not None and not inspection.stream_error.damaged:
        cause = f"the stream was refused: {inspection.stream_error.kind} at {inspection.stream_error.where}"
    return f"{reason} ({cause})" if cause else reason


def _row_step(observations: Sequence[Observation], key: CallKey) -> int:
    """The step of the last ledger row the reference wrote for ``key`` (-1: none)."""
    steps = [o.step for o in observations if isinstance(o, LedgerRow) and o.key == key]
    return steps[-1] if steps else -1


def _ledger_json(entry: Any) -> dict[str, Any]:
    """A ledger row as the store keeps it: never argument values."""
    return {
        "fragments": entry.fragments,
        "terminal_reason": entry.terminal_reason,
        "parse": entry.parse,
        "validation": entry.validation,
        "decision": entry.decision,
    }


def _run_library(name: str, inspection: Inspection, budget: float | None = None) -> LibraryResult:
    from callsafe.offline import keep_offline
    from callsafe.targets._common import run_wire
    from callsafe.targets.libraries import make

    target = make(name)
    library, surface = type(target).library, target.surface
    reason = target.unavailable()
    if reason is not None:
        return LibraryResult(name, library, surface, None, "unavailable", reason)
    version = type(target).version()
    recording = inspection.recording
    items: list[Mapping[str, Any] | Event] = [p.data for p in recording.payloads]
    if recording.disconnected:
        items.append(Disconnect(DEFAULT_TURN.turn, ""))
    keep_offline()  # the library's own downloads (litellm's price list) stay off: read once, at import
    with contextlib.suppress(Exception):  # an import that fails fails the run below, reported there
        importlib.import_module(type(target).module)  # the library's import is not its time on the stream
    try:
        with time_budget(budget):
            run = run_wire(target, items, inspection.tools, turn=DEFAULT_TURN)
    except OutOfTime as exc:  # a library too slow on this stream: the others still get their turn
        return LibraryResult(name, library, surface, version, "stopped", f"{exc} (its time budget)")
    except Exception as exc:  # the adapter itself broke: reported, never a traceback
        return LibraryResult(name, library, surface, version, "failed", f"{type(exc).__name__}: {exc}"[:300])
    presented = tuple(
        LibraryCall(
            key=p.key,
            tool=p.tool,
            arguments=p.arguments,
            raw=p.raw,
            would_execute=p.executed,
            note=p.note,
            where=_where_of_wire_step(p.step, recording),
        )
        for p in run.presented
    )
    return LibraryResult(
        name,
        library,
        surface,
        version,
        "ran",
        None,
        presented,
        tuple(compare(inspection.reference, presented, inspection.stream_error)),
        tuple(run.errors),
    )


def _where_of_wire_step(step: int, recording: Recording) -> str | None:
    """:func:`run_wire` delivers the turn at step 0 and payload ``k`` at step ``k + 1``, and
    ends the stream at the last step: a presentation there happened on the last payload or
    at the end of the stream, which the adapter's step cannot tell apart, so it says both."""
    index = step - 1
    last = len(recording.payloads) - 1
    if 0 <= index < last:
        return recording.payloads[index].where
    if index == last >= 0:
        return f"{recording.payloads[index].where} or end of stream"
    return "end of stream" if index >= 0 else None


# --------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` as plain JSON (what a library presented may hold other objects)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=repr))


def canonical(value: Any) -> str:
    """One text per JSON value, key order ignored, ``1`` apart from ``true`` and ``1.0``
    equal to ``1`` only when JSON writes them alike."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)


def _show(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compare(
    reference: Sequence[ReferenceCall], presented: Sequence[LibraryCall], stopped: StreamError | None = None
) -> list[Difference]:
    """Every difference between the reference's decisions and what a library presented,
    call by call (matched by call id, as both name calls by the same wire fields).
    ``stopped`` is the error that stopped the reference's reading, if any: a library that
    reads on presents calls the reference never reached. Messages are short and complete
    next to the presented call (its tool and arguments are shown beside them)."""
    out: list[Difference] = []
    by_call: dict[str, list[LibraryCall]] = {}
    for call in presented:
        by_call.setdefault(call.key.call, []).append(call)
    known = {c.key.call for c in reference}
    unknown = (
        "no call with this id in the stream as its protocol is read"
        if stopped is None
        else f"the reference stopped reading at {stopped.where} ({stopped.kind}) before this call"
    )
    for ref in reference:
        shown = by_call.get(ref.key.call, [])
        if ref.outcome == "executed":
            if not shown:
                out.append(Difference("missing", ref.key.call, f"never presented; the reference executed {ref.tool}"))
                continue
            first = shown[0]
            if first.tool != ref.tool:
                out.append(Difference("tool", ref.key.call, f"the stream names the tool {ref.tool!r}"))
            if not first.would_execute and first.note:
                out.append(Difference("not_runnable", ref.key.call, f"an application could not run it: {first.note}"))
            elif canonical(first.arguments) != canonical(ref.arguments):
                out.append(Difference("arguments", ref.key.call, f"the reference executed {_show(ref.arguments)}"))
        elif shown:
            why = (
                "awaits a confirmation for this call"
                if ref.outcome == "awaiting_confirmation"
                else (f"refused this call: {ref.reason}")
            )
            out.append(Difference("extra", ref.key.call, f"the reference {why}"))
        if len(shown) > 1:
            out.append(Difference("repeated", ref.key.call, f"presented {len(shown)} times; a call runs at most once"))
    for call_id, shown in by_call.items():
        if call_id not in known:
            out.append(Difference("extra", call_id, unknown))
            if len(shown) > 1:
                out.append(Difference("repeated", call_id, f"presented {len(shown)} times; a call runs at most once"))
    return out


# --------------------------------------------------------------------------------------
# The trace
# --------------------------------------------------------------------------------------


def to_trace(inspection: Inspection) -> Trace:
    """The recording as an abstract trace (the turn, the parsed events, the tools) in the
    format ``callsafe replay`` reads (as do the generators' scenarios), with the oracle's
    verdicts as the author's expectations, so the incident is pinned as a regression
    scenario."""
    trace = inspection.trace
    verdicts = judge(trace).by_short_name()
    counts: dict[str, int] = {}
    for key in judge(trace).verdicts:
        counts[key.short()] = counts.get(key.short(), 0) + 1
    expected: dict[str, Any] = {}
    for short, verdict in verdicts.items():
        if counts[short] != 1:
            continue  # two calls share turn/call (different responses): no author form names one
        entry: dict[str, Any] = {"reason": verdict.reason}
        if verdict.execute != "may":
            entry = {"execute": verdict.execute == "must", **entry}
        if verdict.execute == "must":
            entry["arguments"] = verdict.arguments
        expected[short] = entry
    return Trace(
        events=trace.events,
        tools=trace.tools,
        limits=trace.limits,
        name=trace.name,
        source=trace.source,
        verdicts=expected,
    )


# --------------------------------------------------------------------------------------
# The JSON schema of the report
# --------------------------------------------------------------------------------------

_STR_OR_NULL: Final = {"type": ["string", "null"]}
_CALL_ID: Final = {
    "call": {"type": "string"},
    "response": {"type": "string"},
    "item": {"type": "string"},
    "tool": {"type": "string"},
}

JSON_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "callsafe inspect report",
    "type": "object",
    "required": ["schema", "file", "format", "protocol", "tools", "stream", "reference", "libraries", "summary"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": SCHEMA_VERSION},
        "file": {"type": "string"},
        "format": {"enum": ["jsonl", "sse"]},
        "protocol": {
            "type": "object",
            "required": ["name", "source", "rule", "where", "note"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string"},
                "source": {"enum": ["detected", "option"]},
                "rule": _STR_OR_NULL,
                "where": _STR_OR_NULL,
                "note": _STR_OR_NULL,
            },
        },
        "tools": {
            "type": "object",
            "required": ["source", "declared"],
            "additionalProperties": False,
            "properties": {
                "source": {"enum": ["open", "file"]},
                "declared": {"type": "object", "additionalProperties": {"type": "object", "required": ["schema"]}},
            },
        },
        "stream": {
            "type": "object",
            "required": ["payloads", "events", "done_sentinel", "clean", "damaged", "error", "readings"],
            "additionalProperties": False,
            "properties": {
                "payloads": {"type": "integer", "minimum": 0},
                "events": {"type": "integer", "minimum": 0},
                "done_sentinel": {"type": "boolean"},
                "clean": {"type": "boolean"},
                "damaged": _STR_OR_NULL,
                "readings": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "description", "source", "runs"],
                        "properties": {
                            "name": {"type": "string"},
                            "description": {"type": "string"},
                            "source": {"type": "string"},
                            "runs": {"type": "array", "items": {"type": "object", "required": ["call", "execute"]}},
                        },
                    },
                },
                "error": {
                    "oneOf": [
                        {"type": "null"},
                        {
                            "type": "object",
                            "required": ["kind", "message", "where", "damaged"],
                            "additionalProperties": False,
                            "properties": {
                                "kind": {"type": "string"},
                                "message": {"type": "string"},
                                "where": {"type": "string"},
                                "damaged": {"type": "boolean"},
                            },
                        },
                    ]
                },
            },
        },
        "reference": {
            "type": "object",
            "required": ["target", "calls", "agrees_with_oracle", "oracle_findings", "errors"],
            "additionalProperties": False,
            "properties": {
                "target": {"type": "string"},
                "calls": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": [
                            *_CALL_ID,
                            "outcome",
                            "arguments",
                            "reason",
                            "decision",
                            "ledger",
                            "where",
                            "executions",
                        ],
                        "additionalProperties": False,
                        "properties": {
                            **_CALL_ID,
                            "outcome": {"enum": ["executed", "refused", "awaiting_confirmation", "undecided"]},
                            "arguments": {},
                            "reason": {"type": "string"},
                            "decision": _STR_OR_NULL,
                            "ledger": {
                                "oneOf": [
                                    {"type": "null"},
                                    {
                                        "type": "object",
                                        "required": ["fragments", "terminal_reason", "parse", "validation", "decision"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "fragments": {"type": "integer"},
                                            "terminal_reason": _STR_OR_NULL,
                                            "parse": {"type": "string"},
                                            "validation": {"type": "string"},
                                            "decision": {"type": "string"},
                                        },
                                    },
                                ]
                            },
                            "where": _STR_OR_NULL,
                            "executions": {"type": "integer", "minimum": 0},
                        },
                    },
                },
                "agrees_with_oracle": {"type": "boolean"},
                "oracle_findings": {"type": "array", "items": {"type": "string"}},
                "errors": {"type": "array", "items": {"type": "string"}},
            },
        },
        "libraries": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "name",
                    "library",
                    "surface",
                    "version",
                    "status",
                    "reason",
                    "agrees",
                    "presented",
                    "differences",
                    "errors",
                ],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "library": {"type": "string"},
                    "surface": {"type": "string"},
                    "version": _STR_OR_NULL,
                    "status": {"enum": ["ran", "unavailable", "failed", "stopped"]},
                    "reason": _STR_OR_NULL,
                    "agrees": {"type": ["boolean", "null"]},
                    "presented": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [*_CALL_ID, "arguments", "raw", "would_execute", "note", "where"],
                            "additionalProperties": False,
                            "properties": {
                                **_CALL_ID,
                                "arguments": {},
                                "raw": _STR_OR_NULL,
                                "would_execute": {"type": "boolean"},
                                "note": {"type": "string"},
                                "where": _STR_OR_NULL,
                            },
                        },
                    },
                    "differences": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["kind", "call", "message"],
                            "additionalProperties": False,
                            "properties": {
                                "kind": {"enum": ["missing", "extra", "arguments", "tool", "repeated", "not_runnable"]},
                                "call": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                    "errors": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "summary": {
            "type": "object",
            "required": ["executed", "refused", "awaiting_confirmation", "libraries_ran", "libraries_differing"],
            "additionalProperties": False,
            "properties": {
                "executed": {"type": "integer", "minimum": 0},
                "refused": {"type": "integer", "minimum": 0},
                "awaiting_confirmation": {"type": "integer", "minimum": 0},
                "libraries_ran": {"type": "integer", "minimum": 0},
                "libraries_differing": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
"""The JSON Schema of :meth:`Inspection.to_json` (also in ``docs/inspect.md``)."""
