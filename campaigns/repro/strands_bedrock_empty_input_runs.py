"""strands-agents: a Bedrock tool use with no input delta runs with input {} although the tool's inputSchema
requires "amount": the event loop turns the empty input into {} and never checks it against the schema."""

import asyncio

from strands.event_loop.streaming import process_stream

WIRE = [
    {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "a", "name": "pay"}}}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "tool_use"}},
]
SCHEMA = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}  # the tool's


async def main() -> list:  # type: ignore[type-arg]
    async def chunks():  # type: ignore[no-untyped-def]  # what BedrockModel.stream yields: botocore's decoded events, as they are
        for chunk in WIRE:
            yield chunk

    stops = [e async for e in process_stream(chunks()) if "stop" in e]  # type: ignore[no-untyped-call]
    return [block["toolUse"] for block in stops[-1]["stop"][1]["content"] if "toolUse" in block]


uses = asyncio.run(main())
print("tool uses the agent runs (the schema requires amount):", uses)
raise SystemExit(1 if uses == [{"toolUseId": "a", "name": "pay", "input": {}}] else 0)
