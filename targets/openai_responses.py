"""Adapter for the ``openai`` SDK's Responses stream accumulator.

Surface read: ``ResponseStreamState`` (source: ``openai/lib/streaming/responses/_responses.py``),
the state behind ``client.responses.stream(...)``: ``ResponseStream.__stream__`` calls
``handle_event`` for every raw SSE event and yields what it returns; ``get_final_response()``
returns the ``ParsedResponse`` that the state built at ``response.completed`` (and raises
when no ``response.completed`` arrived). Two surfaces:

* ``arguments_done``: the ``response.function_call_arguments.done`` event, whose
  ``arguments`` are the complete argument string. This is the pattern of OpenAI's function
  calling guide for streaming (keep the ``function_call`` item from
  ``response.output_item.added`` by ``output_index``; its arguments are final at
  ``response.function_call_arguments.done``). The adapter keeps the items it saw in the
  events the state passed on, exactly as such an application does.
* ``final``: what ``get_final_response()`` returns when the application calls it once the
  body ended: the SDK's own ``client.responses.stream(...)`` reads the body's SSE bytes
  through an in-process transport (:mod:`callsafe.targets.sdk_streams`), and its
  ``function_call`` output items run with ``parsed_arguments`` (strict tools;
  ``strict=False`` parses the ``arguments`` string). A body without ``response.completed``
  makes the accessor raise, and nothing runs; so does a dropped connection.

Events are built from the wire payload with ``openai._models.construct_type`` against
``ResponseStreamEvent``, as the SDK's ``Stream`` does with strict validation off (the
default). A ``response.created`` after the previous response ended starts a new state (a new
request, a new stream); a ``response.created`` in the middle of a response goes to the same
state, as it would on one connection.

Call keys: :func:`~callsafe.targets._common.openai_responses_ids` (response = ``response.id``,
item = output item ``id``, call = ``call_id``).

Documentation: OpenAI's function calling guide, "Streaming" section
(https://platform.openai.com/docs/guides/function-calling), and the SDK's ``helpers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from callsafe.model.vocabulary import ToolSpec
from callsafe.targets._common import WireTarget, openai_responses_ids

if TYPE_CHECKING:
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent, ToolParam

__all__ = ["OpenAIResponsesTarget", "available", "event_from_payload", "input_tools"]

_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def available() -> str | None:
    """``None`` when the ``openai`` SDK is importable, else why this adapter is skipped."""
    return OpenAIResponsesTarget.unavailable()


def event_from_payload(payload: Mapping[str, Any]) -> ResponseStreamEvent:
    """One wire payload as the SDK's ``Stream`` builds it (``construct_type``, no validation).
    Public so that the benchmarks build the very same objects."""
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    return cast(ResponseStreamEvent, construct_type(type_=ResponseStreamEvent, value=dict(payload)))


def input_tools(tools: Mapping[str, ToolSpec], *, strict: bool) -> list[ToolParam]:
    """The catalog as the state's ``input_tools`` (strict tools are parsed by the SDK)."""
    return [
        cast("ToolParam", {"type": "function", "name": name, "parameters": dict(spec.schema), "strict": strict})
        for name, spec in tools.items()
    ]


class OpenAIResponsesTarget(WireTarget):
    """``openai`` Responses: ``ResponseStreamState.handle_event`` fed event by event."""

    library: ClassVar[str] = "openai"
    module: ClassVar[str] = "openai"
    protocol = "openai-responses"
    SURFACES: ClassVar[tuple[str, ...]] = ("arguments_done", "final")

    def __init__(self, surface: str | None = None, *, strict: bool = True) -> None:
        super().__init__(surface)
        self.strict = strict
        if not strict:
            self.name += "+nonstrict"
        self._state: ResponseStreamState[Any] | None = None
        self._response_id: str | None = None
        self._items: dict[int, tuple[str | None, str | None, str | None]] = {}  # output_index -> id, call_id, name
        self._ended = False
        self._dead = False
        self._body: list[Mapping[str, Any]] = []  # final: the body the accessor reads

    def _reset(self) -> None:
        self._state = None
        self._response_id = None
        self._items = {}
        self._ended = False
        self._dead = False
        self._body = []

    def end_stream(self) -> None:
        """``final``: the body ended; the application calls ``get_final_response()``."""
        body, self._body = self._body, []
        if self.surface != "final" or not body:
            return
        from callsafe.targets.sdk_streams import openai_final_response, responses_of

        tools = [dict(t) for t in self._input_tools()]
        for part in responses_of(body, "response.created"):  # once per response of a multi-step body
            try:
                response = openai_final_response(part, tools)
            except Exception as exc:
                self._failed(exc)
                raise
            for output in response.output or []:
                if output.type != "function_call":
                    continue
                ids = openai_responses_ids(response.id, output.id, output.call_id)
                if self.strict:
                    self._offer(ids, output.name, output.parsed_arguments, raw=output.arguments)
                else:
                    self._offer(ids, output.name, raw=output.arguments)

    def _input_tools(self) -> list[ToolParam]:
        return input_tools(self._env.tools if self._env is not None else {}, strict=self.strict)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        from openai._types import omit
        from openai.lib.streaming.responses._responses import ResponseStreamState

        if self.surface == "final":
            self._body.append(payload)  # read by the SDK's own stream when the body ends
            return
        kind = payload.get("type")
        if kind == "response.created" and (self._state is None or self._ended or self._dead):
            self._reset()  # a new request's stream
        if self._state is None:
            self._state = ResponseStreamState(input_tools=self._input_tools(), text_format=omit)
            response = payload.get("response")
            if isinstance(response, Mapping):
                self._response_id = cast("str | None", response.get("id"))
        if self._dead:
            return
        event = event_from_payload(payload)
        try:
            events = self._state.handle_event(event)
        except Exception as exc:
            self._dead = True
            self._failed(exc)
            raise
        if kind in _TERMINAL_EVENTS:
            self._ended = True
        for out in events:
            if out.type == "response.output_item.added":
                item = out.item
                self._items[out.output_index] = (
                    getattr(item, "id", None),
                    getattr(item, "call_id", None),
                    getattr(item, "name", None) if item.type == "function_call" else None,
                )
            elif out.type == "response.function_call_arguments.done" and self.surface == "arguments_done":
                _, call_id, name = self._items.get(out.output_index, (out.item_id, None, None))
                if name is None:
                    continue  # not a function_call item the application saw being added
                self._offer(openai_responses_ids(self._response_id, out.item_id, call_id), name, raw=out.arguments)
