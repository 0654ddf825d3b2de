"""Evidence for the third-party library adapters (``callsafe.targets.<library>``).

Three kinds of evidence, all local (no test contacts an API; the libraries' objects are
built from wire payloads, pydantic-ai's agent talks to an in-process transport):

1. **Captures.** Every capture of a protocol (``../shared/captures/vercel-ai``, read in
   place, never copied) goes through every adapter of that protocol. What it executes is
   compared with what the capture says, written down below by reading the files
   (:data:`CAPTURE_EXPECTED`).
2. **Adversarial wire sequences** (``tests/library_scenarios.py``), one per known failure
   class. Each run is judged against what the spec allows; every deviation is pinned in
   :data:`RECORD` under a named finding, so the table below *is* what each library does, and
   a library release that changes behaviour fails here until the record is updated.
3. **Reproductions.** Each finding has a standalone script in ``campaigns/repro/`` (library
   only, no callsafe import) that prints what happened and exits 1 while the problem shows.

A library that is not installed is skipped with the reason its module gives.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from library_scenarios import ALL, BY_NAME, Allowed, Scenario, canonical

from callsafe.model.vocabulary import CallKey, Disconnect, ToolSpec, TurnStarted
from callsafe.targets import _common
from callsafe.targets._common import WireTarget, run_wire
from callsafe.targets.libraries import LIBRARY_TARGETS, make

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT.parent / "shared" / "captures" / "vercel-ai"
REPRO = ROOT / "campaigns" / "repro"
PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages")
needs_captures = pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"the shared captures are not at {CAPTURES}")


def skip_unless_available(target: WireTarget) -> None:
    reason = target.unavailable()
    if reason is not None:
        pytest.skip(reason)


# --------------------------------------------------------------------------------------
# Findings: what each library does, named once
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    library: str
    kind: str  # "safety" (an invariant breaks), "liveness" (a valid call is lost), "surface" (adapter note)
    invariant: str
    summary: str
    repro: str | None  # script in campaigns/repro/


FINDINGS: dict[str, Finding] = {
    "OA-CHAT-INDEX-COLLISION": Finding(
        "openai",
        "safety",
        "INV-EXACT-ARGS",
        "two calls sharing a tool index are merged: ids, names and arguments concatenated; glued fragments "
        "that parse run as one call under an id the stream never carried (call_acall_b)",
        "openai_chat_index_collision.py",
    ),
    "OA-CHAT-DONE-BEFORE-END": Finding(
        "openai",
        "safety",
        "INV-CANCEL (length stop), INV-TERMINAL",
        "tool_calls.function.arguments.done fires for a call when the next tool index starts, before the "
        "finish_reason: a later length stop cannot stop it; with interleaved calls the early done carries "
        "partial arguments (strict tools raise, killing the stream)",
        "openai_chat_done_before_length.py",
    ),
    "OA-CHAT-NONSTRICT-LENGTH-DONE": Finding(
        "openai",
        "safety",
        "INV-CANCEL (length stop)",
        "with non-strict tools, finish_reason=length still emits arguments.done with the arguments",
        "openai_chat_nonstrict_length_done.py",
    ),
    "OA-CHAT-REPEATED-ID-NAME": Finding(
        "openai",
        "liveness",
        "LIVE-DISPATCH",
        "an id and name repeated on every chunk are concatenated (paypay, call_acall_a): the call names no tool",
        "openai_chat_repeated_name.py",
    ),
    "OA-CHAT-MISSING-INDEX": Finding(
        "openai",
        "liveness",
        "LIVE-DISPATCH (raises)",
        "a tool call delta without index (Mistral) makes handle_chunk raise TypeError",
        "openai_chat_missing_index.py",
    ),
    "OA-CHAT-LATE-DATA": Finding(
        "openai",
        "safety",
        "INV-EXACT-ARGS (late data)",
        "a fragment after the choice's finish_reason is appended: with a finish_reason on every chunk "
        "(jcode #1326), '{\"amount\":1' ended, then '00}' runs {'amount': 100} (issue 18)",
        "openai_chat_late_data_after_finish.py",
    ),
    "OA-RESP-REPLAYED-DONE": Finding(
        "openai",
        "safety",
        "INV-ONCE",
        "a replayed response.function_call_arguments.done (same sequence_number) is passed on again",
        "openai_responses_replayed_done.py",
    ),
    "OA-RESP-DONE-THEN-INCOMPLETE": Finding(
        "openai",
        "safety",
        "INV-CANCEL (length stop)",
        "function_call_arguments.done is handed out before the response ends response.incomplete "
        "(max_output_tokens); the final response is then unavailable, but the done event was already acted on",
        "openai_responses_done_then_incomplete.py",
    ),
    "AN-TRUNCATED-REPAIRED": Finding(
        "anthropic",
        "safety",
        "INV-EXACT-ARGS / INV-TERMINAL (repaired prefix)",
        "content_block_stop presents a tool_use block cut off at max_tokens with its input repaired by "
        "partial JSON parsing ({'amount': 10} from '{\"amount\":10'); the stop reason comes after the block",
        "anthropic_truncated_input_repaired.py",
    ),
    "AN-FINE-GRAINED-TRAILING": Finding(
        "anthropic",
        "safety",
        "INV-EXACT-ARGS / INV-TERMINAL (repaired prefix)",
        "with the fine-grained tool streaming beta the repair keeps partial strings ({'time': '10:'})",
        "anthropic_fine_grained_trailing_string.py",
    ),
    "AN-SECOND-MESSAGE-START": Finding(
        "anthropic",
        "safety",
        "INV-EXACT-ARGS",
        "a second message_start while a block is open is ignored: the second message's deltas are appended "
        "to the first message's block of the same index, which is presented as finished; the second call keeps {}",
        "anthropic_second_message_start.py",
    ),
    "AN-REPLAYED-BLOCK-STOP": Finding(
        "anthropic",
        "safety",
        "INV-ONCE",
        "a replayed content_block_stop presents the stopped tool_use block again: it runs twice",
        "anthropic_replayed_block_stop.py",
    ),
    "AN-GLUED-OBJECTS": Finding(
        "anthropic",
        "safety",
        "INV-EXACT-ARGS",
        "'}{'-glued input is accepted as its first object ({'amount': 1}); malformed input is never rejected",
        "anthropic_glued_objects.py",
    ),
    "AN-BLOCK-STOP-NO-EMBEDDED": Finding(
        "anthropic",
        "surface",
        "LIVE-DISPATCH",
        "complete tool_use blocks inside message_start (programmatic tool calling) have no content_block_stop: "
        "the block_stop surface never sees them (the final message has them)",
        None,
    ),
    "AN-FINAL-STOP-REASON": Finding(
        "anthropic",
        "surface",
        "LIVE-DISPATCH",
        "the final surface runs tool_use blocks only when stop_reason is tool_use (the SDK tool runner's rule), "
        "so a block that completed before a max_tokens stop is not run",
        None,
    ),
    "LC-TRUNCATED-REPAIRED": Finding(
        "langchain-core",
        "safety",
        "INV-CANCEL (length stop), INV-EXACT-ARGS (repaired prefix), INV-TERMINAL (no finish reason)",
        "tool_calls are parsed best-effort with parse_partial_json and carry no finish reason: a call cut off at "
        "length comes out valid and repaired ({'amount': 10}), and tool_calls (what LangGraph runs) are the same "
        "after a length stop or with no finish reason at all",
        "langchain_core_truncated_args_repaired.py",
    ),
    "LC-INDEX-COLLISION": Finding(
        "langchain-core",
        "safety",
        "INV-EXACT-ARGS",
        "a second call at the same index gets its own entry, but its id-less argument chunks merge into the first "
        "entry with that index: call a runs {'amount': 100} from both calls' fragments",
        "langchain_core_index_collision.py",
    ),
    "LC-GLUED-OBJECTS": Finding(
        "langchain-core",
        "safety",
        "INV-EXACT-ARGS",
        "'}{'-glued arguments become a valid tool_call with the first object, not an invalid_tool_call",
        "langchain_core_glued_objects.py",
    ),
    "LC-REPEATED-NAME": Finding(
        "langchain-core",
        "liveness",
        "LIVE-DISPATCH",
        "a name repeated on every chunk is concatenated (paypay); the repeated id is deduplicated",
        "langchain_core_repeated_name.py",
    ),
    "LC-PARTIAL-PREVIEW": Finding(
        "langchain-core",
        "safety",
        "INV-TERMINAL (partial arguments exposed)",
        "mid-stream, the aggregate's tool_calls already hold each call as parsed with a repaired prefix of its "
        "arguments (documented as best-effort): acting on them executes before the call ended",
        "langchain_core_partial_preview.py",
    ),
    "LC-LATE-DATA": Finding(
        "langchain-core",
        "safety",
        "INV-EXACT-ARGS (late data)",
        "a fragment after the choice's finish_reason is appended: with a finish_reason on every chunk "
        "(jcode #1326), '{\"amount\":1' ended, then '00}' runs {'amount': 100} (issue 18)",
        "langchain_core_late_data_after_finish.py",
    ),
    "LC-OPENAI-MISSING-INDEX": Finding(
        "langchain-core",
        "surface",
        "LIVE-DISPATCH",
        "langchain-openai's chunk conversion (mirrored by the adapter) drops tool call chunks without index",
        None,
    ),
    "PA-LENGTH-STOP": Finding(
        "pydantic-ai-slim",
        "safety",
        "INV-CANCEL (length stop)",
        "the Agent runs tool calls of a response that ended with finish_reason=length; only a last call whose "
        "JSON does not parse is refused (check_incomplete_tool_call)",
        "pydantic_ai_length_stop_runs_tool.py",
    ),
    "PA-NO-FINISH-REASON": Finding(
        "pydantic-ai-slim",
        "safety",
        "INV-TERMINAL",
        "a stream that ended without any finish_reason counts as 'stop': its calls run",
        "pydantic_ai_no_finish_reason_runs_tool.py",
    ),
    "PA-INDEX-COLLISION": Finding(
        "pydantic-ai-slim",
        "safety",
        "INV-EXACT-ARGS",
        "a new call id at the same vendor index replaces the part's id and glues the arguments: call_b runs "
        "{'amount': 100}; two whole calls glue into invalid JSON and neither runs",
        "pydantic_ai_index_collision.py",
    ),
    "PA-REPEATED-NAME": Finding(
        "pydantic-ai-slim",
        "liveness",
        "LIVE-DISPATCH",
        "a name repeated on every chunk is concatenated (paypay)",
        "pydantic_ai_repeated_name.py",
    ),
    "PA-LATE-DATA": Finding(
        "pydantic-ai-slim",
        "safety",
        "INV-EXACT-ARGS (late data)",
        "a fragment after the choice's finish_reason is appended: with a finish_reason on every chunk "
        "(jcode #1326), '{\"amount\":1' ended, then '00}' runs {'amount': 100} (issue 18)",
        "pydantic_ai_late_data_after_finish.py",
    ),
    "PA-RESP-DUPLICATE-DELTA": Finding(
        "pydantic-ai-slim",
        "liveness",
        "LIVE-DISPATCH",
        "over Responses, a delta delivered twice with the same sequence_number is appended: the arguments no "
        "longer parse and the call never runs",
        "pydantic_ai_responses_duplicate_delta.py",
    ),
    "PA-RESP-SECOND-CREATED": Finding(
        "pydantic-ai-slim",
        "safety",
        "INV-EXACT-ARGS",
        "over Responses, a second response.created inside the open response is ignored: a call of the spliced "
        "stream runs",
        "pydantic_ai_responses_second_created.py",
    ),
    "PA-ANTH-MESSAGE-START-BLOCKS": Finding(
        "pydantic-ai-slim",
        "liveness",
        "LIVE-DISPATCH",
        "over Anthropic, nothing is read from message_start's content: complete tool_use blocks there "
        "(programmatic tool calling) never run",
        "pydantic_ai_anthropic_tool_use_in_message_start.py",
    ),
    "LL-INDEX-COLLISION": Finding(
        "litellm",
        "safety",
        "INV-EXACT-ARGS",
        "stream_chunk_builder merges calls sharing an index: last id and name win, arguments are joined; glued "
        "fragments that parse run as call_b {'amount': 100}",
        "litellm_index_collision.py",
    ),
    "LL-NO-FINISH-REASON": Finding(
        "litellm",
        "safety",
        "INV-TERMINAL",
        "stream_chunk_builder reports finish_reason 'stop' for a stream that never carried one",
        "litellm_no_finish_reason.py",
    ),
    "LL-LATE-DATA": Finding(
        "litellm",
        "safety",
        "INV-EXACT-ARGS (late data)",
        "a fragment after the choice's finish_reason is appended: with a finish_reason on every chunk "
        "(jcode #1326), '{\"amount\":1' ended, then '00}' runs {'amount': 100} (issue 18)",
        "litellm_late_data_after_finish.py",
    ),
}


# --------------------------------------------------------------------------------------
# What every (adapter, scenario) pair does that the spec does not allow. Anything not
# listed must run exactly as the spec allows.
# --------------------------------------------------------------------------------------

_LIVE_AB = ["LIVE-DISPATCH: call_a never executed", "LIVE-DISPATCH: call_b never executed"]
_LIVE_A = ["LIVE-DISPATCH: call_a never executed"]
_GLUED_AB = ['call_acall_b executed (pay {"amount":100}) but must not run']
_A100 = ['call_a executed (pay {"amount":100}) but must not run']


def _must_not(call: str, tool: str, arguments: str) -> str:
    return f"{call} executed ({tool} {arguments}) but must not run"


RECORD: dict[tuple[str, str], tuple[str, list[str]]] = {
    # openai Chat Completions
    ("openai:openai-chat:done_event", "chat-index-collision"): ("OA-CHAT-INDEX-COLLISION", _LIVE_AB),
    ("openai:openai-chat:done_event", "chat-index-collision-glued-valid"): ("OA-CHAT-INDEX-COLLISION", _GLUED_AB),
    ("openai:openai-chat:done_event", "chat-repeated-id-name"): ("OA-CHAT-REPEATED-ID-NAME", _LIVE_A),
    ("openai:openai-chat:done_event", "chat-length-second-call"): ("OA-CHAT-DONE-BEFORE-END", _A100),
    ("openai:openai-chat:done_event", "chat-interleaved"): ("OA-CHAT-DONE-BEFORE-END", _LIVE_AB),
    ("openai:openai-chat:final", "chat-index-collision"): ("OA-CHAT-INDEX-COLLISION", _LIVE_AB),
    ("openai:openai-chat:final", "chat-index-collision-glued-valid"): ("OA-CHAT-INDEX-COLLISION", _GLUED_AB),
    ("openai:openai-chat:final", "chat-repeated-id-name"): ("OA-CHAT-REPEATED-ID-NAME", _LIVE_A),
    ("openai:openai-chat:final", "chat-interleaved"): ("OA-CHAT-DONE-BEFORE-END", _LIVE_AB),
    ("openai:openai-chat:final+nonstrict", "chat-index-collision"): ("OA-CHAT-INDEX-COLLISION", _LIVE_AB),
    ("openai:openai-chat:final+nonstrict", "chat-index-collision-glued-valid"): ("OA-CHAT-INDEX-COLLISION", _GLUED_AB),
    ("openai:openai-chat:final+nonstrict", "chat-repeated-id-name"): ("OA-CHAT-REPEATED-ID-NAME", _LIVE_A),
    ("openai:openai-chat:done_event+nonstrict", "chat-index-collision"): ("OA-CHAT-INDEX-COLLISION", _LIVE_AB),
    ("openai:openai-chat:done_event+nonstrict", "chat-index-collision-glued-valid"): (
        "OA-CHAT-INDEX-COLLISION",
        _GLUED_AB,
    ),
    ("openai:openai-chat:done_event+nonstrict", "chat-repeated-id-name"): ("OA-CHAT-REPEATED-ID-NAME", _LIVE_A),
    ("openai:openai-chat:done_event+nonstrict", "chat-length-parses"): ("OA-CHAT-NONSTRICT-LENGTH-DONE", _A100),
    ("openai:openai-chat:done_event+nonstrict", "chat-length-second-call"): ("OA-CHAT-DONE-BEFORE-END", _A100),
    ("openai:openai-chat:done_event+nonstrict", "chat-interleaved"): (
        "OA-CHAT-DONE-BEFORE-END",
        ["INV-TERMINAL: call_b executed at step 3, its terminal is at 4", "LIVE-DISPATCH: call_a never executed"],
    ),
    # openai Responses
    ("openai:openai-responses:arguments_done", "responses-replayed-done"): (
        "OA-RESP-REPLAYED-DONE",
        ["INV-ONCE: call_1 executed again at step 6"],
    ),
    ("openai:openai-responses:arguments_done", "responses-incomplete"): (
        "OA-RESP-DONE-THEN-INCOMPLETE",
        [_must_not("call_1", "pay", '{"amount":100}')],
    ),
    # anthropic Messages
    ("anthropic:anthropic-messages:block_stop", "anthropic-replayed-block-stop"): (
        "AN-REPLAYED-BLOCK-STOP",
        ["INV-ONCE: toolu_a executed again at step 5"],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic-replayed-block-stop"): (
        "AN-REPLAYED-BLOCK-STOP",
        ["INV-ONCE: toolu_a executed again at step 5"],
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic-max-tokens-truncated"): (
        "AN-TRUNCATED-REPAIRED",
        [_must_not("toolu_a", "book", '{"day":"Tue"}')],
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic-max-tokens-number"): (
        "AN-TRUNCATED-REPAIRED",
        [_must_not("toolu_a", "pay", '{"amount":10}')],
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic-second-message-start"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic-glued-objects"): (
        "AN-GLUED-OBJECTS",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    ("anthropic:anthropic-messages:final", "anthropic-second-message-start"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_a", "pay", '{"amount":1}'), _must_not("toolu_b", "pay", "{}")],
    ),
    ("anthropic:anthropic-messages:final", "anthropic-glued-objects"): (
        "AN-GLUED-OBJECTS",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    ("anthropic:anthropic-messages:final", "anthropic-complete-at-max-tokens"): (
        "AN-FINAL-STOP-REASON",
        ["LIVE-DISPATCH: toolu_a never executed"],
    ),
    # get_final_message() read the way most applications read it: every tool_use block runs
    ("anthropic:anthropic-messages:final+every-block", "anthropic-max-tokens-truncated"): (
        "AN-TRUNCATED-REPAIRED",
        [_must_not("toolu_a", "book", '{"day":"Tue"}')],
    ),
    ("anthropic:anthropic-messages:final+every-block", "anthropic-max-tokens-number"): (
        "AN-TRUNCATED-REPAIRED",
        [_must_not("toolu_a", "pay", '{"amount":10}')],
    ),
    ("anthropic:anthropic-messages:final+every-block", "anthropic-second-message-start"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_a", "pay", '{"amount":1}'), _must_not("toolu_b", "pay", "{}")],
    ),
    ("anthropic:anthropic-messages:final+every-block", "anthropic-glued-objects"): (
        "AN-GLUED-OBJECTS",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic-max-tokens-truncated"): (
        "AN-FINE-GRAINED-TRAILING",
        [_must_not("toolu_a", "book", '{"day":"Tue","time":"10:"}')],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic-max-tokens-number"): (
        "AN-TRUNCATED-REPAIRED",
        [_must_not("toolu_a", "pay", '{"amount":10}')],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic-second-message-start"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic-glued-objects"): (
        "AN-GLUED-OBJECTS",
        [_must_not("toolu_a", "pay", '{"amount":1}')],
    ),
    # langchain-core
    ("langchain-core:openai-chat:final", "chat-index-collision-glued-valid"): ("LC-INDEX-COLLISION", _A100),
    ("langchain-core:openai-chat:final", "chat-repeated-id-name"): ("LC-REPEATED-NAME", _LIVE_A),
    ("langchain-core:openai-chat:final", "chat-length-parses"): ("LC-TRUNCATED-REPAIRED", _A100),
    ("langchain-core:openai-chat:final", "chat-length-truncated"): (
        "LC-TRUNCATED-REPAIRED",
        [_must_not("call_a", "pay", '{"amount":10}')],
    ),
    ("langchain-core:openai-chat:final", "chat-length-second-call"): (
        "LC-TRUNCATED-REPAIRED",
        [*_A100, _must_not("call_b", "book", '{"day":"Tu"}')],
    ),
    ("langchain-core:openai-chat:final", "chat-glued-objects"): (
        "LC-GLUED-OBJECTS",
        [_must_not("call_a", "pay", '{"amount":1}')],
    ),
    ("langchain-core:openai-chat:final", "chat-no-finish-reason"): ("LC-TRUNCATED-REPAIRED", _A100),
    ("langchain-core:openai-chat:preview", "chat-normal"): (
        "LC-PARTIAL-PREVIEW",
        ["INV-EXACT-ARGS: call_a executed pay {}"],
    ),
    ("langchain-core:openai-chat:preview", "chat-index-collision"): (
        "LC-PARTIAL-PREVIEW",
        [
            "INV-TERMINAL: call_a executed at step 1, its terminal is at 3",
            "INV-TERMINAL: call_b executed at step 2, its terminal is at 3",
        ],
    ),
    ("langchain-core:openai-chat:preview", "chat-index-collision-glued-valid"): (
        "LC-PARTIAL-PREVIEW",
        [_must_not("call_a", "pay", '{"amount":1}')],
    ),
    ("langchain-core:openai-chat:preview", "chat-repeated-id-name"): (
        "LC-PARTIAL-PREVIEW",
        ["INV-EXACT-ARGS: call_a executed pay {}"],
    ),
    ("langchain-core:openai-chat:preview", "chat-length-parses"): ("LC-PARTIAL-PREVIEW", _A100),
    ("langchain-core:openai-chat:preview", "chat-length-truncated"): (
        "LC-PARTIAL-PREVIEW",
        [_must_not("call_a", "pay", '{"amount":10}')],
    ),
    ("langchain-core:openai-chat:preview", "chat-length-second-call"): (
        "LC-PARTIAL-PREVIEW",
        [*_A100, _must_not("call_b", "book", '{"day":"Tu"}')],
    ),
    ("langchain-core:openai-chat:preview", "chat-glued-objects"): (
        "LC-PARTIAL-PREVIEW",
        [_must_not("call_a", "pay", '{"amount":1}')],
    ),
    ("langchain-core:openai-chat:preview", "chat-no-finish-reason"): ("LC-PARTIAL-PREVIEW", _A100),
    ("langchain-core:openai-chat:preview", "chat-finish-every-chunk"): (
        "LC-PARTIAL-PREVIEW",
        [_must_not("call_a", "pay", '{"amount":1}')],
    ),
    ("langchain-core:openai-chat:preview", "chat-interleaved"): (
        "LC-PARTIAL-PREVIEW",
        [
            'INV-EXACT-ARGS: call_a executed pay {"amount":1}',
            "INV-TERMINAL: call_b executed at step 2, its terminal is at 4",
        ],
    ),
    ("langchain-core:openai-chat:preview", "chat-disconnect"): ("LC-PARTIAL-PREVIEW", _A100),
    # pydantic-ai
    ("pydantic-ai-slim:openai-chat:agent", "chat-index-collision"): ("PA-INDEX-COLLISION", _LIVE_AB),
    ("pydantic-ai-slim:openai-chat:agent", "chat-index-collision-glued-valid"): (
        "PA-INDEX-COLLISION",
        [_must_not("call_b", "pay", '{"amount":100}')],
    ),
    ("pydantic-ai-slim:openai-chat:agent", "chat-repeated-id-name"): ("PA-REPEATED-NAME", _LIVE_A),
    ("pydantic-ai-slim:openai-responses:agent", "responses-incomplete"): (
        "PA-LENGTH-STOP",
        [_must_not("call_1", "pay", '{"amount":100}')],
    ),
    ("pydantic-ai-slim:openai-responses:agent", "responses-duplicate-delta"): (
        "PA-RESP-DUPLICATE-DELTA",
        ["LIVE-DISPATCH: call_1 never executed"],
    ),
    ("pydantic-ai-slim:openai-responses:agent", "responses-second-created"): (
        "PA-RESP-SECOND-CREATED",
        [_must_not("call_2", "pay", '{"amount":5}')],
    ),
    ("pydantic-ai-slim:openai-chat:agent", "chat-length-parses"): ("PA-LENGTH-STOP", _A100),
    ("pydantic-ai-slim:openai-chat:agent", "chat-length-second-call"): ("PA-LENGTH-STOP", _A100),
    ("pydantic-ai-slim:openai-chat:agent", "chat-no-finish-reason"): ("PA-NO-FINISH-REASON", _A100),
    ("pydantic-ai-slim:openai-chat:parts", "chat-index-collision"): ("PA-INDEX-COLLISION", _LIVE_AB),
    ("pydantic-ai-slim:openai-chat:parts", "chat-index-collision-glued-valid"): (
        "PA-INDEX-COLLISION",
        [_must_not("call_b", "pay", '{"amount":100}')],
    ),
    ("pydantic-ai-slim:openai-chat:parts", "chat-repeated-id-name"): ("PA-REPEATED-NAME", _LIVE_A),
    ("pydantic-ai-slim:openai-chat:parts", "chat-no-finish-reason"): ("PA-NO-FINISH-REASON", _A100),
    # litellm
    ("litellm:openai-chat:final", "chat-index-collision"): ("LL-INDEX-COLLISION", _LIVE_AB),
    ("litellm:openai-chat:final", "chat-index-collision-glued-valid"): (
        "LL-INDEX-COLLISION",
        [_must_not("call_b", "pay", '{"amount":100}')],
    ),
    ("litellm:openai-chat:final", "chat-no-finish-reason"): ("LL-NO-FINISH-REASON", _A100),
    # completion(stream=True) over loopback HTTP: the same rebuild, but a body without a finish_reason raises
    ("litellm:openai-chat:stream", "chat-index-collision"): ("LL-INDEX-COLLISION", _LIVE_AB),
    ("litellm:openai-chat:stream", "chat-index-collision-glued-valid"): (
        "LL-INDEX-COLLISION",
        [_must_not("call_b", "pay", '{"amount":100}')],
    ),
    # data after the finish reason (issue 18): every Chat accumulator appends it
    ("openai:openai-chat:done_event", "chat-finish-every-chunk"): ("OA-CHAT-LATE-DATA", _A100),
    ("openai:openai-chat:final", "chat-finish-every-chunk"): ("OA-CHAT-LATE-DATA", _A100),
    ("openai:openai-chat:final+nonstrict", "chat-finish-every-chunk"): ("OA-CHAT-LATE-DATA", _A100),
    ("openai:openai-chat:done_event+nonstrict", "chat-finish-every-chunk"): ("OA-CHAT-LATE-DATA", _A100),
    ("langchain-core:openai-chat:final", "chat-finish-every-chunk"): ("LC-LATE-DATA", _A100),
    ("pydantic-ai-slim:openai-chat:agent", "chat-finish-every-chunk"): ("PA-LATE-DATA", _A100),
    ("pydantic-ai-slim:openai-chat:parts", "chat-finish-every-chunk"): ("PA-LATE-DATA", _A100),
    ("litellm:openai-chat:final", "chat-finish-every-chunk"): ("LL-LATE-DATA", _A100),
    ("litellm:openai-chat:stream", "chat-finish-every-chunk"): ("LL-LATE-DATA", _A100),
}


# --------------------------------------------------------------------------------------
# Captures: the client-side calls each capture carries, written down by reading the files.
# Only client tools count (tool_use / function_call), never server tools (server_tool_use,
# tool_search_call, program); a call counts when its stream gives it a normal end.
# --------------------------------------------------------------------------------------

_SF = {"location": "San Francisco"}
_JSON_ELEMENTS = {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}
_NOTE = "d10aa585-982b-4bd9-984e-420f9b3717f7"
_ROLLS = [
    "toolu_019jKkXz4jAdwHweHBw92CVY",
    "toolu_015dGLMbwBKv1ZRQr6KdJzeH",
    "toolu_01YYqBNq5mk1wMtv3PAqY44m",
    "toolu_018WxjDkQG8h7i63poySGT2x",
    "toolu_014ch4D3vbx928ddwxMvMvF1",
    "toolu_01QtZ46GWS93Z5ZaSifgGNnq",
    "toolu_012Zvp8FdgvjVGkmbHSU4EZk",
    "toolu_01CMz8Jhv6EfnzHQzEMdpHut",
    "toolu_01PfH6ADzq8Yct5jeRY9QkS2",
    "toolu_013DE3qaKvBMheZXUhwkvpdF",
    "toolu_01MTRMy9BEvFHWR7hpCWc4nJ",
    "toolu_01CXqv27ozPihE5nj6eA3Joc",
    "toolu_01K6ST6orjmPHHwM8rwLj1n9",
    "toolu_01QcWWQcQ1pd7nx9xohX4zAr",
]

CAPTURE_PROTOCOL: dict[str, str] = {
    "alibaba/alibaba-tool-call.chunks.txt": "openai-chat",
    "azure/azure-deepseek-reasoning.1.chunks.txt": "openai-chat",
    "deepseek/chat/deepseek-tool-call.chunks.txt": "openai-chat",
    "groq/groq-tool-call.chunks.txt": "openai-chat",
    "mistral/mistral-incremental-tool-call.chunks.txt": "openai-chat",
    "mistral/mistral-tool-call.chunks.txt": "openai-chat",
    "openai-compatible/chat/xai-tool-call.chunks.txt": "openai-chat",
    "xai/xai-tool-call.chunks.txt": "openai-chat",
    "azure/azure-reasoning-encrypted-content.1.chunks.txt": "openai-responses",
    "azure/azure-tool-call.1.chunks.txt": "openai-responses",
    "open-responses/responses/lmstudio-tool-call.1.chunks.txt": "openai-responses",
    "open-responses/responses/lmstudio-tool-call.2.chunks.txt": "openai-responses",
    "openai/responses/openai-client-tool-search.2.chunks.txt": "openai-responses",
    "openai/responses/openai-reasoning-encrypted-content.1.chunks.txt": "openai-responses",
    "openai/responses/openai-tool-search.1.chunks.txt": "openai-responses",
    "openai/responses/parallel-tool-call-wrapper.1.chunks.txt": "openai-responses",
    "openai/responses/programmatic-tool-calling.1.chunks.txt": "openai-responses",
    "openai/responses/programmatic-tool-calling.2.chunks.txt": "openai-responses",
    "anthropic/anthropic-json-other-tool.1.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-json-tool.1.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-json-tool.2.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-tool-no-args.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-tool-search-bm25.1.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-tool-search-deferred-bm25.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-tool-search-deferred-regex.chunks.txt": "anthropic-messages",
    "anthropic/anthropic-tool-search-regex.1.chunks.txt": "anthropic-messages",
    "anthropic/spliced-message-start.chunks.txt": "anthropic-messages",
}

# Bedrock ConverseStream, Gemini and Cohere v2 captures have no library adapter in phase 1.
UNCOVERED_PROTOCOL_DIRS = ("amazon-bedrock", "google", "cohere")

CAPTURE_EXPECTED: dict[str, list[tuple[str, str, Any]]] = {
    "alibaba/alibaba-tool-call.chunks.txt": [("call_eee11723464a4b9eb8cee71d", "weather", _SF)],
    "azure/azure-deepseek-reasoning.1.chunks.txt": [],
    "deepseek/chat/deepseek-tool-call.chunks.txt": [("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", _SF)],
    "groq/groq-tool-call.chunks.txt": [("tk85n1k4m", "weather", {})],
    "mistral/mistral-incremental-tool-call.chunks.txt": [
        ("chatcmpl-tool-9f149c74c42f265b", "webSearchTool", {"query": "current Berlin weather"})
    ],
    "mistral/mistral-tool-call.chunks.txt": [("gSIMJiOkT", "weather", _SF)],
    "openai-compatible/chat/xai-tool-call.chunks.txt": [("call_79382389", "weather", _SF)],
    "xai/xai-tool-call.chunks.txt": [("call_55117580", "weather", _SF)],
    "azure/azure-reasoning-encrypted-content.1.chunks.txt": [
        ("call_UdvUeOElp5zdU0DKr6IoyhjE", "calculator", {"a": 12, "b": 7, "op": "add"}),
        ("call_Qm7RkNSRinyfYLyTUPXLrgH5", "calculator", {"a": 19, "b": 3, "op": "multiply"}),
        ("call_axaLIcwBQwyb49kT8613pJxW", "calculator", {"a": 57, "b": 10, "op": "multiply"}),
    ],
    "azure/azure-tool-call.1.chunks.txt": [("call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", _SF)],
    "open-responses/responses/lmstudio-tool-call.1.chunks.txt": [("call_2025306790300011", "weather", _SF)],
    "open-responses/responses/lmstudio-tool-call.2.chunks.txt": [("call_3466696471230001", "weather", _SF)],
    "openai/responses/openai-client-tool-search.2.chunks.txt": [
        ("call_Q7pq6EfVGRnauPLWSSYBGJ1l", "get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"})
    ],
    "openai/responses/openai-reasoning-encrypted-content.1.chunks.txt": [
        ("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"}),
        ("call_Q6pW65MUgW9vF59BmItYGos3", "calculator", {"a": 19, "b": 3, "op": "multiply"}),
        ("call_Zl5vIMnD7dVAjgU6FkhmiCZh", "calculator", {"a": 57, "b": 10, "op": "multiply"}),
    ],
    "openai/responses/openai-tool-search.1.chunks.txt": [
        ("call_pddfxhfOx4gY56zn4vIIEbFp", "get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"})
    ],
    # Its first line (response.created) is not valid JSON: the stream breaks there, so no call can run.
    "openai/responses/parallel-tool-call-wrapper.1.chunks.txt": [],
    "openai/responses/programmatic-tool-calling.1.chunks.txt": [
        ("call_VgDSZztLociNcutQZWkC2fmL", "getInventory", {"sku": "sku_123"})
    ],
    "openai/responses/programmatic-tool-calling.2.chunks.txt": [
        ("call_8GZvm5Bs4q0YSJIFH8hZeIcp", "getDemand", {"sku": "sku_123"})
    ],
    "anthropic/anthropic-json-other-tool.1.chunks.txt": [("toolu_019Zvehfe1XQWweT1pm7okyt", "weather", _SF)],
    "anthropic/anthropic-json-tool.1.chunks.txt": [("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", _JSON_ELEMENTS)],
    "anthropic/anthropic-json-tool.2.chunks.txt": [("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json", _JSON_ELEMENTS)],
    # The first roll is a streamed block; the other 13 arrive as complete blocks inside message_start.
    "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt": [
        (call, "rollDie", {"player": f"player{1 + i % 2}"}) for i, call in enumerate(_ROLLS)
    ],
    "anthropic/anthropic-tool-no-args.chunks.txt": [("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", {})],
    "anthropic/anthropic-tool-search-bm25.1.chunks.txt": [
        ("toolu_019nRrfqqXcU5NPTUSYfEMAY", "get_weather", {"location": "San Francisco, CA"})
    ],
    "anthropic/anthropic-tool-search-deferred-bm25.chunks.txt": [
        ("toolu_01U8pzAHj2vNdPCA2Kf8JjeN", "readNoteTree", {"noteId": _NOTE}),
        (
            "toolu_01QoRrvXNv6w4vZSyo9cnxP2",
            "executeEditorOperation",
            {
                "noteId": _NOTE,
                "operations": [
                    {
                        "op": "insert_node",
                        "type": "bulletedListItem",
                        "text": "bye",
                        "at": {"type": "path", "path": [1]},
                    }
                ],
            },
        ),
    ],
    "anthropic/anthropic-tool-search-deferred-regex.chunks.txt": [
        ("toolu_01WPkY6CkyJnFsaCqY7SZ9FX", "readNoteTree", {"noteId": _NOTE}),
        (
            "toolu_01UFHf8D27JBYu9FmrcjJk1p",
            "executeEditorOperation",
            {
                "noteId": _NOTE,
                "operations": [
                    {"op": "insert", "type": "bulletedListItem", "text": "bye", "at": {"type": "after", "path": [0]}}
                ],
            },
        ),
    ],
    "anthropic/anthropic-tool-search-regex.1.chunks.txt": [
        ("toolu_01UmPwkecewaEpMupy2ywk8b", "get_temp_data", {"location": "San Francisco, CA"})
    ],
    # A second message_start splices a new message into an open one: toolu_first never ended and must not
    # run; toolu_second's own input is {"value": "Sparkle Day"}, which is the only thing it may run with.
    "anthropic/spliced-message-start.chunks.txt": [],
}
CAPTURE_MAY: dict[str, list[tuple[str, str, Any]]] = {
    "anthropic/spliced-message-start.chunks.txt": [("toolu_second", "test-tool", {"value": "Sparkle Day"})],
}

_ROLLS_MISSED = [f"LIVE-DISPATCH: {call} never executed" for call in _ROLLS[1:]]
_MISTRAL_LIVE = ["LIVE-DISPATCH: gSIMJiOkT never executed"]

CAPTURE_RECORD: dict[tuple[str, str], tuple[str, list[str]]] = {
    ("openai:openai-chat:done_event", "mistral/mistral-tool-call.chunks.txt"): ("OA-CHAT-MISSING-INDEX", _MISTRAL_LIVE),
    ("openai:openai-chat:final", "mistral/mistral-tool-call.chunks.txt"): ("OA-CHAT-MISSING-INDEX", _MISTRAL_LIVE),
    ("openai:openai-chat:final+nonstrict", "mistral/mistral-tool-call.chunks.txt"): (
        "OA-CHAT-MISSING-INDEX",
        _MISTRAL_LIVE,
    ),
    ("openai:openai-chat:done_event+nonstrict", "mistral/mistral-tool-call.chunks.txt"): (
        "OA-CHAT-MISSING-INDEX",
        _MISTRAL_LIVE,
    ),
    ("langchain-core:openai-chat:final", "mistral/mistral-tool-call.chunks.txt"): (
        "LC-OPENAI-MISSING-INDEX",
        _MISTRAL_LIVE,
    ),
    ("langchain-core:openai-chat:preview", "mistral/mistral-tool-call.chunks.txt"): (
        "LC-OPENAI-MISSING-INDEX",
        _MISTRAL_LIVE,
    ),
    ("langchain-core:openai-chat:preview", "alibaba/alibaba-tool-call.chunks.txt"): (
        "LC-PARTIAL-PREVIEW",
        ["INV-EXACT-ARGS: call_eee11723464a4b9eb8cee71d executed weather {}"],
    ),
    ("langchain-core:openai-chat:preview", "deepseek/chat/deepseek-tool-call.chunks.txt"): (
        "LC-PARTIAL-PREVIEW",
        ["INV-EXACT-ARGS: call_00_ioIn7yN9p1ZOMNpDLwd4MgAF executed weather {}"],
    ),
    ("langchain-core:openai-chat:preview", "mistral/mistral-incremental-tool-call.chunks.txt"): (
        "LC-PARTIAL-PREVIEW",
        ["INV-EXACT-ARGS: chatcmpl-tool-9f149c74c42f265b executed webSearchTool {}"],
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt"): (
        "AN-BLOCK-STOP-NO-EMBEDDED",
        _ROLLS_MISSED,
    ),
    (
        "anthropic:anthropic-messages:block_stop+fine-grained",
        "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt",
    ): ("AN-BLOCK-STOP-NO-EMBEDDED", _ROLLS_MISSED),
    ("pydantic-ai-slim:anthropic-messages:agent", "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt"): (
        "PA-ANTH-MESSAGE-START-BLOCKS",
        _ROLLS_MISSED,
    ),
    ("anthropic:anthropic-messages:block_stop", "anthropic/spliced-message-start.chunks.txt"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_first", "test-tool", '{"value":"Spark{"}')],
    ),
    ("anthropic:anthropic-messages:block_stop+fine-grained", "anthropic/spliced-message-start.chunks.txt"): (
        "AN-SECOND-MESSAGE-START",
        [_must_not("toolu_first", "test-tool", '{"value":"Spark{"}')],
    ),
    ("anthropic:anthropic-messages:final", "anthropic/spliced-message-start.chunks.txt"): (
        "AN-SECOND-MESSAGE-START",
        [
            _must_not("toolu_first", "test-tool", '{"value":"Spark{"}'),
            _must_not("toolu_second", "test-tool", "{}"),
        ],
    ),
    ("anthropic:anthropic-messages:final+every-block", "anthropic/spliced-message-start.chunks.txt"): (
        "AN-SECOND-MESSAGE-START",
        [
            _must_not("toolu_first", "test-tool", '{"value":"Spark{"}'),
            _must_not("toolu_second", "test-tool", "{}"),
        ],
    ),
}


def load_capture(relative: str) -> tuple[list[dict[str, Any]], bool]:
    """The capture's payloads, one JSON object per line, and whether the stream broke: a line
    that is not JSON ends it there, as the SDKs' SSE readers raise on it (so does
    ``tests/test_captures.py``)."""
    payloads: list[dict[str, Any]] = []
    for line in (CAPTURES / relative).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            payloads.append(json.loads(line))
        except ValueError:
            return payloads, True
    return payloads, False


def _tool_names(payloads: list[dict[str, Any]]) -> set[str]:
    """Every ``name`` a capture mentions: the catalog the application declared."""
    names: set[str] = set()
    stack: list[Any] = list(payloads)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("name"), str):
                names.add(value["name"])
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return names


def capture_scenario(relative: str) -> Scenario:
    """A capture as a scenario whose allowed calls are the ones it carries (any step)."""
    allowed = [Allowed(c, t, a, 0) for c, t, a in CAPTURE_EXPECTED[relative]]
    payloads, broken = load_capture(relative)
    items: list[Mapping[str, Any] | Disconnect] = [*payloads, *([Disconnect("t1", "")] if broken else [])]
    return Scenario(relative, CAPTURE_PROTOCOL[relative], "capture", tuple(items), tuple(allowed))


def _executed(target: WireTarget, scenario: Scenario, tools: Mapping[str, ToolSpec]) -> list[tuple[str, str, Any, int]]:
    run = run_wire(target, scenario.items, tools)
    return [(e.key.call, e.tool, e.arguments, e.step) for e in run.executed]


def _targets_for(protocol: str) -> list[str]:
    return [name for name in LIBRARY_TARGETS if name.split(":")[1] == protocol]


# --------------------------------------------------------------------------------------
# The adapters as targets
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LIBRARY_TARGETS))
def test_adapter_declares_protocol_and_no_capabilities(name: str) -> None:
    """A library accumulates; it binds no turns, confirms nothing, takes no operator control."""
    target = make(name)
    assert target.protocol in PROTOCOLS
    assert target.capabilities == frozenset()
    assert target.name == name
    assert callable(target.receive_wire) and callable(target.end_stream)
    assert target.surface in type(target).SURFACES


def test_importing_the_adapters_imports_no_library() -> None:
    """Every library is imported lazily: the catalog loads without any of them."""
    code = (
        "import sys, callsafe.targets.libraries as l; "
        "print([m for m in ('openai', 'anthropic', 'langchain_core', 'pydantic_ai', 'litellm') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_missing_library_gives_a_reason_and_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "litellm" else real(n, *a))
    from callsafe.targets import litellm as litellm_target

    reason = litellm_target.available()
    assert reason is not None and "litellm" in reason and "callsafe[sdks]" in reason
    with pytest.raises(_common.TargetUnavailable):
        run_wire(litellm_target.LiteLLMTarget(), [], {})


def test_call_key_helpers_follow_the_providers_mapping() -> None:
    assert _common.openai_chat_ids("chatcmpl-1", 0, "call_a") == ("chatcmpl-1", "0", "call_a")
    assert _common.openai_chat_ids("chatcmpl-1", 2, None) == ("chatcmpl-1", "2", "chatcmpl-1#2")
    assert _common.openai_responses_ids("resp_1", "fc_1", "call_1") == ("resp_1", "fc_1", "call_1")
    assert _common.anthropic_ids("msg_1", 3, "toolu_a") == ("msg_1", "3", "toolu_a")


@pytest.mark.parametrize("name", sorted(LIBRARY_TARGETS))
def test_executions_carry_the_current_turn(name: str) -> None:
    """Tenant, turn and actor come from the TurnStarted before the stream."""
    target = make(name)
    skip_unless_available(target)
    scenario = next(s for s in ALL if s.protocol == target.protocol and s.name.endswith("-normal"))
    turn = TurnStarted("t9", "alice", "globex", traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01")
    run = run_wire(target, scenario.items, {"pay": ToolSpec()}, turn=turn)
    assert run.executed, run.errors
    for ex in run.executed:
        assert (ex.key.tenant, ex.key.turn, ex.actor, ex.traceparent) == ("globex", "t9", "alice", turn.traceparent)
        assert ex.key == CallKey("globex", "t9", ex.key.response, ex.key.item, ex.key.call)
    assert all(p.executed for p in run.presented if p.key == run.executed[0].key)


@pytest.mark.parametrize("name", sorted(LIBRARY_TARGETS))
def test_unknown_tool_is_presented_but_not_executed(name: str) -> None:
    """An application cannot run a tool it does not have: recorded with the reason."""
    target = make(name)
    skip_unless_available(target)
    scenario = next(s for s in ALL if s.protocol == target.protocol and s.name.endswith("-normal"))
    run = run_wire(target, scenario.items, {"other": ToolSpec()})
    assert run.executed == []
    if not name.endswith(":agent"):  # the agent never offers a tool it does not have
        assert any("no tool named 'pay'" in p.note for p in run.presented)


def test_disconnect_ends_the_stream_without_a_final_result() -> None:
    for name in _targets_for("openai-chat"):
        target = make(name)
        if target.unavailable() or target.surface == "preview":
            continue
        run = run_wire(target, BY_NAME["chat-disconnect"].items, {"pay": ToolSpec()})
        assert run.executed == [], name
    assert isinstance(BY_NAME["chat-disconnect"].items[-1], Disconnect)


# --------------------------------------------------------------------------------------
# (a) Captures
# --------------------------------------------------------------------------------------


@needs_captures
def test_every_capture_of_a_covered_protocol_is_listed() -> None:
    found = {str(p.relative_to(CAPTURES)) for p in CAPTURES.rglob("*.chunks.txt")}
    uncovered = {f for f in found if f.split("/")[0] in UNCOVERED_PROTOCOL_DIRS}
    assert found - uncovered == set(CAPTURE_PROTOCOL)
    assert set(CAPTURE_EXPECTED) == set(CAPTURE_PROTOCOL)


@needs_captures
@pytest.mark.parametrize(
    ("name", "capture"),
    [(n, c) for c, proto in sorted(CAPTURE_PROTOCOL.items()) for n in _targets_for(proto)],
)
def test_capture(name: str, capture: str) -> None:
    """What the adapter executes for a recorded stream, against what the stream carries."""
    target = make(name)
    skip_unless_available(target)
    scenario = capture_scenario(capture)
    may = {c: (t, a) for c, t, a in CAPTURE_MAY.get(capture, [])}
    payloads = [dict(p) for p in scenario.items if isinstance(p, Mapping)]
    executed = _executed(target, scenario, {n: ToolSpec() for n in _tool_names(payloads)})
    permitted = [
        e for e in executed if e[0] in may and (e[1], canonical(e[2])) == (may[e[0]][0], canonical(may[e[0]][1]))
    ]
    problems = scenario.judge([e for e in executed if e not in permitted])
    finding, recorded = CAPTURE_RECORD.get((name, capture), ("", []))
    assert problems == recorded, f"{name} on {capture}: {problems} (recorded under {finding or 'nothing'})"


@pytest.mark.parametrize("case", [s.name for s in ALL] + sorted(CAPTURE_PROTOCOL))
def test_expectations_agree_with_the_model(case: str) -> None:
    """What these tests allow is what callsafe's model decides for the same wire, read by
    ``callsafe.providers`` and judged by the oracle: the calls that may execute, with the same
    tool and arguments (a call listed in :data:`CAPTURE_MAY` is allowed, not required). The
    adapters' call keys follow the same mapping, so the call ids match."""
    streams = pytest.importorskip("callsafe.providers.streams")
    from callsafe.model.oracle import judge
    from callsafe.model.vocabulary import Trace

    if case not in BY_NAME and not CAPTURES.is_dir():
        pytest.skip(f"the shared captures are not at {CAPTURES}")
    scenario = BY_NAME[case] if case in BY_NAME else capture_scenario(case)
    payloads = [p for p in scenario.items if not isinstance(p, Disconnect)]
    clean = len(payloads) == len(scenario.items)
    parsed = streams.parse_payloads(scenario.protocol, payloads, turn="t1", response="r", clean=clean)
    tools = {n: ToolSpec() for n in (*scenario.tools, *_tool_names([dict(p) for p in payloads]))}
    trace = Trace(events=(TurnStarted("t1", "u1", "acme"), *parsed.events), tools=tools)
    model = {
        (v.key.call, v.tool, canonical(v.arguments)) for v in judge(trace).verdicts.values() if v.execute != "must_not"
    }
    required = {(a.call, a.tool, canonical(a.arguments)) for a in scenario.allowed}
    optional = {(c, t, canonical(a)) for c, t, a in CAPTURE_MAY.get(case, [])}
    assert required <= model <= required | optional


# --------------------------------------------------------------------------------------
# (b) Adversarial wire sequences
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "scenario"),
    [(n, s.name) for s in ALL for n in _targets_for(s.protocol)],
)
def test_scenario(name: str, scenario: str) -> None:
    """What the library does on one failure class, against what the spec allows."""
    target = make(name)
    skip_unless_available(target)
    case = BY_NAME[scenario]
    problems = case.judge(_executed(target, case, {t: ToolSpec() for t in case.tools}))
    finding, recorded = RECORD.get((name, scenario), ("", []))
    assert problems == recorded, f"{name} on {scenario} ({case.failure_class}): {problems} ({finding or 'no finding'})"


def test_responses_duplicate_delta_corrupts_only_the_preview_snapshot() -> None:
    """A duplicated delta doubles the text in the state's delta snapshot (a preview), but the
    done events carry the server's complete arguments, and those are what run."""
    target = make("openai:openai-responses:arguments_done")
    skip_unless_available(target)
    from openai._models import construct_type
    from openai._types import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    snapshots = [
        e.snapshot
        for p in BY_NAME["responses-duplicate-delta"].items
        for e in state.handle_event(construct_type(type_=ResponseStreamEvent, value=p))
        if e.type == "response.function_call_arguments.delta"
    ]
    assert snapshots[-1] == '{"amount":10{"amount":100}'  # the executed arguments are checked in test_scenario


def test_record_names_known_findings() -> None:
    for key, (finding, problems) in {**RECORD, **CAPTURE_RECORD}.items():
        assert finding in FINDINGS, key
        assert problems, key
        assert key[0].split(":")[0] == FINDINGS[finding].library, key
    for key in RECORD:
        assert key[0] in LIBRARY_TARGETS and key[1] in BY_NAME, key
    used = {f for f, _ in RECORD.values()} | {f for f, _ in CAPTURE_RECORD.values()}
    assert used == set(FINDINGS)


# --------------------------------------------------------------------------------------
# (c) Reproductions: standalone scripts
# --------------------------------------------------------------------------------------

REPRO_SCRIPTS = sorted(p.name for p in REPRO.glob("*.py"))
_LIBRARY_OF_SCRIPT = {
    "openai_agents": "openai-agents",
    "strands": "strands-agents",
    "google_adk": "google-adk",
    "crewai": "crewai",
    "llama_index": "llama-index-core",
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain": "langchain-core",
    "pydantic": "pydantic-ai-slim",
    "litellm": "litellm",
    "smolagents": "smolagents",
    "agno": "agno",
    "langgraph": "langgraph",
    "boto3": "boto3",
}
_MODULE_OF = {
    "openai-agents": "agents",
    "strands-agents": "strands",
    "google-adk": "google.adk",
    "crewai": "crewai",
    "llama-index-core": "llama_index.core",
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain-core": "langchain_core",
    "pydantic-ai-slim": "pydantic_ai",
    "litellm": "litellm",
    "smolagents": "smolagents",
    "agno": "agno",
    "langgraph": "langgraph.prebuilt",
    "boto3": "boto3",
}


def _script_library(script: str) -> str:
    """The library a script's name begins with (the longest prefix that names one)."""
    prefix = max((p for p in _LIBRARY_OF_SCRIPT if script.startswith(f"{p}_")), key=len)
    return _LIBRARY_OF_SCRIPT[prefix]


# The frameworks that need openai<3 run in their own environment (targets/framework_rows.py).
_OPENAI2_LIBRARIES = {"crewai", "llama-index-core"}


def _run_fresh(script: Path, python: str = sys.executable) -> tuple[int, str]:
    """The script in a fresh interpreter, exactly as a person runs it."""
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [python, str(script)], cwd=script.parent, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def _run_forked(script: Path) -> tuple[int, str]:
    """The script as ``__main__`` in a fork of this interpreter, which has already imported the
    library: the same code runs, without paying each library's import again (litellm's alone
    takes seconds). ``CALLSAFE_REPRO_FRESH=1`` runs every script in a fresh interpreter."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the script, report its exit code, never return to pytest
        code = 2
        try:
            signal.alarm(60)  # a stuck child ends itself
            # This process may have run an agent: its event loop (and the loop's executor
            # threads, which a fork does not copy) must not be the script's.
            asyncio.set_event_loop(None)
            os.close(read_fd)
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            sys.stdout = sys.stderr = open(1, "w", closefd=False)  # noqa: SIM115
            sys.argv = [str(script)]
            os.chdir(script.parent)
            try:
                runpy.run_path(str(script), run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8", errors="replace") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output


def test_every_finding_has_its_reproduction() -> None:
    from callsafe.campaigns.findings import FINDINGS as MATRIX_FINDINGS

    scripts = {f.repro for f in FINDINGS.values() if f.repro}
    # the Python scripts of campaigns/repro; a script in another language is a path
    # (adapters/node/repro/x.mjs), run by tests/test_node_rows.py
    matrix_scripts = {f.script for f in MATRIX_FINDINGS if f.script and "/" not in f.script}
    assert scripts | matrix_scripts == set(REPRO_SCRIPTS)  # every script is some finding's, here or in the matrix
    for finding in FINDINGS.values():
        assert (finding.repro is None) == (finding.kind == "surface"), finding
        if finding.repro:
            assert _script_library(finding.repro) == finding.library
    for script in REPRO_SCRIPTS:
        text = (REPRO / script).read_text(encoding="utf-8")
        assert len(text.splitlines()) < 30, script
        assert "callsafe" not in text, script


@pytest.mark.parametrize("script", REPRO_SCRIPTS)
def test_reproduction_still_shows_the_problem(script: str) -> None:
    """Exit code 1: the problem shows. 0 would mean the library changed: update the findings."""
    library = _script_library(script)
    if library in _OPENAI2_LIBRARIES:
        from callsafe.targets.framework_rows import openai2_python

        python = openai2_python()
        if not python.exists():
            pytest.skip(f"{python} does not exist (make venv-openai2)")
        code, output = _run_fresh(REPRO / script, str(python))
        assert code == 1, f"{script} exited {code}:\n{output}"
        assert output.strip(), script
        return
    reason = _common.library_available(library, _MODULE_OF[library])
    if reason is not None:
        pytest.skip(reason)
    if os.environ.get("CALLSAFE_REPRO_FRESH") == "1" or not hasattr(os, "fork"):
        code, output = _run_fresh(REPRO / script)
    else:
        if library == "litellm":
            from callsafe.targets.litellm import import_offline

            import_offline()
        else:
            importlib.import_module(_MODULE_OF[library])
        code, output = _run_forked(REPRO / script)
    assert code == 1, f"{script} exited {code}:\n{output}"
    assert output.strip(), script
