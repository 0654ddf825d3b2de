"""The provider captures in ``../shared/captures/vercel-ai``, read as test data in place
(never copied into the project): which folders hold each wire protocol, and a capture
file's JSON-object payloads. Shared by the provider bad-input tests and the reliability
pipeline's fuzz seeds, which had each their own copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures" / "vercel-ai"
FOLDERS = {
    "openai-responses": ["openai/responses", "open-responses/responses", "azure"],
    "openai-chat": ["openai-compatible/chat", "deepseek/chat", "groq", "xai", "alibaba", "mistral"],
    "anthropic-messages": ["anthropic"],
    "bedrock-converse": ["amazon-bedrock"],
    "gemini": ["google"],
    "gemini-interactions": ["google/interactions"],
    "cohere-v2": ["cohere"],
}


def capture_streams(protocol: str) -> list[list[dict[str, Any]]]:
    """Every capture of ``protocol`` (none when ``shared/`` is not beside the repository),
    as its list of payloads: the lines that are JSON objects, in order."""
    out = []
    for folder in FOLDERS[protocol]:
        for path in sorted((CAPTURES / folder).glob("*.chunks.txt")):
            payloads = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(value, dict):
                    payloads.append(value)
            out.append(payloads)
    return out
