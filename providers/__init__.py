"""One module per wire protocol, both directions: render abstract traces to that
protocol's events (and SSE bytes), and parse its events back into abstract events."""
