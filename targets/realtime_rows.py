"""The realtime rows of the conformance matrix: programs on a client library's realtime API
(a WebSocket session, :mod:`callsafe.loopback.realtime`), run over the target protocol in
wire mode like every program row (:mod:`callsafe.targets.programs`), judged at the tool.

Why this row: the ``openai`` SDK's realtime client (``client.realtime.connect``) is the
realtime client installed here; the program does what OpenAI's Realtime guide has a client
do with function calling (:mod:`callsafe.adapters.openai_realtime_example`). The OpenAI
Agents SDK's realtime agents (``agents.realtime``, ``openai-agents``) run their own function
tools over the same WebSocket
(:mod:`callsafe.adapters.frameworks.openai_agents_realtime`). google-genai's Live client
(:mod:`callsafe.adapters.gemini_live_example`, ``client.aio.live.connect``) reads the
loopback's Live WebSocket over its TLS listener. Not rows,
because not installed: LiveKit Agents, Pipecat.
"""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["REALTIME_ROWS"]

REALTIME_ROWS: Final[tuple[ProgramRow, ...]] = (
    ProgramRow(
        name="openai:openai-realtime:realtime-connect",
        library="openai",
        ecosystem="python",
        protocol="openai-realtime",
        surface="realtime-connect",
        argv=("{python}", "-m", "callsafe.adapters.openai_realtime_example"),
        needs=("openai", "websockets"),
        dependencies=("websockets",),
    ),
    ProgramRow(
        name="openai-agents:openai-realtime:realtime-agent",
        library="openai-agents",
        ecosystem="python",
        protocol="openai-realtime",
        surface="realtime-agent",
        argv=("{python}", "-m", "callsafe.adapters.frameworks.openai_agents_realtime"),
        needs=("agents.realtime", "websockets"),
        dependencies=("openai", "websockets"),
    ),
    ProgramRow(
        name="google-genai:gemini-live:live-connect",
        library="google-genai",
        ecosystem="python",
        protocol="gemini-live",
        surface="live-connect",
        argv=("{python}", "-m", "callsafe.adapters.gemini_live_example"),
        needs=("google.genai", "websockets"),
        dependencies=("websockets",),
    ),
)
