"""The findings of the Bedrock ConverseStream rows (:mod:`callsafe.targets.bedrock_rows`): each a
:class:`~callsafe.campaigns.finding_record.Finding` with its witnesses, the surfaces and
invariants they violate, and its standalone script; :data:`callsafe.campaigns.findings.FINDINGS`
lists them after the agent frameworks'."""

from __future__ import annotations

from typing import Final

from callsafe.campaigns.finding_record import Finding
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import ToolSpec, Trace

__all__ = ["BEDROCK_FINDINGS"]

_PAY: Final = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


def _unstopped_then_next() -> Trace:
    """Call a's block never gets its ``contentBlockStop``; call b's block (index 1) carries
    the rest of an amount and stops: b's input alone (``00}``) does not parse."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1')
    b.open("call_b", "pay", item="1").fragments("call_b", "00}").terminal("call_b")
    return b.response_end("completed").build()


def _stopped_after_next_started() -> Trace:
    """Call b's block (index 1, no input) starts before call a's ``contentBlockStop``, and
    never stops itself: running b runs a call the end of the response stopped."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}").open("call_b", "pay", item="1")
    return b.terminal("call_a").response_end("completed").build()


def _no_input() -> Trace:
    """One ``pay`` tool use whose block carries no input delta (Bedrock's form of ``{}``)."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    return b.open("call_a", "pay", item="0").terminal("call_a").response_end("completed").build()


BEDROCK_FINDINGS: Final[tuple[Finding, ...]] = (
    Finding(
        "BOTO3-GUIDE-BLOCKS-MERGED",
        "boto3",
        "the Amazon Bedrock User Guide's ConverseStream tool-use loop (stream_messages, on boto3's converse_stream) "
        "keeps one tool_use dict and never reads contentBlockIndex: a block whose contentBlockStop does not arrive "
        "before the next block starts is merged into it (the next start overwrites the id and name, the inputs are "
        "appended), so call b runs with call a's argument prefix glued to its own input, or call a's arguments run "
        "under call b's id and call a never runs",
        "boto3_guide_unstopped_block_merged.py",
        (_unstopped_then_next(), _stopped_after_next_started()),
        {"boto3:bedrock-converse:converse-stream": frozenset({"INV-CANCEL", "INV-TERMINAL", "LIVE-DISPATCH"})},
    ),
    Finding(
        "STRANDS-BEDROCK-BLOCKS-MERGED",
        "strands-agents",
        "Strands' event loop (event_loop/streaming.py, process_stream) keeps one current tool use and never reads "
        "contentBlockIndex: a Bedrock block that starts before the previous block's contentBlockStop replaces it, so "
        "the earlier call is lost and its stop ends the later call, which runs with the input it had ({} when none)",
        "strands_bedrock_blocks_merged.py",
        (_stopped_after_next_started(),),
        {"strands-agents:bedrock-converse:agent": frozenset({"INV-CANCEL", "INV-TERMINAL", "LIVE-DISPATCH"})},
    ),
    Finding(
        "STRANDS-BEDROCK-EMPTY-INPUT",
        "strands-agents",
        "Strands runs a Bedrock tool use whose block carried no input with input {} although the tool's inputSchema "
        "requires a property: the empty input becomes {} (handle_content_block_stop) and is never checked against "
        "the schema the tool declared",
        "strands_bedrock_empty_input_runs.py",
        (_no_input(),),
        {"strands-agents:bedrock-converse:agent": frozenset({"INV-EXACT-ARGS"})},
    ),
)
