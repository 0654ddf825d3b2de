"""The tool catalog an agent already has, as the guard's :class:`ToolSpec` mapping.

Accepted, because these are what agent code holds when it calls a model:

* ``{name: JSON Schema}`` or ``{name: ToolSpec}`` (a mapping whose values are all
  :class:`~callsafe.model.vocabulary.ToolSpec` is used as it is, a *live* view: changes an
  application makes to it are seen at validation and dispatch time, as the spec's
  "catalog as it stands" requires);
* the ``tools=`` list of an OpenAI Chat Completions request
  (``{"type": "function", "function": {"name", "parameters"}}``), of a Responses request
  (``{"type": "function", "name", "parameters"}``) or of an Anthropic Messages request
  (``{"name", "input_schema"}``).

Every schema is checked with ``jsonschema``'s own meta-schema check when the guard is
built, so a broken schema is a :class:`~callsafe.guard.errors.ConfigError` at start-up,
not a failed call in production.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions

from callsafe.guard.errors import ConfigError
from callsafe.model.vocabulary import ToolSpec

__all__ = ["ToolsInput", "catalog_of", "spec_of"]

ToolsInput = Mapping[str, "ToolSpec | Mapping[str, Any]"] | Iterable[Mapping[str, Any]]


def spec_of(name: str, value: object) -> ToolSpec:
    """One tool's declaration: a ToolSpec as it is, a JSON Schema wrapped in one."""
    if isinstance(value, ToolSpec):
        spec = value
    elif isinstance(value, Mapping):
        spec = ToolSpec(schema=dict(value))
    else:
        raise ConfigError(f"tool {name!r}: a tool is a JSON Schema (a dict) or a ToolSpec, got {type(value).__name__}")
    try:
        schema = dict(spec.schema)
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise ConfigError(f"tool {name!r}: not a valid JSON Schema ({exc.message[:200]})") from None
    return spec


def _from_request_tool(entry: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """One entry of a request's ``tools=`` list: (name, schema)."""
    function = entry.get("function")
    if entry.get("type") == "function" and isinstance(function, Mapping):  # Chat Completions
        name, schema = function.get("name"), function.get("parameters", {"type": "object"})
    elif "input_schema" in entry:  # Anthropic Messages
        name, schema = entry.get("name"), entry.get("input_schema")
    elif entry.get("type") == "function":  # Responses
        name, schema = entry.get("name"), entry.get("parameters", {"type": "object"})
    else:
        raise ConfigError(
            "a tools list entry is an OpenAI Chat or Responses function tool or an Anthropic tool "
            f"(keys seen: {sorted(str(k) for k in entry)[:8]})"
        )
    if not isinstance(name, str) or not name:
        raise ConfigError("a tools list entry has no name")
    if not isinstance(schema, Mapping):
        raise ConfigError(f"tool {name!r}: its parameters are not a JSON Schema object")
    return name, schema


def catalog_of(tools: object) -> Mapping[str, ToolSpec]:
    """The catalog for ``tools`` (see the module docstring)."""
    if isinstance(tools, Mapping):
        for name, value in tools.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"tool names are non-empty strings, got {name!r}")
            spec_of(name, value)
        if all(isinstance(v, ToolSpec) for v in tools.values()):
            return tools  # the application's own mapping: a live view
        return {name: spec_of(name, value) for name, value in tools.items()}
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ConfigError(f"tools is a mapping {{name: schema}} or a request's tools list, got {type(tools).__name__}")
    out: dict[str, ToolSpec] = {}
    for entry in tools:
        if not isinstance(entry, Mapping):
            raise ConfigError(f"a tools list holds objects, got {type(entry).__name__}")
        name, schema = _from_request_tool(entry)
        if name in out:
            raise ConfigError(f"tool {name!r} is declared twice")
        out[name] = spec_of(name, schema)
    return out
