"""The MCP rows of the conformance matrix: agent programs that take their tools from an MCP
server through one framework's own MCP client (:mod:`callsafe.adapters.mcp_hosts`, and
``adapters/node/examples/*.mjs``), each certified by configuration alone as ``agent:COMMAND``
(:mod:`callsafe.adapters.mcp_agent`): callsafe is the model endpoint (the loopback provider)
and the MCP tool server, whose ``tools/call`` handler is the executor spy. A row's command
is that ``agent:`` command spelled as the ``exec:`` program it resolves to, so the row runs
through the same program-row machinery (:mod:`callsafe.targets.programs`) as every
framework row, is named ``library:NAME`` the same way, and records its versions (the host
library; beside it the MCP SDK and the model SDK it drives).

Why these hosts: they are the MCP clients installed here (``pyproject.toml``'s extras and
``adapters/node/package.json``). Not rows, because not installed: pydantic-ai's MCP toolsets
(``pydantic_ai.mcp`` needs ``fastmcp``), langchain-mcp-adapters, llama-index's MCP tools
(``llama-index-tools-mcp``), smolagents, and the AI SDK's own MCP client (``@ai-sdk/mcp``;
the ``ai`` row wires the official MCP client's tools into ``streamText`` instead). crewAI's
``Agent(mcps=...)`` is installed but renames each MCP tool for the model
(``mcp_<host>_<port>_mcp_<tool>``), while the loopback streams the catalog's names, so its
calls name no tool it has: not a row until the agent form maps a host's renamed tools.

Controls: none of these programs exposes a cancel, turn or confirmation hook to callsafe, so
traces that need one are not applicable to the rows (never passed). Each host starts as a
process per model stream (seconds each, more on a loaded machine), so the rows have a budget
per row and a longer bound per trace (``MCP_OPTIONS``; a row cut short by its budget is
marked so, its counts then depend on the machine), and the matrix runs them only when asked
(``callsafe matrix --mcp``). Their walks and depth are the matrix's: with no control hook,
the defaults add 7 traces to the 213 of depth 1 and 4 walks (the wire generators are the rest).
"""

from __future__ import annotations

from typing import Final

from callsafe.targets.programs import ProgramRow

__all__ = ["MCP_OPTIONS", "MCP_ROWS"]

MCP_OPTIONS: Final = {"budget": 240.0, "trace_timeout": 120.0}
_AGENT: Final = ("{python}", "-m", "callsafe.adapters.mcp_agent")


def _python(
    module: str, library: str, protocol: str, surface: str, needs: tuple[str, ...], deps: tuple[str, ...]
) -> ProgramRow:
    return ProgramRow(
        name=f"{library}:{protocol}:{surface}",
        library=library,
        ecosystem="python",
        protocol=protocol,
        surface=surface,
        argv=(*_AGENT, "--protocol", protocol, "--", "{python}", "-m", f"callsafe.adapters.mcp_hosts.{module}"),
        needs=needs,
        options=MCP_OPTIONS,
        dependencies=deps,
    )


def _node(program: str, package: str, surface: str, needs: tuple[str, ...]) -> ProgramRow:
    return ProgramRow(
        name=f"node/{package}:openai-chat:{surface}",
        library=package,
        ecosystem="node",
        protocol="openai-chat",
        surface=surface,
        argv=(*_AGENT, "--", "node", f"{{node_dir}}/examples/{program}.mjs"),
        needs=needs,
        options=MCP_OPTIONS,
    )


MCP_ROWS: Final[tuple[ProgramRow, ...]] = (
    _python(
        "openai_agents_mcp",
        "openai-agents",
        "openai-chat",
        "mcp:MCPServerStreamableHttp",
        ("agents.mcp", "mcp"),
        ("mcp", "openai"),
    ),
    _python(
        "strands_mcp", "strands-agents", "openai-chat", "mcp:MCPClient", ("strands.tools.mcp", "mcp"), ("mcp", "openai")
    ),
    _python(
        "google_adk_mcp",
        "google-adk",
        "gemini",
        "mcp:McpToolset",
        ("google.adk.tools.mcp_tool", "mcp"),
        ("mcp", "google-genai"),
    ),
    _node(
        "openai-agents-mcp", "@openai/agents", "mcp:MCPServerStreamableHttp", ("@modelcontextprotocol/client", "openai")
    ),
    _node(
        "ai-sdk-mcp-tools",
        "ai",
        "mcp:streamText+@modelcontextprotocol/client",
        ("@ai-sdk/openai", "@modelcontextprotocol/client"),
    ),
)
