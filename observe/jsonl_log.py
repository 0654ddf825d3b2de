"""JSONL logs of what an agent loop saw and did: the provider's raw events, the turn
bindings and stops, and the executions, one JSON object per line.

Why this shape: it is what ``callsafe inspect`` reads (the provider's event payloads, one
per line) with what inspect cannot know added beside them, the application's own records
of turns and executions. A line is one of:

* ``{"provider_event": {"protocol": P, "turn": T, "response": R, "payload": {...}}}``: a raw
  event payload of the stream ``(T, R)`` in protocol ``P`` (a name of
  ``callsafe.providers.registry``); ``{"provider_event": {..., "done": true}}`` ends that
  stream cleanly (the ``[DONE]`` sentinel, or the end of the HTTP body), ``"dropped": true``
  ends it unclean (the connection dropped);
* ``{"execution": {"turn": T, "call": C, "tool": N, "arguments": A, ...}}``: a call handed
  to the executor (``response``, ``item``, ``actor`` and ``tenant`` are read from the stream
  and the turn when left out; without ``arguments``, the log does not establish them);
* an input event of the model's vocabulary, ``{"turn_started": {...}}``,
  ``{"cancel_turn": {...}}``, ``{"fragment": {...}}`` and the others, as a trace writes
  them;
* an observation of the model's vocabulary (``{"executed": {...}}``,
  ``{"ledger_row": {...}}``, ``{"status_shown": {...}}``, ...), whose ``step`` may be left
  out: the order of the lines fixes it;
* ``{"tools": {...}}`` (the tool catalog, as a trace declares it), ``{"limits": {...}}``,
  ``{"recorded": ["ledger", ...]}`` (kinds of record the log holds even where it has no line
  of that kind: a ledger that wrote no row is then a finding, not a gap).

Everything else is a :class:`~callsafe.observe.records.RecordError` naming the line; the
reader is incremental (:meth:`LogReader.feed`), so :mod:`callsafe.observe.follow` uses it
on a growing file.
"""

from __future__ import annotations

import json
from typing import Any, Final

from callsafe.model.vocabulary import (
    EVENT_TYPES,
    OBSERVATION_TYPES,
    AuditRow,
    BusinessValidated,
    CallKey,
    CallOpened,
    ConfirmationRequested,
    Event,
    Executed,
    LedgerRow,
    Limits,
    Observation,
    Replay,
    StatusShown,
    ToolSpec,
    TraceFormatError,
    TurnStarted,
    event_from_json,
    observation_from_json,
)
from callsafe.observe.records import KINDS, RecordError, Records, shown
from callsafe.providers import registry
from callsafe.providers.base import Parser, ProviderError

__all__ = ["LogReader", "read_log"]

_STREAM_EVENTS: Final = ("call_opened", "fragment", "call_terminal", "response_terminal", "disconnect")


class LogReader:
    """Reads a JSONL log line by line into :attr:`records`."""

    def __init__(self, source: str = "log") -> None:
        self.records = Records(source)
        self._parsers: dict[tuple[str, str, str], Parser] = {}
        self._ended: set[tuple[str, str, str]] = set()
        self._bindings: dict[str, TurnStarted] = {}
        self._calls: dict[str, dict[str, list[CallOpened]]] = {}  # turn -> call id -> openings
        self._argumentless = 0
        self._declared: set[str] = set()

    def forget(self, turn: str) -> None:
        """Drop what the reader keeps about ``turn`` (its binding, its calls, its streams):
        a follower calls this for a turn it has finished, so that memory stays bounded."""
        self._bindings.pop(turn, None)
        self._calls.pop(turn, None)
        for stream in [s for s in (*self._parsers, *self._ended) if s[1] == turn]:
            self._parsers.pop(stream, None)
            self._ended.discard(stream)

    # -- reading ------------------------------------------------------------------------

    def feed(self, line: str | bytes, number: int) -> None:
        """Read one line (``number`` counts from 1, for messages and evidence)."""
        where = f"line {number}"
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(f"{where}: not UTF-8 (byte {exc.start})") from None
        text = line.strip().lstrip("\ufeff")
        if not text:
            return
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{where}: not JSON ({exc.msg}): {shown(text, 80)}") from None
        except RecursionError:
            raise RecordError(f"{where}: JSON nested too deeply") from None
        if not isinstance(data, dict) or len(data) != 1:
            raise RecordError(f"{where}: a record is an object with one key, got {shown(text, 80)}")
        ((name, body),) = data.items()
        try:
            self._read(str(name), body, where)
        except TraceFormatError as exc:
            raise RecordError(f"{where}: {exc}") from None
        except RecursionError:
            raise RecordError(f"{where}: values nested too deeply") from None

    def _read(self, name: str, body: Any, where: str) -> None:
        if name == "provider_event":
            self._provider_event(body, where)
        elif name == "execution":
            self._execution(body, where)
        elif name in EVENT_TYPES:
            event = event_from_json({name: body})
            if isinstance(event, Replay):
                raise RecordError(f"{where}: a log holds what was delivered; a replay is written as its events")
            self._event(event, where)
        elif name in OBSERVATION_TYPES:
            if isinstance(body, dict) and "step" not in body:
                body = {**body, "step": 0}
            self._observation(observation_from_json({name: body}), where)
        elif name == "tools":
            if not isinstance(body, dict):
                raise RecordError(f"{where}: 'tools' is an object of tool declarations")
            self.records.tools = {
                **(self.records.tools or {}),
                **{str(k): ToolSpec.from_json(v) for k, v in body.items()},
            }
        elif name == "limits":
            self.records.limits = Limits.from_json(body)
        elif name == "recorded":
            if not isinstance(body, list) or not all(isinstance(k, str) and k in KINDS for k in body):
                raise RecordError(f"{where}: 'recorded' lists kinds of record, of: {', '.join(KINDS)}")
            self._declared.update(body)
            self.records.kinds.update(body)
        else:
            raise RecordError(f"{where}: unknown record {shown(name, 60)!r}")

    def _event(self, event: Event, where: str) -> None:
        kinds = self.records.kinds
        if isinstance(event, TurnStarted):
            self._bindings.setdefault(event.turn, event)
            kinds.add("turns")
        elif event.kind in ("cancel_turn", "stop_tenant"):
            kinds.add("turns")
        if event.kind in _STREAM_EVENTS:
            kinds.add("stream")
        if isinstance(event, CallOpened):
            self._calls.setdefault(event.turn, {}).setdefault(event.call, []).append(event)
        self.records.add_event(event, where)

    def _observation(self, obs: Observation, where: str) -> None:
        kinds = self.records.kinds
        if isinstance(obs, Executed):
            kinds.add("executions")
            if not self._argumentless:
                kinds.add("arguments")
        elif isinstance(obs, (LedgerRow, AuditRow)):
            kinds.add("ledger")
        elif isinstance(obs, StatusShown):
            kinds.add("status")
        elif isinstance(obs, ConfirmationRequested):
            kinds.add("confirmation")
        elif isinstance(obs, BusinessValidated):
            kinds.add("business_validation")
        self.records.add_observation(obs, where)

    def _provider_event(self, body: Any, where: str) -> None:
        if not isinstance(body, dict):
            raise RecordError(f"{where}: a provider_event is an object")
        protocol, turn, response = (body.get(k) for k in ("protocol", "turn", "response"))
        if not all(isinstance(v, str) for v in (protocol, turn, response)):
            raise RecordError(f"{where}: a provider_event names its protocol, turn and response (strings)")
        assert isinstance(protocol, str) and isinstance(turn, str) and isinstance(response, str)
        if protocol not in registry.names():
            raise RecordError(
                f"{where}: unknown protocol {shown(protocol, 60)!r}; known: {', '.join(registry.names())}"
            )
        stream = (protocol, turn, response)
        if stream in self._ended:
            self.records.notes.append(f"{where}: the stream {turn}/{response} had ended; this event is not read")
            return
        parser = self._parsers.get(stream)
        if parser is None:
            parser = self._parsers[stream] = registry.get(protocol).new_parser(turn, response)
        events: list[Event] = []
        if "payload" in body:
            try:
                events += parser.feed(body["payload"])
            except ProviderError as exc:
                self.records.notes.append(f"{where}: the {protocol} stream {turn}/{response} broke: {shown(exc)}")
                body = {**body, "dropped": True}
        if body.get("done") or body.get("dropped"):
            events += parser.finish(clean=not body.get("dropped"))
            self._ended.add(stream)
            del self._parsers[stream]
        self.records.kinds.add("stream")
        for event in events:
            self._event(event, where)

    def _execution(self, body: Any, where: str) -> None:
        if not isinstance(body, dict):
            raise RecordError(f"{where}: an execution is an object")
        unknown = set(body) - {"turn", "call", "tool", "arguments", "actor", "tenant", "response", "item"}
        if unknown:
            raise RecordError(f"{where}: unknown execution fields {sorted(unknown)}")
        turn, call, tool = body.get("turn"), body.get("call"), body.get("tool")
        if not all(isinstance(v, str) for v in (turn, call, tool)):
            raise RecordError(f"{where}: an execution names its turn, call and tool (strings)")
        assert isinstance(turn, str) and isinstance(call, str) and isinstance(tool, str)
        for name in ("actor", "tenant", "response", "item"):
            if name in body and not isinstance(body[name], str):
                raise RecordError(f"{where}: an execution's {name} is a string")
        places = {
            (c.response, c.item): c
            for c in self._calls.get(turn, {}).get(call, [])
            if body.get("response", c.response) == c.response and body.get("item", c.item) == c.item
        }
        opened = list(places.values())  # a call re-announced by a re-delivered stream is one call
        if len(opened) > 1:
            raise RecordError(
                f"{where}: call {shown(call, 60)!r} of turn {shown(turn, 60)!r} is ambiguous: name its response"
            )
        response = body.get("response", opened[0].response if opened else "")
        item = body.get("item", opened[0].item if opened else call)
        binding = self._bindings.get(turn)
        tenant = body.get("tenant", binding.tenant if binding else "")
        actor = body.get("actor", binding.actor if binding else "")
        if "arguments" not in body:
            self._argumentless += 1
            self.records.kinds.discard("arguments")
        key = CallKey(tenant, turn, response, item, call)
        self._observation(Executed(0, key, actor, tool, body.get("arguments", {})), where)
        if self._argumentless:
            self.records.kinds.discard("arguments")


def read_log(data: bytes, source: str = "log") -> Records:
    """A whole JSONL log read (a :class:`RecordError` at the first bad line)."""
    reader = LogReader(source)
    for number, line in enumerate(data.split(b"\n"), start=1):
        reader.feed(line, number)
    return reader.records
