"""What the client libraries do wrong, named once: the findings behind the violated cells of
the conformance matrix (:mod:`callsafe.campaigns.matrix`).

Each :class:`Finding` carries

* a **witness**: one or more short abstract traces that show it through the harness, the
  same way the matrix runs every trace (rendered for the library's protocol, judged by
  the oracle);
* the **surfaces** it shows on, each with the invariants the witnesses violate there
  (``tests/test_matrix_findings.py`` runs every witness and checks the record is exact,
  so a library release that changes behaviour fails until this table is updated);
* the **script** in ``campaigns/repro/`` that reproduces it with the library alone (no
  callsafe import, under 30 lines, exit status 1 while the problem shows).

The matrix lists, in each violated cell, the findings recorded for that surface and
invariant; a test checks that every violated cell has at least one. Notes explain cells
whose reading is not obvious (:func:`notes_for`).
"""

from __future__ import annotations

from typing import Any, Final

from callsafe.campaigns.finding_record import REPRO_DIR, Finding
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import StopReason, ToolSpec, Trace
from callsafe.providers.adversities import Variant, read_back, wire_trace

__all__ = ["FINDINGS", "NOTES", "REPRO_DIR", "Finding", "findings_for", "findings_markdown", "notes_for"]

PAY: Final = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
WHOLE: Final = ('{"amount":1', "00}")
TRUNCATED: Final = ('{"amount":10',)
GLUED: Final = ('{"amount":1}', '{"amount":2}')


def _b() -> TraceBuilder:
    return TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")


def _one(texts: tuple[str, ...], stop: StopReason | None = "completed", end: StopReason | None = "completed") -> Trace:
    """One call on item 0 with ``texts``; its terminal with ``stop`` (None: none), then the
    response's end with ``end`` (None: the body is still open when the trace ends)."""
    b = _b().open("call_a", "pay", item="0").fragments("call_a", *texts)
    if stop is not None:
        b.terminal("call_a", stop)
    if end is not None:
        b.response_end(end)
    return b.build()


def _two(
    a: tuple[str, ...],
    b: tuple[str, ...],
    *,
    shared: bool = False,
    interleaved: bool = False,
    stop: StopReason = "completed",
    a_ends: bool = True,
) -> Trace:
    """Two calls (items 0 and 1, or both 0), in sequence or interleaved, both ended with
    ``stop`` at the end of the response (``a_ends=False``: call a never gets its terminal)."""
    t = _b().open("call_a", "pay", item="0")
    if interleaved:
        t.fragments("call_a", *a[:1]).open("call_b", "pay", item="0" if shared else "1")
        t.fragments("call_b", *b[:1]).fragments("call_a", *a[1:]).fragments("call_b", *b[1:])
    else:
        t.fragments("call_a", *a).open("call_b", "pay", item="0" if shared else "1").fragments("call_b", *b)
    if a_ends:
        t.terminal("call_a", stop)
    return t.terminal("call_b", stop).response_end(stop).build()


def _s(*invariants: str) -> frozenset[str]:
    return frozenset(invariants)


def _adversity(protocol: str, operator: str, label: str, base: Trace | None = None) -> Trace:
    """A wire adversity's variant of one call's stream (``base``: of another trace), as the
    ``wire-adversities`` generator makes it (:mod:`callsafe.providers.adversities`)."""
    return wire_trace(base or _one(WHOLE), protocol, operator, label)


BOOK: Final = {"type": "object", "properties": {"day": {"type": "string"}, "time": {"type": "string"}}}


def _book_cut_in_a_string() -> Trace:
    """One ``book`` call whose input was cut off inside a string by a ``length`` stop that
    arrives after the call's own end."""
    b = TraceBuilder(tools={"book": ToolSpec(schema=BOOK)}).turn("t1", response="r1")
    b.open("call_a", "book", item="0").fragments("call_a", '{"day":"Tue","time":"10:').terminal("call_a")
    return b.response_end("length").build()


def _recorded(protocol: str, label: str, payloads: tuple[dict[str, Any], ...]) -> Trace:
    """A stream written out payload by payload (a shape no operator makes from a rendered
    trace), read back by the protocol's parser as the adversities are, so that its expected
    verdict is the oracle's on what the parser reads (never set by hand)."""
    return read_back(
        _b().build(), protocol, "recorded", "issue 18 (a library surface's finding)", Variant(label, payloads)
    )


def _fc(n: int, arguments: str = "", status: str = "in_progress") -> dict[str, Any]:
    return {"id": f"fc_{n}", "type": "function_call", "status": status, "arguments": arguments}


_SPLICED_RESPONSES: Final = (
    {"type": "response.created", "sequence_number": 0, "response": {"id": "r1", "status": "in_progress", "output": []}},
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {**_fc(1), "call_id": "call_a", "name": "pay"},
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 2,
        "item_id": "fc_1",
        "output_index": 0,
        "delta": '{"amount":1',
    },
    {"type": "response.created", "sequence_number": 3, "response": {"id": "r2", "status": "in_progress", "output": []}},
    {
        "type": "response.output_item.added",
        "sequence_number": 4,
        "output_index": 0,
        "item": {**_fc(2), "call_id": "call_b", "name": "pay"},
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 5,
        "item_id": "fc_2",
        "output_index": 0,
        "delta": '{"amount":5}',
    },
    {
        "type": "response.function_call_arguments.done",
        "sequence_number": 6,
        "item_id": "fc_2",
        "output_index": 0,
        "arguments": '{"amount":5}',
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 7,
        "output_index": 0,
        "item": {**_fc(2, '{"amount":5}', "completed"), "call_id": "call_b", "name": "pay"},
    },
    {
        "type": "response.completed",
        "sequence_number": 8,
        "response": {
            "id": "r2",
            "status": "completed",
            "output": [{**_fc(2, '{"amount":5}', "completed"), "call_id": "call_b", "name": "pay"}],
        },
    },
)
_DONE_THEN_INCOMPLETE: Final = (
    {"type": "response.created", "sequence_number": 0, "response": {"id": "r1", "status": "in_progress", "output": []}},
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {**_fc(1), "call_id": "call_a", "name": "pay"},
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 2,
        "item_id": "fc_1",
        "output_index": 0,
        "delta": '{"amount":100}',
    },
    {
        "type": "response.function_call_arguments.done",
        "sequence_number": 3,
        "item_id": "fc_1",
        "output_index": 0,
        "arguments": '{"amount":100}',
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 4,
        "output_index": 0,
        "item": {**_fc(1, '{"amount":100}', "incomplete"), "call_id": "call_a", "name": "pay"},
    },
    {
        "type": "response.incomplete",
        "sequence_number": 5,
        "response": {
            "id": "r1",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{**_fc(1, '{"amount":100}', "incomplete"), "call_id": "call_a", "name": "pay"}],
        },
    },
)
_BLOCK_IN_MESSAGE_START: Final = (
    {
        "type": "message_start",
        "message": {
            "id": "r1",
            "type": "message",
            "role": "assistant",
            "model": "callsafe",
            "content": [{"type": "tool_use", "id": "call_a", "name": "pay", "input": {"amount": 100}}],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    },
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 0},
    },
    {"type": "message_stop"},
)


T, X, C, L, ONCE = "INV-TERMINAL", "INV-EXACT-ARGS", "INV-CANCEL", "LIVE-DISPATCH", "INV-ONCE"
OA_DONE, OA_FINAL, OA_NONSTRICT, OA_FINAL_NONSTRICT = (
    "openai:openai-chat:done_event",
    "openai:openai-chat:final",
    "openai:openai-chat:done_event+nonstrict",
    "openai:openai-chat:final+nonstrict",
)
CHAT, RESP, ANTH = "openai-chat", "openai-responses", "anthropic-messages"
EVERY_CHUNK = ("finish-reason-on-every-chunk", "finish_reason 'tool_calls' on every chunk")
REPEATED = ("repeated-id-and-name", "the id and name repeated on every chunk of a call")
_SPLICED = ("replayed-block-or-message-start", "a second message_start (another id) inside the open message")
_LATE = (
    "a fragment that arrives after the choice's finish_reason is appended (a finish_reason on every chunk, "
    "jcode #1326): '{\"amount\":1' ended, then '00}' runs {'amount': 100}, a reading the end never gave"
)
OR_DONE, OR_FINAL = "openai:openai-responses:arguments_done", "openai:openai-responses:final"
AN_STOP, AN_FINAL, AN_FINE = (
    "anthropic:anthropic-messages:block_stop",
    "anthropic:anthropic-messages:final",
    "anthropic:anthropic-messages:block_stop+fine-grained",
)
AN_EVERY = "anthropic:anthropic-messages:final+every-block"
LC_FINAL, LC_PREVIEW = "langchain-core:openai-chat:final", "langchain-core:openai-chat:preview"
PA_AGENT, PA_PARTS = "pydantic-ai-slim:openai-chat:agent", "pydantic-ai-slim:openai-chat:parts"
PA_RESP, PA_ANTH = "pydantic-ai-slim:openai-responses:agent", "pydantic-ai-slim:anthropic-messages:agent"
LL_FINAL, LL_STREAM = "litellm:openai-chat:final", "litellm:openai-chat:stream"

PYTHON_LIBRARY_FINDINGS: Final[tuple[Finding, ...]] = (
    # -- openai, Chat Completions ------------------------------------------------------------
    Finding(
        "OA-CHAT-DONE-BEFORE-END",
        "openai",
        "ChatCompletionStreamState emits tool_calls.function.arguments.done for a call as soon as the next tool "
        "index starts, before the finish_reason: a length stop that follows cannot take it back, and with "
        "interleaved calls the early done carries partial arguments (strict tools then raise and end the stream)",
        "openai_chat_done_before_length.py",
        (_two(WHOLE, TRUNCATED, stop="length"), _two(WHOLE, WHOLE, interleaved=True)),
        {OA_DONE: _s(T, C, L), OA_FINAL: _s(L), OA_NONSTRICT: _s(T, C, L)},
    ),
    Finding(
        "OA-CHAT-NONSTRICT-LENGTH-DONE",
        "openai",
        "with non-strict tools, finish_reason length still emits tool_calls.function.arguments.done with the "
        "arguments of the call it cut off",
        "openai_chat_nonstrict_length_done.py",
        (_one(WHOLE, "length", "length"),),
        {OA_NONSTRICT: _s(T, C)},
    ),
    Finding(
        "OA-CHAT-INDEX-COLLISION",
        "openai",
        "two calls sharing a tool index are merged into one (ids, names and arguments concatenated): neither runs, "
        "or glued fragments that parse run under an id the stream never carried",
        "openai_chat_index_collision.py",
        (_two(WHOLE, WHOLE, shared=True),),
        {OA_DONE: _s(L), OA_FINAL: _s(L), OA_NONSTRICT: _s(L)},
    ),
    Finding(
        "OA-CHAT-STRICT-ONE-BAD-CALL",
        "openai",
        "with strict tools, one call whose arguments do not parse makes the state raise (at its done event, or in "
        "get_final_completion): the stream ends and every other, valid call of the response is lost "
        "(the spec: validate per call, not per stream)",
        "openai_chat_strict_bad_call_loses_others.py",
        (_two(TRUNCATED, WHOLE),),
        {OA_DONE: _s(L), OA_FINAL: _s(L)},
    ),
    # -- openai, Responses -------------------------------------------------------------------
    Finding(
        "OA-RESP-DONE-THEN-INCOMPLETE",
        "openai",
        "response.function_call_arguments.done is handed out for an item that then ends incomplete "
        "(output_item.done status incomplete, response.incomplete max_output_tokens): acting on it runs a call "
        "the provider says did not finish (a run at arguments.done is otherwise judged under the reading that "
        "the arguments' done event ends the call)",
        "openai_responses_done_then_incomplete.py",
        (_recorded(RESP, "arguments.done, then the item ends incomplete", _DONE_THEN_INCOMPLETE),),
        {OR_DONE: _s(T, C)},
    ),
    Finding(
        "OA-RESP-FINAL-UNFINISHED-ITEM",
        "openai",
        "ResponseStreamState raises at response.completed when any output item never got output_item.done: the "
        "final response, with every complete call in it, is lost (the spec: validate per call, not per stream)",
        "openai_responses_unfinished_item_loses_calls.py",
        (_two((), WHOLE, a_ends=False),),
        {OR_FINAL: _s(L)},
    ),
    Finding(
        "OA-RESP-STRICT-ONE-BAD-CALL",
        "openai",
        "with strict tools, one function_call whose arguments do not parse makes the final response raise: every "
        "other, valid call is lost (the spec: validate per call, not per stream)",
        "openai_responses_strict_bad_call_loses_others.py",
        (_two(TRUNCATED, WHOLE),),
        {OR_FINAL: _s(L)},
    ),
    # -- anthropic -----------------------------------------------------------------------------
    Finding(
        "AN-GLUED-OBJECTS",
        "anthropic",
        "'}{'-glued input is accepted as its first object ({'amount': 1}); malformed input is never rejected",
        "anthropic_glued_objects.py",
        (_one(GLUED),),
        {AN_STOP: _s(T), AN_FINAL: _s(T), AN_FINE: _s(T), AN_EVERY: _s(T)},
    ),
    Finding(
        "AN-TRUNCATED-REPAIRED",
        "anthropic",
        "a tool_use block whose input was cut off ('{\"amount\":10') is presented at content_block_stop, and in the "
        "final message, with its input repaired by partial JSON parsing ({'amount': 10}); a max_tokens stop "
        "reason only arrives after the block stopped",
        "anthropic_truncated_input_repaired.py",
        (_one(TRUNCATED, "completed", "length"), _one(TRUNCATED)),
        {AN_STOP: _s(T), AN_FINAL: _s(T), AN_FINE: _s(T), AN_EVERY: _s(T)},
    ),
    Finding(
        "AN-FINAL-UNSTOPPED-BLOCK",
        "anthropic",
        "the final message (message_stop, stop_reason tool_use) keeps a tool_use block that never got its "
        "content_block_stop, with whatever input had arrived, repaired: it is presented as a finished call",
        "anthropic_final_keeps_unstopped_block.py",
        (_one(('{"amount":1',), None),),
        {AN_FINAL: _s(T, C), AN_EVERY: _s(T, C)},
    ),
    # -- langchain-core ------------------------------------------------------------------------
    Finding(
        "LC-TRUNCATED-REPAIRED",
        "langchain-core",
        "AIMessageChunk's tool_calls are parsed best-effort (parse_partial_json) and carry no finish reason: a call "
        "cut off at length comes out valid and repaired ({'amount': 10}), and tool_calls (what LangGraph runs) "
        "are the same after a length stop or with no finish reason at all",
        "langchain_core_truncated_args_repaired.py",
        (_one(TRUNCATED, "length", "length"), _one(WHOLE, None, None)),
        {LC_FINAL: _s(T, C), LC_PREVIEW: _s(T, C)},
    ),
    Finding(
        "LC-INDEX-COLLISION",
        "langchain-core",
        "a second call at the same index gets its own entry, but its id-less argument chunks merge into the first "
        "entry with that index",
        "langchain_core_index_collision.py",
        (_two((), WHOLE, shared=True),),
        {LC_FINAL: _s(X), LC_PREVIEW: _s(T, X)},
    ),
    Finding(
        "LC-GLUED-OBJECTS",
        "langchain-core",
        "'}{'-glued arguments become a valid tool_call with the first object, not an invalid_tool_call",
        "langchain_core_glued_objects.py",
        (_one(GLUED),),
        {LC_FINAL: _s(T), LC_PREVIEW: _s(T)},
    ),
    Finding(
        "LC-PARTIAL-PREVIEW",
        "langchain-core",
        "mid-stream, the aggregate's tool_calls already hold each call as parsed, with a repaired prefix of its "
        "arguments (documented as best-effort): acting on them runs a call before it ended, with arguments it "
        "never had",
        "langchain_core_partial_preview.py",
        (_one(WHOLE),),
        {LC_PREVIEW: _s(T, X)},
    ),
    # -- pydantic-ai ---------------------------------------------------------------------------
    Finding(
        "PA-LENGTH-STOP",
        "pydantic-ai-slim",
        "the Agent runs the tool calls of a response that ended with finish_reason length (over Responses: "
        "incomplete, max_output_tokens; over Anthropic: stop_reason max_tokens); only a last call whose JSON does "
        "not parse is refused (check_incomplete_tool_call, in the agent graph whatever the model)",
        "pydantic_ai_length_stop_runs_tool.py",
        (_one(WHOLE, "length", "length"),),
        {PA_AGENT: _s(T, C), PA_RESP: _s(T, C), PA_ANTH: _s(T, C)},
    ),
    Finding(
        "PA-NO-FINISH-REASON",
        "pydantic-ai-slim",
        "a stream that ended without any finish_reason counts as 'stop': its calls run (over Responses and "
        "Anthropic too: a body that ends without response.completed / message_stop runs its calls)",
        "pydantic_ai_no_finish_reason_runs_tool.py",
        (_one(WHOLE, None, None),),
        {PA_AGENT: _s(T), PA_PARTS: _s(T), PA_RESP: _s(T), PA_ANTH: _s(T)},
    ),
    Finding(
        "PA-INDEX-COLLISION",
        "pydantic-ai-slim",
        "a new call id at the same vendor index replaces the part's id and glues the arguments: the first call is "
        "lost, and glued fragments that parse run under the second id",
        "pydantic_ai_index_collision.py",
        (_two(WHOLE, WHOLE, shared=True),),
        {PA_AGENT: _s(L), PA_PARTS: _s(L)},
    ),
    # -- litellm -------------------------------------------------------------------------------
    Finding(
        "LL-NO-FINISH-REASON",
        "litellm",
        "stream_chunk_builder reports finish_reason 'stop' for a stream that never carried one",
        "litellm_no_finish_reason.py",
        (_one(WHOLE, None, None),),
        {LL_FINAL: _s(T)},
    ),
    Finding(
        "LL-INDEX-COLLISION",
        "litellm",
        "stream_chunk_builder merges calls sharing an index: the last id and name win and the arguments are "
        "joined, so the first call is lost, and glued fragments that parse run under the second id",
        "litellm_index_collision.py",
        (_two(WHOLE, WHOLE, shared=True),),
        {LL_FINAL: _s(L), LL_STREAM: _s(L)},
    ),
    # -- findings that only wire adversities show (issue 18) -------------------------------------
    Finding(
        "OA-CHAT-REPEATED-ID-NAME",
        "openai",
        "an id and name repeated on every chunk are concatenated (paypay, call_acall_a): the call names no tool",
        "openai_chat_repeated_name.py",
        (_adversity(CHAT, *REPEATED),),
        {OA_DONE: _s(L), OA_FINAL: _s(L), OA_NONSTRICT: _s(L), OA_FINAL_NONSTRICT: _s(L)},
    ),
    Finding(
        "OA-CHAT-LATE-DATA",
        "openai",
        _LATE + " (the final completion; with strict tools the SDK's parse at the first finish_reason raises)",
        "openai_chat_late_data_after_finish.py",
        (_adversity(CHAT, *EVERY_CHUNK),),
        {OA_FINAL_NONSTRICT: _s(T, C)},
    ),
    Finding(
        "OA-RESP-REPLAYED-DONE",
        "openai",
        "a replayed response.function_call_arguments.done (same sequence_number) is passed on again: the call "
        "runs twice",
        "openai_responses_replayed_done.py",
        (
            _adversity(
                RESP,
                "replayed-responses-events",
                "response.function_call_arguments.done replayed (same sequence_number)",
            ),
        ),
        {OR_DONE: _s(ONCE)},
    ),
    Finding(
        "OA-RESP-DONE-EVENTS-DISAGREE",
        "openai",
        "when function_call_arguments.done and output_item.done carry different arguments for one call, both are "
        "passed on without a word: the final response runs the item's text, which no reading of the stream "
        "gives (arguments_done runs the done event's text at that event, which the reading that takes it as the "
        "call's final arguments and its terminal point allows)",
        "openai_responses_done_events_disagree.py",
        (
            _adversity(
                RESP,
                "done-disagrees-with-deltas",
                "response.function_call_arguments.done carries other arguments than the deltas",
            ),
        ),
        {OR_FINAL: _s(X)},
    ),
    Finding(
        "AN-SECOND-MESSAGE-START",
        "anthropic",
        "a second message_start inside the open message is ignored: the deltas after it are appended to the first "
        "message's block, which is presented as finished (the stream, spliced from two messages, has no call "
        "that may run)",
        "anthropic_second_message_start.py",
        (
            _adversity(
                ANTH, "replayed-block-or-message-start", "a second message_start (another id) inside the open message"
            ),
            _adversity(ANTH, *_SPLICED, _two(WHOLE, WHOLE)),
        ),
        {AN_STOP: _s(T, C, X), AN_FINAL: _s(T, C, X), AN_FINE: _s(T, C, X), AN_EVERY: _s(T, C, X)},
    ),
    Finding(
        "AN-REPLAYED-BLOCK-START",
        "anthropic",
        "a replayed content_block_start (the same block: index, id and name) is read as a new block: the final "
        "message holds the call twice, once as a phantom tool_use with input {} (issue 18), and with two calls "
        "the blocks after it shift, so the second call's input goes to the phantom (block_stop: the first call is "
        "presented again under the second block's index and the second call is lost)",
        "anthropic_replayed_block_start.py",
        (
            _adversity(ANTH, "replayed-block-or-message-start", "content_block_start replayed"),
            _adversity(ANTH, "replayed-block-or-message-start", "content_block_start replayed", _two(WHOLE, WHOLE)),
        ),
        {AN_STOP: _s(X, L), AN_FINAL: _s(X, ONCE), AN_FINE: _s(X, L), AN_EVERY: _s(X, ONCE)},
    ),
    Finding(
        "AN-REPLAYED-BLOCK-STOP",
        "anthropic",
        "a replayed content_block_stop is passed on again: the stopped tool_use block is presented twice, and an "
        "application that runs each stopped block runs the call twice",
        "anthropic_replayed_block_stop.py",
        (_adversity(ANTH, "replayed-block-or-message-start", "content_block_stop replayed"),),
        {AN_STOP: _s(ONCE), AN_FINE: _s(ONCE)},
    ),
    Finding(
        "AN-FINE-GRAINED-TRAILING",
        "anthropic",
        "with the fine-grained tool streaming beta the repair keeps partial strings ({'time': '10:'})",
        "anthropic_fine_grained_trailing_string.py",
        (_book_cut_in_a_string(),),
        {AN_FINE: _s(T)},
    ),
    Finding(
        "LC-REPEATED-NAME",
        "langchain-core",
        "a name repeated on every chunk is concatenated (paypay); the repeated id is deduplicated",
        "langchain_core_repeated_name.py",
        (_adversity(CHAT, *REPEATED),),
        {LC_FINAL: _s(L)},
    ),
    Finding(
        "LC-LATE-DATA",
        "langchain-core",
        _LATE,
        "langchain_core_late_data_after_finish.py",
        (_adversity(CHAT, *EVERY_CHUNK),),
        {LC_FINAL: _s(T, C)},
    ),
    Finding(
        "PA-REPEATED-NAME",
        "pydantic-ai-slim",
        "a name repeated on every chunk is concatenated (paypay)",
        "pydantic_ai_repeated_name.py",
        (_adversity(CHAT, *REPEATED),),
        {PA_AGENT: _s(L), PA_PARTS: _s(L)},
    ),
    Finding(
        "PA-LATE-DATA",
        "pydantic-ai-slim",
        _LATE,
        "pydantic_ai_late_data_after_finish.py",
        (_adversity(CHAT, *EVERY_CHUNK),),
        {PA_AGENT: _s(T, C), PA_PARTS: _s(T, C)},
    ),
    Finding(
        "PA-RESP-DUPLICATE-DELTA",
        "pydantic-ai-slim",
        "over Responses, a delta replayed with its sequence_number is appended ('{\"amount\":100}00}'): the "
        "arguments no longer parse, and the call (whose done events say '{\"amount\":100}') never runs (which the "
        "reading that fails a call on a repeated position allows); where "
        "the doubled text still parses ('{\"amount\":' '1' '1' '00}'), the call runs with {'amount': 1100}",
        "pydantic_ai_responses_duplicate_delta.py",
        (
            _adversity(RESP, "duplicated-delta", "delta 2 replayed with its sequence number"),
            _adversity(
                RESP, "duplicated-delta", "delta 3 replayed with its sequence number", _one(('{"amount":', "1", "00}"))
            ),
        ),
        {PA_RESP: _s(X)},
    ),
    Finding(
        "PA-RESP-SECOND-CREATED",
        "pydantic-ai-slim",
        "over Responses, a second response.created (another id) inside the open response is ignored: a call of "
        "the stream spliced from two responses runs",
        "pydantic_ai_responses_second_created.py",
        (_recorded(RESP, "a second response.created inside the open response", _SPLICED_RESPONSES),),
        {PA_RESP: _s(X)},
    ),
    Finding(
        "PA-ANTH-MESSAGE-START-BLOCKS",
        "pydantic-ai-slim",
        "over Anthropic, nothing is read from message_start's content: a complete tool_use block there "
        "(programmatic tool calling sends them so) never runs",
        "pydantic_ai_anthropic_tool_use_in_message_start.py",
        (_recorded(ANTH, "a complete tool_use block inside message_start", _BLOCK_IN_MESSAGE_START),),
        {PA_ANTH: _s(L)},
    ),
    Finding(
        "PA-ANTH-LATE-DELTA",
        "pydantic-ai-slim",
        "over Anthropic, an input_json_delta after its block's content_block_stop (or after message_delta or "
        "message_stop) is appended to the stopped call ('{\"amount\":100}' + '0'): its input no longer parses "
        "and the call never runs",
        "pydantic_ai_anthropic_delta_after_block_stop.py",
        (_adversity(ANTH, "delta-after-block-or-message-stop", "a delta after content_block_stop"),),
        {PA_ANTH: _s(L)},
    ),
    Finding(
        "PA-ANTH-SECOND-MESSAGE-START",
        "pydantic-ai-slim",
        "over Anthropic, a second message_start (another id) inside the open message is ignored: the deltas after "
        "it are appended to the first message's block and the spliced call runs (with two calls, the second one, "
        "of a message that never started cleanly, runs too)",
        "pydantic_ai_anthropic_second_message_start.py",
        (_adversity(ANTH, *_SPLICED), _adversity(ANTH, *_SPLICED, _two(WHOLE, WHOLE))),
        {PA_ANTH: _s(T, C, X)},
    ),
    Finding(
        "LL-LATE-DATA",
        "litellm",
        _LATE,
        "litellm_late_data_after_finish.py",
        (_adversity(CHAT, *EVERY_CHUNK),),
        {LL_FINAL: _s(T, C), LL_STREAM: _s(T, C)},
    ),
    Finding(
        "LL-EMPTY-ARGUMENTS",
        "litellm",
        "a tool call whose streamed arguments were '' is rebuilt with arguments '{}': a call that carried no "
        "arguments (not JSON) is presented as a valid call with an empty object and runs (on the streaming "
        "path of completion(stream=True) too)",
        "litellm_empty_arguments_become_object.py",
        (_b().open("call_a", "pay", item="0").terminal("call_a").response_end().build(),),
        {LL_FINAL: _s(X), LL_STREAM: _s(X)},
    ),
)


def _all_findings() -> tuple[Finding, ...]:
    """The Python libraries' findings (here), then the agent frameworks' and the TypeScript
    libraries' (kept in modules of their own, :mod:`callsafe.campaigns.findings_frameworks`
    and :mod:`callsafe.campaigns.findings_node`)."""
    from callsafe.campaigns.findings_bedrock import BEDROCK_FINDINGS
    from callsafe.campaigns.findings_frameworks import FRAMEWORK_FINDINGS
    from callsafe.campaigns.findings_node import NODE_FINDINGS

    found = (*PYTHON_LIBRARY_FINDINGS, *FRAMEWORK_FINDINGS, *BEDROCK_FINDINGS, *NODE_FINDINGS)
    ids = [f.id for f in found]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ValueError(f"finding ids must be unique: {duplicated}")
    return found


FINDINGS: Final[tuple[Finding, ...]] = _all_findings()

NOTES: Final[dict[tuple[str, str], str]] = {}


def findings_for(spec: str, invariant: str) -> list[Finding]:
    """The findings recorded for a matrix row (``library:NAME``) and invariant."""
    name = spec.removeprefix("library:")
    return [f for f in FINDINGS if invariant in f.surfaces.get(name, frozenset())]


def notes_for(spec: str, invariant: str) -> list[str]:
    """Explanations for a cell whose reading is not obvious."""
    note = NOTES.get((spec.removeprefix("library:"), invariant))
    return [note] if note else []


def findings_markdown() -> str:
    """The findings page's table (``docs/findings.md``): one row per finding, with the
    surfaces and invariants its witnesses violate and its script
    (``tests/test_docs_findings.py`` keeps the page equal to this)."""
    rows = ["| finding | library | surfaces: invariants | what | script |", "| --- | --- | --- | --- | --- |"]
    for f in FINDINGS:
        where = "; ".join(
            f"{surface.split(':', 1)[1]}: {', '.join(sorted(invariants))}" for surface, invariants in f.surfaces.items()
        )
        summary = f.summary.replace("|", "\\|") + (f" (public report: {f.issue})" if f.issue else "")
        rows.append(f"| {f.id} | {f.library} | {where} | {summary} | `{f.script}` |")
    return "\n".join(rows) + "\n"
