"""MCP hosts as users write them: agent programs whose model is the base URL in their
environment and whose tools come from the MCP server at ``CALLSAFE_MCP_URL``, each through
one framework's own MCP client. Nothing in them knows callsafe: ``callsafe certify
'agent:python -m callsafe.adapters.mcp_hosts.NAME'`` judges them by configuration alone,
and the matrix's MCP rows (:mod:`callsafe.targets.mcp_rows`) are these programs."""
