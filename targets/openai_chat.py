"""Adapter for the ``openai`` SDK's Chat Completions stream accumulator.

Surface read: ``openai.lib.streaming.chat.ChatCompletionStreamState`` (source:
``openai/lib/streaming/chat/_completions.py``). Its docstring presents it as the helper "for
manually accumulating ``ChatCompletionChunk``s into a final ``ChatCompletion`` object" when
an application cannot use ``client.chat.completions.stream()``; that ``stream()`` wraps the
very same state (``ChatCompletionStream.__stream__`` calls ``handle_chunk`` for every chunk
whose ``object`` is ``chat.completion.chunk``). Two moments where the library presents a
call as finished, so two surfaces:

* ``done_event``: the ``tool_calls.function.arguments.done`` event that ``handle_chunk``
  returns (``ChoiceEventState._add_tool_done_event``), with ``name``, ``arguments`` and
  ``parsed_arguments``. The SDK's helpers documentation shows applications reacting to this
  event; the state emits it when the *next* tool index starts or when a ``finish_reason``
  arrives.
* ``final``: ``get_final_completion()`` after the body ended (``data: [DONE]``), executing
  ``choices[0].message.tool_calls`` when the finish reason is a normal one
  (:data:`~callsafe.targets._common.CHAT_COMPLETED_REASONS`), with each call's
  ``function.parsed_arguments``.

Tools are passed to the state as ``input_tools`` with ``"strict": True`` (what
``openai.pydantic_function_tool`` produces and what makes the SDK parse arguments itself):
with strict tools the state raises ``LengthFinishReasonError`` on ``finish_reason:
"length"``. ``strict=False`` passes non-strict tools, for which ``parsed_arguments`` is
``None`` and the application ``json.loads`` the ``arguments`` string itself.

Chunks are built from the wire payload with ``openai._models.construct_type``, which is what
the SDK's ``Stream`` does for every SSE event when strict response validation is off (the
default, ``BaseClient._process_response_data``): no validation, nested models built loosely.

Call keys: :func:`~callsafe.targets._common.openai_chat_ids` (response = chunk ``id``,
item = tool ``index``, call = the tool call ``id`` as the state accumulated it).

Documentation: the SDK's ``helpers.md`` (Chat Completions streaming events, auto-parsing of
strict function tools), https://github.com/openai/openai-python/blob/main/helpers.md; the
``ChatCompletionStreamState`` docstring was added in openai/openai-python#1898.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from callsafe.model.vocabulary import ToolSpec
from callsafe.targets._common import CHAT_COMPLETED_REASONS, WireTarget, openai_chat_ids

if TYPE_CHECKING:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk, ChatCompletionToolUnionParam

__all__ = ["OpenAIChatTarget", "available", "chunk_from_payload", "input_tools"]


def available() -> str | None:
    """``None`` when the ``openai`` SDK is importable, else why this adapter is skipped."""
    return OpenAIChatTarget.unavailable()


def chunk_from_payload(payload: Mapping[str, Any]) -> ChatCompletionChunk:
    """One wire payload as the SDK's ``Stream`` builds it (``construct_type``, no validation).
    Public so that other code (the pydantic-ai adapter, the benchmarks) builds the very same
    objects."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    return cast(ChatCompletionChunk, construct_type(type_=ChatCompletionChunk, value=dict(payload)))


def input_tools(tools: Mapping[str, ToolSpec], *, strict: bool) -> list[ChatCompletionToolUnionParam]:
    """The catalog as the state's ``input_tools``: with ``strict`` the SDK parses arguments
    itself (``parsed_arguments``), partially on every chunk and fully at the end."""
    return [
        cast(
            "ChatCompletionToolUnionParam",
            {"type": "function", "function": {"name": name, "parameters": dict(spec.schema), "strict": strict}},
        )
        for name, spec in tools.items()
    ]


class OpenAIChatTarget(WireTarget):
    """``openai`` Chat Completions: ``ChatCompletionStreamState`` fed chunk by chunk."""

    library: ClassVar[str] = "openai"
    module: ClassVar[str] = "openai"
    protocol = "openai-chat"
    SURFACES: ClassVar[tuple[str, ...]] = ("done_event", "final")

    def __init__(self, surface: str | None = None, *, strict: bool = True) -> None:
        super().__init__(surface)
        self.strict = strict
        if not strict:
            self.name += "+nonstrict"
        self._state: ChatCompletionStreamState[Any] | None = None
        self._stream_id: str | None = None
        self._finished = False  # a finish_reason arrived on this stream
        self._dead = False  # the library raised: the application's read loop is over

    def _reset(self) -> None:
        self._state = None
        self._stream_id = None
        self._finished = False
        self._dead = False

    def _input_tools(self) -> list[ChatCompletionToolUnionParam]:
        return input_tools(self._env.tools if self._env is not None else {}, strict=self.strict)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.lib.streaming.chat._completions import _is_valid_chat_completion_chunk_weak

        self._chat_error(payload)
        chunk = chunk_from_payload(payload)
        if not _is_valid_chat_completion_chunk_weak(chunk):
            return  # ChatCompletionStream.__stream__ skips these (Azure's async filter events)
        if self._state is not None and (self._finished or self._dead) and chunk.id != self._stream_id:
            self.end_stream()  # a new response: the previous body has ended
        if self._state is None:
            self._state = ChatCompletionStreamState(input_tools=self._input_tools())
            self._stream_id = chunk.id
        if self._dead:
            return
        try:
            events = self._state.handle_chunk(chunk)
        except Exception as exc:
            self._dead = True
            self._failed(exc)
            raise
        if any(choice.finish_reason for choice in chunk.choices or []):
            self._finished = True
        if self.surface != "done_event":
            return
        snapshot = self._state.current_completion_snapshot
        calls = (snapshot.choices[0].message.tool_calls or []) if snapshot.choices else []
        for event in events:
            if event.type != "tool_calls.function.arguments.done":
                continue
            call_id = calls[event.index].id if event.index < len(calls) else None
            ids = openai_chat_ids(self._stream_id, event.index, call_id)
            if self.strict:
                self._offer(ids, event.name, event.parsed_arguments, raw=event.arguments)
            else:
                self._offer(ids, event.name, raw=event.arguments)

    def end_stream(self) -> None:
        state, dead = self._state, self._dead
        stream_id = self._stream_id
        self._reset()
        if state is None or dead or self.surface != "final":
            return
        try:
            completion = state.get_final_completion()
        except Exception as exc:  # LengthFinishReasonError, ContentFilterFinishReasonError, ...
            self._failed(exc)
            raise
        if not completion.choices:
            return
        choice = completion.choices[0]
        refused = None
        if choice.finish_reason not in CHAT_COMPLETED_REASONS:
            refused = f"finish_reason {choice.finish_reason!r} is not a normal end: an application does not run it"
        for index, call in enumerate(choice.message.tool_calls or []):
            if call.type != "function":
                continue
            ids = openai_chat_ids(stream_id, index, call.id)
            if self.strict:
                parsed = call.function.parsed_arguments
                self._offer(ids, call.function.name, parsed, raw=call.function.arguments, refused=refused)
            else:
                self._offer(ids, call.function.name, raw=call.function.arguments, refused=refused)
