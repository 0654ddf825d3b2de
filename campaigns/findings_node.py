"""The findings of the TypeScript libraries (the node rows, :mod:`callsafe.targets.node_rows`): each a
:class:`~callsafe.campaigns.finding_record.Finding` with its witnesses, the surfaces and
invariants they violate, and its standalone script; :data:`callsafe.campaigns.findings.FINDINGS`
lists them after the Python libraries'.

The witnesses are the traces the matrix itself found, built here in the shapes of the
wire-shaped traces (``callsafe.certify.wire_traces``, a floor above this one) and their wire
adversities (:func:`callsafe.providers.adversities.wire_trace`, under the generator's
labels). Each script is ``adapters/node/repro/*.mjs``: plain JavaScript that runs under
Node with the pinned package alone (a local ``node:http`` server or the SDK's ``fetch``
option sends the stream; no callsafe), under 30 lines, and exits 1 while the problem shows
(``tests/test_node_rows.py`` runs every one).
"""

from __future__ import annotations

from typing import Final

from callsafe.campaigns.finding_record import Finding
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import StopReason, ToolSpec, Trace
from callsafe.providers.adversities import wire_trace

__all__ = ["NODE_FINDINGS", "NODE_REPRO_DIR"]

NODE_REPRO_DIR: Final = "adapters/node/repro"
T, X, C, L, ONCE = "INV-TERMINAL", "INV-EXACT-ARGS", "INV-CANCEL", "LIVE-DISPATCH", "INV-ONCE"
CHAT, RESP, ANTH = "openai-chat", "openai-responses", "anthropic-messages"

AI = "node/ai:openai-chat:streamText"
AA = "node/ai:anthropic-messages:streamText"
OC = "node/openai:openai-chat:chat.completions.stream"
OR = "node/openai:openai-responses:responses.stream"
AN = "node/@anthropic-ai/sdk:anthropic-messages:MessageStream"
ATR = "node/@anthropic-ai/sdk:anthropic-messages:toolRunner"
LC = "node/@langchain/core:openai-chat:ChatOpenAI.stream"
AG = "node/@openai/agents:openai-responses:run-streamed"

PAY: Final = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}
WHOLE: Final = ('{"amount":1', "00}")
TRUNCATED: Final = ('{"amount":10',)


def _b() -> TraceBuilder:
    return TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", response="r1")


def _one(texts: tuple[str, ...], stop: StopReason = "completed", end: StopReason | None = "completed") -> Trace:
    """The wire-shaped trace of one call on item 0 (``callsafe.certify.wire_traces``' shape):
    ``texts``, its terminal with ``stop``, then the response's end (None: it never ends)."""
    b = _b().open("call_a", "pay", item="0").fragments("call_a", *texts).terminal("call_a", stop)
    if end is not None:
        b.response_end(end)
    return b.build()


def _two(shared: bool = False) -> Trace:
    """Two whole calls in sequence, on items 0 and 1 (or both on 0), completed at the end."""
    b = _b().open("call_a", "pay", item="0").fragments("call_a", *WHOLE)
    b.open("call_b", "pay", item="0" if shared else "1").fragments("call_b", *WHOLE)
    return b.terminal("call_a").terminal("call_b").response_end().build()


ONE: Final = _one(WHOLE)
DISAGREES: Final = "response.function_call_arguments.done carries other arguments than the deltas"


def _adversity(protocol: str, operator: str, label: str, base: Trace = ONE) -> Trace:
    """A wire adversity's variant of a wire-shaped trace, as the ``wire-adversities``
    generator makes it (:func:`callsafe.providers.adversities.wire_trace`)."""
    return wire_trace(base, protocol, operator, label)


def _merged_into_first() -> Trace:
    """Two calls on index 0: the first sends no arguments, the second opens and completes."""
    b = _b().open("call_a", "pay", item="0").open("call_b", "pay", item="0").fragments("call_b", '{"amount":1', "00}")
    return b.terminal("call_a").terminal("call_b").response_end().build()


def _s(*invariants: str) -> frozenset[str]:
    return frozenset(invariants)


def _script(name: str) -> str:
    return f"{NODE_REPRO_DIR}/{name}"


NODE_FINDINGS: Final[tuple[Finding, ...]] = (
    # -- ai (Vercel AI SDK), streamText with executing tools --------------------------------
    Finding(
        "AISDK-EMPTY-ARGUMENTS-RUN",
        "ai",
        "a tool call that sent no arguments at all (an empty string, not JSON) runs with {}: the SDK's tool-call "
        "parsing turns empty input into an empty object (over Anthropic too: a tool_use block with no "
        "input_json_delta)",
        _script("ai-empty-arguments-run.mjs"),
        (_one(()),),
        {AI: _s(X), AA: _s(X)},
    ),
    Finding(
        "AISDK-LATE-ID-MADE-UP",
        "ai",
        "when a call's id arrives in a later chunk than its first, StreamingToolCallTracker makes up an id and the "
        "tool runs under it, a call key the stream never carried (vercel/ai #14722 is the name's variant: there "
        "the tracker throws)",
        _script("ai-late-id-made-up.mjs"),
        (_adversity(CHAT, "name-or-id-later", "each call's id in a later chunk than its first"),),
        {AI: _s(X, L)},
    ),
    Finding(
        "AISDK-DATA-AFTER-FINISH",
        "ai",
        "a tool-call fragment after the choice's finish_reason is still appended and the tool runs with it: "
        "'{\"amount\":1' ended, then '00}' runs {'amount': 100}",
        _script("ai-data-after-finish-reason-runs.mjs"),
        (
            _adversity(
                CHAT, "finish-reason-before-trailing-fragments", "finish_reason 'tool_calls' before tool chunk 1"
            ),
        ),
        {AI: _s(T, C)},
    ),
    Finding(
        "AISDK-SHARED-INDEX-MERGED",
        "ai",
        "a second call opened (with its own id) on the index of a first call that sent no arguments is merged "
        "into the first: the tool runs once, under the first id with the second call's arguments, and the "
        "second call never runs",
        _script("ai-shared-index-merges-calls.mjs"),
        (_merged_into_first(),),
        {AI: _s(X, L)},
    ),
    Finding(
        "AISDK-ANTH-START-AFTER-DELTAS",
        "ai",
        "over @ai-sdk/anthropic, a content_block_start replayed after the block's input_json_delta events resets "
        "the block's input: the tool runs with {} instead of the streamed arguments",
        _script("ai-anthropic-start-after-deltas-resets-input.mjs"),
        (_adversity(ANTH, "replayed-block-or-message-start", "content_block_start replayed after the block's deltas"),),
        {AA: _s(X)},
    ),
    # -- openai (node), chat.completions.stream ----------------------------------------------
    Finding(
        "OA-NODE-CHAT-DONE-ON-LENGTH",
        "openai",
        "ChatCompletionStream emits tool_calls.function.arguments.done on any finish_reason, length included: "
        "the call a length stop cut off is presented as finished (it also emits it when a new index starts)",
        _script("openai-chat-done-on-length.mjs"),
        (_one(WHOLE, "length", "length"),),
        {OC: _s(T, C)},
    ),
    Finding(
        "OA-NODE-CHAT-INDEX-COLLISION",
        "openai",
        "two calls that share a tool index are accumulated as one (the second id replaces the first, the "
        "arguments are concatenated): the first call is never presented",
        _script("openai-chat-index-collision.mjs"),
        (_two(shared=True),),
        {OC: _s(L)},
    ),
    # -- openai (node), responses.stream -------------------------------------------------------
    Finding(
        "OA-NODE-RESP-REPLAYED-DONE",
        "openai",
        "a replayed response.function_call_arguments.done (same sequence_number) is emitted again: the call runs twice",
        _script("openai-responses-replayed-done.mjs"),
        (
            _adversity(
                RESP,
                "replayed-responses-events",
                "response.function_call_arguments.done replayed (same sequence_number)",
            ),
        ),
        {OR: _s(ONCE)},
    ),
    Finding(
        "OA-NODE-RESP-ARGUMENTS-ONLY-IN-ITEM-DONE",
        "openai",
        "a call whose arguments come only in response.output_item.done (no deltas, no arguments.done; pi #917, "
        "forgecode #2558) is never presented by response.function_call_arguments.done",
        _script("openai-responses-arguments-only-in-item-done.mjs"),
        (
            _adversity(
                RESP,
                "arguments-only-in-done",
                "no deltas, no arguments.done: the arguments only in output_item.done",
            ),
        ),
        {OR: _s(L)},
    ),
    # -- @anthropic-ai/sdk, MessageStream ------------------------------------------------------
    Finding(
        "AN-NODE-TRUNCATED-REPAIRED",
        "@anthropic-ai/sdk",
        "MessageStream finalises a tool_use block's input with its lenient partial-JSON parser: arguments cut "
        "off at '{\"amount\":10' are presented at content_block_stop as {} (the cut-off field dropped), a "
        "complete-looking call",
        _script("anthropic-truncated-input-repaired.mjs"),
        (_one(TRUNCATED),),
        {AN: _s(T)},
    ),
    Finding(
        "AN-NODE-REPLAYED-BLOCK-START",
        "@anthropic-ai/sdk",
        "MessageStream's snapshot pushes every content_block_start as a new block, whatever its index: a "
        "replayed start shifts the later blocks, so the stop of block 1 presents block 0's call again (under the "
        "wrong item) and the call of block 1 is never presented",
        _script("anthropic-replayed-block-start.mjs"),
        (_adversity(ANTH, "replayed-block-or-message-start", "content_block_start replayed", _two()),),
        {AN: _s(X, L)},
    ),
    Finding(
        "AN-NODE-REPLAYED-BLOCK-STOP",
        "@anthropic-ai/sdk",
        "a replayed content_block_stop is emitted again: the stopped tool_use block is presented twice",
        _script("anthropic-replayed-block-stop.mjs"),
        (_adversity(ANTH, "replayed-block-or-message-start", "content_block_stop replayed"),),
        {AN: _s(ONCE)},
    ),
    Finding(
        "AN-NODE-DUPLICATED-DELTA",
        "@anthropic-ai/sdk",
        "a duplicated input_json_delta is appended, the block's input no longer parses, and the whole stream "
        "raises at that block's stop: the other, valid tool_use block of the message is lost (the class of "
        "anthropic-sdk-typescript #996, where an invalid escape crashed the stream); the tool runner reads with "
        "BetaMessageStream, which does the same",
        _script("anthropic-duplicated-delta.mjs"),
        (_adversity(ANTH, "duplicated-delta", "delta 2 sent twice", _two()),),
        {AN: _s(L), ATR: _s(L)},
        issue="anthropics/anthropic-sdk-typescript#996",
    ),
    Finding(
        "AN-NODE-RUNNER-UNSTOPPED-BLOCK",
        "@anthropic-ai/sdk",
        "the tool runner runs a tool_use block that never got its content_block_stop (the message ended first): "
        "the final message keeps it, with whatever input had arrived",
        _script("anthropic-tool-runner-unstopped-block-runs.mjs"),
        (_b().open("call_a", "pay", item="0").fragments("call_a", *WHOLE).response_end().build(),),
        {ATR: _s(T, C)},
    ),
    Finding(
        "AN-NODE-RUNNER-REPLAYED-BLOCK-START",
        "@anthropic-ai/sdk",
        "a replayed content_block_start adds a second block with the same id to the final message, and the tool "
        "runner runs the call twice (once with the streamed input, once with {})",
        _script("anthropic-tool-runner-replayed-block-start.mjs"),
        (_adversity(ANTH, "replayed-block-or-message-start", "content_block_start replayed"),),
        {ATR: _s(X, ONCE)},
    ),
    # -- @langchain/core with @langchain/openai, ChatOpenAI.stream ----------------------------
    Finding(
        "LCJS-NO-ROLE-DROPS-CALLS",
        "@langchain/core",
        "ChatOpenAI types the message from the stream's first delta: a stream whose deltas name no role, or "
        'role "" (some OpenAI-compatible servers and gateways; the cloud APIs open with role assistant), '
        "becomes generic ChatMessageChunks, which carry no tool_call_chunks: every tool call is lost",
        _script("langchain-no-role-drops-tool-calls.mjs"),
        (
            _adversity(CHAT, "role-missing-or-empty", "no role in any delta"),
            _adversity(CHAT, "role-missing-or-empty", 'role "" in the first delta'),
        ),
        {LC: _s(L)},
        issue="langchain-ai/langchainjs#11157, #11468",
    ),
    Finding(
        "LCJS-LENGTH-STOP-RUNS",
        "@langchain/core",
        "a tool call cut off by finish_reason length stays in the concatenated message's tool_calls, its "
        "arguments parsed best-effort ('{\"amount\":10' becomes {amount: 10}, no arguments {}), and tool_calls "
        "say nothing of the cut: what LangGraph.js's ToolNode runs",
        _script("langchain-length-stop-runs.mjs"),
        (_one(TRUNCATED, "length", "length"), _one((), "length", "length")),
        {LC: _s(T, C)},
        issue="langchain-ai/langchainjs#11469",
    ),
    Finding(
        "LCJS-SHARED-INDEX-MERGED",
        "@langchain/core",
        "a second call at the same tool index gets its own entry, but its argument chunks carry no id and merge "
        "into the first entry with that index: the first call runs with the second's arguments, the second with "
        "{} (or, when both sent arguments, the first's are glued and it is lost)",
        _script("langchain-shared-index-merges-calls.mjs"),
        (_merged_into_first(), _two(True)),
        {LC: _s(X, L)},
    ),
    # -- @openai/agents, run(agent, { stream: true }) ------------------------------------------
    Finding(
        "AGENTS-JS-DONE-DISAGREES",
        "@openai/agents",
        "the run executes a function_call whose arguments.done disagrees with its deltas: the Agents SDK takes the "
        "final item's arguments, which no reading of the stream gives (the done event's are final), and never "
        "checks them against the stream",
        _script("openai-agents-done-disagrees-with-deltas.mjs"),
        (_adversity(RESP, "done-disagrees-with-deltas", DISAGREES),),
        {AG: _s(X)},
    ),
)
