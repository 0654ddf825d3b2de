"""The reference implementation's typed errors: anything else escaping it is a bug."""

from __future__ import annotations

__all__ = ["AssemblerError", "ModelDriftError", "StoreError", "UnsupportedEvent"]


class AssemblerError(Exception):
    """Base of every error the reference implementation raises on purpose."""


class UnsupportedEvent(AssemblerError):
    """An event the core has no rule for (e.g. an unexpanded ``replay``)."""


class ModelDriftError(AssemblerError):
    """The lifecycle table now says something the core was not written for (e.g. a
    terminal state with a way out). Raised rather than guessed: the model is the spec."""


class StoreError(AssemblerError):
    """The durable store failed or holds something it cannot read."""
