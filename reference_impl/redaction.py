"""Keeping argument values where they belong: copies for the few who need them, nothing
for logs.

Why: the spec wants the ledger to tell a malformed stream from a permission rejection
"without retaining sensitive argument values in broad logs", and it wants a buffer never
exposed as a live object. So whoever gets arguments (the business validator, the
confirmation prompt) gets a copy, and validation messages are reduced to names the tool
author declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from callsafe.model.leaks import declared_names, withhold_path

__all__ = ["copy_json", "declared_names", "redact_schema_problem"]

_J = TypeVar("_J")


def copy_json(value: _J) -> _J:
    """A deep copy of a JSON value (dicts, lists, scalars): cheaper than ``copy.deepcopy``
    and enough for what :func:`json.loads` produces. Scalars (most of a value) are taken
    as they are without a call each."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, _CONTAINERS) else v for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, _CONTAINERS) else v for v in value]  # type: ignore[return-value]
    return value


_CONTAINERS = (dict, list)


def redact_schema_problem(problem: str, schema: Mapping[str, Any]) -> str:
    """The model's ``schema: <keyword> at <path>`` message, with the path kept only when
    it is made of declared property names and array indices: an instance path can hold
    keys that came from the arguments themselves (``additionalProperties``), and those
    must not reach the ledger. The model's own rule (:func:`callsafe.model.leaks.withhold_path`),
    so that the reference's rows and the oracle's ideal rows withhold the same paths."""
    return withhold_path(problem, schema)
