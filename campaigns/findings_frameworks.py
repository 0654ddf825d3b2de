"""The findings of the Python agent frameworks (:mod:`callsafe.targets.framework_rows`): each a
:class:`~callsafe.campaigns.finding_record.Finding` with its witnesses, the surfaces and
invariants they violate, and its standalone script; :data:`callsafe.campaigns.findings.FINDINGS`
lists them after the Python libraries'."""

from __future__ import annotations

from typing import Final

from callsafe.campaigns.finding_record import Finding
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import ToolSpec, Trace
from callsafe.providers.adversities import wire_trace

__all__ = ["FRAMEWORK_FINDINGS"]

_PAY: Final = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


def _glued() -> Trace:
    """One ``pay`` call whose arguments are two JSON objects glued together (``}{``)."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1}', '{"amount":2}').terminal("call_a")
    return b.response_end("completed").build()


def _length_stop() -> Trace:
    """One whole ``pay`` call whose response is cut off by a ``length`` stop."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}").terminal("call_a", "length")
    return b.response_end("length").build()


def _length_stop_before_arguments() -> Trace:
    """One ``pay`` call cut off by a ``length`` stop before any of its arguments arrived."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").terminal("call_a", "length")
    return b.response_end("length").build()


def _no_finish_reason() -> Trace:
    """One whole ``pay`` call whose Chat Completions body ends without a finish reason (the
    ``ends-without-closing-events`` wire adversity: no finishing chunk, no ``[DONE]``)."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}").terminal("call_a")
    base = b.response_end("completed").build()
    return wire_trace(base, "openai-chat", "ends-without-closing-events", "the body ends after payload 2 of 4")


def _no_arguments() -> Trace:
    """One ``pay`` call that streams no argument bytes, in a response that completed."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").terminal("call_a")
    return b.response_end("completed").build()


def _length_runs(finding: str, library: str, surface: str, script: str, summary: str) -> Finding:
    """A framework that runs the calls of a response cut off by a ``length`` stop."""
    return Finding(
        finding, library, summary, script, (_length_stop(),), {surface: frozenset({"INV-CANCEL", "INV-TERMINAL"})}
    )


def _shared_index() -> Trace:
    """Two whole ``pay`` calls (their own ids) on the same Chat Completions index 0."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1', "00}")
    b.open("call_b", "pay", item="0").fragments("call_b", '{"amount":1', "00}")
    return b.terminal("call_a").terminal("call_b").response_end("completed").build()


def _continued_after_next_opened() -> Trace:
    """Call a's last fragment arrives after call b (index 1, no arguments) opened."""
    b = TraceBuilder(tools={"pay": ToolSpec(schema=_PAY)}).turn("t1", response="r1")
    b.open("call_a", "pay", item="0").fragments("call_a", '{"amount":1').open("call_b", "pay", item="1")
    b.fragments("call_a", "00}").terminal("call_a").terminal("call_b")
    return b.response_end("completed").build()


def _collision(
    finding: str, library: str, surface: str, script: str, summary: str, also: str = "", mcp: str = ""
) -> Finding:
    """A shared-index finding; ``mcp``: the same framework's MCP row, where the witness
    violates the same invariants (the framework assembles the stream; MCP only carries the call)."""
    invariants = frozenset({"LIVE-DISPATCH", *([also] if also else [])})
    surfaces = {surface: invariants, **({mcp: invariants} if mcp else {})}
    return Finding(finding, library, summary, script, (_shared_index(),), surfaces)


_MERGED: Final = (
    "two tool calls that share a Chat Completions index (each with its own id and name) are accumulated into one "
    "entry by index (their arguments glued, '}{', which does not parse): neither call runs"
)

FRAMEWORK_FINDINGS: Final[tuple[Finding, ...]] = (
    Finding(
        "OAA-LENGTH-RUNS",
        "openai-agents",
        "openai-agents runs the tool calls of a Chat Completions response that ended with finish_reason "
        '"length" (the model was cut off; the SDK builds the model response from what it accumulated and '
        "its run loop executes the calls in it)",
        "openai_agents_length_stop_runs_tool.py",
        (_length_stop(),),
        {
            "openai-agents:openai-chat:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
            "openai-agents:openai-chat:mcp:MCPServerStreamableHttp": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
        },
    ),
    Finding(
        "CREWAI-LENGTH-RUNS",
        "crewai",
        "crewAI's native OpenAI provider hands the agent the tool calls of a Chat Completions response that "
        'ended with finish_reason "length" (_finalize_streaming_response runs every call whose accumulated '
        "arguments parse, whatever the finish reason), and the agent runs them",
        "crewai_length_stop_runs_tool.py",
        (_length_stop(),),
        {"crewai:openai-chat:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"})},
    ),
    Finding(
        "STRANDS-MALFORMED-EMPTY",
        "strands-agents",
        "Strands turns a tool call's input that does not parse ('}{'-glued objects, a truncated object) into {} "
        "and runs the tool with it (event_loop/streaming.py, handle_content_block_stop: 'failed to parse tool "
        "input json, defaulting to empty dict'); the tool is never told the call was malformed",
        "strands_malformed_input_becomes_empty.py",
        (_glued(),),
        {
            "strands-agents:openai-chat:agent": frozenset({"INV-TERMINAL"}),
            "strands-agents:openai-chat:mcp:MCPClient": frozenset({"INV-TERMINAL"}),
            "strands-agents:bedrock-converse:agent": frozenset({"INV-TERMINAL"}),
        },
        issue="strands-agents/harness-sdk#2051",
    ),
    Finding(
        "ADK-MAX-TOKENS-RUNS",
        "google-adk",
        "google-adk runs a function call of a Gemini response that ended with finishReason MAX_TOKENS, from the "
        "streamed partialArgs it had, though the call's closing part never arrived (the finish reason only becomes "
        "the response's error_code; the function calls of the aggregated response run regardless)",
        "google_adk_max_tokens_runs_tool.py",
        (_length_stop(),),
        {
            "google-adk:gemini:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
            "google-adk:gemini:mcp:McpToolset": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
        },
    ),
    Finding(
        "LI-LENGTH-RUNS-EMPTY",
        "llama-index-core",
        "a LlamaIndex FunctionAgent runs a tool call of a Chat Completions response cut off by finish_reason "
        '"length", even before any of its arguments arrived: the empty argument text is read as {} '
        "(get_tool_calls_from_response, through parse_partial_json) and the agent never looks at the finish reason",
        "llama_index_length_stop_runs_empty_call.py",
        (_length_stop_before_arguments(),),
        {"llama-index-core:openai-chat:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"})},
    ),
    _collision(
        "OAA-INDEX-COLLISION",
        "openai-agents",
        "openai-agents:openai-chat:agent",
        "openai_agents_index_collision.py",
        f"openai-agents (ChatCmplStreamHandler): {_MERGED}",
        mcp="openai-agents:openai-chat:mcp:MCPServerStreamableHttp",
    ),
    _collision(
        "CREWAI-INDEX-COLLISION",
        "crewai",
        "crewai:openai-chat:agent",
        "crewai_index_collision.py",
        f"crewAI's native OpenAI provider (_ahandle_streaming_completion): {_MERGED}",
    ),
    _collision(
        "LI-INDEX-COLLISION",
        "llama-index-core",
        "llama-index-core:openai-chat:agent",
        "llama_index_index_collision.py",
        f"LlamaIndex's OpenAI LLM (astream_chat_with_tools): {_MERGED}",
    ),
    _collision(
        "STRANDS-INDEX-COLLISION",
        "strands-agents",
        "strands-agents:openai-chat:agent",
        "strands_index_collision.py",
        "Strands' OpenAIModel groups tool deltas by index: two calls that share one are glued into the first "
        "call's id, and the glued input, which does not parse, runs as {} (STRANDS-MALFORMED-EMPTY); the second "
        "call is lost",
        also="INV-EXACT-ARGS",
        mcp="strands-agents:openai-chat:mcp:MCPClient",
    ),
    Finding(
        "LI-PARTIAL-ARGUMENTS-FINAL",
        "llama-index-core",
        "LlamaIndex's OpenAI LLM (update_tool_calls, which reads only tool_calls_delta[0]) merges a delta into the "
        "last call only, and a delta of another index starts a new call: a fragment of call a that arrives after "
        "call b opened is split off, and get_tool_calls_from_response presents call a's prefix, parsed with "
        "parse_partial_json ({'amount': 1}), as its final arguments; the empty call b runs as {}",
        "llama_index_partial_arguments_final.py",
        (_continued_after_next_opened(),),
        {"llama-index-core:openai-chat:agent": frozenset({"INV-EXACT-ARGS"})},
        issue="run-llama/llama_index#22580",
    ),
    Finding(
        "OAA-NO-FINISH-RUNS",
        "openai-agents",
        "openai-agents runs the tool calls of a Chat Completions body that ended without any finish_reason (the "
        "connection closed after the arguments): the stream handler builds the response from what it accumulated",
        "openai_agents_no_finish_reason_runs_tool.py",
        (_no_finish_reason(),),
        {
            "openai-agents:openai-chat:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
            "openai-agents:openai-chat:mcp:MCPServerStreamableHttp": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
        },
    ),
    Finding(
        "STRANDS-NO-FINISH-RUNS",
        "strands-agents",
        "Strands runs the tool calls of a Chat Completions body that ended without any finish_reason "
        "(OpenAIModel.stream emits the accumulated calls after the loop whatever ended it, and the stop reason "
        "defaults to end_turn)",
        "strands_no_finish_reason_runs_tool.py",
        (_no_finish_reason(),),
        {
            "strands-agents:openai-chat:agent": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
            "strands-agents:openai-chat:mcp:MCPClient": frozenset({"INV-CANCEL", "INV-TERMINAL"}),
        },
    ),
    # issue 34: smolagents, agno and langgraph
    _length_runs(
        "SMOL-LENGTH-RUNS",
        "smolagents",
        "smolagents:openai-chat:agent",
        "smolagents_length_stop_runs_tool.py",
        'smolagents runs the tool calls of a Chat Completions response that ended with finish_reason "length": '
        "OpenAIServerModel.generate_stream never reads the finish reason, and the ToolCallingAgent runs every call "
        "agglomerate_stream_deltas assembled",
    ),
    _collision(
        "SMOL-INDEX-COLLISION",
        "smolagents",
        "smolagents:openai-chat:agent",
        "smolagents_index_collision.py",
        f"smolagents (agglomerate_stream_deltas, keyed by index, the id overwritten by the later call's): {_MERGED}",
    ),
    _length_runs(
        "AGNO-LENGTH-RUNS",
        "agno",
        "agno:openai-chat:agent",
        "agno_length_stop_runs_tool.py",
        'Agno runs the tool calls of a Chat Completions response that ended with finish_reason "length" (OpenAIChat '
        "builds the calls from what it accumulated; the agent's run loop never looks at the finish reason)",
    ),
    Finding(
        "AGNO-EMPTY-ARGS-RUN",
        "agno",
        "Agno runs a tool call whose stream carried no argument bytes at all, with {} (the empty argument text is "
        "read as no arguments), so the tool runs with its defaults rather than the call being refused",
        "agno_empty_arguments_run.py",
        (_no_arguments(),),
        {"agno:openai-chat:agent": frozenset({"INV-EXACT-ARGS"})},
    ),
    _collision(
        "AGNO-INDEX-COLLISION",
        "agno",
        "agno:openai-chat:agent",
        "agno_index_collision.py",
        f"Agno's OpenAIChat (parse_tool_calls, one entry per index): {_MERGED}",
    ),
    _length_runs(
        "LANGGRAPH-LENGTH-RUNS",
        "langgraph",
        "langgraph:openai-chat:agent",
        "langgraph_length_stop_runs_tool.py",
        "LangGraph's prebuilt ReAct agent (create_react_agent over langchain-openai) runs the tool calls of a Chat "
        'Completions response that ended with finish_reason "length": the ToolNode runs every tool_call of the '
        "final AIMessage, whatever the response_metadata's finish_reason",
    ),
    _collision(
        "LANGGRAPH-INDEX-COLLISION",
        "langgraph",
        "langgraph:openai-chat:agent",
        "langgraph_index_collision.py",
        "LangGraph's ReAct agent over langchain-openai: two tool calls on one Chat Completions index whose later "
        "fragments carry no id are merged by langchain-core's chunk addition (LC-INDEX-COLLISION): one call runs "
        "with the merged arguments, the other never runs",
    ),
)
