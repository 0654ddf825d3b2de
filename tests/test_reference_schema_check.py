"""The core's schema check answers exactly what the model's ``schema_errors`` answers.

:mod:`callsafe.reference_impl.schema_check` lets a compiled validator (fastjsonschema) say
"valid" for schemas made of the keywords both dialects share, and leaves every other
answer to jsonschema. That is sound only if, whenever the compiled validator accepts an
instance, jsonschema accepts it too. Checked here on random schemas over those keywords
(and over keywords outside them, which must not be compiled), on random instances built
to hit the edges where the dialects differ, and on the schemas the project's traces use.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from bench_modules import bench_module
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from callsafe.generators import catalog, exhaustive
from callsafe.model.system import schema_errors
from callsafe.model.vocabulary import ToolSpec
from callsafe.reference_impl import schema_check
from callsafe.reference_impl.schema_check import COMPILE_AFTER, SchemaCheck, compile_quick

# ------------------------------------------------------------------------------------
# strategies: schemas over the shared keywords (and a few outside them), instances
# ------------------------------------------------------------------------------------

# property names that stress fastjsonschema's code generation (quotes, backslashes,
# names that collapse to the same Python variable, non-ASCII, braces, empty)
NAMES = st.sampled_from(
    ["a", "b", "a_b", "ab", "a-b", "", "é", 'q"', "back\\slash", "{x}", "n\n", "1", "aa", "bb", "a\n"]
)
# a ``$`` that is last (fine), inside a class or a lookahead (fastjsonschema's ``\Z``
# rewrite would change them), escaped, \d (Unicode digits in Python's re)
PATTERNS = st.sampled_from(
    ["^a", "a$", "^[0-2][0-9]:[0-5][0-9]$", r"^\d+$", "b", "^$", "(?!a$)", "a(?!$)", "[$]", r"a\$", "x|y$"]
)
# patterns jsonschema joins into one regex (patternProperties): backreferences, named
# groups, global flags change or break in the join
JOINED = st.one_of(PATTERNS, st.sampled_from(["(?m)^a$", r"(a)\1", r"(b)\1", "(?P<g>a)", "(?i:A)"]))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 2.5, 0.3, 1e300, -0.0, 3]),
    st.sampled_from(["", "a", "ab", "a\n", "10:00", "10:00\n", "٣", "3", "x", "y\n", "b$", "é"]),
)
NUMBERS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 2.0, 1e300]))
COUNTS = st.integers(0, 3)
TYPES = st.sampled_from(["null", "boolean", "object", "array", "number", "integer", "string"])

# keyword -> the strategy for its value (plain values; subschemas are drawn below)
PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "type": TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True),
    "enum": st.lists(SCALARS, min_size=1, max_size=4),
    "const": SCALARS,
    "minLength": COUNTS,
    "maxLength": COUNTS,
    "pattern": JOINED,
    "minimum": NUMBERS,
    "maximum": NUMBERS,
    "exclusiveMinimum": NUMBERS,
    "exclusiveMaximum": NUMBERS,
    "minItems": COUNTS,
    "maxItems": COUNTS,
    "uniqueItems": st.booleans(),
    "minProperties": COUNTS,
    "maxProperties": COUNTS,
    "required": st.lists(NAMES, max_size=3, unique=True),
    "format": st.sampled_from(["email", "date", "uri", "ipv4"]),
    "default": SCALARS,
    "description": st.just("documentation only"),
}
# keywords whose value holds subschemas: one, a list, or a map (names or patterns)
ONE = ["additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else"]
LIST = ["allOf", "anyOf", "oneOf"]
MAP = ["properties", "patternProperties"]
# keywords outside the shared set (and an enum of containers, where Python's == says
# [1] == [True]): a schema holding any of them is never compiled
OUTSIDE: dict[str, Any] = {
    "multipleOf": 0.1,
    "prefixItems": [{"type": "integer"}],
    "dependentRequired": {"a": ["b"]},
    "enum": [{"a": 1}, [1]],
    "$ref": "#/$defs/n",
    "minContains": 2,
    "unevaluatedProperties": False,
}


@st.composite
def subschemas(draw: st.DrawFn, depth: int) -> Any:
    """A schema of a few keywords, nested at most ``depth`` more levels (drawn keyword by
    keyword: a fixed dictionary with every optional keyword is far slower to generate)."""
    if draw(st.integers(0, 6)) == 0:
        return draw(st.booleans())
    keywords = list(PLAIN) + (ONE + LIST + MAP if depth > 0 else [])
    schema: dict[str, Any] = {}
    for keyword in draw(st.lists(st.sampled_from(keywords), max_size=4, unique=True)):
        if keyword in PLAIN:
            schema[keyword] = draw(PLAIN[keyword])
        elif keyword in ONE:
            schema[keyword] = draw(subschemas(depth - 1))
        elif keyword in LIST:
            schema[keyword] = [draw(subschemas(depth - 1)) for _ in range(draw(st.integers(1, 2)))]
        else:
            names = NAMES if keyword == "properties" else JOINED
            schema[keyword] = {draw(names): draw(subschemas(depth - 1)) for _ in range(draw(st.integers(0, 3)))}
    return schema


@st.composite
def schemas(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A schema, and whether it holds a keyword outside the shared set at its root."""
    schema = draw(subschemas(2))
    if not isinstance(schema, dict):
        schema = {"not": schema}
    outside = draw(st.sampled_from(sorted(OUTSIDE))) if draw(st.integers(0, 5)) == 0 else None
    if outside is not None:
        schema[outside] = OUTSIDE[outside]
        if outside == "$ref":
            schema["$defs"] = {"n": {"type": "integer", "maximum": 1}}
    if draw(st.booleans()):
        schema["$schema"] = draw(
            st.sampled_from(["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#"])
        )
    return schema, outside is not None or "draft-07" in schema.get("$schema", "")


INSTANCES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


def _js_valid(schema: dict[str, Any], instance: Any) -> bool:
    return bool(jsonschema.validators.validator_for(schema)(schema).is_valid(instance))


def _outcome(function: Any, *args: Any) -> tuple[str, Any]:
    """What a call returns, or which exception it raises (jsonschema raises on some
    schemas that its metaschema accepts, e.g. patterns it cannot join)."""
    try:
        return ("returned", function(*args))
    except Exception as exc:
        return ("raised", type(exc).__name__)


def _quick_valid(quick: Any, instance: Any) -> bool:
    try:
        quick(instance)
    except Exception:
        return False
    return True


def _valid_schema(schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


# ------------------------------------------------------------------------------------
# the property: the compiled validator never accepts what jsonschema rejects
# ------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas(), st.lists(INSTANCES, min_size=1, max_size=5))
def test_compiled_validator_accepts_only_what_jsonschema_accepts(
    drawn: tuple[dict[str, Any], bool], instances: list[Any]
) -> None:
    schema, outside = drawn
    assume(_valid_schema(schema))
    quick = compile_quick(schema)
    if outside:
        assert quick is None  # never compiled: jsonschema alone validates
    spec = ToolSpec(schema=schema)
    check = SchemaCheck()
    validator = jsonschema.validators.validator_for(schema)(schema)
    for instance in instances:
        before = copy.deepcopy(instance)
        if quick is not None and _quick_valid(quick, instance):
            assert _outcome(validator.is_valid, instance) == ("returned", True), (schema, instance)
        assert instance == before  # never a default filled in
        assert _outcome(check, spec, instance) == _outcome(schema_errors, spec, instance)


# ------------------------------------------------------------------------------------
# where the dialects differ: the answer is still jsonschema's
# ------------------------------------------------------------------------------------

SLOT = {"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}}}


@pytest.mark.parametrize(
    ("schema", "instance", "compiled"),
    [
        # ``$`` matches before a final newline in Python's re; fastjsonschema's ``\Z`` does not
        (SLOT, {"time": "10:00\n"}, True),
        # a ``$`` inside a lookahead: the rewrite would loosen it, so it is not compiled
        ({"type": "string", "pattern": "a(?!$)"}, "a\n", False),
        # float multipleOf: fastjsonschema divides decimals, jsonschema floats
        ({"type": "number", "multipleOf": 0.1}, 0.3, False),
        ({"type": "number", "multipleOf": 3}, 1e300, False),
        # draft 7 ignores siblings of $ref; 2020-12 applies them
        ({"$ref": "#/$defs/n", "maximum": 1, "$defs": {"n": {"type": "integer"}}}, 5, False),
        # 2020-12 keywords fastjsonschema does not know
        ({"type": "array", "prefixItems": [{"type": "integer"}]}, ["x"], False),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
        # patternProperties joined by jsonschema into one regex: a backreference renumbered
        ({"patternProperties": {r"(a)\1": {}, r"(b)\1": {}}, "additionalProperties": False}, {"bb": 1}, False),
        # an enum of containers: Python's == says [1] == [True]
        ({"enum": [[1]]}, [True], False),
        # a draft-07 schema keeps jsonschema's draft-07 reading
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer"}, 1.0, False),
    ],
)
def test_where_the_dialects_differ_the_answer_is_jsonschemas(
    schema: dict[str, Any], instance: Any, compiled: bool
) -> None:
    quick = compile_quick(schema)
    assert (quick is not None) is compiled
    spec = ToolSpec(schema=schema)
    check = SchemaCheck()
    for _ in range(COMPILE_AFTER + 2):  # past the point where a compiled validator takes over
        assert check(spec, instance) == schema_errors(spec, instance)


def test_the_slot_schema_reads_dollar_as_ecma_262_compiled_or_not() -> None:
    """``$`` before a final newline: Python's re (python-jsonschema) matches, ECMA-262
    (JSON Schema 2020-12, the oracle: callsafe.model.ecma_regex) does not. The compiled
    validator (``\\Z``) and the check agree with the oracle: invalid."""
    quick = compile_quick(SLOT)
    assert quick is not None
    assert not _quick_valid(quick, {"time": "10:00\n"})
    assert _js_valid(SLOT, {"time": "10:00\n"})  # python-jsonschema's own reading differs
    assert SchemaCheck()(ToolSpec(schema=SLOT), {"time": "10:00\n"}) == schema_errors(
        ToolSpec(schema=SLOT), {"time": "10:00\n"}
    )
    assert schema_errors(ToolSpec(schema=SLOT), {"time": "10:00\n"}) is not None


# ------------------------------------------------------------------------------------
# the schemas the project's traces use: compiled, and agreeing in both directions
# ------------------------------------------------------------------------------------

MEETING = bench_module("assembly").BOOK_MEETING.schema  # the benchmark's many-calls tool
IN_USE = [catalog.BOOK, catalog.PAY, catalog.LOOKUP, catalog.WRITE, exhaustive.SCHEMA, MEETING, {"type": "object"}]
FIELDS = ["day", "time", "room", "attendees", "minutes", "note", "amount", "to", "card", "q", "path", "content", "v"]
FIELD_VALUES = st.one_of(
    SCALARS,
    st.sampled_from(["Mon", "Fri", "Sun", "09:30", "9:30", "29:99", "B-201", "x" * 17, 4, 5, 480, 481, 30.0, 30.5]),
    st.lists(st.sampled_from(["ana@example.com", 1, None]), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(IN_USE))), st.dictionaries(st.sampled_from(FIELDS), FIELD_VALUES, max_size=6))
def test_schemas_in_use_are_compiled_and_agree(index: int, arguments: dict[str, Any]) -> None:
    schema = IN_USE[index]
    quick = compile_quick(schema)
    assert quick is not None
    # no string here ends in a newline: the two dialects then agree both ways
    assert _quick_valid(quick, arguments) == _js_valid(schema, arguments)
    spec = ToolSpec(schema=schema)
    assert SchemaCheck()(spec, arguments) == schema_errors(spec, arguments)


# ------------------------------------------------------------------------------------
# when the compiled validator is built, and that it is really used
# ------------------------------------------------------------------------------------


def test_compiled_only_after_enough_validations_then_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_check, "_REGISTRY", {})
    schema = json.loads(json.dumps(MEETING))
    schema["description"] = "a schema no other test registered"
    spec = ToolSpec(schema=schema)
    check = SchemaCheck()
    good = {"day": "Mon", "time": "09:30", "room": "B-201"}
    compiled: list[Any] = []
    real = schema_check.compile_quick

    def counting(s: Any) -> Any:
        compiled.append(s)
        return real(s)

    monkeypatch.setattr(schema_check, "compile_quick", counting)
    for _ in range(COMPILE_AFTER - 1):
        assert check(spec, good) is None
    assert compiled == []
    assert check(spec, good) is None
    assert len(compiled) == 1
    # from now on the compiled validator answers: jsonschema is not asked for a valid call
    calls: list[Any] = []
    monkeypatch.setattr(schema_check, "schema_errors", lambda s, a: calls.append(a) or schema_errors(s, a))
    assert check(spec, good) is None
    assert calls == []
    assert check(spec, {**good, "extra": 1}) == "schema: additionalProperties at (root)"
    assert len(calls) == 1
    # another core, another declaration object with the same schema: shares the compiled one
    assert SchemaCheck()(ToolSpec(schema=json.loads(json.dumps(schema))), good) is None
    assert len(compiled) == 1


def test_pattern_properties_jsonschema_cannot_join_are_matched_each_on_its_own() -> None:
    """python-jsonschema joins ``patternProperties`` into one regex and refuses a global
    flag that is not at its start; the oracle (callsafe.model.ecma_regex) matches each
    pattern on its own, as the standard does, and the check answers the same."""
    schema = {"patternProperties": {"a": {}, "(?m)^b$": {}}, "additionalProperties": False}
    assert compile_quick(schema) is None
    spec = ToolSpec(schema=schema)
    assert _outcome(SchemaCheck(), spec, {"x": 1}) == _outcome(schema_errors, spec, {"x": 1})
    assert schema_errors(spec, {"x": 1}) == "schema: additionalProperties at (root)"
    assert schema_errors(spec, {"b": 1}) is None
