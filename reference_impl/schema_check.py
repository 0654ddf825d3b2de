"""Schema validation for the core: a compiled validator may say "valid", jsonschema decides everything else.

Why two validators: jsonschema (the model's :func:`~callsafe.model.system.schema_errors`)
is the reference, but it interprets the schema for every call, and for a small call that
costs more than everything else the core does (about 70 us for a ten-keyword schema).
fastjsonschema compiles a schema to Python code once (about 4 us a call). Its dialect is
not jsonschema's, though: it reads a schema without ``$schema`` as draft 7 where
jsonschema reads draft 2020-12, it rewrites ``$`` in ``pattern`` to ``\\Z``, checks
``multipleOf`` with decimals, ignores 2020-12 keywords such as ``prefixItems``, and so on.

So the compiled validator is only ever trusted in one direction, and only where it is
known to be at least as strict as jsonschema:

* when it accepts, the call is valid (:meth:`SchemaCheck.__call__` returns None);
* when it rejects, or raises anything, the model's ``schema_errors`` decides, so every
  message (and every "valid" that the compiled code is too strict to give) is exactly
  jsonschema's;
* it is compiled only for a schema built from the keywords in :data:`_SCHEMA_KEYWORDS`
  (those whose meaning is the same in draft 7 and 2020-12, or stricter in fastjsonschema),
  with ``$schema`` absent or 2020-12, no ``$ref``, no ``multipleOf``, ``enum`` and
  ``const`` of scalars only, and a ``pattern`` whose only unescaped ``$`` is its last
  character (fastjsonschema's ``\\Z`` rewrite is then only stricter: a ``$`` inside a
  lookaround or a class could make it looser). Formats are not asserted by either
  (jsonschema is built without a format checker; fastjsonschema with ``use_formats=False``),
  and defaults are never filled in (``use_default=False``: the arguments are not changed).
  Any other schema is validated by jsonschema alone, as before.

``tests/test_reference_schema_check.py`` holds the two to this: on random schemas over
these keywords and random instances, whenever fastjsonschema accepts, jsonschema accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import fastjsonschema
import jsonschema

from callsafe.model.ecma_regex import Untranslatable, translate, validator_class
from callsafe.model.system import schema_errors
from callsafe.model.vocabulary import ToolSpec

__all__ = ["SchemaCheck", "compile_quick"]

QuickValidator = Callable[[Any], Any]

# keyword -> how its value is read: a schema, a list of schemas, a map of name -> schema,
# or a plain value (checked by _plain_ok). Annotations are plain values nobody asserts.
_SUBSCHEMA, _SCHEMA_LIST, _SCHEMA_MAP, _PLAIN = range(4)
_SCHEMA_KEYWORDS: Final[Mapping[str, int]] = {
    "properties": _SCHEMA_MAP,
    "patternProperties": _SCHEMA_MAP,
    "additionalProperties": _SUBSCHEMA,
    "propertyNames": _SUBSCHEMA,
    "items": _SUBSCHEMA,  # the 2020-12 form only (a schema); an array is draft 7's tuple form
    "contains": _SUBSCHEMA,
    "not": _SUBSCHEMA,
    "if": _SUBSCHEMA,
    "then": _SUBSCHEMA,
    "else": _SUBSCHEMA,
    "allOf": _SCHEMA_LIST,
    "anyOf": _SCHEMA_LIST,
    "oneOf": _SCHEMA_LIST,
    "type": _PLAIN,
    "enum": _PLAIN,
    "const": _PLAIN,
    "required": _PLAIN,
    "minLength": _PLAIN,
    "maxLength": _PLAIN,
    "pattern": _PLAIN,
    "minimum": _PLAIN,
    "maximum": _PLAIN,
    "exclusiveMinimum": _PLAIN,
    "exclusiveMaximum": _PLAIN,
    "minItems": _PLAIN,
    "maxItems": _PLAIN,
    "uniqueItems": _PLAIN,
    "minProperties": _PLAIN,
    "maxProperties": _PLAIN,
    "format": _PLAIN,
    "title": _PLAIN,
    "description": _PLAIN,
    "default": _PLAIN,
    "examples": _PLAIN,
    "$comment": _PLAIN,
    "deprecated": _PLAIN,
    "readOnly": _PLAIN,
    "writeOnly": _PLAIN,
}
_NUMERIC: Final = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    | {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_TYPES: Final = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
# fastjsonschema's own rule for the ``$`` it rewrites (draft04.DOLLAR_FINDER).
_UNESCAPED_DOLLAR: Final = re.compile(r"(?<!\\)\$")
# What jsonschema's joining of ``patternProperties`` into one ``a|b`` regex (to find the
# additional properties) changes or refuses, where fastjsonschema matches each pattern on
# its own: backreferences (renumbered), named groups (may clash), global flags (allowed
# only at the start). Conservative: an escaped backslash before a digit counts too.
_JOIN_SENSITIVE: Final = re.compile(r"\\[1-9]|\(\?P|\(\?[aiLmsux]+\)")
_DRAFT_2020_12: Final = jsonschema.Draft202012Validator


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def _plain_ok(keyword: str, value: Any) -> bool:
    """A plain keyword's value is one both validators read the same way."""
    if keyword in _NUMERIC:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        return bool(names) and all(isinstance(n, str) and n in _TYPES for n in names)
    if keyword == "enum":
        return isinstance(value, list) and all(_scalar(v) for v in value)
    if keyword == "const":
        return _scalar(value)
    if keyword == "required":
        return isinstance(value, list) and all(isinstance(n, str) for n in value)
    if keyword == "pattern":
        if not _regex_ok(value):
            return False
        return all(m.start() == len(value) - 1 for m in _UNESCAPED_DOLLAR.finditer(value))
    if keyword == "uniqueItems":
        return isinstance(value, bool)
    return True  # format (not asserted) and annotations


def _regex_ok(pattern: Any) -> bool:
    return isinstance(pattern, str) and _JOIN_SENSITIVE.search(pattern) is None and _ecma_same(pattern)


# Escapes that Python's re reads Unicode-wide and ECMA-262 (the model) as ASCII.
_UNICODE_WIDE: Final = re.compile(r"\\[dDwWbB]")


def _ecma_same(pattern: str) -> bool:
    """fastjsonschema (Python's ``re``, ``$`` as ``\\Z``) reads ``pattern`` as the model's
    ECMA-262 translation (:mod:`callsafe.model.ecma_regex`) does: the translation is the
    pattern itself but for a final ``$``, and no class escape is Unicode-wide in one and
    ASCII in the other. Other patterns go to the model's validator."""
    try:
        translated = translate(pattern).pattern
    except Untranslatable:
        return True  # both match it with Python's re
    expected = pattern[:-1] + "\\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    return translated == expected and _UNICODE_WIDE.search(pattern) is None


def _eligible(schema: Any) -> bool:
    """Every (sub)schema uses only keywords whose meaning fastjsonschema shares, or
    enforces more strictly (see the module docstring)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for keyword, value in schema.items():
        kind = _SCHEMA_KEYWORDS.get(keyword)
        if kind is None:
            return False
        if kind == _SUBSCHEMA:
            ok = _eligible(value)
        elif kind == _SCHEMA_LIST:
            ok = isinstance(value, list) and bool(value) and all(_eligible(v) for v in value)
        elif kind == _SCHEMA_MAP:
            ok = isinstance(value, dict) and all(isinstance(k, str) and _eligible(v) for k, v in value.items())
            ok = ok and (keyword != "patternProperties" or all(_regex_ok(k) for k in value))
        else:
            ok = _plain_ok(keyword, value)
        if not ok:
            return False
    return True


def _plain(value: Any) -> Any:
    """A deep copy of a schema as dicts and lists (a catalog may hold other mappings), so
    the compiled code is built from a snapshot and fastjsonschema's dict checks hold."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _dialect_ok(schema: Mapping[str, Any]) -> bool:
    """``schema`` is 2020-12 and uses only the keywords both dialects share."""
    try:
        if jsonschema.validators.validator_for(schema) is not _DRAFT_2020_12:
            return False
        plain = _plain(schema)
        plain.pop("$schema", None)
        return _eligible(plain)
    except Exception:  # jsonschema cannot read it either: it will say so when validating
        return False


def compile_quick(schema: Mapping[str, Any]) -> QuickValidator | None:
    """The compiled validator for ``schema``, or None when the schema is outside the
    keywords both dialects share (or fastjsonschema cannot compile it): jsonschema alone
    then validates. The function returns when the instance is valid and raises otherwise."""
    try:
        if not _dialect_ok(schema):
            return None
        plain = _plain(schema)
        plain.pop("$schema", None)  # 2020-12 (checked above); fastjsonschema would read it as its default
        quick: QuickValidator = fastjsonschema.compile(
            plain, use_default=False, use_formats=False, detailed_exceptions=False
        )
    except Exception:  # a schema fastjsonschema refuses (or a recursive one): jsonschema decides
        return None
    return quick


# Compiling costs about as much as 30 to 40 jsonschema validations of a small call (1 to
# 3 ms against 45 to 70 us). A schema is compiled once it has been validated this many
# times in the process: one used only a few times (a one-off schema in a certification
# trace or a test) never pays for it, one in steady use is compiled almost at once, and
# the most a schema can waste is one compile (a few ms) per process.
COMPILE_AFTER: Final = 8
_REGISTRY_MAX: Final = 256


class _Schema:
    """One schema's validators, shared by every core in the process that declares the same
    schema (by content): the jsonschema validator, and the compiled one once earned. Both
    are built from a snapshot of the schema (a declaration's schema is never changed in
    place: a catalog change makes a new declaration)."""

    __slots__ = ("pending", "quick", "schema", "validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema: Mapping[str, Any] = _plain(schema)
        self.validator: Any = validator_class(self.schema)(self.schema)
        self.quick: QuickValidator | None = None
        # validations left before compiling; -1: never (outside the shared keywords)
        self.pending = COMPILE_AFTER if _dialect_ok(self.schema) else -1

    def count(self) -> None:
        pending = self.pending = self.pending - 1
        if pending == 0:  # replicas on threads may race here: at worst it compiles twice
            self.quick = compile_quick(self.schema)


# canonical JSON of a schema -> its validators (bounded: cleared when full)
_REGISTRY: dict[str, _Schema] = {}


def _shared(schema: Mapping[str, Any]) -> _Schema:
    try:
        key = json.dumps(_plain(schema), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not JSON: nothing to share it by
        return _Schema(schema)
    record = _REGISTRY.get(key)
    if record is None:
        if len(_REGISTRY) >= _REGISTRY_MAX:
            _REGISTRY.clear()
        record = _REGISTRY[key] = _Schema(schema)
    return record


class SchemaCheck:
    """``schema_errors`` of the model, answered by a compiled validator when it accepts.

    Per declaration (keyed by the :class:`ToolSpec` object, held so that its id cannot be
    reused; bounded, cleared when full; a catalog change makes a new declaration) the
    schema's shared validators (:class:`_Schema`). A jsonschema validator's ``is_valid``
    is, by jsonschema's definition, "``iter_errors`` yields nothing", so it answers None
    exactly when ``schema_errors`` would; only a call that some validator rejects pays for
    the model's own message."""

    __slots__ = ("_cache",)

    _MAX: Final = 256

    def __init__(self) -> None:
        self._cache: dict[int, tuple[ToolSpec, _Schema]] = {}

    def __call__(self, spec: ToolSpec, arguments: Any) -> str | None:
        entry = self._cache.get(id(spec))
        if entry is None or entry[0] is not spec:
            if len(self._cache) >= self._MAX:
                self._cache.clear()
            entry = self._cache[id(spec)] = (spec, _shared(spec.schema))
        record = entry[1]
        quick = record.quick
        if quick is not None:
            try:
                quick(arguments)
            except Exception:  # rejected, or the compiled code could not tell: the model decides
                return schema_errors(spec, arguments)
            return None
        if record.pending > 0:
            record.count()
        if record.validator.is_valid(arguments):
            return None
        return schema_errors(spec, arguments)
