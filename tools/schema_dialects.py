"""Measure the oracle's JSON Schema reading against other validators, and print where they differ.

``PYTHONPATH=<folder holding callsafe> python tools/schema_dialects.py``

Every schema the generators use (the catalog's traces, their catalog changes, the rich and
plain domains) plus the dialect probes of ``tests/test_schema_dialect.py``, each against the
argument values the traces carry and a set of values where validators are known to differ
(``$`` before a final newline, Unicode digits, line terminators for ``.``, integers beyond
2**53, ``1.0`` as an integer, backreferences in ``patternProperties``). Validators: the oracle
(:func:`callsafe.model.system.schema_errors`), python-jsonschema (Python's ``re``),
jsonschema-rs when installed, and, when ``node`` is here, @cfworker/json-schema (a 2020-12
validator on JavaScript's ECMA-262 RegExp, in adapters/node/node_modules; ajv is not
installed there and cannot be fetched offline). Prints each disagreement with the oracle; a
disagreement with an ECMA-262 validator is a false alarm to fix, one with python-jsonschema
is the documented dialect difference (docs/json-schema-dialect.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from callsafe.generators.catalog import CATALOG
from callsafe.generators.domain import PLAIN_SCHEMA, SCHEMA
from callsafe.model.system import schema_errors
from callsafe.model.vocabulary import Fragment, ToolChanged, ToolSpec

ROOT = Path(__file__).resolve().parent.parent
PROBE_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}}},
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^\\d+$"}}},
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a.c$"}}},
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^\\w+$"}}},
    {"type": "object", "patternProperties": {"^(a)\\1$": {}, "^(b)\\1$": {}}, "additionalProperties": False},
    {"type": "object", "properties": {"v": {"type": "integer", "maximum": 9007199254740992}}},
]
PROBE_VALUES: list[Any] = [
    {"s": "10:00"},
    {"s": "10:00\n"},
    {"s": "\u0663"},
    {"s": "a\rc"},
    {"s": "a\u2028c"},
    {"s": "caf\u00e9"},
    {"aa": 1},
    {"bb": 1},
    {"ab": 1},
    {"v": 9007199254740993},
    {"v": 1.0},
    {"v": 10**30},
]


def schemas() -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    candidates: list[Any] = [SCHEMA, PLAIN_SCHEMA, *PROBE_SCHEMAS]
    for scenario in CATALOG:
        candidates += [spec.schema for spec in scenario.trace.tools.values()]
        candidates += [e.schema for e in scenario.trace.events if isinstance(e, ToolChanged) and e.schema]
    for schema in candidates:
        plain = json.loads(json.dumps(schema))
        found.setdefault(json.dumps(plain, sort_keys=True), plain)
    return list(found.values())


def values() -> list[Any]:
    out: dict[str, Any] = {}
    for scenario in CATALOG:
        texts: dict[str, str] = {}
        for e in scenario.trace.events:
            if isinstance(e, Fragment):
                texts[e.call] = texts.get(e.call, "") + e.text
        for text in texts.values():
            try:
                value = json.loads(text)
            except ValueError:
                continue
            out.setdefault(json.dumps(value, sort_keys=True), value)
    for value in PROBE_VALUES:
        out.setdefault(json.dumps(value, sort_keys=True), value)
    return list(out.values())


def node_answers(pairs: list[tuple[dict[str, Any], Any]]) -> list[bool] | None:
    module = ROOT / "adapters" / "node" / "node_modules" / "@cfworker" / "json-schema"
    if shutil.which("node") is None or not module.exists():
        return None
    script = (
        f"const {{Validator}} = require({json.dumps(str(module))});"
        "const pairs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(pairs.map(([s, v]) => new Validator(s, '2020-12', false).validate(v).valid)));"
    )
    done = subprocess.run(["node", "-e", script], input=json.dumps(pairs), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"@cfworker/json-schema failed: {done.stderr.strip()[:300]}")
        return None
    return list(json.loads(done.stdout))


def main() -> int:
    pairs = [(s, v) for s in schemas() for v in values()]
    oracle = [schema_errors(ToolSpec(schema=s), v) is None for s, v in pairs]
    columns: dict[str, list[bool]] = {
        "python-jsonschema": [jsonschema.validators.validator_for(s)(s).is_valid(v) for s, v in pairs]
    }
    try:
        import jsonschema_rs  # type: ignore[import-not-found]

        columns["jsonschema-rs"] = [jsonschema_rs.validator_for(s).is_valid(v) for s, v in pairs]
    except ImportError:
        print("jsonschema-rs: not installed (pip install jsonschema-rs)")
    cf = node_answers(pairs)
    if cf is not None:
        columns["@cfworker/json-schema (ECMA-262)"] = cf
    print(f"{len(pairs)} (schema, value) pairs from {len(schemas())} schemas and {len(values())} values")
    for name, answers in columns.items():
        differ = [(s, v, o) for (s, v), o, a in zip(pairs, oracle, answers, strict=True) if o != a]
        print(f"{name}: {len(differ)} disagreements with the oracle")
        for s, v, o in differ:
            print(f"  oracle {'valid' if o else 'invalid'}: {json.dumps(s)[:120]} <- {json.dumps(v)[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
