"""strands-agents: the event loop keeps one current tool use and ignores contentBlockIndex: a Bedrock block that
starts before the previous block's contentBlockStop replaces it, so call a is lost and its stop ends call b, which
runs with input {} (b had no input: '' does not parse and becomes {}, harness-sdk #2051)."""

import asyncio

from strands.event_loop.streaming import process_stream

WIRE = [
    {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "a", "name": "pay"}}}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"amount":100}'}}}},
    {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "b", "name": "pay"}}}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "tool_use"}},
]


async def main() -> list:  # type: ignore[type-arg]
    async def chunks():  # type: ignore[no-untyped-def]  # what BedrockModel.stream yields: botocore's decoded events, as they are
        for chunk in WIRE:
            yield chunk

    stops = [e async for e in process_stream(chunks()) if "stop" in e]  # type: ignore[no-untyped-call]
    return [block["toolUse"] for block in stops[-1]["stop"][1]["content"] if "toolUse" in block]


uses = asyncio.run(main())
print("tool uses the agent runs:", uses)
raise SystemExit(1 if uses == [{"toolUseId": "b", "name": "pay", "input": {}}] else 0)
