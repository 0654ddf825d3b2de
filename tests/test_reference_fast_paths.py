"""The fast paths decide exactly what the slow, obvious code decides.

Every speed-up of the assembly path (see ``bench/assembly.py``) skips work it can prove
unnecessary; each proof is checked here against the code it replaced, kept below as the
reference: ``strict_parse`` (duplicate keys through ``dict``, the surrogate walk only
when the text has a surrogate escape, one shared decoder), ``schema_errors`` (one
validator per schema), the buffer's ``fresh_from`` (a position at or past it is new),
and the core's enum namespaces (the very members of the model's enums).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callsafe.model.lifecycle import CallEvent, State
from callsafe.model.system import ParseFailure, schema_errors, strict_parse
from callsafe.model.vocabulary import ToolSpec
from callsafe.reference_impl import core
from callsafe.reference_impl.buffer import ArgumentBuffer

# ------------------------------------------------------------------------------------
# the replaced code, verbatim: the reference the fast paths must agree with
# ------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ParseFailure(f"non-standard JSON constant {name}")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ParseFailure("duplicate key in object")
        out[k] = v
    return out


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def reference_strict_parse(text: str) -> dict[str, Any]:
    if _has_lone_surrogate(text):
        raise ParseFailure("lone surrogate in arguments")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except ParseFailure:
        raise
    except (ValueError, RecursionError) as exc:
        raise ParseFailure(type(exc).__name__ + ": " + (getattr(exc, "msg", None) or str(exc)[:80])) from None
    if not isinstance(value, dict):
        raise ParseFailure("arguments must be a JSON object")
    try:
        lone = _has_lone_surrogate(value)
    except RecursionError:
        raise ParseFailure("arguments nested too deep") from None
    if lone:
        raise ParseFailure("lone surrogate in arguments")
    return value


def reference_schema_errors(spec: ToolSpec, arguments: Any) -> str | None:
    validator_cls = jsonschema.validators.validator_for(spec.schema)
    error = jsonschema.exceptions.best_match(validator_cls(spec.schema).iter_errors(arguments))
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"schema: {error.validator} at {path}"


def _outcome(parse: Any, text: Any) -> tuple[str, Any]:
    try:
        return ("ok", parse(text))
    except ParseFailure as exc:
        return ("failure", str(exc))
    except RecursionError:
        return ("recursion", None)


# ------------------------------------------------------------------------------------
# strict_parse
# ------------------------------------------------------------------------------------

SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
STRINGS = st.text(
    alphabet=st.one_of(st.characters(codec=None, exclude_categories=()), SURROGATES, st.sampled_from('\\"/u')),
    max_size=12,
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(STRINGS, inner, max_size=3),
    max_leaves=10,
)
ESCAPES = st.sampled_from(
    [
        "\\ud800",
        "\\uDFFF",
        "\\ud83d\\ude00",
        "\\uD83D",
        "\\ude00\\ud83d",
        "\\\\ud800",
        "\\\\\\ud800",
        "\\u00e9",
        "\\u0041",
        "\\uDbFf",
        "\\u",
        "\\ud8",
        "\ud800",
        "\ufeff",
    ]
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """JSON texts (ASCII or not, with escapes of every kind) and near-JSON: duplicate
    keys, spliced escapes, NaN, a byte-order mark, leading whitespace (and a space JSON does
    not skip), trailing data, a cut-off text, a non-object."""
    value = draw(VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = json.dumps({"k": value, "e": "@"}, ensure_ascii=draw(st.booleans()))
        text = text.replace("@", draw(ESCAPES))
    mutation = draw(st.sampled_from(["none", "duplicate", "bom", "trailing", "leading", "cut", "nan", "wrap"]))
    if mutation == "duplicate":
        text = '{"a": 1, "b": ' + text + ', "a": 2}'
    elif mutation == "bom":
        text = "\ufeff" + text
    elif mutation == "trailing":
        text = text + draw(st.sampled_from(["{}", " ", "x", "\n"]))
    elif mutation == "leading":
        text = draw(st.sampled_from([" ", "\t\n", "\r ", "\u00a0"])) + text
    elif mutation == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif mutation == "nan":
        text = '{"x": ' + draw(st.sampled_from(["NaN", "Infinity", "-Infinity"])) + "}"
    elif mutation == "wrap":
        text = '{"v": ' + text + "}"
    return text


@settings(max_examples=600, deadline=None)
@given(texts())
def test_strict_parse_agrees_with_the_reference(text: str) -> None:
    assert _outcome(strict_parse, text) == _outcome(reference_strict_parse, text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"\\ud800"}',  # a lone high surrogate escape
        '{"\\udc00":1}',  # a lone low surrogate escape, in a key
        '{"a":"\\ud83d\\ude00"}',  # a pair: one astral character, fine
        '{"a":"\\\\ud800"}',  # an escaped backslash: no surrogate (the walk runs, finds none)
        '{"a":"\ud800"}',  # a raw lone surrogate in the text
        '{"a":["x",{"b":"\\uDABC"}]}',  # deep, upper case
        '{"a":1,"a":1}',
        '\ufeff{"a":1}',
        '{"a":NaN}',
        '{"a":' + "[" * 60 + "]" * 60 + "}",  # few containers: not walked, and nothing to find
        '{"a":' + "[" * 150 + '"\\ud800"' + "]" * 150 + "}",  # deep, with a surrogate
        '{"a":' + "[" * 500 + "]" * 500 + "}",  # deep enough that the walk runs out of stack
        '{"a":' + "[" * 2000 + "]" * 2000 + "}",  # too deep for the parser itself
        "[1]",
        "",
        '{"a":1}}',
    ],
)
def test_strict_parse_edge_cases_agree(text: str) -> None:
    assert _outcome(strict_parse, text) == _outcome(reference_strict_parse, text)


def test_strict_parse_accepts_bytes_like_json_loads() -> None:
    for text in (b'{"a":"\\ud800"}', b'{"a":1}', b"\xef\xbb\xbf{}", b'{"a":1,"a":2}'):
        assert _outcome(strict_parse, text) == _outcome(reference_strict_parse, text)


# ------------------------------------------------------------------------------------
# schema_errors
# ------------------------------------------------------------------------------------

SCHEMAS = [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "maximum": 3}}},
    {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^x"}, "l": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False,
    },
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"n": {"enum": [1, "x"]}}},
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(range(len(SCHEMAS))), st.dictionaries(st.sampled_from(["a", "s", "l", "n", "z"]), VALUES))
def test_schema_errors_agrees_with_a_fresh_validator(index: int, arguments: dict[str, Any]) -> None:
    spec = ToolSpec(schema=SCHEMAS[index])
    assert schema_errors(spec, arguments) == reference_schema_errors(spec, arguments)


def test_schema_errors_never_uses_a_dead_schemas_validator() -> None:
    """The cache is keyed by identity and holds each schema (so its id is not reused while
    cached); past its bound it starts again. Every schema gets its own validator."""
    for i in range(300):
        schema: dict[str, Any] = {"type": "object", "properties": {"a": {"maximum": i}}}
        assert schema_errors(ToolSpec(schema=schema), {"a": i}) is None
        assert schema_errors(ToolSpec(schema=schema), {"a": i + 1}) == "schema: maximum at a"
        del schema  # freed unless cached: a later schema may get its id


# ------------------------------------------------------------------------------------
# the buffer's fresh_from and the core's enum namespaces
# ------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=14, unique=True), st.integers(0, 3), st.booleans())
def test_positions_from_fresh_from_on_are_new(positions: list[int], scan_every: int, doom: bool) -> None:
    buffer = ArgumentBuffer(scan_every=scan_every)
    for n, position in enumerate(positions):
        buffer.add(position, "}{" if doom and n == 1 else f'{{"p{position}":0,')
        for probe in range(-2, 16):
            seen = buffer.seen(probe, "x")
            if probe >= buffer.fresh_from:
                assert seen == (False, False)
            if probe in positions[: n + 1]:
                assert probe < buffer.fresh_from and seen == (False, True)
    buffer.seal()
    for probe in range(16):
        if probe >= buffer.fresh_from:
            assert buffer.seen(probe, "x") == (False, False)


def test_core_namespaces_hold_the_models_members() -> None:
    for member in State:
        assert getattr(core.S, member.name) is member
    for event in CallEvent:
        assert getattr(core.E, event.name) is event
