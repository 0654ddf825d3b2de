"""One module per wire protocol, both directions: render abstract traces to that
protocol's events (and SSE bytes), and parse its events back into abstract events.

``base`` holds the shared contract (errors, :class:`~callsafe.providers.base.Parser`,
:class:`~callsafe.providers.base.Renderer`, :class:`~callsafe.providers.base.Protocol`);
``sse`` the incremental SSE codec; ``registry`` maps protocol names to modules;
``streams`` parses and renders whole streams. Each protocol module documents its call
keys, its terminal events, what its parser decides and what its renderer can express.

Role: the wire protocols, both directions. Imports only :mod:`callsafe.model`.
"""

from callsafe.providers.base import (
    MalformedEvent,
    NotRepresentable,
    Parser,
    Protocol,
    ProtocolViolation,
    ProviderError,
    Renderer,
)
from callsafe.providers.registry import get, names

__all__ = [
    "MalformedEvent",
    "NotRepresentable",
    "Parser",
    "Protocol",
    "ProtocolViolation",
    "ProviderError",
    "Renderer",
    "get",
    "names",
]
