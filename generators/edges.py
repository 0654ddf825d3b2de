"""Edge traces: the data shapes the state graph's traces never hold, each as a family.

Why a generator of its own: the walks, the coverage suite and the exhaustive enumeration
concretise small documents (``{"v":100}`` and its rich variants, a few dozen bytes), one
schema of two keywords and events that follow the state graph's steps. Whole classes of
implementation code never run on such data: an incremental syntax scan that only starts
after hundreds of bytes, a digest kept for repeats of a text over 64 Ki characters, a
compiled schema validator that takes over after a schema's eighth validation, a position
that is negative, an operator control followed by a *new* call, a byte cap met exactly
on the far side of a restart. Mutation testing of the reference (``make mutation``)
showed each of these as surviving mutants. Each family here is a general class, not one
trace per bug:

* ``long``: documents over 512 characters whose strings hold escaped quotes, escaped
  backslashes, ``\\u`` escapes, brackets and multi-byte text, nested arrays and objects,
  whitespace around the object; cut into fragments of at least 512 characters at every
  kind of boundary (inside a string, inside an escape, after an opener, before a closer,
  between multi-byte characters, after the closing brace), sent in order, out of order,
  with identical and conflicting repeats; and long texts that can never parse (glued
  objects, mismatched brackets, a raw control character, a non-object start, trailing
  data) followed by repeats and a good call;
* ``huge``: a fragment over 65,536 characters (caps raised to fit) repeated identically,
  or with one character changed at its start or end, while the call collects and while
  it awaits confirmation;
* ``schema``: tools whose schemas use keywords where a faster validator could read them
  more loosely than JSON Schema 2020-12 (``$`` inside a lookahead, backreferences joined
  by ``patternProperties``, ``prefixItems``, ``dependentRequired``, decimal
  ``multipleOf``) and keywords it shares (``const``, ``enum``, ``additionalProperties:
  false`` given undeclared keys, ``allOf``, bounds): each validated nine times with valid
  arguments before the arguments that only JSON Schema rejects;
* ``positions``: negative and very large positions, before and after position 0, with
  and without a terminal event;
* ``controls``: each operator and application stop (disable a tool, quarantine a
  response, stop a tenant, cancel a turn) followed by a new call that uses the same tool,
  response, tenant or turn, directly, after a repeat of the control, and after a restart;
* ``caps``: the per-turn and per-call caps met exactly (and missed by one byte) by a call
  sent after a restart, with and without bytes of the same turn before it (one call, or two
  whose fragments interleave, the first-opened call's last);
* ``unknown``: confirmations, denials, terminal events and fragments for calls that were
  never opened, and for turns never started;
* ``reannounce``: a call id announced again, with its own tool or another, while it
  collects and after it ended (the tool name an equal string from another event, as a
  parser gives);
* ``catalog``: a tool's declaration replaced by an equal one or a changed one while a
  call collects or awaits confirmation, and renamed away and back.

Expected verdicts are never set here: the oracle judges every trace, as it does for the
walks. The family is in every trace's name (``edges/long: ...``). Deterministic: no random
source, so adding a family or a trace never moves another generator's draws.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from callsafe.generators.data_classes import DATA_FAMILIES
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import CallOpened, Limits, ToolSpec, Trace

__all__ = ["FAMILIES", "edge_traces"]

SCAN_STEP: Final = 512  # at least this many characters a fragment (a scan every fragment)

_NOTE: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["v"],
    "properties": {
        "v": {"type": "integer"},
        "memo": {"type": "string"},
        "items": {"type": "array"},
        "tags": {"type": "array"},
    },
}


def _note(confirm: bool = False) -> ToolSpec:
    return ToolSpec(schema=_NOTE, confirm=confirm)


# --------------------------------------------------------------------------------------
# long: documents over 512 characters and their boundaries
# --------------------------------------------------------------------------------------

# JSON source text (not values): brackets first (a scanner that loses track of a string
# then meets a bracket, not a quote), an escaped quote, an escaped backslash, a \u escape,
# \n, punctuation inside a string, 2-, 3- and 4-byte characters, spaces.
_STRING_PIECE: Final = r"}]{[x\"y\\z\u00e9\n é€🦄 ,:\/"
_ITEM: Final = r'{"k":"a\"b]","n":[1,{"m":"}{"},[]],"e":{},"s":"\\"}'


def _documents() -> dict[str, str]:
    strings = '{"v":7,"memo":"' + _STRING_PIECE * 60 + '","tags":["[", "]", "{", "\\"}"]}'
    structure = '{"v":8,"items":[' + ",".join([_ITEM] * 30) + '],"memo":"end"}'
    spaced = " \n\t" + '{"v":9,"memo":"' + _STRING_PIECE * 30 + '"}' + " \r\n\t" * 200
    docs = {"strings": strings, "structure": structure, "spaced": spaced}
    for name, doc in docs.items():
        json.loads(doc)  # every one is a well-formed document
        assert len(doc) > 3 * SCAN_STEP, name
    return docs


def _escape_at(doc: str, i: int) -> bool:
    """``doc[i - 1]`` is a backslash that starts an escape (an odd run of them)."""
    run = 0
    while i - 1 - run >= 0 and doc[i - 1 - run] == "\\":
        run += 1
    return run % 2 == 1


# Where a fragment boundary (and so a scan boundary) falls: cut before index i when...
_CUTS: Final[dict[str, Callable[[str, int], bool]]] = {
    "after a quote": lambda d, i: d[i - 1] == '"',
    "inside an escape": _escape_at,
    "inside an escape that ends a string": lambda d, i: _escape_at(d, i) and d[i + 1 : i + 2] == '"',
    "after an escaped backslash": lambda d, i: d[i - 2 : i] == "\\\\" and not _escape_at(d, i),
    "inside a unicode escape": lambda d, i: d[i - 2 : i] == "\\u",
    "after an opener": lambda d, i: d[i - 1] in "{[",
    "before a closer": lambda d, i: d[i] in "}]",
    "between multi-byte characters": lambda d, i: ord(d[i - 1]) > 0x7F and ord(d[i]) > 0x7F,
    "after a space": lambda d, i: d[i - 1] == " ",
    "after the object": lambda d, i: d[i - 1] == "}" and not d[i:].strip(),
}


def _cut(doc: str, where: Callable[[str, int], bool], step: int = SCAN_STEP) -> list[str] | None:
    """``doc`` in fragments of at least ``step`` characters, each boundary where
    ``where`` holds (the last fragment whatever is left); None when no boundary fits."""
    cuts = [0]
    i = step
    while i < len(doc):
        if where(doc, i):
            cuts.append(i)
            i += step
        else:
            i += 1
    if len(cuts) == 1:
        return None
    cuts.append(len(doc))
    return [doc[a:b] for a, b in itertools.pairwise(cuts) if a < b]


def _long() -> Iterator[Trace]:
    docs = _documents()
    for doc_name, doc in docs.items():
        for cut_name, where in _CUTS.items():
            pieces = _cut(doc, where)
            if pieces is None or len(pieces) < 2:
                continue
            b = TraceBuilder(tools={"note": _note()}, name=f"edges/long: {doc_name}, cut {cut_name}")
            b.turn("t1").call("a", "note", *pieces).call("b", "note", *pieces)
            yield b.build()
    # every phase: the first boundary moved through one repeating unit of the document
    # (every scanner state at a boundary, and every pairing of states at two boundaries)
    for doc_name, unit in (("strings", len(_STRING_PIECE)), ("structure", len(_ITEM) + 1)):
        doc = docs[doc_name]
        for shift in range(unit):
            head = SCAN_STEP + shift
            pieces = [doc[:head], *(doc[a : a + SCAN_STEP] for a in range(head, len(doc), SCAN_STEP))]
            b = TraceBuilder(tools={"note": _note()}, name=f"edges/long: {doc_name}, boundaries at {head} + 512k")
            yield b.turn("t1").call("a", "note", *pieces).build()
    # out of order, repeated and conflicting long fragments of one call
    pieces = _cut(docs["strings"], _CUTS["inside an escape"])
    assert pieces is not None and len(pieces) >= 3
    b = TraceBuilder(tools={"note": _note()}, name="edges/long: out of order (last, middle, first)")
    b.turn("t1").open("a", "note")
    for k in reversed(range(len(pieces))):
        b.fragment("a", pieces[k], position=k)
    yield b.terminal("a").build()
    b = TraceBuilder(tools={"note": _note()}, name="edges/long: a gap closed after a scan")
    b.turn("t1").open("a", "note").fragment("a", pieces[0], position=0)
    for k in range(2, len(pieces)):
        b.fragment("a", pieces[k], position=k)
    yield b.fragment("a", pieces[1], position=1).terminal("a").build()
    for confirm in (False, True):
        suffix = ", awaiting confirmation" if confirm else ""
        b = TraceBuilder(tools={"note": _note(confirm)}, name=f"edges/long: identical repeats after scans{suffix}")
        b.turn("t1").open("a", "note").fragments("a", *pieces)
        b.fragment("a", pieces[0], position=0).fragment("a", pieces[1], position=1).terminal("a")
        if confirm:
            b.fragment("a", pieces[1], position=1).confirm("a")
        yield b.build()
        b = TraceBuilder(tools={"note": _note(confirm)}, name=f"edges/long: a conflicting repeat after scans{suffix}")
        b.turn("t1").open("a", "note").fragments("a", *pieces)
        other = pieces[1][:-1] + ("y" if pieces[1][-1] != "y" else "z")
        if confirm:
            b.terminal("a").fragment("a", other, position=1).confirm("a")
        else:
            b.fragment("a", other, position=1).terminal("a")
        yield b.build()
    yield from _long_invalid(docs["strings"])


def _long_invalid(good: str) -> Iterator[Trace]:
    body = good[: good.index(',"tags"')]  # '{"v":7,"memo":"...' up to the memo's closing quote
    bad = {
        "glued objects": body + '}{"v":1}',
        "mismatched brackets": body + ',"tags":[1}' + " " * SCAN_STEP + "]}",
        "a raw control character in a string": body[:-1] + "\x01" + '"' + " " * SCAN_STEP + "}",
        "not an object": "[" + body[1:] + "]",
        "trailing data": body + "}" + " " * SCAN_STEP + "x",
        "an unclosed string": body[:-1] + "\\" + " " * SCAN_STEP,
        "a raw control character in a string opened after a boundary": body + ',"bad":"a\x01b"' + " " * SCAN_STEP + "}",
    }
    for name, text in bad.items():
        # boundaries every 512 characters, or one where the good document's body ends
        for how, pieces in (
            ("every 512 characters", _cut(text, lambda d, i: True) or [text]),
            ("after the good part", [text[: len(body)], text[len(body) :]]),
        ):
            b = TraceBuilder(
                tools={"note": _note()}, name=f"edges/long: cannot parse ({name}), cut {how}, repeats, then a good call"
            )
            b.turn("t1").open("a", "note").fragments("a", *pieces)
            b.fragment("a", pieces[0], position=0)
            b.fragment("a", pieces[-1][:-1] + "!", position=len(pieces) - 1)
            b.terminal("a").call("b", "note", good)
            yield b.build()


# --------------------------------------------------------------------------------------
# huge: repeats of a text over 65,536 characters
# --------------------------------------------------------------------------------------

_HUGE_CHARS: Final = 70_000
_HUGE_LIMITS: Final = Limits(call_bytes=4 * _HUGE_CHARS, turn_bytes=16 * _HUGE_CHARS)


def _huge() -> Iterator[Trace]:
    filler = "".join(chr(ord("a") + k % 26) for k in range(_HUGE_CHARS))
    head = '{"v":5,"memo":"' + filler
    changed = {"identical": head, "changed at its end": head[:-1] + "!", "changed at its start": '{"v":6' + head[6:]}
    for confirm in (False, True):
        for what, again in changed.items():
            where = "awaiting confirmation" if confirm else "collecting"
            b = TraceBuilder(
                tools={"note": _note(confirm)}, limits=_HUGE_LIMITS, name=f"edges/huge: repeat {what}, {where}"
            )
            b.turn("t1").open("a", "note").fragment("a", head)
            if confirm:
                b.fragment("a", '"}').terminal("a").fragment("a", again, position=0).confirm("a")
            else:
                b.fragment("a", again, position=0).fragment("a", '"}').terminal("a")
            yield b.build()


# --------------------------------------------------------------------------------------
# schema: keywords a compiled validator may read differently, after it has taken over
# --------------------------------------------------------------------------------------

WARM_UP: Final = 9  # valid calls of a schema before the decisive ones (compiled after 8)


def _obj(properties: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), **extra}


# name -> (schema, valid arguments, arguments JSON Schema 2020-12 rejects)
_SCHEMAS: Final[dict[str, tuple[dict[str, Any], list[Any], list[Any]]]] = {
    "a dollar inside a lookahead": (
        _obj({"code": {"type": "string", "pattern": "^a(?!$)"}}, required=["code"]),
        [{"code": "ab"}, {"code": "a-x"}],
        [{"code": "a\n"}, {"code": "a"}],
    ),
    "a dollar inside a lookahead, nothing required": (
        _obj({"code": {"type": "string", "pattern": "^a(?!$)"}}),
        [{"code": "ab"}, {}],
        [{"code": "a\n"}, {"code": "a"}],
    ),
    "a dollar inside a lookahead, under anyOf": (
        _obj({"code": {"anyOf": [{"type": "string", "pattern": "^a(?!$)"}, {"type": "integer"}]}}),
        [{"code": "ab"}, {"code": 3}],
        [{"code": "a\n"}, {"code": 2.5}],
    ),
    "a dollar inside a lookahead, no top-level type": (
        {"properties": {"code": {"type": "string", "pattern": "^a(?!$)"}}},
        [{"code": "ab"}, {"other": 1}],
        [{"code": "a\n"}, {"code": 1}],
    ),
    "an anchored pattern": (
        _obj({"code": {"type": "string", "pattern": "^[a-z]+$"}}, required=["code"]),
        [{"code": "abc"}],
        [{"code": "abc\n"}, {"code": "ab1"}],
    ),
    # Python's re reads \d and \w Unicode-wide, ECMA-262 as ASCII: a compiled validator on
    # Python's re takes Arabic-Indic digits and accented letters the schema refuses
    "a digit class escape": (
        _obj({"code": {"type": "string", "pattern": "^\\d+$"}}, required=["code"]),
        [{"code": "123"}, {"code": "0"}],
        [{"code": "\u0661\u0662\u0663"}, {"code": "12a"}],
    ),
    "a word class escape": (
        _obj({"code": {"type": "string", "pattern": "^\\w+$"}}, required=["code"]),
        [{"code": "abc_1"}, {"code": "Z"}],
        [{"code": "caf\u00e9"}, {"code": "a-b"}],
    ),
    "a digit class escape in array items": (
        _obj({"codes": {"type": "array", "items": {"type": "string", "pattern": "^\\d+$"}}}, required=["codes"]),
        [{"codes": ["12", "3"]}, {"codes": []}],
        [{"codes": ["\u0661"]}, {"codes": ["1x"]}],
    ),
    "a digit class escape, no top-level type": (
        {"properties": {"code": {"type": "string", "pattern": "^\\d+$"}}},
        [{"code": "12"}, {}],
        [{"code": "\u0661\u0662"}, {"code": "1x"}],
    ),
    "a digit class escape in additionalProperties": (
        {"additionalProperties": {"type": "string", "pattern": "^\\d+$"}},
        [{"a": "12"}, {}],
        [{"a": "\u0661"}, {"a": "x"}],
    ),
    "backreferences in patternProperties": (
        {
            "type": "object",
            "patternProperties": {"^(a)\\1$": {"type": "integer"}, "^(b)\\1$": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{"aa": 1}],
        [{"bb": 2}, {"cc": 3}, {"aa": "x"}],
    ),
    "additionalProperties false": (
        _obj({"v": {"type": "integer"}}, required=["v"], additionalProperties=False),
        [{"v": 1}],
        [{"v": 2, "undeclared_key": "kept-out-value"}, {"v": 3, "zz": 0}],
    ),
    "const and enum": (
        _obj({"mode": {"const": "fast"}, "level": {"enum": [1, 2, 3]}}, required=["mode"]),
        [{"mode": "fast", "level": 2}, {"mode": "fast"}],
        [{"mode": "slow"}, {"mode": "fast", "level": 4}, {"mode": "fast", "level": True}],
    ),
    "prefixItems": (
        _obj({"xs": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}}),
        [{"xs": [1, "a"]}],
        [{"xs": ["x"]}, {"xs": [1, 2]}],
    ),
    "dependentRequired": (
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        [{"a": 1, "b": 2}, {"b": 1}],
        [{"a": 1}],
    ),
    "dependentRequired, no top-level type": (
        {"dependentRequired": {"a": ["b"]}},
        [{"a": 1, "b": 2}, {"b": 1}],
        [{"a": 1}],
    ),
    "a decimal multipleOf": (
        _obj({"p": {"type": "number", "multipleOf": 0.01}}),
        [{"p": 0.5}],
        [{"p": 0.07}, {"p": 0.075}],
    ),
    "allOf, anyOf, not and bounds": (
        _obj(
            {
                "n": {"allOf": [{"type": "integer"}, {"minimum": 1}], "not": {"const": 7}, "maximum": 99},
                "s": {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 4}, {"type": "null"}]},
                "xs": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
            },
            required=["n"],
        ),
        [{"n": 5, "s": "ab", "xs": [1, 2]}, {"n": 99, "s": None}],
        [{"n": 7}, {"n": 0}, {"n": 5, "s": "abcde"}, {"n": 5, "xs": [1, 1]}, {"n": 100}, {"n": 5.5}],
    ),
}


def _schema() -> Iterator[Trace]:
    for name, (schema, valid, invalid) in _SCHEMAS.items():
        for confirm in (False, True):
            b = TraceBuilder(
                tools={"tool": ToolSpec(schema=schema, confirm=confirm)},
                name=f"edges/schema: {name}{', with confirmation' if confirm else ''}",
            )
            b.turn("t1")
            calls: list[tuple[str, Any]] = [(f"w{k}", valid[k % len(valid)]) for k in range(WARM_UP)]
            calls += [(f"x{k}", args) for k, args in enumerate(invalid)]
            calls.append(("last", valid[0]))
            for call, args in calls:
                b.call(call, "tool", json.dumps(args, separators=(",", ":")))
                if confirm:
                    b.confirm(call)
            yield b.build()


# --------------------------------------------------------------------------------------
# positions: negative and very large
# --------------------------------------------------------------------------------------


def _positions() -> Iterator[Trace]:
    tools = {"note": _note()}
    for position in (-1, -2, 2**31, 2**63):
        for first in (True, False):
            for terminal in (True, False):
                order = "before" if first else "after"
                name = f"edges/positions: {position} {order} position 0, {'a' if terminal else 'no'} terminal event"
                b = TraceBuilder(tools=tools, name=name).turn("t1").open("a", "note")
                if first:
                    b.fragment("a", '{"v":1}', position=position).fragment("a", '{"v":1}', position=0)
                else:
                    b.fragment("a", '{"v":1', position=0).fragment("a", "}", position=position)
                if terminal:
                    b.terminal("a")
                yield b.call("b", "note", '{"v":2}').build()


# --------------------------------------------------------------------------------------
# controls: a stop, then a new call that uses what it stopped
# --------------------------------------------------------------------------------------


def _controls() -> Iterator[Trace]:
    def stop(b: TraceBuilder, control: str) -> None:
        if control == "disable the tool":
            b.disable_tool("note")
        elif control == "quarantine the response":
            b.quarantine("r1")
        elif control == "stop the tenant":
            b.stop_tenant("acme")
        else:
            b.cancel("t1")

    for control in ("disable the tool", "quarantine the response", "stop the tenant", "cancel the turn"):
        for then in ("directly", "after a repeat", "after a restart", "while a call collects"):
            b = TraceBuilder(tools={"note": _note()}, name=f"edges/controls: {control}, a new call {then}")
            b.turn("t1", response="r1").call("a", "note", '{"v":1}')
            if then == "while a call collects":
                b.open("c", "note").fragment("c", '{"v":')
            stop(b, control)
            if then == "after a repeat":
                stop(b, control)
            if then == "after a restart":
                b.restart()
            if then == "while a call collects":
                b.fragment("c", "3}").terminal("c")
            b.call("b", "note", '{"v":2}')
            if control != "cancel the turn":  # a new turn of the same tenant and tool
                b.turn("t2", response="r1", conversation="other").call("d", "note", '{"v":4}')
            yield b.build()


# --------------------------------------------------------------------------------------
# caps: met exactly, or missed by a byte, after a restart
# --------------------------------------------------------------------------------------


# What comes before the restart: nothing, one call, or two calls of the turn whose fragments
# interleave with the first-opened call's fragment last (what a store keeps per call must
# still give the turn's whole total: each call's last write carries a different one).
_BEFORE: Final = ("", ", bytes before it", ", bytes of two interleaved calls before it")


def _caps() -> Iterator[Trace]:
    first, second, third = '{"v":1,"memo":"abc"}', '{"v":22,"memo":"é€🦄"}', '{"v":333}'
    n, m, k = len(first.encode()), len(second.encode()), len(third.encode())
    for before in _BEFORE:
        prior = {0: 0, 1: n, 2: n + k}[_BEFORE.index(before)]
        for kind in ("turn", "call"):
            for delta in (0, -1, 1):
                if kind == "turn":
                    limits = Limits(call_bytes=4 * m, turn_bytes=prior + m + delta)
                else:
                    limits = Limits(call_bytes=m + delta, turn_bytes=16 * (n + m + k))
                if kind == "call" and prior and n > m + delta:
                    continue  # the first call would be over the per-call cap itself
                where = {0: "met exactly", 1: "a byte to spare", -1: "over by a byte"}[delta]
                name = f"edges/caps: the {kind} cap {where} after a restart{before}"
                b = TraceBuilder(tools={"note": _note()}, limits=limits, name=name).turn("t1")
                if before == _BEFORE[1]:
                    b.call("a", "note", first)
                elif before == _BEFORE[2]:
                    b.open("a", "note").open("x", "note").fragment("a", first[:7]).fragment("x", third[:4])
                    b.fragment("x", third[4:]).fragment("a", first[7:]).terminal("x").terminal("a")
                b.restart().call("b", "note", second[:5], second[5:])
                yield b.build()


# --------------------------------------------------------------------------------------
# unknown: events for calls never opened and turns never started
# --------------------------------------------------------------------------------------


def _unknown() -> Iterator[Trace]:
    tools = {"note": _note(confirm=True), "plain": _note()}
    for event in ("confirm", "deny", "terminal", "fragment twice"):
        for turn_known in (True, False):
            b = TraceBuilder(
                tools=tools,
                name=f"edges/unknown: {event} for a call never opened"
                + ("" if turn_known else ", in a turn never started"),
            )
            b.turn("t1").call("a", "plain", '{"v":1}')
            turn = "t1" if turn_known else "t9"
            b.at("ghost", turn=turn)
            if event == "confirm":
                b.confirm("ghost")
            elif event == "deny":
                b.deny("ghost")
            elif event == "terminal":
                b.terminal("ghost")
            else:
                b.fragment("ghost", '{"v":2}', position=0).fragment("ghost", '{"v":2}', position=0)
            b.open("ghost", "note", turn="t1").fragment("ghost", '{"v":3}').terminal("ghost").confirm("ghost")
            yield b.build()


# --------------------------------------------------------------------------------------
# reannounce: a call id announced again while it collects or after it ended
# --------------------------------------------------------------------------------------


def _fresh(text: str) -> str:
    """An equal string that is another object, as a parsed stream gives for each event
    (literals in a trace built here are one interned object)."""
    return "".join(list(text))


def _reannounce() -> Iterator[Trace]:
    for when in ("while it collects", "after its terminal event"):
        for tool in ("note", "other"):
            same = "the same tool" if tool == "note" else "another tool"
            b = TraceBuilder(tools={"note": _note(), "other": _note()}, name=f"edges/reannounce: {same}, {when}")
            b.turn("t1").open("a", "note").fragment("a", '{"v":')
            again = CallOpened("t1", "r-t1", "i-a", "a", _fresh(tool))
            if when == "while it collects":
                b.add(again).fragment("a", "1}").terminal("a")
            else:
                b.fragment("a", "1}").terminal("a").add(again)
            yield b.call("b", "note", '{"v":2}').build()


# --------------------------------------------------------------------------------------
# catalog: a declaration replaced by an equal one, or changed, around a call
# --------------------------------------------------------------------------------------


def _catalog() -> Iterator[Trace]:
    changed = {**_NOTE, "properties": {**_NOTE["properties"], "extra": {"type": "string"}}}
    for confirm in (False, True):
        for what, schema in (("an equal schema", dict(_NOTE)), ("another schema", changed)):
            for when in ("while it collects", "after its terminal event"):
                if when == "after its terminal event" and not confirm:
                    continue  # it ran at its terminal event
                waits = ", awaiting confirmation" if confirm else ""
                b = TraceBuilder(tools={"note": _note(confirm)}, name=f"edges/catalog: {what} {when}{waits}")
                b.turn("t1").open("a", "note").fragment("a", '{"v":')
                if when == "while it collects":
                    b.change_schema("note", schema).fragment("a", "1}").terminal("a")
                else:
                    b.fragment("a", "1}").terminal("a").change_schema("note", schema)
                if confirm:
                    b.confirm("a")
                b.call("b", "note", '{"v":2}')
                if confirm:
                    b.confirm("b")
                yield b.build()
        b = TraceBuilder(
            tools={"note": _note(confirm)},
            name=f"edges/catalog: renamed away and back{', awaiting confirmation' if confirm else ''}",
        )
        b.turn("t1").call("a", "note", '{"v":1}').rename_tool("note", "gone").rename_tool("gone", "note")
        if confirm:
            b.confirm("a")
        yield b.build()


FAMILIES: Final[dict[str, Callable[[], Iterator[Trace]]]] = {
    "long": _long,
    "huge": _huge,
    "schema": _schema,
    "positions": _positions,
    "controls": _controls,
    "caps": _caps,
    "unknown": _unknown,
    "reannounce": _reannounce,
    "catalog": _catalog,
    **DATA_FAMILIES,  # json-dialect, tool-identity, confirmations, interleaved-text
}


@functools.lru_cache(maxsize=1)
def edge_traces() -> tuple[Trace, ...]:
    """Every family's traces, in a fixed order (built once per process; traces are frozen)."""
    return tuple(trace for build in FAMILIES.values() for trace in build())
