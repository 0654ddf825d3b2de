"""JSON Schema ``pattern`` as the standard says: ECMA-262 regular expressions, on Python's ``re``.

Why: JSON Schema 2020-12 (Validation, 6.3.3 and Core, 6.4) says a ``pattern`` is an ECMA-262
regular expression. python-jsonschema matches it with Python's ``re``, which reads some
patterns differently: ``$`` also matches before a final newline, ``\\d``, ``\\w`` and ``\\b``
are Unicode-wide, ``.`` matches ``\\r``, ``\\u2028`` and ``\\u2029``, ``\\s`` is another set, and
to find additional properties it joins every ``patternProperties`` pattern into one
``a|b`` regex, which renumbers backreferences. An implementation validating with ajv (or any
validator that follows the standard) would then be blamed for the oracle's dialect: a false
alarm. :func:`ecma_search` translates a pattern into a Python regex with the ECMA-262
meaning (compiled with ``re.ASCII``, so ``\\d``, ``\\w``, ``\\b`` are the ASCII classes ECMA-262
defines; ``\\s`` spelled out; ``.`` without the line terminators; ``$`` at the very end;
``(?<name>`` and ``\\k<name>`` to Python's spelling) and :data:`ECMA_KEYWORDS` are the
keywords that use it, each pattern on its own.

A pattern this translation does not cover (Unicode property escapes ``\\p{..}``, ``\\u{..}``,
``\\c``, inline flags, a class escape like ``\\D`` inside ``[...]``) is matched by Python's
``re`` as before: :func:`translate` raises :class:`Untranslatable`, and the fallback is said
in docs/json-schema-dialect.md. ``bench/schema_dialects.py`` measures the oracle against
python-jsonschema (and jsonschema-rs, ajv where installed) on every schema the generators use.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["ECMA_KEYWORDS", "Untranslatable", "ecma_search", "translate", "validator_class"]

# ECMA-262 WhiteSpace and LineTerminator (22.2.2.9 CharacterClassEscape :: s)
_ECMA_SPACE: Final = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_DOT: Final = "[^\\n\\r\\u2028\\u2029]"  # ECMA-262 `.` without the s flag
_OUTSIDE: Final = {
    "s": f"[{_ECMA_SPACE}]",
    "S": f"[^{_ECMA_SPACE}]",
}
_INSIDE: Final = {"s": _ECMA_SPACE, "d": "0-9", "w": "A-Za-z0-9_"}
# Escapes whose meaning is the same in both once compiled with re.ASCII (or a literal).
_SAME: Final = frozenset("dDwWbBfnrtv0123456789") | frozenset("^$\\.*+?()[]{}|/-")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Untranslatable(ValueError):
    """A pattern whose ECMA-262 meaning this module cannot express in Python's ``re``."""


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The translation of the escape at ``pattern[i] == '\\\\'`` and the index after it."""
    if i + 1 >= len(pattern):
        raise Untranslatable("a pattern may not end in a backslash")
    c = pattern[i + 1]
    if c == "v":
        return "\\x0b", i + 2
    if in_class and c in _INSIDE:
        return _INSIDE[c], i + 2
    if in_class and c in "DWS":
        raise Untranslatable(f"\\{c} inside a character class")
    if not in_class and c in _OUTSIDE:
        return _OUTSIDE[c], i + 2
    if c == "b" and in_class:
        return "\\x08", i + 2  # backspace inside a class, in both
    if c == "k" and not in_class:
        m = re.match(r"<([A-Za-z_][A-Za-z0-9_]*)>", pattern[i + 2 :])
        if m is None:
            raise Untranslatable("\\k without a group name")
        return f"(?P={m.group(1)})", i + 2 + m.end()
    if c == "u":
        hex4 = pattern[i + 2 : i + 6]
        if len(hex4) == 4 and all(h in "0123456789abcdefABCDEF" for h in hex4):
            return f"\\u{hex4}", i + 6
        raise Untranslatable("\\u{...} or a short \\u escape")
    if c == "x":
        hex2 = pattern[i + 2 : i + 4]
        if len(hex2) == 2 and all(h in "0123456789abcdefABCDEF" for h in hex2):
            return f"\\x{hex2}", i + 4
        raise Untranslatable("a short \\x escape")
    if c in _SAME or not c.isalnum():
        return pattern[i : i + 2], i + 2
    raise Untranslatable(f"the escape \\{c}")  # \p, \P, \c, \A, \Z, \z, \G, \N ...


def _class(pattern: str, i: int) -> tuple[str, int]:
    """The translation of the class starting at ``pattern[i] == '['``."""
    j = i + 1
    negated = pattern.startswith("^", j)
    if negated:
        j += 1
    if pattern.startswith("]", j):  # ECMA: [] matches nothing, [^] any character
        return ("(?s:.)" if negated else "(?!)"), j + 1
    out = ["[^" if negated else "["]
    while j < len(pattern):
        c = pattern[j]
        if c == "]":
            out.append("]")
            return "".join(out), j + 1
        if c == "\\":
            piece, j = _escape(pattern, j, True)
            out.append(piece)
            continue
        if c == "[":
            out.append("\\[")  # a literal in ECMA; Python warns of nested sets
        elif c in "&~|" and pattern.startswith(c * 2, j):
            out.append("\\" + c)  # Python's reserved set operations: literals in ECMA
        else:
            out.append(c)
        j += 1
    raise Untranslatable("an unterminated character class")


def _group(pattern: str, i: int) -> tuple[str, int]:
    """The translation of a group opening at ``pattern[i] == '('``."""
    rest = pattern[i + 1 :]
    if not rest.startswith("?"):
        return "(", i + 1
    for opener in ("?:", "?=", "?!", "?<=", "?<!"):
        if rest.startswith(opener):
            return "(" + opener, i + 1 + len(opener)
    if rest.startswith("?<"):
        m = _NAME.match(rest, 2)
        if m is not None and rest.startswith(">", m.end()):
            return f"(?P<{m.group(0)}>", i + 1 + m.end() + 1
    raise Untranslatable("a group syntax ECMA-262 does not have (inline flags, (?P...)")


@functools.lru_cache(maxsize=512)
def translate(pattern: str) -> re.Pattern[str]:
    """``pattern`` read as ECMA-262 (without flags), compiled as a Python regex; raises
    :class:`Untranslatable` where the translation is not sure of the meaning."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            piece, i = _escape(pattern, i, False)
        elif c == "[":
            piece, i = _class(pattern, i)
        elif c == "(":
            piece, i = _group(pattern, i)
        elif c == ".":
            piece, i = _DOT, i + 1
        elif c == "$":
            piece, i = "\\Z", i + 1  # ECMA-262 without the m flag: the end of the input only
        else:
            piece, i = c, i + 1
        out.append(piece)
    try:
        return re.compile("".join(out), re.ASCII)
    except (re.error, OverflowError, RecursionError) as exc:
        raise Untranslatable(f"not a regex Python can run the same way: {exc}") from None


def ecma_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (ECMA-262) matches somewhere in ``text``; a pattern the
    translation does not cover is matched by Python's ``re``, as python-jsonschema does."""
    try:
        compiled = translate(pattern)
    except Untranslatable:
        return re.search(pattern, text) is not None
    return compiled.search(text) is not None


# --- the keywords, as python-jsonschema's own but with ECMA-262 patterns, each on its own


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not ecma_search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        for k, v in instance.items():
            if ecma_search(patrn, k):
                yield from validator.descend(v, subschema, path=k, schema_path=patrn)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The additional properties, each ``patternProperties`` pattern matched on its own
    (python-jsonschema joins them into one regex, renumbering backreferences)."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [k for k in instance if k not in properties and not any(ecma_search(p, k) for p in patterns)]


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        yield ValidationError(f"Additional properties are not allowed ({', '.join(map(repr, sorted(extras)))})")


ECMA_KEYWORDS: Final = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@functools.cache
def _extended(base: Any) -> Any:
    import jsonschema

    return jsonschema.validators.extend(base, ECMA_KEYWORDS)  # type: ignore[no-untyped-call]


def validator_class(schema: Mapping[str, Any]) -> Any:
    """The jsonschema validator class for ``schema``'s draft, with ECMA-262 ``pattern``,
    ``patternProperties`` and ``additionalProperties`` (:data:`ECMA_KEYWORDS`): what the
    oracle and the reference implementation validate with."""
    import jsonschema

    return _extended(jsonschema.validators.validator_for(schema))
