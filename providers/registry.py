"""Protocol name -> the module that speaks it.

Modules are imported on first use, so that naming a protocol costs nothing until it is
used, and a new provider is one new module plus one line here.
"""

from __future__ import annotations

import importlib
from typing import Final

from callsafe.providers.base import Protocol

__all__ = ["MODULES", "get", "names"]

MODULES: Final[dict[str, str]] = {
    "openai-responses": "callsafe.providers.openai_responses",
    "openai-chat": "callsafe.providers.openai_chat",
    "anthropic-messages": "callsafe.providers.anthropic_messages",
    "bedrock-converse": "callsafe.providers.bedrock_converse",
    "gemini": "callsafe.providers.gemini",
    "gemini-interactions": "callsafe.providers.gemini_interactions",
    "cohere-v2": "callsafe.providers.cohere",
    "openai-realtime": "callsafe.providers.openai_realtime",
    "gemini-live": "callsafe.providers.gemini_live",
}


def names() -> list[str]:
    """Every protocol name, in a stable order."""
    return list(MODULES)


def get(name: str) -> Protocol:
    """The protocol called ``name``. Raises KeyError, naming the known protocols."""
    module_name = MODULES.get(name)
    if module_name is None:
        raise KeyError(f"unknown protocol {name!r}; known: {', '.join(MODULES)}")
    protocol = importlib.import_module(module_name).PROTOCOL
    if not isinstance(protocol, Protocol) or protocol.name != name:
        raise RuntimeError(f"{module_name}.PROTOCOL does not describe {name!r}")
    return protocol
