"""Edge families for data classes no other generator holds (issue 29's held-out misses).

Why: a held-out set of subtle broken implementations slipped through because no trace
carried the data their bug needs. Each family here is a class, reached by every default
certification through the ``edges`` generator (:data:`callsafe.generators.edges.FAMILIES`):

* ``json-dialect``: arguments holding ``NaN``, ``Infinity`` or ``-Infinity`` (Python's
  ``json`` accepts them, the JSON grammar of RFC 8259 does not: the spec's malformed data,
  which must stay inert), in a member no schema constrains so that a lenient parser's call
  would pass validation; and integers beyond a double's 53 bits and long decimals (JSON
  numbers have no precision limit: a parser that reads them as doubles executes other
  arguments);
* ``tool-identity``: calls naming a tool that differs from a declared one only by case or
  by Unicode normalisation (NFC vs NFD, a compatibility form NFKC folds): the catalog's
  names are identities, so such a call names an unknown tool and must not run as the
  declared one;
* ``confirmations``: several calls of one response awaiting confirmation at once,
  answered one by one (approve one, deny another, leave one unanswered, in both orders):
  one answer must not be taken for all;
* ``interleaved-text``: assistant text deltas between a call's argument fragments (text
  that itself looks like JSON or like the arguments' missing piece) where the arguments
  alone still parse: text is output, never arguments.

Expected verdicts are never set here: the oracle judges every trace.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any, Final

from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import ToolSpec, Trace

__all__ = ["DATA_FAMILIES"]

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["v"],
    "properties": {"v": {"type": "integer"}, "memo": {"type": "string"}},
}
NONSTANDARD: Final = ("NaN", "Infinity", "-Infinity")
# integers a double cannot hold (2**53 + 1, one far larger, a negative one), a decimal
# longer than a double's 17 significant digits, and a number beyond a double's range
PRECISE: Final = ("9007199254740993", "123456789012345678901234567890", "-9007199254740995")
DECIMALS: Final = ("0.10000000000000000555111512312578270211815834045410156250001", "1e400")


def _tools(confirm: bool = False) -> dict[str, ToolSpec]:
    return {"note": ToolSpec(schema=_SCHEMA, confirm=confirm)}


def _json_dialect() -> Iterator[Trace]:
    for constant in NONSTANDARD:
        for where in ("an unconstrained member", "the integer member", "an array"):
            doc = {
                "an unconstrained member": '{"v":1,"n":' + constant + "}",
                "the integer member": '{"v":' + constant + "}",
                "an array": '{"v":1,"xs":[1,' + constant + "]}",
            }[where]
            name = f"edges/json-dialect: {constant} in {where}"
            b = TraceBuilder(tools=_tools(), name=name).turn("t1")
            cut = doc.index(constant) + 1  # the constant split across fragments
            b.call("a", "note", doc[:cut], doc[cut:]).call("b", "note", '{"v":2}')
            yield b.build()
    for number in (*PRECISE, *DECIMALS):
        for member in ("n", "v"):
            if member == "v" and not number.lstrip("-").isdigit():
                continue  # v must be an integer: a decimal there only fails the schema
            name = f"edges/json-dialect: {number[:24]} in {member!r}"
            b = TraceBuilder(tools=_tools(), name=name).turn("t1")
            doc = '{"v":1,"n":' + number + "}" if member == "n" else '{"v":' + number + "}"
            yield b.call("a", "note", doc[:8], doc[8:]).build()


def _variants(name: str) -> list[tuple[str, str]]:
    out = [("upper case", name.upper()), ("title case", name.title())]
    for form in ("NFD", "NFKC", "NFC"):
        other = unicodedata.normalize(form, name)
        if other != name:
            out.append((form, other))
    return out


def _tool_identity() -> Iterator[Trace]:
    # declared names: plain ASCII, a precomposed é (NFC; NFD decomposes it), a ligature
    # and a full-width letter (NFKC folds them), a decomposed one (NFC composes it)
    for declared in ("note", "caf\u00e9", "\ufb01le", "\uff4eote", "cafe\u0301"):
        for how, called in _variants(declared):
            if called == declared:
                continue
            name = f"edges/tool-identity: {declared!r} called as {called!r} ({how})"
            tools = {declared: ToolSpec(schema=_SCHEMA)}
            b = TraceBuilder(tools=tools, name=name).turn("t1")
            b.call("a", called, '{"v":1}').call("b", declared, '{"v":2}')
            yield b.build()
        # both declared: each call runs as the tool it names, never the other
        for how, other in _variants(declared)[:2]:
            name = f"edges/tool-identity: {declared!r} and {other!r} ({how}) both declared"
            tools = {declared: ToolSpec(schema=_SCHEMA), other: ToolSpec(schema=_SCHEMA, confirm=True)}
            b = TraceBuilder(tools=tools, name=name).turn("t1")
            yield b.call("a", other, '{"v":1}').call("b", declared, '{"v":2}').build()


def _confirmations() -> Iterator[Trace]:
    answers = (
        ("approve the first only", [("a", True)]),
        ("approve the last only", [("c", True)]),
        ("deny the first, approve the second", [("a", False), ("b", True)]),
        ("approve the second, deny the first", [("b", True), ("a", False)]),
        ("deny one, leave the others", [("b", False)]),
        ("approve all one by one", [("a", True), ("b", True), ("c", True)]),
    )
    for what, given in answers:
        for ended in (False, True):
            name = f"edges/confirmations: three awaiting in one response, {what}"
            name += ", after the response ended" if ended else ""
            b = TraceBuilder(tools=_tools(confirm=True), name=name).turn("t1")
            for call in "abc":
                b.open(call, "note")
            for n, call in enumerate("abc"):
                b.fragment(call, '{"v":' + str(n + 1) + "}").terminal(call)
            if ended:
                b.response_end()
            for call, approved in given:
                b.confirm(call, approved)
            yield b.build()


def _interleaved_text() -> Iterator[Trace]:
    texts = ('{"v":9}', "}", '"memo":"x"}', "Let me check that for you. ")
    for text in texts:
        for where in ("between fragments", "before the first fragment", "after the last fragment"):
            name = f"edges/interleaved-text: {text!r} {where}"
            b = TraceBuilder(tools=_tools(), name=name).turn("t1").open("a", "note")
            if where == "before the first fragment":
                b.text(text)
            b.fragment("a", '{"v":1,')
            if where == "between fragments":
                b.text(text)
            b.fragment("a", '"memo":"ok"}')
            if where == "after the last fragment":
                b.text(text)
            yield b.terminal("a").build()


DATA_FAMILIES: Final = {
    "json-dialect": _json_dialect,
    "tool-identity": _tool_identity,
    "confirmations": _confirmations,
    "interleaved-text": _interleaved_text,
}
