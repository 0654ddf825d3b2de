"""``python -m callsafe.adapters.bedrock_converse_example``: an ordinary program on ``boto3``'s
``bedrock-runtime`` client that streams a model's tool calls with ``converse_stream`` and
runs them, certified in wire mode over HTTP.

The program does what the Amazon Bedrock User Guide's ConverseStream tool-use example
("Call a tool with the Converse API", ``stream_messages``) has an application do: one
``tool_use`` dict for the block being streamed, its ``toolUseId`` and ``name`` from
``contentBlockStart``, the ``contentBlockDelta`` input text appended to it, and at
``contentBlockStop`` the input parsed (``json.loads``) and the block appended to the
message; the ``stopReason`` from ``messageStop``; after the stream, when the stop reason is
``tool_use``, each ``toolUse`` block of the message run. Nothing in boto3 is replaced:
botocore's HTTP client and event-stream decoder read the loopback provider's binary frames
(cut inside the prelude, the headers, the payload and the CRC), and callsafe sees only what
the program sends to its executor.

Offline by construction: explicit region and credentials (no credential chain, no IMDS:
``AWS_EC2_METADATA_DISABLED``), ``endpoint_url`` the loopback, no retries.

Call keys: Bedrock names no response, so the program numbers its streams per turn
(:func:`callsafe.providers.bedrock_converse.response_name`), as the harness does; the
item is the block's ``contentBlockIndex`` (noted for the key only: the guide's loop ignores
it).

``callsafe certify 'exec:python -m callsafe.adapters.bedrock_converse_example'``
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

from callsafe.adapters.stdio import serve
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, Event, TurnStarted
from callsafe.providers.bedrock_converse import response_name

__all__ = ["BedrockConverseProgram", "bedrock_client", "main"]

MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"


@functools.cache
def bedrock_client(base_url: str) -> Any:
    """A ``bedrock-runtime`` client at the loopback: fake credentials, one region, no retries,
    no instance metadata (building one reads botocore's service model: once per address)."""
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    import boto3
    from botocore.config import Config

    session = boto3.Session(aws_access_key_id="callsafe", aws_secret_access_key="loopback", region_name="us-east-1")
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=30)
    return session.client("bedrock-runtime", endpoint_url=base_url, config=config)


class BedrockConverseProgram:
    """The application around ``converse_stream``: binds calls to the turn in force, runs
    the message's tool uses after a stream that stopped for ``tool_use``."""

    name = "bedrock-converse-example"
    protocol = "bedrock-converse"
    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.env: TargetEnv | None = None
        self.turn: TurnStarted | None = None
        self.streams: dict[str, int] = {}  # turn -> streams read for it

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.turn = None
        self.streams = {}

    def receive(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event

    def receive_wire(self, payload: Any) -> None:
        raise RuntimeError("this program reads its stream over HTTP (wire='http')")

    def end_stream(self) -> None:
        """The body ended: botocore's event stream ends by itself."""

    def restart(self) -> None:
        self.turn = None  # the streams of a turn stay counted: the conversation is kept

    def close(self) -> None:
        self.env = None

    def stream(self, base_url: str) -> None:
        env, turn = self.env, self.turn
        if env is None or turn is None:
            return
        nth = self.streams.get(turn.turn, 0)
        self.streams[turn.turn] = nth + 1
        response_id = response_name(turn.turn, nth)
        tools = [{"toolSpec": {"name": n, "inputSchema": {"json": dict(s.schema)}}} for n, s in env.tools.items()]
        try:
            stop_reason, message, items = stream_messages(bedrock_client(base_url), tools)
        except Exception as exc:  # botocore's EventStreamError, a dropped body, input that is not JSON
            print(f"bedrock-converse-example: the stream ended with {type(exc).__name__}", file=sys.stderr)
            return
        if stop_reason != "tool_use":
            return
        for content in message["content"]:
            if "toolUse" in content:
                tool = content["toolUse"]
                key = CallKey(turn.tenant, turn.turn, response_id, items.get(tool["toolUseId"], ""), tool["toolUseId"])
                env.executor(key, turn.actor, tool["name"], tool["input"], turn.traceparent)


def stream_messages(client: Any, tools: list[dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The User Guide's ``stream_messages``: the stop reason and the message the stream
    built (and, for the keys, each tool use's block index)."""
    response = client.converse_stream(
        modelId=MODEL_ID,
        messages=[{"role": "user", "content": [{"text": "go"}]}],
        toolConfig={"tools": tools},
    )
    stop_reason = ""
    message: dict[str, Any] = {"content": []}
    content = message["content"]
    text = ""
    tool_use: dict[str, Any] = {}
    items: dict[str, str] = {}
    for chunk in response["stream"]:
        if "messageStart" in chunk:
            message["role"] = chunk["messageStart"]["role"]
        elif "contentBlockStart" in chunk:
            tool = chunk["contentBlockStart"]["start"]["toolUse"]
            tool_use["toolUseId"] = tool["toolUseId"]
            tool_use["name"] = tool["name"]
            items[tool["toolUseId"]] = str(chunk["contentBlockStart"].get("contentBlockIndex", ""))
        elif "contentBlockDelta" in chunk:
            delta = chunk["contentBlockDelta"]["delta"]
            if "toolUse" in delta:
                if "input" not in tool_use:
                    tool_use["input"] = ""
                tool_use["input"] += delta["toolUse"]["input"]
            elif "text" in delta:
                text += delta["text"]
        elif "contentBlockStop" in chunk:
            if "input" in tool_use:
                tool_use["input"] = json.loads(tool_use["input"])
                content.append({"toolUse": tool_use})
                tool_use = {}
            else:
                content.append({"text": text})
                text = ""
        elif "messageStop" in chunk:
            stop_reason = chunk["messageStop"]["stopReason"]
    return stop_reason, message, items


def main() -> int:
    return serve(BedrockConverseProgram, wire="http", acks=False)  # botocore reads with urllib3: no hook sees it


if __name__ == "__main__":
    raise SystemExit(main())
