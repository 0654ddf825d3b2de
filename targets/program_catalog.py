"""Every program row by catalog name (:mod:`callsafe.targets.programs`): the Python
agent-framework rows, the Bedrock rows (:mod:`callsafe.targets.bedrock_rows`), the realtime
rows (:mod:`callsafe.targets.realtime_rows`), the TypeScript rows, then the MCP hosts
(:mod:`callsafe.targets.mcp_rows`). A module of its own so that the row
definitions import :class:`~callsafe.targets.programs.ProgramRow` and this imports them,
without a circle."""

from __future__ import annotations

from callsafe.targets import bedrock_rows, framework_rows, mcp_rows, node_rows, realtime_rows
from callsafe.targets.programs import ProgramRow

__all__ = ["program_rows"]


def program_rows() -> dict[str, ProgramRow]:
    """The rows by name, read from their modules at each call (a test may swap a table)."""
    rows: dict[str, ProgramRow] = {}
    for row in (
        *framework_rows.FRAMEWORK_ROWS,
        *bedrock_rows.BEDROCK_ROWS,
        *realtime_rows.REALTIME_ROWS,
        *node_rows.NODE_ROWS,
        *mcp_rows.MCP_ROWS,
    ):
        if row.name in rows:
            raise ValueError(f"two program rows are named {row.name!r}")
        rows[row.name] = row
    return rows
