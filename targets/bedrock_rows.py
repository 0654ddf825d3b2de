"""The Bedrock ConverseStream rows of the conformance matrix: programs whose client reads
AWS's binary event stream (``application/vnd.amazon.eventstream``) from the loopback
provider over HTTP, run in wire mode like every program row
(:mod:`callsafe.targets.programs`), judged at the tool.

Why these rows: Bedrock is the one provider here whose stream is not SSE, and the public
reports (``../shared/research/public-streaming-bugs.md``: strands harness-sdk #2051,
langchain-aws #843, llama_index #21579) are about clients reading it. ``boto3`` is the
client every Python Bedrock program uses (the row runs the User Guide's ConverseStream
tool-use loop on it); ``strands-agents`` reads Bedrock by default (``BedrockModel``). Not a
row, because not installed here: ``langchain-aws`` (``ChatBedrockConverse``).

Both rows pin ``boto3`` and ``botocore`` (``callsafe[frameworks]``); the matrix records
botocore's version beside the library's, since its event-stream decoder is what reads the
frames.
"""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["BEDROCK_ROWS"]

BEDROCK_ROWS: Final[tuple[ProgramRow, ...]] = (
    ProgramRow(
        name="boto3:bedrock-converse:converse-stream",
        library="boto3",
        ecosystem="python",
        protocol="bedrock-converse",
        surface="converse-stream",
        argv=("{python}", "-m", "callsafe.adapters.bedrock_converse_example"),
        needs=("boto3", "botocore"),
        dependencies=("botocore",),
    ),
    ProgramRow(
        name="strands-agents:bedrock-converse:agent",
        library="strands-agents",
        ecosystem="python",
        protocol="bedrock-converse",
        surface="agent",
        argv=("{python}", "-m", "callsafe.adapters.frameworks.strands_bedrock"),
        needs=("strands", "boto3"),
        dependencies=("boto3", "botocore"),
    ),
)
