"""The realtime rows of the conformance matrix: programs on a client library's realtime API
(a WebSocket session, :mod:`callsafe.loopback.realtime`), run over the target protocol in
wire mode like every program row (:mod:`callsafe.targets.programs`), judged at the tool.

Why this row: the ``openai`` SDK's realtime client (``client.realtime.connect``) is the
realtime client installed here; the program does what OpenAI's Realtime guide has a client
do with function calling (:mod:`callsafe.adapters.openai_realtime_example`). The OpenAI
Agents SDK's realtime agents (``agents.realtime``, ``openai-agents``) run their own function
tools over the same WebSocket
(:mod:`callsafe.adapters.frameworks.openai_agents_realtime`). Not rows, because not
installed: LiveKit Agents, Pipecat.
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
        options={"walks": 10, "depth": 2},
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
        options={"walks": 10, "depth": 2},
        dependencies=("openai", "websockets"),
    ),
)
