"""JSON Schema ``pattern`` as the standard says (issue 29): the oracle reads patterns as
ECMA-262, and the reference implementation's fast path agrees with it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from callsafe.model.ecma_regex import Untranslatable, ecma_search, translate
from callsafe.model.system import schema_errors
from callsafe.model.vocabulary import ToolSpec

PATTERNS = [
    "^abc$",
    "^\\d+$",
    "^\\w+$",
    "\\bword\\b",
    "^a.c$",
    "^\\s$",
    "^\\S+$",
    "^[\\d\\s]+$",
    "^[^\\d]+$",
    "^(?<y>\\d{2})-\\k<y>$",
    "^(a)\\1$",
    "[]",
    "^x\\v$",
    "^[a-z]{2,3}$",
]
TEXTS = ["abc", "abc\n", "123", "\u0663", "word", "a word.", "a\rc", "a\u2028c", "\ufeff", "\u00a0", "x\x0b"]
TEXTS += ["12-12", "12-13", "aa", "ab", "\x1c", " ", "caf\u00e9", "ab\n", "abc\r"]


def node_truth(pairs: list[tuple[str, str]]) -> list[bool]:
    """What JavaScript's RegExp (ECMA-262, with the u flag as ajv uses it) answers."""
    script = (
        "const p=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(p.map(([r,s])=>new RegExp(r,'u').test(s))))"
    )
    out = subprocess.run(["node", "-e", script], input=json.dumps(pairs), capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node for ECMA-262's own answer")
def test_patterns_match_as_ecma_262_does() -> None:
    pairs = [(p, t) for p in PATTERNS for t in TEXTS]
    truth = node_truth(pairs)
    wrong = [(p, t, want) for (p, t), want in zip(pairs, truth, strict=True) if ecma_search(p, t) != want]
    assert not wrong


def test_pythons_own_readings_are_not_the_oracles() -> None:
    """Where Python's re and ECMA-262 differ, the oracle follows ECMA-262."""
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^abc$"}}}
    assert schema_errors(ToolSpec(schema=schema), {"q": "abc\n"}) == "schema: pattern at q"
    digits = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^\\d+$"}}}
    assert schema_errors(ToolSpec(schema=digits), {"q": "\u0663"}) is not None
    assert schema_errors(ToolSpec(schema=digits), {"q": "3"}) is None


def test_pattern_properties_are_matched_each_on_its_own() -> None:
    """python-jsonschema joins them into one regex to find additional properties, which
    renumbers the second pattern's backreference: ``bb`` was an additional property."""
    schema = {"type": "object", "patternProperties": {"^(a)\\1$": {}, "^(b)\\1$": {}}, "additionalProperties": False}
    assert schema_errors(ToolSpec(schema=schema), {"bb": 1}) is None
    assert schema_errors(ToolSpec(schema=schema), {"bc": 1}) == "schema: additionalProperties at (root)"


def test_what_the_translation_cannot_say_is_refused_not_guessed() -> None:
    for pattern in ("\\p{L}", "(?i)abc", "[\\D]", "\\Z", "\\u{1F600}"):
        with pytest.raises(Untranslatable):
            translate(pattern)


def test_the_reference_implementation_agrees_with_the_oracle_on_dialect_cases() -> None:
    from callsafe.reference_impl.schema_check import SchemaCheck

    cases = [
        ({"type": "object", "properties": {"q": {"type": "string", "pattern": "^abc$"}}}, {"q": "abc\n"}),
        ({"type": "object", "properties": {"q": {"type": "string", "pattern": "^\\d+$"}}}, {"q": "\u0663"}),
        ({"type": "object", "properties": {"q": {"type": "string", "pattern": "^a.c$"}}}, {"q": "a\rc"}),
    ]
    for schema, arguments in cases:
        spec = ToolSpec(schema=schema)
        check = SchemaCheck()
        for _ in range(40):  # past the compile threshold: the compiled fast path answers too
            assert (check(spec, arguments) is None) == (schema_errors(spec, arguments) is None)
