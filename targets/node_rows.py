"""The TypeScript rows of the conformance matrix: Node.js libraries run as programs over the
target protocol (:mod:`callsafe.targets.programs`), their SDKs reading the loopback
provider over HTTP. The programs are ``adapters/node/rows/*.ts``, compiled by
``npm run build``; the packages are pinned in ``adapters/node/package-lock.json``.

Each row is judged where its library acts: a library that runs tools itself (the AI SDK's
``streamText`` with executing tools, over Chat Completions and over Anthropic Messages, an
``@openai/agents`` run, the Anthropic SDK's tool runner) is judged on what reached the tool
body, which calls callsafe's executor; a stream helper that only presents calls (``chat.completions.stream``,
``responses.stream``, ``MessageStream``, LangChain's concatenated chunks) is judged on the
moment it presents a call as finished, where the program runs it. Every row aborts its
request through the library's own ``AbortSignal`` on a ``cancel_turn`` or a superseding
turn, so each declares ``cancellation``, and acknowledges what its SDK has read (``acks``),
so that what it ran for a payload is recorded at that payload's step
(``adapters/node/rows/common.ts``)."""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["NODE_ROWS"]


def _row(
    package: str, protocol: str, surface: str, program: str, needs: tuple[str, ...] = (), *args: str
) -> ProgramRow:
    return ProgramRow(
        name=f"node/{package}:{protocol}:{surface}",
        library=package,
        ecosystem="node",
        protocol=protocol,
        surface=surface,
        argv=("node", f"{{node_dir}}/dist/rows/{program}.js", *args),
        needs=needs,
    )


NODE_ROWS: Final[tuple[ProgramRow, ...]] = (
    _row("ai", "openai-chat", "streamText", "ai-stream-text", ("@ai-sdk/openai",)),
    _row("ai", "anthropic-messages", "streamText", "ai-stream-text", ("@ai-sdk/anthropic",), "anthropic"),
    _row("openai", "openai-chat", "chat.completions.stream", "openai-chat-stream"),
    _row("openai", "openai-responses", "responses.stream", "openai-responses-stream"),
    _row("@anthropic-ai/sdk", "anthropic-messages", "MessageStream", "anthropic-message-stream"),
    _row("@anthropic-ai/sdk", "anthropic-messages", "toolRunner", "anthropic-tool-runner"),
    _row("@langchain/core", "openai-chat", "ChatOpenAI.stream", "langchain-chat-openai", ("@langchain/openai",)),
    _row("@openai/agents", "openai-responses", "run-streamed", "openai-agents-run", ("openai",)),
)
