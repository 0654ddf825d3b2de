"""Agent-framework programs over callsafe's target protocol (``exec:`` targets reading their
streams over HTTP from the loopback provider): each module runs one framework whole, its own
HTTP client and its own tool runner, with tools whose bodies call callsafe's executor."""
