"""Fragmentations of one arguments document that fool weak implementations.

Why: whether an implementation assembles arguments correctly shows only under the right
cuts. Given a tool's JSON Schema and a valid arguments document, this module finds them:

* **deceptive prefixes** (:func:`deceptive_prefixes`): a cut whose prefix is valid JSON,
  or which partial-JSON repair (close the open string and brackets, drop a dangling
  token, :func:`repair`) turns into schema-valid arguments different from the final ones:
  ``{"amount":1`` of ``{"amount":100}``. An implementation that previews or repairs
  partial arguments executes them; the traces cut the call off there (stop reason
  ``length``: must not execute) or finish it (must execute the whole document only);
* **glued calls** (:func:`glued_calls`): two calls whose fragments, concatenated in
  arrival order as a weak implementation keyed by index would, still form schema-valid
  JSON with a different meaning (``{"a":`` ``{"b":1`` ``2}`` ``}``); each call must
  execute its own arguments;
* **cuts inside escapes, surrogate-pair escapes and next to multi-byte characters**
  (:func:`escape_cuts`): the joined text is what counts, never a piece decoded alone;
* **duplicated fragments** (:func:`duplicate_fragments`): a piece re-delivered at its own
  position whose naive concatenation is still valid JSON with another value
  (``{"amount":1`` ``0`` ``0`` ``0}``); a repeated position is a delivery condition;
* **adversarial splits** (:func:`adversarial`): z3 chooses integer cut points that meet
  several requirements at once (a cut in each dangerous place the document has, as many
  deceptive prefixes as possible, a dangerous duplicate, a bound on piece size). The
  number of ways to cut is binomial in the document's length, so this is where a solver
  earns its place; the other searches are exhaustive over one or two cuts, which is small.

Every candidate is checked with ``json`` and ``jsonschema`` (z3 only chooses among cut
points whose properties were computed by them), and every trace carries the verdicts the
spec asks for, which ``tests/test_formal_fragmentation.py`` checks against the oracle.
Cuts are between code points: an abstract fragment is ``str``, so a split inside a
multi-byte UTF-8 sequence is the wire's business (:attr:`Fragmentation.byte_cuts` lists
where it falls, for a provider that renders bytes).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import z3

from callsafe.formal.z3_context import isolated_z3
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import Trace

__all__ = [
    "Cut",
    "Fragmentation",
    "adversarial",
    "analyse",
    "deceptive_prefixes",
    "duplicate_fragments",
    "escape_cuts",
    "glued_calls",
    "repair",
    "synthesised_fragmentations",
]

_CLOSE = {"{": "}", "[": "]"}


def _parse(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False, None


def _scan(text: str) -> tuple[list[str], bool]:
    """The open brackets and whether a string is open at the end of ``text``."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
    return stack, in_string


def repair(prefix: str) -> tuple[bool, Any]:
    """What a partial-JSON repair makes of ``prefix``, as streaming "preview" parsers do:
    the longest truncation of it that, with its string and brackets closed, parses."""
    for end in range(len(prefix), 0, -1):
        text = prefix[:end].rstrip()
        if not text:
            break
        stack, in_string = _scan(text)
        candidate = text + ('"' if in_string else "") + "".join(_CLOSE[c] for c in reversed(stack))
        ok, value = _parse(candidate)
        if ok:
            return True, value
        ok, value = _parse(candidate.replace(',"}', "}"))  # a key with nothing after it
        if ok and value is not None:
            return True, value
    return False, None


def _schema_valid(schema: Mapping[str, Any], value: Any) -> bool:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return isinstance(value, dict) and validator.is_valid(value)


@dataclass(frozen=True)
class Cut:
    """What a cut at ``position`` (between ``text[position - 1]`` and ``text[position]``)
    is: the dangerous places it falls in, and what a weak implementation makes of the
    prefix before it."""

    position: int
    places: frozenset[str]  # in_escape, in_unicode_escape, between_surrogates, in_number, in_string, by_multibyte
    prefix_parses: bool  # the prefix is itself valid JSON
    repaired: Any  # the partial-JSON repair of the prefix (None: none)
    deceptive: bool  # the repair (or parse) is schema-valid arguments, different from the final ones


def analyse(text: str, schema: Mapping[str, Any]) -> list[Cut]:
    """Every cut of ``text`` (positions 1 .. len - 1)."""
    final = json.loads(text)
    places: list[set[str]] = [set() for _ in range(len(text) + 1)]
    in_string = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                length = 6 if text[i + 1 : i + 2] == "u" else 2
                for p in range(i + 1, min(i + length, len(text))):
                    places[p].add("in_unicode_escape" if length == 6 else "in_escape")
                if length == 6 and 0xD800 <= int(text[i + 2 : i + 6], 16) <= 0xDBFF and text[i + 6 : i + 8] == "\\u":
                    places[i + 6].add("between_surrogates")
                i += length
                continue
            if ch == '"':
                in_string = False
            else:
                places[i + 1].add("in_string")
                if ord(ch) > 0x7F:
                    places[i].add("by_multibyte")
                    places[i + 1].add("by_multibyte")
        elif ch == '"':
            in_string = True
        elif ch in "-0123456789" and i + 1 < len(text) and text[i + 1] in "0123456789.eE+-":
            places[i + 1].add("in_number")
        i += 1
    cuts = []
    for p in range(1, len(text)):
        prefix = text[:p]
        parses, value = _parse(prefix)
        fixed, repaired = (parses, value) if parses else repair(prefix)
        deceptive = fixed and repaired != final and _schema_valid(schema, repaired)
        cuts.append(Cut(p, frozenset(places[p]), parses, repaired if fixed else None, deceptive))
    return cuts


@dataclass(frozen=True)
class Fragmentation:
    """Pieces of one call's arguments (and, for glued calls, of a second call's) in
    arrival order, with what a weak implementation gets (``naive``) and what a correct
    one executes (``arguments``)."""

    kind: str
    description: str
    pieces: tuple[str, ...]
    arguments: Any
    naive: Any = None
    duplicate: int | None = None  # index of a piece delivered twice, at its own position
    other: tuple[str, ...] = ()  # the second call's pieces
    other_arguments: Any = None
    order: tuple[tuple[int, int], ...] = ()  # arrival order: (call 0 or 1, piece index)
    cut_off: bool = False  # the call is cut off after the pieces (stop reason ``length``)
    byte_cuts: tuple[int, ...] = field(default_factory=tuple)

    def trace(self, schema: Mapping[str, Any], tool: str = "tool", name: str = "") -> Trace:
        """The trace, with the verdicts the spec asks for."""
        b = TraceBuilder(tools={tool: schema}, name=name or f"fragmentation-{self.kind}", source=self.source)
        b.turn("t1").open("a", tool)
        if self.other:
            b.open("b", tool)
        order = self.order or tuple((0, k) for k in range(len(self.pieces)))
        for call, k in order:
            cid, pieces = ("a", self.pieces) if call == 0 else ("b", self.other)
            b.fragment(cid, pieces[k], position=k)
            if call == 0 and k == self.duplicate:
                b.fragment(cid, pieces[k], position=k)  # a repeated delta: same position, same text
        if self.cut_off:
            b.terminal("a", reason="length")
            verdicts: dict[str, Any] = {"t1/a": {"execute": False, "reason": "stopped: length"}}
        else:
            b.terminal("a")
            verdicts = {"t1/a": {"execute": True, "arguments": self.arguments}}
        if self.other:
            b.terminal("b")
            verdicts["t1/b"] = {"execute": True, "arguments": self.other_arguments}
        trace = b.build()
        return Trace(trace.events, trace.tools, trace.limits, trace.name, trace.source, verdicts)

    @property
    def source(self) -> str:
        return f"synthesised: fragmentation {self.kind}"


def _split(text: str, cuts: Sequence[int]) -> tuple[str, ...]:
    bounds = [0, *sorted(cuts), len(text)]
    return tuple(text[a:b] for a, b in itertools.pairwise(bounds))


def _byte_cuts(text: str, cuts: Sequence[int]) -> tuple[int, ...]:
    return tuple(len(text[:c].encode("utf-8")) for c in cuts)


def deceptive_prefixes(text: str, schema: Mapping[str, Any]) -> Iterator[Fragmentation]:
    """For each deceptive cut: the call cut off there, and the call finished after it."""
    final = json.loads(text)
    for cut in analyse(text, schema):
        if not cut.deceptive:
            continue
        pieces = _split(text, [cut.position])
        how = "parses" if cut.prefix_parses else "repairs"
        desc = f"prefix {pieces[0]!r} {how} to schema-valid {json.dumps(cut.repaired)}"
        yield Fragmentation("deceptive-prefix-cut-off", desc, pieces[:1], final, cut.repaired, cut_off=True)
        yield Fragmentation("deceptive-prefix", desc, pieces, final, cut.repaired)


def duplicate_fragments(text: str, schema: Mapping[str, Any]) -> Iterator[Fragmentation]:
    """Pieces ``text[i:j]`` whose naive re-delivery (``text[:j] + text[i:j] + text[j:]``)
    is schema-valid JSON with another value, shortest pieces first (``0`` before
    ``amount":100,"n``)."""
    final = json.loads(text)
    for size in range(1, len(text) - 1):
        for i in range(1, len(text) - size):
            j = i + size
            ok, value = _parse(text[:j] + text[i:j] + text[j:])
            if ok and value != final and _schema_valid(schema, value):
                pieces = _split(text, [i, j])
                desc = f"piece {pieces[1]!r} delivered twice reads as {json.dumps(value)}"
                yield Fragmentation("duplicate-fragment", desc, pieces, final, value, duplicate=1)


def _minimal(schema: Mapping[str, Any]) -> Any:
    """A small instance of common schema shapes (None when unsure)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: _minimal(props.get(k, {})) for k in schema.get("required", [])}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}.get(
        kind if isinstance(kind, str) else "integer", 0
    )


def glued_calls(
    text: str, schema: Mapping[str, Any], others: Sequence[str] = (), limit: int = 8
) -> Iterator[Fragmentation]:
    """Two calls (``text`` and another valid document: ``others``, else ``text`` itself
    and a minimal instance of the schema), each cut once, in an arrival order whose naive
    concatenation is schema-valid JSON different from both."""
    final = json.loads(text)
    candidates = list(others) or [text, json.dumps(_minimal(schema), separators=(",", ":"))]
    found = 0
    orders = [((0, 0), (1, 0), (0, 1), (1, 1)), ((0, 0), (1, 0), (1, 1), (0, 1)), ((1, 0), (0, 0), (1, 1), (0, 1))]
    for other in candidates:
        other_value = json.loads(other)
        if not _schema_valid(schema, other_value):
            continue
        for a, b in itertools.product(range(1, len(text)), range(1, len(other))):
            mine, theirs = _split(text, [a]), _split(other, [b])
            for order in orders:
                glued = "".join(mine[k] if call == 0 else theirs[k] for call, k in order)
                ok, value = _parse(glued)
                if ok and value not in (final, other_value) and _schema_valid(schema, value):
                    desc = f"glued in arrival order: {glued}"
                    yield Fragmentation("glued-calls", desc, mine, final, value, None, theirs, other_value, order)
                    found += 1
                    if found >= limit:
                        return


def escape_cuts(text: str, schema: Mapping[str, Any]) -> Iterator[Fragmentation]:
    """One fragmentation per dangerous place the document has: a cut inside an escape,
    inside a ``\\u`` escape, between the two escapes of a surrogate pair, next to a
    multi-byte character."""
    final = json.loads(text)
    cuts = analyse(text, schema)
    for place in ("in_escape", "in_unicode_escape", "between_surrogates", "by_multibyte"):
        positions = [c.position for c in cuts if place in c.places]
        if positions:
            pieces = _split(text, positions)
            desc = f"cut {place.replace('_', ' ')} at {positions}"
            yield Fragmentation(f"cut-{place}", desc, pieces, final, byte_cuts=_byte_cuts(text, positions))


def adversarial(
    text: str,
    schema: Mapping[str, Any],
    fragments: int = 5,
    max_piece: int | None = None,
    duplicate: bool = True,
) -> Fragmentation | None:
    """z3's choice of ``fragments - 1`` cuts: one in each dangerous place the document
    has, pieces no longer than ``max_piece``, a piece whose re-delivery reads as another
    valid document (when ``duplicate`` and one exists), and, under those, as many
    deceptive prefixes as possible. None when the requirements cannot all be met. In a
    z3 context of its own, so that the choice does not depend on what the process did
    with z3 before (:mod:`callsafe.formal.z3_context`)."""
    with isolated_z3():
        return _adversarial(text, schema, fragments, max_piece, duplicate)


def _adversarial(
    text: str, schema: Mapping[str, Any], fragments: int, max_piece: int | None, duplicate: bool
) -> Fragmentation | None:
    final = json.loads(text)
    n = len(text)
    info = {c.position: c for c in analyse(text, schema)}
    k = fragments - 1
    if k < 1 or k >= n:
        return None
    cuts = [z3.Int(f"cut{m}") for m in range(k)]
    opt = z3.Optimize()
    opt.add(cuts[0] >= 1, cuts[-1] <= n - 1)
    opt.add(*(cuts[m] < cuts[m + 1] for m in range(k - 1)))
    bounds = [0, *cuts, n]
    if max_piece is not None:
        opt.add(*(bounds[m + 1] - bounds[m] <= max_piece for m in range(k + 1)))

    def at(cut: Any, positions: Sequence[int]) -> Any:
        return z3.Or(*(cut == p for p in positions)) if positions else z3.BoolVal(False)

    for place in ("in_escape", "in_unicode_escape", "between_surrogates", "by_multibyte", "in_number"):
        positions = [p for p, c in info.items() if place in c.places]
        if positions:
            opt.add(z3.Or(*(at(c, positions) for c in cuts)))
    dup = None
    if duplicate:
        pairs = [
            (i, j)
            for i in range(1, n - 1)
            for j in range(i + 1, n)
            if (r := _parse(text[:j] + text[i:j] + text[j:]))[0] and r[1] != final and _schema_valid(schema, r[1])
        ]
        if pairs:
            dup = z3.Int("duplicate")
            opt.add(dup >= 0, dup < k)
            opt.add(z3.Or(*(z3.And(dup == m, cuts[m] == i, cuts[m + 1] == j) for m in range(k - 1) for i, j in pairs)))
    deceptive = [p for p, c in info.items() if c.deceptive]
    opt.maximize(z3.Sum(*(z3.If(at(c, deceptive), 1, 0) for c in cuts)) if deceptive else z3.IntVal(0))
    if opt.check() != z3.sat:
        return None
    m = opt.model()
    chosen = sorted(m.eval(c).as_long() for c in cuts)
    index = m.eval(dup).as_long() + 1 if dup is not None else None
    pieces = _split(text, chosen)
    naive = None
    if index is not None:
        naive = json.loads("".join(pieces[: index + 1]) + pieces[index] + "".join(pieces[index + 1 :]))
    places = sorted({p for c in chosen for p in info[c].places})
    shown = sum(1 for c in chosen if info[c].deceptive)
    desc = f"cuts {chosen} in {', '.join(places) or 'plain text'}; {shown} deceptive prefixes"
    return Fragmentation("adversarial", desc, pieces, final, naive, index, byte_cuts=_byte_cuts(text, chosen))


def synthesised_fragmentations(
    schema: Mapping[str, Any], document: Any, tool: str = "tool", per_kind: int = 3
) -> Iterator[tuple[str, Trace]]:
    """``(name, trace)`` for every kind of fragmentation of ``document`` (a JSON text,
    used verbatim, or a value, written compactly both with and without ``\\u``
    escapes)."""
    if isinstance(document, str):
        texts = [document]
    else:
        texts = list(
            dict.fromkeys(
                [
                    json.dumps(document, separators=(",", ":"), ensure_ascii=False),
                    json.dumps(document, separators=(",", ":"), ensure_ascii=True),
                ]
            )
        )
    seen: set[str] = set()
    for t, text in enumerate(texts):
        groups: list[Iterator[Fragmentation]] = [
            deceptive_prefixes(text, schema),
            duplicate_fragments(text, schema),
            glued_calls(text, schema),
            escape_cuts(text, schema),
        ]
        for group in groups:
            counts: dict[str, int] = {}
            for frag in group:
                counts[frag.kind] = counts.get(frag.kind, 0) + 1
                if counts[frag.kind] > per_kind:
                    continue
                name = f"synthesised-{frag.kind}-{t}-{counts[frag.kind]}"
                trace = frag.trace(schema, tool, name)
                key = json.dumps(trace.to_json()["events"])
                if key not in seen:
                    seen.add(key)
                    yield name, trace
        chosen = adversarial(text, schema, fragments=min(6, max(2, len(text) // 6)))
        if chosen is not None:
            name = f"synthesised-adversarial-{t}"
            yield name, chosen.trace(schema, tool, name)
