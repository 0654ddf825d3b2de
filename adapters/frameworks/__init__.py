"""Agent-framework programs over callsafe's target protocol (``exec:`` targets reading their
streams over HTTP from the loopback provider): each module runs one framework whole, its own
HTTP client and its own tool runner, with tools whose bodies call callsafe's executor.

Importing this package turns off the frameworks' own telemetry, trace export and downloads
(:func:`callsafe.offline.keep_offline`) before any program module imports its framework."""

from callsafe.offline import keep_offline

keep_offline()
