"""The rules compiled to Python source, for the explorer's inner loop.

Why: the explorer evaluates :func:`~callsafe.formal.abstract.enabled`,
:func:`~callsafe.formal.abstract.successor` and :func:`~callsafe.formal.abstract.canonical`
millions of times. Interpreted over :class:`~callsafe.formal.ops.Concrete`, every ``and``,
every table lookup and every field of every record is a Python call, a dataclass
``_replace`` or an enum hash; the rules themselves are a few comparisons per step. So the
explorer evaluates them once more, the way the TLA+ export does: :class:`PyOps` interprets
:class:`~callsafe.formal.ops.Ops` as Python *expressions*, the very same rule functions run
over them once per configuration, and the resulting source (one function that takes a
state and returns all its successors) is compiled with :func:`compile`. Nothing is
restated by hand: a mutant table or guard is compiled as it is, and the generic path
(:meth:`~callsafe.formal.abstract.SystemModel.next_state`) stays the reference the compiled
one is tested against on every state of several configurations
(``tests/test_model_compiled.py``).

What the compiled code works on, and why:

* a state is one ``bytes`` object, a byte per field (every call's fields, then the turns,
  the response flags, the tool flags and the restart count; a lifecycle state as its code,
  a string as its index in :data:`~callsafe.formal.abstract.STRINGS`, a flag as 0 or 1), so
  deduplication hashes one buffer in C, and a state costs about 90 bytes instead of a
  tuple of pointers (450 bytes at four calls); the generated code unpacks it into its
  fields as it would a tuple (a configuration with 256 restarts or more, whose count no
  longer fits a byte, keeps tuples of the same small integers); the explorer itself stores
  and deduplicates states as integers of slot codes (:mod:`callsafe.formal.slots`) and runs
  this step only to fill that search's tables, per group of actions
  (:attr:`CompiledModel.group_steps`: one call's inputs and internal steps, or the turn and
  system inputs);
* the symmetry reduction (:func:`~callsafe.formal.abstract.symmetric`) is generated too:
  :attr:`CompiledModel.symmetric` sorts each turn's calls as byte slices, which is the
  order of :func:`~callsafe.formal.abstract.call_key`;
* a lifecycle state is its index in :class:`State` and an event its index in
  :class:`CallEvent`, so the table is a tuple per event indexed by state: ``outcome`` is
  one subscript, no hashing;
* each guard is its truth table (:func:`~callsafe.formal.ops.truth_table`, as for z3 and
  TLA+), indexed by its boolean inputs;
* the table entries a step exercises are bits of an integer (``state * events + event``),
  OR-ed together: the explorer keeps their union, as it kept a set before.

Subexpressions used by more than one action (``turn 0 is started``) are computed once per
state; those used twice within one action, once per action; the rest are inlined, so
Python's ``and``, ``or`` and conditional expressions keep their short circuits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from callsafe.formal.abstract import (
    INVARIANT_IDS,
    KINDS,
    STRINGS,
    AbsCall,
    AbsState,
    Action,
    SystemModel,
    call_key,
    canonical,
    enabled,
    invariant_holds,
    successor,
)
from callsafe.formal.ops import Ops, TableEntry, Val, truth_table
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, State

__all__ = ["CompiledModel", "PyOps", "action_group", "compile_model"]

STATES: Final[tuple[State, ...]] = tuple(State)
EVENTS: Final[tuple[CallEvent, ...]] = tuple(CallEvent)
_STATE_CODE: Final = {s: n for n, s in enumerate(STATES)}
_EVENT_CODE: Final = {e: n for n, e in enumerate(EVENTS)}
_STRING_CODE: Final = {text: n for n, text in enumerate(STRINGS)}
_CALL_FIELDS: Final = len(AbsCall._fields)
_STATE_FIELD: Final = AbsCall._fields.index("state")

Flat = Any  # bytes (or, past 255 restarts, a tuple of the same small integers)
# One state's successors: the exercised table entries (a bit mask) and, per enabled action,
# its index in ``SystemModel.all_actions`` and the successor.
Step = Callable[[Flat], tuple[int, list[tuple[int, Flat]]]]


class Node:
    """A Python expression over the state's fields: an operator and its arguments (nodes
    or constants). Nodes are hash-consed by :class:`PyOps`, so equal subexpressions are one
    node, which is what lets the code generator name and share them."""

    __slots__ = ("args", "name", "op", "parents")

    def __init__(self, op: str, args: tuple[Any, ...], name: str | None = None) -> None:
        self.op = op
        self.args = args
        self.name = name  # a variable holding the value, once emitted (inputs: always)
        self.parents = 0  # distinct references (parent nodes, roots), counted before emission

    def children(self) -> Iterable[Node]:
        return (a for a in self.args if isinstance(a, Node))

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.args!r})"


def _const(value: Val) -> str:
    """A constant as Python source: lifecycle states and events as their codes."""
    if isinstance(value, State):
        return str(_STATE_CODE[value])
    if isinstance(value, CallEvent):
        return str(_EVENT_CODE[value])
    if isinstance(value, str):
        return str(_STRING_CODE[value])
    if isinstance(value, bool | int):
        return repr(value)
    raise TypeError(f"no Python constant for {value!r}")


def _key(value: Val) -> Any:
    """A hash-consing key: constants by type too (``True == 1`` and ``State.FAILED ==
    "failed"`` must stay different constants)."""
    return value if isinstance(value, Node) else (type(value), value)


class PyOps(Ops):
    """The rules over Python expressions (:class:`Node`), folding constants as
    :class:`~callsafe.formal.tla.TlaOps` does. :attr:`entries` collects, per step, the
    expressions of the table-entry bits it exercises."""

    def __init__(self, model: SystemModel) -> None:
        super().__init__(model.table, model.guards)
        self._nodes: dict[tuple[Any, ...], Node] = {}
        self.entries: list[Val] = []
        self.tables: dict[str, Any] = {}
        self._moved: list[tuple[bool, ...]] = []
        self._next: list[tuple[State, ...]] = []
        for event in EVENTS:
            outcomes = [model.table[s][event] for s in STATES]
            self._moved.append(tuple(isinstance(r, State) for r in outcomes))
            self._next.append(tuple(r if isinstance(r, State) else s for s, r in zip(STATES, outcomes, strict=True)))
            code = _EVENT_CODE[event]
            self.tables[f"MV{code}"] = self._moved[-1]
            self.tables[f"NX{code}"] = tuple(_STATE_CODE[s] for s in self._next[-1])
            self.tables[f"EB{code}"] = tuple(1 << (n * len(EVENTS) + code) for n in range(len(STATES)))
        self.tables["MV"] = tuple(self.tables[f"MV{n}"] for n in range(len(EVENTS)))
        self.tables["NX"] = tuple(self.tables[f"NX{n}"] for n in range(len(EVENTS)))
        self.tables["EB"] = tuple(self.tables[f"EB{n}"] for n in range(len(EVENTS)))
        self._guards: dict[str, tuple[Callable[..., CallEvent], int]] = {
            "OPEN": (self.guards.classify_open, 3),
            "DISPATCH": (self.guards.classify_dispatch, 6),
        }
        for name, (guard, arity) in self._guards.items():
            rows: list[int] = [0] * (1 << arity)
            for event, inputs in truth_table(guard, arity).items():
                for row in inputs:
                    rows[sum(bit << (arity - 1 - i) for i, bit in enumerate(row))] = _EVENT_CODE[event]
            self.tables[name] = tuple(rows)

    def node(self, op: str, *args: Val) -> Node:
        key = (op, *map(_key, args))
        found = self._nodes.get(key)
        if found is None:
            found = self._nodes[key] = Node(op, args)
        return found

    def var(self, name: str) -> Node:
        found = self.node("var", name)
        found.name = name
        return found

    # -- logic and arithmetic, folding constants ------------------------------------

    def lit(self, value: Val) -> Val:
        return value

    def not_(self, x: Val) -> Val:
        if not isinstance(x, Node):
            return not x
        if x.op == "not":
            return x.args[0]
        return self.node("not", x)

    def _junction(self, op: str, xs: Sequence[Val], unit: bool) -> Val:
        terms: list[Node] = []
        for x in xs:
            if not isinstance(x, Node):
                if bool(x) != unit:
                    return not unit
                continue
            for t in x.args if x.op == op else (x,):
                if t not in terms:
                    terms.append(t)
        if not terms:
            return unit
        if len(terms) == 1:
            return terms[0]
        return self.node(op, *terms)

    def and_(self, *xs: Val) -> Val:
        return self._junction("and", xs, True)

    def or_(self, *xs: Val) -> Val:
        return self._junction("or", xs, False)

    def ite(self, c: Val, a: Val, b: Val) -> Val:
        if not isinstance(c, Node):
            return a if c else b
        if _key(a) == _key(b):
            return a
        if a is True and b is False:
            return c
        if a is False and b is True:
            return self.not_(c)
        return self.node("ite", c, a, b)

    def eq(self, a: Val, b: Val) -> Val:
        if not isinstance(a, Node) and not isinstance(b, Node):
            return a == b
        if _key(a) == _key(b):
            return True
        return self.node("eq", a, b)

    def lt(self, a: Val, b: Val) -> Val:
        if not isinstance(a, Node) and not isinstance(b, Node):
            return bool(a < b)
        return self.node("lt", a, b)

    def add(self, a: Val, n: int) -> Val:
        if not isinstance(a, Node):
            return a + n
        return self.node("add", a, n)

    def is_in(self, a: Val, values: Iterable[Val]) -> Val:
        items = tuple(values)
        if not isinstance(a, Node) or any(isinstance(v, Node) for v in items):
            return super().is_in(a, items)
        return self.node("in", a, tuple(sorted(items, key=_const)))

    # -- the lifecycle table and the guards -----------------------------------------

    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        if not isinstance(state, Node) and not isinstance(event, Node):
            e, s = _EVENT_CODE[event], _STATE_CODE[state]
            self.entries.append(self.tables[f"EB{e}"][s])
            return self._moved[e][s], self._next[e][s]
        self.entries.append(self._lookup("EB", state, event))
        return self._lookup("MV", state, event), self._lookup("NX", state, event)

    def _lookup(self, table: str, state: Val, event: Val) -> Node:
        return self.node("lookup", table, event, state)

    def moves(self, state: Val, event: CallEvent) -> Val:
        if not isinstance(state, Node):
            return self._moved[_EVENT_CODE[event]][_STATE_CODE[state]]
        return self._lookup("MV", state, event)

    def _classify(self, name: str, inputs: Sequence[Val]) -> Val:
        if not any(isinstance(x, Node) for x in inputs):
            guard, _ = self._guards[name]
            return guard(*inputs)
        return self.node("guard", name, *inputs)

    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> Val:
        return self._classify("OPEN", (turn_live, response_open, quarantined))

    def classify_dispatch(
        self,
        needs_confirmation: Val,
        confirmed: Val,
        turn_live: Val,
        quarantined: Val,
        tool_unchanged: Val,
        permitted: Val,
    ) -> Val:
        inputs = (needs_confirmation, confirmed, turn_live, quarantined, tool_unchanged, permitted)
        return self._classify("DISPATCH", inputs)

    def event_is(self, event: Val, which: CallEvent) -> Val:
        return self.eq(event, which)


# --------------------------------------------------------------------------------------
# Flat states
# --------------------------------------------------------------------------------------


def _codes(s: AbsState) -> list[int]:
    """A state's fields as small integers, in the compiled code's order."""
    fields: list[int] = []
    for call in s.calls:
        fields += call_key(call)
    fields += (_STRING_CODE[t] for t in s.turns)
    fields += (int(v) for v in (*s.ended, *s.quarantined, *s[4:]))
    return fields


def _decoder(calls: int, turns: int, packed: Callable[[list[int]], Flat]) -> Callable[[Flat], AbsState]:
    """The inverse of the packing: each field back to its type (lifecycle states, strings,
    flags as ``bool``, counts as ``int``), as the interpreted rules hold them."""
    kinds = [type(v) for v in AbsCall()]

    def field(kind: type, v: int) -> Any:
        if kind is State:
            return STATES[v]
        if kind is str:
            return STRINGS[v]
        return bool(v) if kind is bool else v

    def unflatten(f: Flat) -> AbsState:
        cs = tuple(
            AbsCall._make(field(kind, v) for kind, v in zip(kinds, f[k : k + _CALL_FIELDS], strict=True))
            for k in range(0, calls * _CALL_FIELDS, _CALL_FIELDS)
        )
        k = calls * _CALL_FIELDS
        return AbsState(
            cs,
            tuple(STRINGS[v] for v in f[k : k + turns]),
            tuple(bool(v) for v in f[k + turns : k + 2 * turns]),
            tuple(bool(v) for v in f[k + 2 * turns : k + 3 * turns]),
            bool(f[k + 3 * turns]),
            bool(f[k + 3 * turns + 1]),
            f[k + 3 * turns + 2],
        )

    return unflatten


def _symmetry_source(calls_of_turn: Sequence[Sequence[int]], calls: int) -> str:
    """``sym(s)``: each turn's calls sorted as slices of ``s`` (compare-and-swap for two)."""
    lines = ["def sym(s):"]
    parts = []
    for t, members in enumerate(calls_of_turn):
        if not members:  # a turn without calls (more turns than calls)
            continue
        if len(members) == 1:
            parts.append(f"s[{members[0] * _CALL_FIELDS}:{(members[0] + 1) * _CALL_FIELDS}]")
            continue
        slices = [f"s[{m * _CALL_FIELDS}:{(m + 1) * _CALL_FIELDS}]" for m in members]
        if len(members) == 2:
            lines.append(f"    a{t} = {slices[0]}")
            lines.append(f"    b{t} = {slices[1]}")
            lines.append(f"    t{t} = a{t} + b{t} if a{t} <= b{t} else b{t} + a{t}")
        else:
            lines.append(f"    t{t} = JOIN(sorted(({', '.join(slices)})))")
        parts.append(f"t{t}")
    parts.append(f"s[{calls * _CALL_FIELDS}:]")
    lines.append(f"    return {' + '.join(parts)}")
    return "\n".join(lines)


def _symbolic_state(o: PyOps, calls: int, turns: int) -> tuple[AbsState, list[str]]:
    """The input state as variables ``v0, v1, ...`` in :func:`flatten`'s order."""
    names: list[str] = []

    def v() -> Any:  # a Node, standing where the rules expect a field's value
        names.append(f"v{len(names)}")
        return o.var(names[-1])

    cs = tuple(AbsCall(*(v() for _ in range(_CALL_FIELDS))) for _ in range(calls))
    ts = tuple(v() for _ in range(turns))
    ended = tuple(v() for _ in range(turns))
    quarantined = tuple(v() for _ in range(turns))
    scalars = tuple(v() for _ in range(len(AbsState._fields) - 4))
    return AbsState(cs, ts, ended, quarantined, *scalars), names


def _flat_fields(s: AbsState) -> list[Val]:
    out: list[Val] = []
    for call in s.calls:
        out += call
    out += s.turns
    out += s.ended
    out += s.quarantined
    out += s[4:]
    return out


# --------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------


_BINARY: Final = {"eq": "==", "lt": "<", "add": "+"}


class _Emitter:
    """Renders nodes as Python source, naming shared ones."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.temps = 0

    def expr(self, x: Val) -> str:
        if not isinstance(x, Node):
            return _const(x)
        if x.name is not None:
            return x.name
        op, args = x.op, x.args
        if op == "not":
            return f"(not {self.expr(args[0])})"
        if op in ("and", "or"):
            return "(" + f" {op} ".join(self.expr(a) for a in args) + ")"
        if op == "ite":
            return f"({self.expr(args[1])} if {self.expr(args[0])} else {self.expr(args[2])})"
        if op in _BINARY:
            return f"({self.expr(args[0])} {_BINARY[op]} {self.expr(args[1])})"
        if op == "in":
            return f"({self.expr(args[0])} in ({''.join(_const(v) + ', ' for v in args[1])}))"
        if op == "lookup":
            table, event, state = args
            if isinstance(event, Node):
                return f"{table}[{self.expr(event)}][{self.expr(state)}]"
            return f"{table}{_EVENT_CODE[event]}[{self.expr(state)}]"
        if op == "guard":
            name, *inputs = args
            arity = len(inputs)
            terms = [f"{self.expr(a)} * {1 << (arity - 1 - i)}" for i, a in enumerate(inputs) if isinstance(a, Node)]
            base = sum(1 << (arity - 1 - i) for i, a in enumerate(inputs) if not isinstance(a, Node) and a)
            return f"{name}[{' + '.join(terms)}{f' + {base}' if base else ''}]"
        raise AssertionError(f"unknown node {op}")

    def define(self, nodes: Iterable[Node], indent: str) -> list[Node]:
        """Assign each node (children first) to a temporary; returns them, to forget later."""
        done: list[Node] = []
        for n in nodes:
            if n.name is None:
                text = self.expr(n)
                self.temps += 1
                n.name = f"t{self.temps}"
                self.lines.append(f"{indent}{n.name} = {text}")
                done.append(n)
        return done


def _reachable(roots: Iterable[Val]) -> list[Node]:
    """Nodes reachable from ``roots``, children before parents (inputs excluded)."""
    seen: set[int] = set()
    order: list[Node] = []
    stack: list[tuple[Node, bool]] = [(r, False) for r in roots if isinstance(r, Node)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            order.append(n)
            continue
        if id(n) in seen or n.op == "var":
            continue
        seen.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in n.children() if id(c) not in seen)
    return order


def _count_parents(blocks: Sequence[Sequence[Val]]) -> None:
    """Count, for every node, its distinct referrers: parent nodes and roots."""
    for roots in blocks:
        for r in roots:
            if isinstance(r, Node):
                r.parents += 1
    for n in _reachable(r for roots in blocks for r in roots):
        for c in set(n.children()):
            c.parents += 1


def _shared(nodes: Iterable[Node]) -> list[Node]:
    return [n for n in nodes if n.parents > 1 and n.op != "var"]


@dataclass(frozen=True)
class _Block:
    """One action: its enabling condition, its successor's fields, its table-entry bits."""

    index: int
    action: Action
    condition: Val
    fields: list[Val]
    entries: list[Val]


@dataclass(frozen=True)
class CompiledModel:
    """A model's rules as compiled Python: :attr:`step` (a flat state to its successors),
    :attr:`holds` (whether a flat state satisfies every state invariant), the conversions,
    and the generated :attr:`source` for reading."""

    model: SystemModel
    source: str
    step: Step
    holds: Callable[[Flat], bool]
    flatten: Callable[[AbsState], Flat]
    unflatten: Callable[[Flat], AbsState]
    symmetric: Callable[[Flat], Flat]  # the representative (calls sorted within each turn)
    terminal: Callable[[Flat], bool]  # every call in a terminal lifecycle state
    # :attr:`step` restricted to the actions of one group (:func:`action_group`; a group
    # without an action in the configuration has none): the successors of those actions
    group_steps: dict[str, Step]

    def entries(self, mask: int) -> set[TableEntry]:
        """The table entries whose bits are set in ``mask`` (the union of :attr:`step`'s masks)."""
        out: set[TableEntry] = set()
        for s, state in enumerate(STATES):
            for e, event in enumerate(EVENTS):
                if mask >> (s * len(EVENTS) + e) & 1:
                    out.add(TableEntry(state, event, self.model.table[state][event]))
        return out


def action_group(action: Action) -> str:
    """The group of an action for :attr:`CompiledModel.group_steps`: ``call<i>`` for the
    inputs and internal steps of call ``i``, ``broadcast`` for the turn and system inputs."""
    scope = KINDS[action.name].scope
    return f"call{action.target}" if scope in ("call", "internal") else "broadcast"


def compile_model(model: SystemModel) -> CompiledModel:
    """Evaluate the model's rules over :class:`PyOps` for every action of its configuration,
    generate one Python function from the result, and compile it."""
    c = model.config
    o = PyOps(model)
    s, names = _symbolic_state(o, c.calls, c.turns)
    blocks: list[_Block] = []
    for index, action in enumerate(model.all_actions):
        condition = enabled(o, c, s, action)
        if condition is False:
            continue
        o.entries = []
        succ = successor(o, c, s, action)
        if model.canonicalise:
            succ = canonical(o, c, succ)
        blocks.append(_Block(index, action, condition, _flat_fields(succ), o.entries))
    holds = o.and_(*(invariant_holds(o, s, inv) for inv in INVARIANT_IDS))

    _count_parents([[b.condition, *b.fields, *b.entries] for b in blocks])
    em = _Emitter()
    unpack = f"    ({', '.join(names)},) = s"

    def emit_step(name: str, chosen: Sequence[_Block]) -> None:
        """One step function over the ``chosen`` actions."""
        # Computed once per state: what more than one of them uses.
        users: dict[int, int] = {}
        for b in chosen:
            for n in _reachable([b.condition, *b.fields, *b.entries]):
                users[id(n)] = users.get(id(n), 0) + 1
        em.lines += [f"def {name}(s):", unpack, "    m = 0", "    out = []"]
        every = _reachable(r for b in chosen for r in (b.condition, *b.fields, *b.entries))
        hoisted = em.define((n for n in _shared(every) if users[id(n)] > 1), "    ")
        for b in chosen:
            em.lines.append(f"    # {b.action}")
            cond_nodes = _reachable([b.condition])
            local = em.define(_shared(cond_nodes), "    ")
            em.lines.append(f"    if {em.expr(b.condition)}:")
            local += em.define(_shared(_reachable([*b.fields, *b.entries])), "        ")
            if b.entries:
                em.lines.append(f"        m |= {' | '.join(em.expr(e) for e in b.entries)}")
            em.lines.append(f"        out.append(({b.index}, P(({''.join(em.expr(f) + ', ' for f in b.fields)}))))")
            for n in local:
                n.name = None
        em.lines += ["    return m, out", "", ""]
        for n in hoisted:
            n.name = None

    emit_step("step", blocks)
    # The same, per group of actions (:func:`action_group`), for the slot search's tables.
    groups: dict[str, list[_Block]] = {}
    for b in blocks:
        groups.setdefault(action_group(b.action), []).append(b)
    for group, chosen in groups.items():
        emit_step(f"step_{group}", chosen)
    # ``holds`` runs once per distinct state and is small: rendered inline, nothing named.
    em.lines += ["def holds(s):", unpack, f"    return bool({em.expr(holds)})", ""]
    terminal = " and ".join(f"s[{i * _CALL_FIELDS + _STATE_FIELD}] in TERMINAL" for i in range(c.calls))
    em.lines += ["", "def terminal(s):", f"    return {terminal}", ""]
    em.lines += ["", _symmetry_source(c.calls_of_turn, c.calls), ""]
    source = "\n".join(em.lines)
    filename = f"<callsafe.formal.compiled {c.to_json()} canonicalise={model.canonicalise}>"
    fits = c.restarts < 256  # every other field is a code or a count below 256
    pack: Callable[[Any], Flat] = bytes if fits else tuple
    namespace: dict[str, Any] = dict(o.tables)
    namespace.update(
        P=pack,
        JOIN=b"".join if fits else lambda parts: sum(parts, ()),
        TERMINAL=frozenset(_STATE_CODE[st] for st in TERMINAL_STATES),
    )
    exec(compile(source, filename, "exec"), namespace)  # our own generated code, nothing from outside
    return CompiledModel(
        model=model,
        source=source,
        step=namespace["step"],
        holds=namespace["holds"],
        flatten=lambda state: pack(_codes(state)),
        unflatten=_decoder(c.calls, c.turns, pack),
        symmetric=namespace["sym"],
        terminal=namespace["terminal"],
        group_steps={g: namespace[f"step_{g}"] for g in groups},
    )
