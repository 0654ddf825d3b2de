"""Wire scenarios for the third-party library adapters (``callsafe.targets.*``).

Each :class:`Scenario` is a short, hand-made wire sequence for one protocol that exercises
one known failure class (a duplicated delta, a call cut off at ``length`` whose JSON still
parses, two parallel calls sharing an index, ...), with what the spec allows: which calls
may execute, with which arguments, and from which step on. That step is the call's own end
under its protocol: the end of the body for Chat Completions (``callsafe.providers`` ends
chat calls only with the stream), ``content_block_stop`` for Anthropic, and for Responses
``response.function_call_arguments.done`` (the earliest event that says the arguments are
final; ``callsafe.providers`` waits one event more, for ``response.output_item.done``). Steps count as
:func:`callsafe.targets._common.run_wire` delivers them: step 0 is the turn, payload ``i``
is step ``i + 1``, and the end of the body (``close``) is the last step.

This module holds data only; ``tests/test_targets_libraries.py`` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callsafe.model.vocabulary import Disconnect, Event

Item = Mapping[str, Any] | Event


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Allowed:
    """A call the spec allows to execute: its tool and exact arguments, from ``from_step`` on."""

    call: str
    tool: str
    arguments: Any
    from_step: int


@dataclass(frozen=True)
class Scenario:
    name: str
    protocol: str
    failure_class: str
    items: tuple[Item, ...]
    allowed: tuple[Allowed, ...] = ()
    tools: tuple[str, ...] = ("pay", "book")

    @property
    def end_step(self) -> int:
        """The step of ``close``: the last delivered item (the turn is step 0)."""
        return len(self.items)

    def judge(self, executed: Sequence[tuple[str, str, Any, int]]) -> list[str]:
        """What in ``executed`` (call, tool, arguments, step) the spec does not allow, then the
        allowed calls that never executed (liveness)."""
        problems: list[str] = []
        seen: dict[str, int] = {}
        by_call = {a.call: a for a in self.allowed}
        for call, tool, arguments, step in executed:
            seen[call] = seen.get(call, 0) + 1
            allowed = by_call.get(call)
            if seen[call] > 1:
                problems.append(f"INV-ONCE: {call} executed again at step {step}")
            elif allowed is None:
                problems.append(f"{call} executed ({tool} {canonical(arguments)}) but must not run")
            elif tool != allowed.tool or canonical(arguments) != canonical(allowed.arguments):
                problems.append(f"INV-EXACT-ARGS: {call} executed {tool} {canonical(arguments)}")
            elif step < allowed.from_step:
                problems.append(f"INV-TERMINAL: {call} executed at step {step}, its terminal is at {allowed.from_step}")
        problems.extend(f"LIVE-DISPATCH: {a.call} never executed" for a in self.allowed if a.call not in seen)
        return problems


# --------------------------------------------------------------------------------------
# Wire builders
# --------------------------------------------------------------------------------------


def cc(
    tool_calls: list[dict[str, Any]] | None = None, finish: str | None = None, cid: str = "chatcmpl-1"
) -> dict[str, Any]:
    """One Chat Completions chunk (choice 0)."""
    delta: dict[str, Any] = {}
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tc(index: int, call_id: str | None = None, name: str | None = None, args: str | None = None) -> dict[str, Any]:
    """One ``delta.tool_calls`` entry."""
    out: dict[str, Any] = {"index": index}
    if call_id is not None:
        out["id"] = call_id
        out["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    out["function"] = function
    return out


@dataclass
class Responses:
    """Builds a Responses event sequence with increasing ``sequence_number``s."""

    rid: str = "resp_1"
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def _add(self, kind: str, seq: int | None = None, **fields: Any) -> Responses:
        number = self.seq if seq is None else seq
        if seq is None:
            self.seq += 1
        self.events.append({"type": kind, "sequence_number": number, **fields})
        return self

    def response(self, status: str, output: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.rid,
            "object": "response",
            "created_at": 1,
            "status": status,
            "model": "gpt-4o",
            "output": output or [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            **extra,
        }

    @staticmethod
    def item(item_id: str, call_id: str, name: str, args: str = "", status: str = "in_progress") -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": name,
            "arguments": args,
            "status": status,
        }

    def created(self) -> Responses:
        return self._add("response.created", response=self.response("in_progress"))

    def added(self, index: int, item_id: str, call_id: str, name: str) -> Responses:
        return self._add("response.output_item.added", output_index=index, item=self.item(item_id, call_id, name))

    def delta(self, index: int, item_id: str, text: str, seq: int | None = None) -> Responses:
        return self._add("response.function_call_arguments.delta", seq, item_id=item_id, output_index=index, delta=text)

    def args_done(self, index: int, item_id: str, text: str, seq: int | None = None) -> Responses:
        return self._add(
            "response.function_call_arguments.done", seq, item_id=item_id, output_index=index, arguments=text
        )

    def item_done(
        self,
        index: int,
        item_id: str,
        call_id: str,
        name: str,
        text: str,
        status: str = "completed",
        seq: int | None = None,
    ) -> Responses:
        item = self.item(item_id, call_id, name, text, status)
        return self._add("response.output_item.done", seq, output_index=index, item=item)

    def completed(self, *items: dict[str, Any]) -> Responses:
        return self._add("response.completed", response=self.response("completed", list(items)))

    def incomplete(self, *items: dict[str, Any]) -> Responses:
        details = {"reason": "max_output_tokens"}
        return self._add(
            "response.incomplete", response=self.response("incomplete", list(items), incomplete_details=details)
        )


def m_start(mid: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }


def b_start(index: int, tool_use_id: str, name: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_use_id, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def b_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


def b_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def m_delta(reason: str) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": 9},
    }


M_STOP: dict[str, Any] = {"type": "message_stop"}


# --------------------------------------------------------------------------------------
# Chat Completions (calls end with the stream: their terminal is the end of the body)
# --------------------------------------------------------------------------------------


def _chat(name: str, failure_class: str, items: list[Item], allowed: list[tuple[str, str, Any]]) -> Scenario:
    end = len(items)
    return Scenario(
        name, "openai-chat", failure_class, tuple(items), tuple(Allowed(c, t, a, end) for c, t, a in allowed)
    )


CHAT: tuple[Scenario, ...] = (
    _chat(
        "chat-normal",
        "baseline: one call in three fragments",
        [
            cc([tc(0, "call_a", "pay", "")]),
            cc([tc(0, args='{"amount":')]),
            cc([tc(0, args="100}")]),
            cc(finish="tool_calls"),
        ],
        [("call_a", "pay", {"amount": 100})],
    ),
    _chat(
        "chat-index-collision",
        "two parallel calls sharing index 0 with different ids, each sent whole",
        [
            cc([tc(0, "call_a", "pay", '{"amount":1}')]),
            cc([tc(0, "call_b", "pay", '{"amount":2}')]),
            cc(finish="tool_calls"),
        ],
        [("call_a", "pay", {"amount": 1}), ("call_b", "pay", {"amount": 2})],
    ),
    _chat(
        "chat-index-collision-glued-valid",
        "two calls sharing index 0 whose glued fragments parse: {'amount':1 + 00} = {'amount':100}",
        [
            cc([tc(0, "call_a", "pay", '{"amount":1')]),
            cc([tc(0, "call_b", None, "")]),
            cc([tc(0, args="00}")]),
            cc(finish="tool_calls"),
        ],
        [],
    ),
    _chat(
        "chat-repeated-id-name",
        "id and name repeated on every chunk of one call (vLLM, Fireworks, GPT-5 style)",
        [cc([tc(0, "call_a", "pay", '{"amount":')]), cc([tc(0, "call_a", "pay", "100}")]), cc(finish="tool_calls")],
        [("call_a", "pay", {"amount": 100})],
    ),
    _chat(
        "chat-length-parses",
        "a call cut off at finish_reason=length whose JSON still parses",
        [cc([tc(0, "call_a", "pay", '{"amount":100}')]), cc(finish="length")],
        [],
    ),
    _chat(
        "chat-length-truncated",
        "a call cut off at finish_reason=length inside a number",
        [cc([tc(0, "call_a", "pay", '{"amount":10')]), cc(finish="length")],
        [],
    ),
    _chat(
        "chat-length-second-call",
        "first call complete, second cut off at length: the stop reason covers both",
        [
            cc([tc(0, "call_a", "pay", '{"amount":100}')]),
            cc([tc(1, "call_b", "book", '{"day":"Tu')]),
            cc(finish="length"),
        ],
        [],
    ),
    _chat(
        "chat-glued-objects",
        "'}{' glued arguments inside one call",
        [cc([tc(0, "call_a", "pay", '{"amount":1}{"amount":2}')]), cc(finish="tool_calls")],
        [],
    ),
    _chat(
        "chat-no-finish-reason",
        "the body ends cleanly without any finish_reason (the call never got its terminal)",
        [cc([tc(0, "call_a", "pay", '{"amount":100}')])],
        [],
    ),
    _chat(
        "chat-finish-every-chunk",
        "finish_reason on every chunk (jcode #1326), arguments split across chunks: the data after the first "
        "finish_reason is late data, the call has two readings and must not run (issue 18)",
        [
            cc([tc(0, "call_a", "pay", '{"amount":1')], finish="tool_calls"),
            cc([tc(0, args="00}")], finish="tool_calls"),
        ],
        [],
    ),
    _chat(
        "chat-interleaved",
        "two calls interleaved: index 0 continues after index 1 started",
        [
            cc([tc(0, "call_a", "pay", '{"amount":1')]),
            cc([tc(1, "call_b", "book", '{"day":"Tue"}')]),
            cc([tc(0, args="00}")]),
            cc(finish="tool_calls"),
        ],
        [("call_a", "pay", {"amount": 100}), ("call_b", "book", {"day": "Tue"})],
    ),
    _chat(
        "chat-disconnect",
        "the connection drops after complete arguments, before any finish_reason",
        [cc([tc(0, "call_a", "pay", '{"amount":100}')]), Disconnect("t1", "chatcmpl-1")],
        [],
    ),
)


# --------------------------------------------------------------------------------------
# Responses (a call's terminal is its response.output_item.done)
# --------------------------------------------------------------------------------------


def _responses_normal() -> Scenario:
    r = Responses().created().added(0, "fc_1", "call_1", "pay")
    r.delta(0, "fc_1", '{"amount":').delta(0, "fc_1", "100}").args_done(0, "fc_1", '{"amount":100}')
    r.item_done(0, "fc_1", "call_1", "pay", '{"amount":100}')
    r.completed(Responses.item("fc_1", "call_1", "pay", '{"amount":100}', "completed"))
    return Scenario(
        "responses-normal",
        "openai-responses",
        "baseline: one call, two deltas",
        tuple(r.events),
        (Allowed("call_1", "pay", {"amount": 100}, 5),),
    )


def _responses_duplicate_delta() -> Scenario:
    r = Responses().created().added(0, "fc_1", "call_1", "pay")
    r.delta(0, "fc_1", '{"amount":10')
    r.delta(0, "fc_1", '{"amount":10', seq=2)  # the same sequence_number again
    r.delta(0, "fc_1", "0}").args_done(0, "fc_1", '{"amount":100}')
    r.item_done(0, "fc_1", "call_1", "pay", '{"amount":100}')
    r.completed(Responses.item("fc_1", "call_1", "pay", '{"amount":100}', "completed"))
    return Scenario(
        "responses-duplicate-delta",
        "openai-responses",
        "a delta delivered twice with the same sequence_number",
        tuple(r.events),
        (Allowed("call_1", "pay", {"amount": 100}, 6),),
    )


def _responses_replayed_done() -> Scenario:
    r = Responses().created().added(0, "fc_1", "call_1", "pay")
    r.delta(0, "fc_1", '{"amount":100}').args_done(0, "fc_1", '{"amount":100}')
    r.item_done(0, "fc_1", "call_1", "pay", '{"amount":100}')
    r.args_done(0, "fc_1", '{"amount":100}', seq=3)  # a reconnect re-delivers seq 3 and 4
    r.item_done(0, "fc_1", "call_1", "pay", '{"amount":100}', seq=4)
    r.completed(Responses.item("fc_1", "call_1", "pay", '{"amount":100}', "completed"))
    return Scenario(
        "responses-replayed-done",
        "openai-responses",
        "a reconnect replays the call's done events (same sequence_numbers)",
        tuple(r.events),
        (Allowed("call_1", "pay", {"amount": 100}, 4),),
    )


def _responses_incomplete() -> Scenario:
    r = Responses().created().added(0, "fc_1", "call_1", "pay")
    r.delta(0, "fc_1", '{"amount":100}').args_done(0, "fc_1", '{"amount":100}')
    r.item_done(0, "fc_1", "call_1", "pay", '{"amount":100}', status="incomplete")
    r.incomplete(Responses.item("fc_1", "call_1", "pay", '{"amount":100}', "incomplete"))
    return Scenario(
        "responses-incomplete",
        "openai-responses",
        "a call cut off at max_output_tokens whose JSON still parses (item status incomplete)",
        tuple(r.events),
    )


def _responses_second_created() -> Scenario:
    r = Responses().created().added(0, "fc_1", "call_1", "pay").delta(0, "fc_1", '{"amount":1')
    second = Responses(rid="resp_2", seq=r.seq).created().added(0, "fc_2", "call_2", "pay")
    second.delta(0, "fc_2", '{"amount":5}').args_done(0, "fc_2", '{"amount":5}')
    second.item_done(0, "fc_2", "call_2", "pay", '{"amount":5}')
    second.completed(Responses.item("fc_2", "call_2", "pay", '{"amount":5}', "completed"))
    return Scenario(
        "responses-second-created",
        "openai-responses",
        "a second response.created while the first response is open (spliced stream)",
        tuple(r.events + second.events),
    )


RESPONSES: tuple[Scenario, ...] = (
    _responses_normal(),
    _responses_duplicate_delta(),
    _responses_replayed_done(),
    _responses_incomplete(),
    _responses_second_created(),
)


# --------------------------------------------------------------------------------------
# Anthropic Messages (a call's terminal is its content_block_stop)
# --------------------------------------------------------------------------------------


def _anthropic(
    name: str, failure_class: str, items: list[Item], allowed: list[tuple[str, str, Any, int]] | None = None
) -> Scenario:
    return Scenario(name, "anthropic-messages", failure_class, tuple(items), tuple(Allowed(*a) for a in allowed or []))


_END = (m_delta("tool_use"), M_STOP)
_MAX = (m_delta("max_tokens"), M_STOP)

ANTHROPIC: tuple[Scenario, ...] = (
    _anthropic(
        "anthropic-normal",
        "baseline: one tool_use block in two deltas",
        [m_start(), b_start(0, "toolu_a", "pay"), b_delta(0, '{"amount":'), b_delta(0, "100}"), b_stop(0), *_END],
        [("toolu_a", "pay", {"amount": 100}, 5)],
    ),
    _anthropic(
        "anthropic-replayed-block-stop",
        "a replayed content_block_stop (a proxy or a resumed stream sends it again)",
        [m_start(), b_start(0, "toolu_a", "pay"), b_delta(0, '{"amount":100}'), b_stop(0), b_stop(0), *_END],
        [("toolu_a", "pay", {"amount": 100}, 4)],
    ),
    _anthropic(
        "anthropic-max-tokens-truncated",
        "a tool_use block cut off at max_tokens inside a string (content_block_stop still arrives)",
        [m_start(), b_start(0, "toolu_a", "book"), b_delta(0, '{"day":"Tue","time":"10:'), b_stop(0), *_MAX],
    ),
    _anthropic(
        "anthropic-max-tokens-number",
        "a tool_use block cut off at max_tokens inside a number: 10 of 100",
        [m_start(), b_start(0, "toolu_a", "pay"), b_delta(0, '{"amount":10'), b_stop(0), *_MAX],
    ),
    _anthropic(
        "anthropic-second-message-start",
        "a second message_start while the first message's call is open (spliced stream)",
        [
            *(m_start("msg_1"), b_start(0, "toolu_a", "pay"), b_delta(0, '{"amount":1')),
            *(m_start("msg_2"), b_start(0, "toolu_b", "pay"), b_delta(0, '{"amount":5}'), b_stop(0)),
            *_END,
        ],
    ),
    _anthropic(
        "anthropic-glued-objects",
        "'}{' glued input inside one tool_use block",
        [
            m_start(),
            b_start(0, "toolu_a", "pay"),
            b_delta(0, '{"amount":1}'),
            b_delta(0, '{"amount":2}'),
            b_stop(0),
            *_END,
        ],
    ),
    _anthropic(
        "anthropic-complete-at-max-tokens",
        "the block's input completed and stopped, then the message hit max_tokens",
        [
            m_start(),
            b_start(0, "toolu_a", "pay"),
            b_delta(0, '{"amount":100}'),
            b_stop(0),
            m_delta("max_tokens"),
            M_STOP,
        ],
        [("toolu_a", "pay", {"amount": 100}, 4)],
    ),
)

ALL: tuple[Scenario, ...] = CHAT + RESPONSES + ANTHROPIC
BY_NAME: dict[str, Scenario] = {s.name: s for s in ALL}
