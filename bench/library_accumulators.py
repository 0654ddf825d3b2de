"""The third-party accumulators the assembly benchmark compares the reference implementation with.

Issue "Benchmarks", item 1, asks that the same streams go through the accumulators of openai,
anthropic, langchain-core, pydantic-ai and litellm, "each fed its own chunk types built before
timing starts". This module holds, per library:

* how the benchmark's abstract stream becomes that library's own objects (untimed): the
  trace is rendered to the library's wire protocol as the certification harness renders it
  (:mod:`callsafe.certify.wire` over :mod:`callsafe.providers`: same calls, same argument
  bytes, same fragment boundaries), and each payload is turned into the
  library's chunk or event type by the adapter's public builder in :mod:`callsafe.targets`
  (``chunk_from_payload`` / ``event_from_payload``), so the benchmark feeds exactly the
  objects the certified adapters feed;
* the timed part: feeding those objects through the library's accumulator until the tool
  calls' final arguments are available the way the library exposes them (parsed, or a string
  followed by one ``json.loads``, as the floor does);
* a sentence saying what the library does per chunk, because that, not the language, is
  what decides whether it is linear in bytes.

Why render through the harness rather than write payloads here: the renderers are the
project's one definition of each protocol, checked by the round-trip tests, and the harness
adds what real servers always send (Anthropic's ``usage``, without which the SDK raises); a
second hand-written encoder in the benchmark could drift from both.

Each variant returns ``(call id, arguments)`` pairs; the benchmark checks them against the
expected arguments outside the timed region. Nothing here is imported unless the library is
installed; a missing one is reported with the reason.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callsafe.certify import wire
from callsafe.model.vocabulary import CallTerminal, Event, ResponseTerminal, ToolSpec, Trace
from callsafe.providers import registry
from callsafe.targets._common import library_available

__all__ = [
    "ACCUMULATORS",
    "Accumulator",
    "LibraryRun",
    "by_call",
    "calls_end_with_their_response",
    "prepare",
    "wire_streams",
]

# What a prepared variant does when timed: feed the prebuilt objects, return (call id, arguments).
LibraryRun = Callable[[], list[tuple[str, Any]]]
# The wire payloads of a trace, one list per stream (response).
Streams = list[list[dict[str, Any]]]


@dataclass(frozen=True)
class Accumulator:
    """One library's accumulator as the benchmark drives it.

    ``prepare(streams, tools)`` builds the library's objects from each stream's wire payloads
    (not timed) and returns the thunk that is timed: it feeds every stream through a fresh
    accumulator, one stream after the other, as an application does one request after the
    other."""

    name: str
    distribution: str
    module: str
    protocol: str
    per_chunk: str
    prepare: Callable[[Streams, Mapping[str, ToolSpec]], LibraryRun]
    needs: tuple[tuple[str, str], ...] = ()  # further (distribution, module) pairs it imports

    def unavailable(self) -> str | None:
        """Why this library cannot run here, or ``None``."""
        for distribution, module in ((self.distribution, self.module), *self.needs):
            reason = library_available(distribution, module)
            if reason is not None:
                return reason
        return None


# --------------------------------------------------------------------------------------
# the abstract stream on each library's wire
# --------------------------------------------------------------------------------------


def calls_end_with_their_response(trace: Trace) -> Trace:
    """``trace`` with every call's terminal event moved to just before its response's end,
    in the order the calls opened: the shape of protocols whose calls end only with the
    response (Chat Completions: one ``finish_reason`` for the whole message). Fragments,
    their texts and their order are untouched."""
    events: list[Event] = []
    held: list[Event] = []
    for event in trace.events:
        if isinstance(event, CallTerminal):
            held.append(event)
            continue
        if isinstance(event, ResponseTerminal):
            events.extend(held)
            held = []
        events.append(event)
    return dataclasses.replace(trace, events=(*events, *held))


def wire_streams(trace: Trace, protocol: str) -> list[list[dict[str, Any]]]:
    """The trace's payloads on ``protocol``, one list per stream (per response), exactly as
    the certification harness delivers them to a library adapter
    (:func:`callsafe.certify.wire.prepare`: items relabelled the way the protocol addresses
    them, the protocol's own renderer, and the fields real servers always send)."""
    if registry.get(protocol).renderer.calls_end_with_response:
        trace = calls_end_with_their_response(trace)
    _, plan = wire.prepare(trace, protocol)
    streams: list[list[dict[str, Any]]] = [[]]
    for delivery in plan.deliveries:
        streams[-1].extend(dict(p) for p in delivery.payloads)
        if delivery.end_stream:
            streams.append([])
    return [s for s in streams if s]


# --------------------------------------------------------------------------------------
# one preparation per library: build objects (untimed), return the timed thunk
# --------------------------------------------------------------------------------------


def _openai_chat(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from openai.lib.streaming.chat import ChatCompletionStreamState

    from callsafe.targets.openai_chat import chunk_from_payload, input_tools

    built = [[chunk_from_payload(p) for p in stream] for stream in streams]
    strict_tools = input_tools(tools, strict=True)

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for chunks in built:
            state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(input_tools=strict_tools)
            for chunk in chunks:
                state.handle_chunk(chunk)
            message = state.get_final_completion().choices[0].message
            out += [(c.id, c.function.parsed_arguments) for c in message.tool_calls or [] if c.type == "function"]
        return out

    return run


def _openai_responses(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState

    from callsafe.targets.openai_responses import event_from_payload, input_tools

    built = [[event_from_payload(p) for p in stream] for stream in streams]
    strict_tools = input_tools(tools, strict=True)

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for events in built:
            state: ResponseStreamState[Any] = ResponseStreamState(input_tools=strict_tools, text_format=omit)
            call_ids: dict[str, str] = {}
            snapshots: dict[str, str] = {}
            for event in events:
                for seen in state.handle_event(event):
                    if seen.type == "response.function_call_arguments.delta":
                        snapshots[seen.item_id] = seen.snapshot
                    elif seen.type == "response.output_item.added" and seen.item.type == "function_call":
                        call_ids[seen.item.id or ""] = seen.item.call_id
            out += [(call_ids[item], json.loads(text)) for item, text in snapshots.items()]
        return out

    return run


def _anthropic(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from anthropic.lib.streaming._messages import accumulate_event, build_events

    from callsafe.targets.anthropic_messages import event_from_payload

    built = [[event_from_payload(p) for p in stream] for stream in streams]

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for events in built:
            snapshot: Any = None
            json_bufs: dict[int, bytes] = {}
            for event in events:
                snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
                build_events(event=event, message_snapshot=snapshot)
            out += [(b.id, b.input) for b in snapshot.content if b.type == "tool_use"]
        return out

    return run


def _langchain_core(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from langchain_core.messages import AIMessageChunk

    from callsafe.targets.langchain_core import chunk_from_payload

    built = [[chunk_from_payload(p) for p in stream] for stream in streams]
    last = AIMessageChunk(content="", chunk_position="last")

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for chunks in built:
            gathered = chunks[0]
            for chunk in chunks[1:]:
                gathered = gathered + chunk
            final = gathered + last
            out += [(call["id"] or "", call["args"]) for call in final.tool_calls]
        return out

    return run


def _pydantic_ai(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from pydantic_ai._parts_manager import ModelResponsePartsManager
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models import ModelRequestParameters

    from callsafe.targets.openai_chat import chunk_from_payload

    built = [[chunk_from_payload(p) for p in stream] for stream in streams]
    parameters = ModelRequestParameters()

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for chunks in built:
            manager = ModelResponsePartsManager(model_request_parameters=parameters)
            for chunk in chunks:
                if not chunk.choices or chunk.choices[0].delta is None:
                    continue
                for dtc in chunk.choices[0].delta.tool_calls or []:
                    function = dtc.function
                    manager.handle_tool_call_delta(
                        vendor_part_id=dtc.index,
                        tool_name=function.name if function is not None else None,
                        args=function.arguments if function is not None else None,
                        tool_call_id=dtc.id,
                    )
            out += [
                (part.tool_call_id, part.args_as_dict(raise_if_invalid=True))
                for part in manager.get_parts()
                if isinstance(part, ToolCallPart)
            ]
        return out

    return run


def _litellm(streams: Streams, tools: Mapping[str, ToolSpec]) -> LibraryRun:
    from callsafe.targets.litellm import chunk_from_payload, import_offline

    litellm = import_offline()
    built = [[chunk_from_payload(p) for p in stream] for stream in streams]

    def run() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for chunks in built:
            response = litellm.stream_chunk_builder(list(chunks))
            out += [(c.id, json.loads(c.function.arguments)) for c in response.choices[0].message.tool_calls or []]
        return out

    return run


ACCUMULATORS: tuple[Accumulator, ...] = (
    Accumulator(
        "lib-openai-chat",
        "openai",
        "openai",
        "openai-chat",
        "`ChatCompletionStreamState.handle_chunk`: per chunk it dumps the whole message snapshot to a dict "
        "(`model_dump`, every call's argument string so far), merges the delta (`accumulate_delta`), rebuilds "
        "the snapshot model, and re-parses the touched call's whole argument text with "
        "`jiter.from_json(partial_mode=True)` (strict tools); `parsed_arguments` of `get_final_completion()`",
        _openai_chat,
    ),
    Accumulator(
        "lib-openai-responses",
        "openai",
        "openai",
        "openai-responses",
        "`ResponseStreamState.handle_event`: per delta `output.arguments += delta` on the snapshot item (a new "
        "string each time) and a delta event carrying the snapshot; the accumulated `snapshot` text, then one "
        "`json.loads`",
        _openai_responses,
    ),
    Accumulator(
        "lib-anthropic",
        "anthropic",
        "anthropic",
        "anthropic-messages",
        "`accumulate_event` + `build_events` (what `MessageStream` runs per event): per `input_json_delta` it "
        "appends to the block's byte buffer (`json_buf += ...`, a new bytes object) and re-parses the whole "
        "buffer with `jiter.from_json(partial_mode=True)`; the tool_use block's `input`",
        _anthropic,
    ),
    Accumulator(
        "lib-langchain-core",
        "langchain-core",
        "langchain_core",
        "openai-chat",
        "`gathered = gathered + chunk` (the tool-streaming guide): per chunk `AIMessageChunk.__add__` merges the "
        "`tool_call_chunks` lists (string concatenation of `args`) into a new message, whose validator re-parses "
        "every call's merged `args` with `parse_partial_json`; the final message's `tool_calls[].args`",
        _langchain_core,
    ),
    Accumulator(
        "lib-pydantic-ai",
        "pydantic-ai-slim",
        "pydantic_ai",
        "openai-chat",
        "`ModelResponsePartsManager.handle_tool_call_delta` per `delta.tool_calls` entry (as "
        "`OpenAIStreamedResponse` feeds it): a `ToolCallPartDelta` applied to the call's part, argument text "
        "kept in a per-part string buffer; `ToolCallPart.args_as_dict()` at the end",
        _pydantic_ai,
        needs=(("openai", "openai"),),
    ),
    Accumulator(
        "lib-litellm",
        "litellm",
        "litellm",
        "openai-chat",
        "nothing per chunk (the application keeps the `ModelResponseStream` chunks); at the end "
        "`stream_chunk_builder(chunks)` groups the tool-call deltas by index, joins the argument strings and "
        "rebuilds a `ModelResponse` (with usage); then one `json.loads` per call",
        _litellm,
    ),
)


def unavailable() -> dict[str, str]:
    """The libraries that cannot run here, by variant name, with the reason."""
    return {acc.name: reason for acc in ACCUMULATORS if (reason := acc.unavailable()) is not None}


def prepare(trace: Trace, names: Collection[str]) -> list[tuple[str, LibraryRun]]:
    """The timed thunks of the accumulators called ``names`` (installed ones) over
    ``trace``, their objects built now; each protocol is rendered once."""
    runs: list[tuple[str, LibraryRun]] = []
    streams: dict[str, Streams] = {}
    for acc in ACCUMULATORS:
        if acc.name not in names:
            continue
        if acc.protocol not in streams:
            streams[acc.protocol] = wire_streams(trace, acc.protocol)
        runs.append((acc.name, acc.prepare(streams[acc.protocol], trace.tools)))
    return runs


def by_call(results: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """A library run's results by call id (a repeated id would be a wrong result: kept as a list)."""
    out: dict[str, Any] = {}
    for call, arguments in results:
        out[call] = [out[call], arguments] if call in out else arguments
    return out
