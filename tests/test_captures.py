"""Every recorded provider stream in ``shared/captures/vercel-ai``, replayed through its
protocol's parser, judged by the oracle, and run through the reference implementation.

The expectations below were written by reading each capture file, not by running the
parsers: for each file, the calls that must execute (tool and exact arguments, in the
order their calls first appear), and the error that stops reading the stream, if any.
Every tool name seen is declared with an open schema, so these are the calls the wire
completed, not a judgement of the application's catalog.

The captures are third-party test data (Apache-2.0, Vercel AI SDK); they are read from
``<repo>/../shared/captures/vercel-ai`` and never copied into this repository. Each line is
the data of one event: the test sends them through the SSE decoder as ``data:`` lines, so
a line that is not JSON fails its stream as it would on the wire.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callsafe.certify.runner import run_trace
from callsafe.model.invariants import check_all
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import CallOpened, Executed, ToolSpec, Trace, TurnStarted
from callsafe.providers.base import MalformedEvent, ProtocolViolation, ProviderError
from callsafe.providers.streams import parse_sse
from callsafe.targets.reference import ReferenceTarget

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures" / "vercel-ai"

# NOTICE.md: the provider package tells the wire protocol.
FOLDER_PROTOCOL = {
    "openai/responses": "openai-responses",
    "open-responses/responses": "openai-responses",
    "openai-compatible/chat": "openai-chat",
    "deepseek/chat": "openai-chat",
    "groq": "openai-chat",
    "xai": "openai-chat",
    "alibaba": "openai-chat",
    "mistral": "openai-chat",
    "anthropic": "anthropic-messages",
    "amazon-bedrock": "bedrock-converse",
    "google": "gemini",
    "cohere": "cohere-v2",
    # not in NOTICE.md: Google's step-based Interactions API, a protocol of its own
    "google/interactions": "gemini-interactions",
}
# not in NOTICE.md: the Azure package speaks both OpenAI protocols, so each file is named
FILE_PROTOCOL = {
    "azure/azure-deepseek-reasoning.1.chunks.txt": "openai-chat",
    "azure/azure-reasoning-encrypted-content.1.chunks.txt": "openai-responses",
    "azure/azure-tool-call.1.chunks.txt": "openai-responses",
}

SF = {"location": "San Francisco"}
SF_CA_F = {"location": "San Francisco, CA", "unit": "fahrenheit"}
NOTE = "d10aa585-982b-4bd9-984e-420f9b3717f7"
JSON_ELEMENTS = {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}
LASAGNA = {
    "recipe": {
        "ingredients": [
            {"amount": "16 oz", "name": "Lasagna noodles"},
            {"amount": "1 lb", "name": "Ground beef"},
            {"amount": "15 oz", "name": "Ricotta cheese"},
            {"amount": "3 cups", "name": "Mozzarella cheese"},
            {"amount": "1/2 cup", "name": "Parmesan cheese"},
            {"amount": "24 oz", "name": "Tomato sauce"},
            {"amount": "1", "name": "Egg"},
            {"amount": "2 cloves", "name": "Garlic"},
            {"amount": "1 tsp", "name": "Salt"},
            {"amount": "1/2 tsp", "name": "Pepper"},
        ],
        "name": "Lasagna",
        "steps": [
            "Preheat oven to 375°F (190°C).",
            "Cook lasagna noodles according to package directions, drain and set aside.",
            "Brown ground beef with minced garlic in a skillet. Drain fat and stir in tomato sauce. Simmer for 10 minutes.",
            "In a bowl, mix ricotta cheese, egg, salt, pepper, and Parmesan cheese.",
            "In a 9x13 baking dish, spread a thin layer of meat sauce.",
            "Layer noodles, ricotta mixture, mozzarella, and meat sauce. Repeat.",
            "Top with remaining mozzarella cheese.",
            "Cover with foil and bake for 25 minutes.",
            "Remove foil and bake for another 25 minutes until golden.",
            "Let stand for 15 minutes before serving.",
        ],
    }
}
P1, P2 = {"player": "player1"}, {"player": "player2"}

Call = tuple[str, dict[str, Any]]

# file -> (calls that must execute, in order; the error that stops the stream, or None)
EXPECTED: dict[str, tuple[list[Call], type[ProviderError] | None]] = {
    "alibaba/alibaba-tool-call.chunks.txt": ([("weather", SF)], None),
    "amazon-bedrock/amazon-bedrock-json-only-text-first.1.chunks.txt": ([("json", {"name": "John"})], None),
    "amazon-bedrock/amazon-bedrock-json-other-tool.1.chunks.txt": ([("get-weather", SF)], None),
    # despite its name, the stream holds two weather calls and no json call
    "amazon-bedrock/amazon-bedrock-json-tool-text-then-weather-then-json.1.chunks.txt": (
        [("weather", SF), ("weather", {"location": "London"})],
        None,
    ),
    "amazon-bedrock/amazon-bedrock-json-tool.1.chunks.txt": ([("json", {"value": "test"})], None),
    "amazon-bedrock/amazon-bedrock-json-tool.2.chunks.txt": ([("json", {"value": "test"})], None),
    "amazon-bedrock/amazon-bedrock-json-tool.3.chunks.txt": ([("json", {"result": 42})], None),
    "amazon-bedrock/amazon-bedrock-json-with-tool.1.chunks.txt": (
        [("get-weather", {"location": "SF"}), ("json", {"result": "data"})],
        None,
    ),
    "amazon-bedrock/amazon-bedrock-json-with-tools.1.chunks.txt": (
        [("tool-a", {"a": "1"}), ("tool-b", {"b": "2"}), ("json", {"final": "result"})],
        None,
    ),
    "amazon-bedrock/amazon-bedrock-tool-call.1.chunks.txt": ([("test-tool", {"value": "Sparkle Day"})], None),
    # an empty input delta: the protocol's empty value, {}
    "amazon-bedrock/amazon-bedrock-tool-no-args.chunks.txt": ([("updateIssueList", {})], None),
    "anthropic/anthropic-json-other-tool.1.chunks.txt": ([("weather", SF)], None),
    "anthropic/anthropic-json-tool.1.chunks.txt": ([("json", JSON_ELEMENTS)], None),
    "anthropic/anthropic-json-tool.2.chunks.txt": ([("json", JSON_ELEMENTS)], None),
    # code_execution is a server tool; rollDie is the client's, called by the program: once
    # with its input in the start block, then 13 times pre-populated in message_start
    "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt": (
        [("rollDie", P1)] + [("rollDie", P2), ("rollDie", P1)] * 6 + [("rollDie", P2)],
        None,
    ),
    "anthropic/anthropic-tool-no-args.chunks.txt": ([("updateIssueList", {})], None),
    # tool_search_tool_* blocks are server_tool_use: the provider runs them
    "anthropic/anthropic-tool-search-bm25.1.chunks.txt": ([("get_weather", {"location": "San Francisco, CA"})], None),
    "anthropic/anthropic-tool-search-deferred-bm25.chunks.txt": (
        [
            ("readNoteTree", {"noteId": NOTE}),
            (
                "executeEditorOperation",
                {
                    "noteId": NOTE,
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
        None,
    ),
    "anthropic/anthropic-tool-search-deferred-regex.chunks.txt": (
        [
            ("readNoteTree", {"noteId": NOTE}),
            (
                "executeEditorOperation",
                {
                    "noteId": NOTE,
                    "operations": [
                        {
                            "op": "insert",
                            "type": "bulletedListItem",
                            "text": "bye",
                            "at": {"type": "after", "path": [0]},
                        }
                    ],
                },
            ),
        ],
        None,
    ),
    "anthropic/anthropic-tool-search-regex.1.chunks.txt": (
        [("get_temp_data", {"location": "San Francisco, CA"})],
        None,
    ),
    # a second message_start inside msg_first: a violation, never a merge. toolu_first
    # (half its input) is disconnected; toolu_second is never read.
    "anthropic/spliced-message-start.chunks.txt": ([], ProtocolViolation),
    "azure/azure-deepseek-reasoning.1.chunks.txt": ([], None),
    "azure/azure-reasoning-encrypted-content.1.chunks.txt": (
        [
            ("calculator", {"a": 12, "b": 7, "op": "add"}),
            ("calculator", {"a": 19, "b": 3, "op": "multiply"}),
            ("calculator", {"a": 57, "b": 10, "op": "multiply"}),
        ],
        None,
    ),
    "azure/azure-tool-call.1.chunks.txt": ([("weather", SF)], None),
    # tool-call-start with empty arguments, then tool-call-end: {}
    "cohere/cohere-empty-tool-call.chunks.txt": ([("currentTime", {})], None),
    "cohere/cohere-reasoning.chunks.txt": ([], None),
    "cohere/cohere-text.chunks.txt": ([], None),
    "cohere/cohere-tool-call.chunks.txt": ([("weather", SF), ("cityAttractions", {"city": "San Francisco"})], None),
    "deepseek/chat/deepseek-tool-call.chunks.txt": ([("weather", SF)], None),
    "google/google-stream-no-args-tool-call.chunks.txt": (
        [("read_theme", {}), ("read_screen", {"id": "A"}), ("read_screen", {"id": "B"}), ("read_screen", {"id": "C"})],
        None,
    ),
    "google/google-stream-tool-call-arguments.chunks.txt": (
        [("getWeather", {"location": "Boston"}), ("getWeather", SF)],
        None,
    ),
    # the closing functionCall never arrives: the call never ends, nothing executes
    "google/google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt": ([], None),
    "google/google-tool-call-gemini3.chunks.txt": ([("weather", SF)], None),
    "google/google-tool-call.chunks.txt": ([("weather", SF)], None),
    "google/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt": ([("cookRecipe", LASAGNA)], None),
    "google/interactions/tool-call-step1.chunks.txt": ([("getWeather", SF)], None),
    "groq/groq-tool-call.chunks.txt": ([("weather", {})], None),
    "mistral/mistral-incremental-tool-call.chunks.txt": (
        [("webSearchTool", {"query": "current Berlin weather"})],
        None,
    ),
    "mistral/mistral-tool-call.chunks.txt": ([("weather", SF)], None),
    # no argument deltas: the arguments arrive whole in function_call_arguments.done
    "open-responses/responses/lmstudio-tool-call.1.chunks.txt": ([("weather", SF)], None),
    "open-responses/responses/lmstudio-tool-call.2.chunks.txt": ([("weather", SF)], None),
    "openai/responses/openai-client-tool-search.2.chunks.txt": ([("get_weather", SF_CA_F)], None),
    # three responses, one after another, in one file
    "openai/responses/openai-reasoning-encrypted-content.1.chunks.txt": (
        [
            ("calculator", {"a": 12, "b": 7, "op": "add"}),
            ("calculator", {"a": 19, "b": 3, "op": "multiply"}),
            ("calculator", {"a": 57, "b": 10, "op": "multiply"}),
        ],
        None,
    ),
    # tool_search_call / tool_search_output run on OpenAI's side
    "openai/responses/openai-tool-search.1.chunks.txt": ([("get_weather", SF_CA_F)], None),
    # the first line (response.created) is not valid JSON: the stream fails before any call
    "openai/responses/parallel-tool-call-wrapper.1.chunks.txt": ([], MalformedEvent),
    # function calls whose caller is a program, done with status in_progress: the client's
    "openai/responses/programmatic-tool-calling.1.chunks.txt": ([("getInventory", {"sku": "sku_123"})], None),
    "openai/responses/programmatic-tool-calling.2.chunks.txt": ([("getDemand", {"sku": "sku_123"})], None),
    "openai-compatible/chat/xai-tool-call.chunks.txt": ([("weather", SF)], None),
    "xai/xai-tool-call.chunks.txt": ([("weather", SF)], None),
}


def capture_files() -> list[str]:
    return sorted(p.relative_to(CAPTURES).as_posix() for p in CAPTURES.rglob("*.chunks.txt"))


def protocol_of(name: str) -> str:
    if name in FILE_PROTOCOL:
        return FILE_PROTOCOL[name]
    return FOLDER_PROTOCOL[name.rsplit("/", 1)[0]]


def sse_bytes(path: Path) -> bytes:
    """Each line of a capture as the data of one server-sent event."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return b"".join(b"data: " + line.encode("utf-8") + b"\n\n" for line in lines)


def test_captures_are_present() -> None:
    assert CAPTURES.is_dir(), f"the shared captures are expected at {CAPTURES}"
    assert capture_files()


def test_every_capture_has_an_expectation() -> None:
    """A new capture must be read and given its expectations; none is skipped silently."""
    files = set(capture_files())
    assert files - set(EXPECTED) == set(), "captures without expectations"
    assert set(EXPECTED) - files == set(), "expectations for captures that are gone"
    for name in files:
        protocol_of(name)  # every file maps to a protocol


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture(name: str) -> None:
    calls, error = EXPECTED[name]
    parsed = parse_sse(protocol_of(name), [sse_bytes(CAPTURES / name)], turn="t1", response="r-fallback")
    if error is None:
        assert parsed.error is None, parsed.error
    else:
        assert isinstance(parsed.error, error), parsed.error

    tools = {e.tool: ToolSpec(schema={"type": "object"}) for e in parsed.events if isinstance(e, CallOpened)}
    trace = Trace(events=(TurnStarted(turn="t1", actor="u1", tenant="acme"), *parsed.events), tools=tools)
    verdicts = list(judge(trace).verdicts.values())

    assert not [v for v in verdicts if v.execute == "may"], "no capture delivers fragments out of order"
    assert [(v.tool, v.arguments) for v in verdicts if v.execute == "must"] == calls
    # every call announced either executes or has a reason not to: nothing is left dangling
    assert all(v.execute == "must" or v.reason for v in verdicts)

    # The reference implementation, fed the parsed stream, executes exactly those calls,
    # once each, and keeps every invariant doing it.
    run = run_trace(ReferenceTarget(store="memory"), trace)
    assert run.errors == []
    executed = [(o.tool, o.arguments) for o in run.observations if isinstance(o, Executed)]
    assert executed == calls
    found = check_all(trace, run.observations)
    assert {k: v for k, v in found.items() if v} == {}


def _verdicts(name: str) -> dict[str, Any]:
    parsed = parse_sse(protocol_of(name), [sse_bytes(CAPTURES / name)], turn="t1", response="r-fallback")
    tools = {e.tool: ToolSpec() for e in parsed.events if isinstance(e, CallOpened)}
    trace = Trace(events=(TurnStarted(turn="t1", actor="u1", tenant="acme"), *parsed.events), tools=tools)
    return {v.key.call: v for v in judge(trace).verdicts.values()}


def test_spliced_message_start_disconnects_the_first_message() -> None:
    verdicts = _verdicts("anthropic/spliced-message-start.chunks.txt")
    assert set(verdicts) == {"toolu_first"}  # the second message is never read
    assert verdicts["toolu_first"].execute == "must_not"
    assert verdicts["toolu_first"].reason == "connection lost"


def test_missing_closing_function_call_fails_the_call() -> None:
    verdicts = _verdicts("google/google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt")
    (verdict,) = verdicts.values()
    assert verdict.tool == "writeItems" and verdict.execute == "must_not"
    assert verdict.reason == "response ended before the call's terminal event"
