"""Adapter for the ``anthropic`` SDK's Messages stream accumulator.

Surface read: ``accumulate_event`` and ``build_events`` (source:
``anthropic/lib/streaming/_messages.py``), the two functions that ``MessageStream.__stream__``
(what ``client.messages.stream(...)`` yields) runs for every raw SSE event: the first folds
the event into the message snapshot, parsing ``input_json_delta`` fragments with
``jiter.from_json(..., partial_mode=True)``; the second turns it into the stream's events.
Two surfaces:

* ``block_stop``: the ``content_block_stop`` event (``ParsedContentBlockStopEvent``), which
  carries the finished ``tool_use`` block with its parsed ``input``. Streaming applications
  act on it: the SDK documents ``content_block_stop`` as "Block completed", and its own tool
  runner with ``run_tools_eagerly`` starts each call from its stopped block (it then waits
  for the model to move on, see ``anthropic/lib/tools/_beta_runner.py``, ``EagerToolCalls``).
* ``final``: what ``get_final_message()`` returns when the application calls it once the
  body ended: the SDK's own ``client.messages.stream(...)`` reads the body's SSE bytes
  through an in-process transport (:mod:`callsafe.targets.sdk_streams`), so a delta after
  ``message_stop`` and a body that ends with no stop event reach the message as they reach
  an application's. Its ``tool_use`` blocks run when ``stop_reason`` is ``"tool_use"``, the
  rule the SDK's tool runner applies (``_STOP_REASON_STEPS``) and the pattern of Anthropic's
  tool-use guide. Blocks of a message with another stop reason (none included) are presented
  with the reason they do not run (``inspect`` lists them). A dropped connection, or an
  accessor that raises, presents nothing.
* ``final+every-block`` (``every_block=True``): ``get_final_message()`` read the way most
  applications read it, running every ``tool_use`` block whatever the stop reason.

``fine_grained=True`` reads the beta accumulator (``anthropic/lib/streaming/_beta_messages.py``)
with the ``anthropic-beta: fine-grained-tool-streaming-2025-05-14`` request header, under
which the SDK parses tool input with ``partial_mode="trailing-strings"``.

Events are built with ``anthropic._models.construct_type`` against ``RawMessageStreamEvent``
(or ``BetaRawMessageStreamEvent``), as the SDK's ``Stream`` does. Like ``MessageStream``,
events before the first ``message_start`` are passed on without accumulating. A
``message_start`` after ``message_stop`` (or after the library raised) starts a new stream; a
``message_start`` in the middle of a message goes to the same accumulator, as it would on one
connection. An ``error`` event ends the stream with an exception, as the SDK's ``Stream``
raises one.

Call keys: :func:`~callsafe.targets._common.anthropic_ids` (response = ``message.id`` of the
snapshot, item = content block ``index``, call = ``tool_use`` id).

Documentation: https://docs.anthropic.com/en/docs/build-with-claude/streaming (event flow, the
SDK's ``MessageStream``) and https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/fine-grained-tool-streaming
("there is no guarantee that the resulting stream will complete in a valid JSON string").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from callsafe.targets._common import WireTarget, anthropic_ids

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

__all__ = ["AnthropicMessagesTarget", "available", "event_from_payload"]

FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"


def available() -> str | None:
    """``None`` when the ``anthropic`` SDK is importable, else why this adapter is skipped."""
    return AnthropicMessagesTarget.unavailable()


def event_from_payload(payload: Mapping[str, Any]) -> RawMessageStreamEvent:
    """One wire payload as the SDK's ``Stream`` builds it (``construct_type``). Public so
    that the benchmarks build the very same objects."""
    from anthropic._models import construct_type
    from anthropic.types import RawMessageStreamEvent

    return cast(RawMessageStreamEvent, construct_type(type_=RawMessageStreamEvent, value=dict(payload)))


class StreamErrorEvent(RuntimeError):
    """An ``error`` event arrived; the SDK's ``Stream`` raises an API error here."""


class AnthropicMessagesTarget(WireTarget):
    """``anthropic`` Messages: ``accumulate_event`` + ``build_events`` fed event by event."""

    library: ClassVar[str] = "anthropic"
    module: ClassVar[str] = "anthropic"
    protocol = "anthropic-messages"
    SURFACES: ClassVar[tuple[str, ...]] = ("block_stop", "final")

    def __init__(self, surface: str | None = None, *, fine_grained: bool = False, every_block: bool = False) -> None:
        super().__init__(surface)
        self.fine_grained = fine_grained
        self.every_block = every_block
        if fine_grained:
            self.name += "+fine-grained"
        if every_block:
            self.name += "+every-block"
        self._snapshot: Any = None  # ParsedMessage or ParsedBetaMessage
        self._json_bufs: dict[int, bytes] = {}
        self._ended = False
        self._dead = False
        self._body: list[Mapping[str, Any]] = []  # final: the body the accessor reads

    def _reset(self) -> None:
        self._snapshot = None
        self._json_bufs = {}
        self._ended = False
        self._dead = False
        self._body = []

    def end_stream(self) -> None:
        """``final``: the body ended; the application calls ``get_final_message()``."""
        body, self._body = self._body, []
        if self.surface != "final" or not body:
            return
        from callsafe.targets.sdk_streams import anthropic_final_message, responses_of

        for part in responses_of(body, "message_start"):  # once per message of a multi-step body
            try:
                message = anthropic_final_message(part, beta=FINE_GRAINED_BETA if self.fine_grained else None)
            except Exception as exc:
                self._failed(exc)
                raise
            refused = None
            if message.stop_reason != "tool_use" and not self.every_block:
                refused = f"stop_reason {message.stop_reason!r}: tool_use blocks run only on stop_reason tool_use"
            for index, block in enumerate(message.content):
                if block.type == "tool_use":
                    self._offer(anthropic_ids(message.id, index, block.id), block.name, block.input, refused=refused)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self.surface == "final":
            self._body.append(payload)  # read by the SDK's own stream when the body ends
            return
        kind = payload.get("type")
        if kind == "message_start" and (self._snapshot is None or self._ended or self._dead):
            self._reset()
        if self._dead:
            return
        if kind == "error":
            self._dead = True
            exc = StreamErrorEvent(f"error event: {payload.get('error')!r}"[:300])
            self._failed(exc)
            raise exc
        if self._snapshot is None and kind != "message_start":
            return  # MessageStream passes these on without accumulating
        try:
            events = self._accumulate(payload)
        except Exception as exc:
            self._dead = True
            self._failed(exc)
            raise
        message_id = cast("str | None", getattr(self._snapshot, "id", None))
        for event in events:
            if event.type == "content_block_stop" and self.surface == "block_stop":
                block = event.content_block
                if block.type == "tool_use":
                    self._offer(anthropic_ids(message_id, event.index, block.id), block.name, block.input)
            elif event.type == "message_stop":
                self._ended = True

    def _accumulate(self, payload: Mapping[str, Any]) -> list[Any]:
        """One raw event through the library: ``accumulate_event`` then ``build_events``."""
        if self.fine_grained:
            import httpx2
            from anthropic._models import construct_type
            from anthropic.lib.streaming import _beta_messages as beta
            from anthropic.types.beta import BetaRawMessageStreamEvent

            beta_event = cast(
                BetaRawMessageStreamEvent, construct_type(type_=BetaRawMessageStreamEvent, value=dict(payload))
            )
            self._snapshot = beta.accumulate_event(
                event=beta_event,
                current_snapshot=self._snapshot,
                json_bufs=self._json_bufs,
                request_headers=httpx2.Headers({"anthropic-beta": FINE_GRAINED_BETA}),
            )
            return list(beta.build_events(event=beta_event, message_snapshot=self._snapshot))

        from anthropic.lib.streaming._messages import accumulate_event, build_events

        event = event_from_payload(payload)
        self._snapshot = accumulate_event(event=event, current_snapshot=self._snapshot, json_bufs=self._json_bufs)
        return list(build_events(event=event, message_snapshot=self._snapshot))
