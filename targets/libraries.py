"""The catalog of third-party library adapters, by a stable name, for the conformance matrix.

Each entry builds a fresh target: ``library:protocol:surface`` (plus a variant suffix); the
harness names them ``library:<entry>`` (``callsafe certify library:openai:openai-chat:final``,
and the rows of ``callsafe matrix``). A name's adapter can be unavailable (its library is not installed): ask
:func:`unavailable` before running it, and report the entry as skipped with that reason.
Importing this module imports no third-party library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from callsafe.targets._common import WireTarget
from callsafe.targets.anthropic_messages import AnthropicMessagesTarget
from callsafe.targets.langchain_core import LangChainCoreTarget
from callsafe.targets.litellm import LiteLLMTarget
from callsafe.targets.openai_chat import OpenAIChatTarget
from callsafe.targets.openai_responses import OpenAIResponsesTarget
from callsafe.targets.pydantic_ai import PydanticAITarget
from callsafe.targets.pydantic_ai_agents import PydanticAIAnthropicTarget, PydanticAIResponsesTarget

__all__ = ["LIBRARY_TARGETS", "make", "unavailable"]

LIBRARY_TARGETS: Final[dict[str, Callable[[], WireTarget]]] = {
    "openai:openai-chat:done_event": lambda: OpenAIChatTarget("done_event"),
    "openai:openai-chat:final": lambda: OpenAIChatTarget("final"),
    "openai:openai-chat:done_event+nonstrict": lambda: OpenAIChatTarget("done_event", strict=False),
    "openai:openai-chat:final+nonstrict": lambda: OpenAIChatTarget("final", strict=False),
    "openai:openai-responses:arguments_done": lambda: OpenAIResponsesTarget("arguments_done"),
    "openai:openai-responses:final": lambda: OpenAIResponsesTarget("final"),
    "anthropic:anthropic-messages:block_stop": lambda: AnthropicMessagesTarget("block_stop"),
    "anthropic:anthropic-messages:final": lambda: AnthropicMessagesTarget("final"),
    "anthropic:anthropic-messages:final+every-block": lambda: AnthropicMessagesTarget("final", every_block=True),
    "anthropic:anthropic-messages:block_stop+fine-grained": lambda: AnthropicMessagesTarget(
        "block_stop", fine_grained=True
    ),
    "langchain-core:openai-chat:final": lambda: LangChainCoreTarget("final"),
    "langchain-core:openai-chat:preview": lambda: LangChainCoreTarget("preview"),
    "pydantic-ai-slim:openai-chat:agent": lambda: PydanticAITarget("agent"),
    "pydantic-ai-slim:openai-chat:parts": lambda: PydanticAITarget("parts"),
    "pydantic-ai-slim:openai-responses:agent": lambda: PydanticAIResponsesTarget("agent"),
    "pydantic-ai-slim:anthropic-messages:agent": lambda: PydanticAIAnthropicTarget("agent"),
    "litellm:openai-chat:final": lambda: LiteLLMTarget("final"),
    "litellm:openai-chat:stream": lambda: LiteLLMTarget("stream"),
}


def make(name: str) -> WireTarget:
    """A fresh adapter for a catalog name."""
    try:
        factory = LIBRARY_TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown library target {name!r}; known: {sorted(LIBRARY_TARGETS)}") from None
    return factory()


def unavailable(name: str) -> str | None:
    """Why the named adapter (or program row, :mod:`callsafe.targets.programs`) cannot run
    here, or ``None``."""
    if name not in LIBRARY_TARGETS:
        from callsafe.targets.program_catalog import program_rows

        programs = program_rows()
        if name in programs:
            return programs[name].unavailable()
    return make(name).unavailable()
