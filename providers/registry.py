"""Protocol name -> the module that speaks it.

Modules are imported on first use, so that naming a protocol costs nothing until it is
used, and a new provider is one new module plus one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

from callsafe.providers.base import Protocol

__all__ = ["MODULES", "get", "names", "unnamed_response"]

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


def unnamed_response(protocol: str) -> Callable[[str, int], str] | None:
    """How a target names the ``n``-th response of a turn where ``protocol``'s wire names
    none (``(turn, n) -> id``: Bedrock's ConverseStream,
    :func:`callsafe.providers.bedrock_converse.response_name`), or ``None`` where the wire
    names each response. The harness names a trace's responses the same way
    (:func:`callsafe.certify.wire.relabel`)."""
    if protocol == "bedrock-converse":
        from callsafe.providers.bedrock_converse import response_name

        return response_name
    return None
