"""The model as a lean TLA+ module: what TLC explores fastest, with the explorer's counts.

Why a second export: :mod:`callsafe.formal.tla` writes every action of every call out in
full, as the rules compute it (each action rewrites every variable as a whole tuple, the
canonicalisation inlined per field, the table a record of records looked up by string,
the dispatch guard a 64-row disjunction). That text reads well beside the rules, but it
makes TLC 2.5-3.4x slower than a hand-written spec of the same state space, so a speed
comparison on it flatters the explorer. This module is the lean encoding, generated from
the same rule functions over the same :class:`~callsafe.formal.tla.TlaOps` expressions:

* **parametrised actions**: one operator per kind of call action, ``A_fragment(k)``, taken
  by ``\\E k \\in Calls``; the calls are model values (``c1``, ``c2``...), so TLC can be given
  the explorer's symmetry (below). Turn and system actions stay one per turn, as in the
  explorer's catalogue;
* **only what changed is written**: a call action updates its call's fields with
  ``EXCEPT ![k]``; the canonicalisation reduces only the calls an action reached, and the
  response and tool flags are recomputed only when a call has just become terminal (in a
  canonical state nothing else can change them);
* **the lifecycle table as functions over enumerated values**: a lifecycle state is its
  number (``1`` = ``absent``..., listed in the module), and per event ``NX_<event>`` is a
  tuple giving the state after it (itself where the table ignores or rejects it) and
  ``MV_<event>`` whether it moves; the guards are constant functions over ``BOOLEAN``
  tuples, evaluated once when TLC starts.

:func:`lean_config` with ``symmetry=True`` gives TLC ``SYMMETRY Symm``, the permutations of
each turn's calls (the group the explorer's :func:`~callsafe.formal.abstract.symmetric`
quotients by, built as products with ``@@`` so that it is the whole group, not the union of
its factors). TLC's symmetry keeps the first state of each orbit it meets instead of a
canonical representative, but counts orbits all the same, so its distinct and generated
counts equal the symmetric explorer's (``tests/test_formal_tla.py``).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from callsafe.formal.abstract import (
    INVARIANT_IDS,
    KINDS,
    AbsCall,
    AbsState,
    Action,
    SystemModel,
    canonical,
    enabled,
    invariant_holds,
    successor,
)
from callsafe.formal.ops import Guards, Table, Val, truth_table
from callsafe.formal.tla import T, TlaOps, tla_name
from callsafe.model.lifecycle import TERMINAL_STATES, CallEvent, State

__all__ = ["LeanOps", "export_lean", "lean_config", "lean_module"]

STATES = tuple(State)
EVENTS = tuple(CallEvent)
_STATE_CODE = {s: n + 1 for n, s in enumerate(STATES)}
_EVENT_CODE = {e: n + 1 for n, e in enumerate(EVENTS)}
_CALL_VARS = AbsCall._fields
_TURN_VARS = ("turn", "ended", "quarantined")
_SCALARS = ("tool_disabled", "tool_changed", "restarts")
_VARIABLES = (*_CALL_VARS, *_TURN_VARS, *_SCALARS)
_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*('?)(\[[A-Za-z0-9_]+\])?$|^\"[^\"]*\"$|^\d+$")


class LeanOps(TlaOps):
    """:class:`~callsafe.formal.tla.TlaOps` with lifecycle states and events as numbers and
    the table and guards as constant functions, and common subexpressions named.

    Why the naming: the rules build a call's new fields one by one, each from the same few
    conditions (did the table move it, is the new state terminal, is the buffer fresh);
    written out inline, TLC evaluates each of them once per field. :func:`_generate` builds
    an action's text repeatedly: every compound expression built more than once in one
    pass (:attr:`counts`) is a ``LET`` name in the next (:attr:`hot`), until nothing new
    repeats; names are kept across passes (:attr:`names`), so an expression's text is
    the same in every pass once its parts are named."""

    def __init__(
        self, table: Table, guards: Guards, hot: set[str], names: dict[str, str], sets: dict[str, tuple[bool, ...]]
    ) -> None:
        super().__init__(table, guards)
        self.hot = hot
        self.names = names
        self.sets = sets  # the sets of lifecycle states used, as membership tuples (module level)
        self.counts: Counter[str] = Counter()
        self._moves: dict[str, tuple[str, str]] = {}  # MV text -> (NX text, the state's text)

    def _cse(self, x: Val) -> T:
        t = self._literal(x)
        if _SIMPLE.match(t.text):
            return t
        return self.share(t) if t.text in self.hot else t

    def not_(self, x: Val) -> T:
        return self._cse(super().not_(x))

    def and_(self, *xs: Val) -> T:
        return self._cse(super().and_(*xs))

    def or_(self, *xs: Val) -> T:
        return self._cse(super().or_(*xs))

    def ite(self, c: Val, a: Val, b: Val) -> T:
        tc, ta, tb = self._literal(c), self._literal(a), self._literal(b)
        if self._moves.get(tc.text) == (ta.text, tb.text):  # NX already is the state where MV is false
            return self.lit(ta)
        return self._cse(super().ite(c, a, b))

    def eq(self, a: Val, b: Val) -> T:
        return self._cse(super().eq(a, b))

    def lt(self, a: Val, b: Val) -> T:
        return self._cse(super().lt(a, b))

    def add(self, a: Val, n: int) -> T:
        return self._cse(super().add(a, n))

    def is_in(self, a: Val, values: Any) -> T:
        items = tuple(values)
        if isinstance(a, T) and items and all(isinstance(v, State) for v in items):
            # a lifecycle state in a set: one subscript of a constant tuple (TLC would build
            # and normalise the set on every evaluation)
            name = "In_" + "_".join(str(_STATE_CODE[v]) for v in sorted(items, key=_STATE_CODE.__getitem__))
            self.sets[name] = tuple(st in items for st in STATES)
            return self._cse(T(f"{name}[{self.lit(a)}]"))
        return self._cse(super().is_in(a, items))

    def lit(self, value: Val) -> T:
        if isinstance(value, T):  # a use of an expression (counted for naming)
            self.counts[value.text] += 1
            return value
        return self._literal(value)

    def _literal(self, value: Val) -> T:
        if isinstance(value, T):
            return value
        if isinstance(value, State):
            return T(str(_STATE_CODE[value]))
        if isinstance(value, CallEvent):
            return T(str(_EVENT_CODE[value]))
        return super().lit(value)

    def share(self, x: Val) -> Val:
        t = self.lit(x)
        if _SIMPLE.match(t.text):
            return t
        if t.text not in self._named:
            name = self.names.setdefault(t.text, f"v{len(self.names) + 1}")
            self.lets.append((name, t.text))
            self._named[t.text] = T(name)
        return self._named[t.text]

    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        s = self.lit(state)
        if isinstance(event, CallEvent):
            moved, new = self.share(T(f"MV_{event.value}[{s}]")), self.share(T(f"NX_{event.value}[{s}]"))
        else:
            e = self.lit(event)
            moved, new = self.share(T(f"MV[{e}][{s}]")), self.share(T(f"NX[{e}][{s}]"))
        self._moves[self._literal(moved).text] = (self._literal(new).text, s.text)
        return moved, new

    def moves(self, state: Val, event: CallEvent) -> T:
        return T(f"MV_{event.value}[{self.lit(state)}]")

    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> T:
        return T(f"ClassifyOpen[{', '.join(self.lit(x).text for x in (turn_live, response_open, quarantined))}]")

    def classify_dispatch(
        self,
        needs_confirmation: Val,
        confirmed: Val,
        turn_live: Val,
        quarantined: Val,
        tool_unchanged: Val,
        permitted: Val,
    ) -> T:
        inputs = (needs_confirmation, confirmed, turn_live, quarantined, tool_unchanged, permitted)
        return T(f"ClassifyDispatch[{', '.join(self.lit(x).text for x in inputs)}]")

    def event_is(self, event: Val, which: CallEvent) -> T:
        return self.eq(event, which)


# --------------------------------------------------------------------------------------
# Symbolic states
# --------------------------------------------------------------------------------------


def _call(ref: str, prime: str = "") -> AbsCall:
    return AbsCall(*(T(f"{f}{prime}[{ref}]") for f in _CALL_VARS))  # type: ignore[arg-type]


def _state(calls: Sequence[AbsCall], turns: int, turn_ref: str | None = None) -> AbsState:
    """Calls as given; each turn's fields as ``turn[t]`` (or all as ``turn[turn_ref]``)."""

    def ref(name: str, t: int) -> T:
        return T(f"{name}[{turn_ref if turn_ref is not None else t + 1}]")

    cols = [tuple(ref(name, t) for t in range(turns)) for name in _TURN_VARS]
    return AbsState(tuple(calls), *cols, *(T(v) for v in _SCALARS))  # type: ignore[arg-type]


def _values(o: LeanOps, s: AbsState) -> dict[str, list[str]]:
    """Each variable's entries in ``s``, as text: per call, per turn, or one."""
    out = {f: [o.lit(getattr(k, f)).text for k in s.calls] for f in _CALL_VARS}
    out.update({name: [o.lit(v).text for v in col] for name, col in zip(_TURN_VARS, s[1:4], strict=True)})
    out.update({name: [o.lit(v).text] for name, v in zip(_SCALARS, s[4:], strict=True)})
    return out


def _updates(
    names: Sequence[str], keys: Sequence[str], now: dict[str, list[str]], then: dict[str, list[str]]
) -> list[str]:
    """``v' = [v EXCEPT ![key] = new, ...]`` for the entries that changed."""
    out = []
    for name in names:
        changed = [(key, new) for key, old, new in zip(keys, now[name], then[name], strict=True) if new != old]
        if changed:
            out.append(f"{name}' = [{name} EXCEPT {', '.join(f'![{key}] = {new}' for key, new in changed)}]")
    return out


def _reached(model: SystemModel, a: Action) -> list[int]:
    c, kind = model.config, KINDS[a.name]
    if kind.scope in ("call", "internal"):
        return [a.target]
    if kind.reach == "turn":
        return list(c.calls_of_turn[a.target])
    if kind.reach == "older":
        return [i for t in range(a.target) for i in c.calls_of_turn[t]]
    return list(range(c.calls))


def _action_name(a: Action, parametrised: bool) -> str:
    if parametrised:
        return f"A_{a.name}"
    return f"A_{a.name}" + (f"_{a.target}" if a.target >= 0 else "")


def _render(name: str, comment: str, o: LeanOps, body: list[str]) -> str:
    lines = [f"\\* {comment}", f"{name} =="]
    if o.lets:
        lines.append("    LET " + "\n        ".join(f"{n} == {text}" for n, text in o.lets))
        lines.append("    IN  " + "\n        ".join(f"/\\ {b}" for b in body))
    else:
        lines += [f"    /\\ {b}" for b in body]
    return "\n".join(lines)


def _unchanged(names: Sequence[str], body: list[str]) -> list[str]:
    written = {b.split("'", 1)[0] for b in body if "' = " in b}
    rest = [n for n in names if n not in written]
    return [f"UNCHANGED <<{', '.join(rest)}>>"] if rest else []


def _flags(o: LeanOps, model: SystemModel, calls: Sequence[AbsCall], s: AbsState) -> tuple[list[str], list[str]]:
    """What :func:`canonical` makes of the response and tool flags once ``calls`` (the calls
    after the action) are as given: updates, and the flag variables that change."""
    after = canonical(o, model.config, s._replace(calls=tuple(calls)))
    now, then = _values(o, s), _values(o, after)
    names = [*_TURN_VARS[1:], *_SCALARS]
    turns = [str(t + 1) for t in range(model.config.turns)]
    updates = _updates(_TURN_VARS[1:], turns, now, then)
    updates += [f"{n}' = {then[n][0]}" for n in _SCALARS if then[n] != now[n]]
    return updates, names


def _generate(model: SystemModel, sets: dict[str, tuple[bool, ...]], build: Callable[[LeanOps], str]) -> str:
    """``build``'s text with its repeated subexpressions named (see :class:`LeanOps`)."""
    hot: set[str] = set()
    names: dict[str, str] = {}
    for _ in range(16):
        o = LeanOps(model.table, model.guards, hot, names, sets)
        text = build(o)
        repeated = {t for t, n in o.counts.items() if n > 1}
        if repeated <= hot:
            return text
        hot |= repeated
    return text


def _call_action(model: SystemModel, a: Action, o: LeanOps) -> str:
    """One kind of call action, for call ``k``: its guard and the call's new fields, the
    call reduced if it is terminal, and the flags recomputed if it has just become so."""
    c = model.config
    mine = _call("k")
    s = _state([mine] * c.calls, c.turns, "TurnOf[k]")
    x = Action(a.name, 0)
    guard = o.lit(enabled(o, c, s, x))
    succ = successor(o, c, s, x)
    if succ.calls[1:] != s.calls[1:] or succ[1:] != s[1:]:
        raise AssertionError(f"{a.name} changes more than its own call: the lean export assumes it does not")
    new = canonical(o, c, succ).calls[0] if model.canonicalise else succ.calls[0]
    now, then = _values(o, s._replace(calls=(mine,))), _values(o, s._replace(calls=(new,)))
    body = [f"{guard}", *_updates(_CALL_VARS, ["k"], now, then)]
    if model.canonicalise:
        became = o.and_(o.is_in(new.state, TERMINAL_STATES), o.not_(o.is_in(mine.state, TERMINAL_STATES)))
        primed = [_call(f"c{i + 1}", "'") for i in range(c.calls)]
        updates, names = _flags(o, model, primed, _state(primed, c.turns))
        if updates and any(b.startswith("state' ") for b in body):  # the call may have become terminal
            both = " /\\ ".join(updates)
            body.append(f"IF {became} THEN {both} ELSE UNCHANGED <<{', '.join(names)}>>")
            body += _unchanged([*_CALL_VARS, "turn"], body)
        else:
            body += _unchanged(_VARIABLES, body)
    else:
        body += _unchanged(_VARIABLES, body)
    return _render(f"{_action_name(a, True)}(k)", f"{a.name}, for call k", o, body)


def _other_action(model: SystemModel, a: Action, o: LeanOps) -> str:
    """A turn or system action: the calls it reaches (canonicalised), turns, flags."""
    c = model.config
    s = _state([_call(f"c{i + 1}") for i in range(c.calls)], c.turns)
    guard = o.lit(enabled(o, c, s, a))
    succ = successor(o, c, s, a)
    reached = _reached(model, a)
    if model.canonicalise and reached:
        done = canonical(o, c, succ)
        succ = done._replace(calls=tuple(done.calls[i] if i in reached else s.calls[i] for i in range(c.calls)))
    now, then = _values(o, s), _values(o, succ)
    body = [f"{guard}"]
    body += _updates(_CALL_VARS, [f"c{i + 1}" for i in range(c.calls)], now, then)
    body += _updates(_TURN_VARS, [str(t + 1) for t in range(c.turns)], now, then)
    body += [f"{n}' = {then[n][0]}" for n in _SCALARS if then[n] != now[n]]
    body += _unchanged(_VARIABLES, body)
    return _render(_action_name(a, False), str(a), o, body)


# --------------------------------------------------------------------------------------
# The module and its configuration
# --------------------------------------------------------------------------------------


def _fcn(entries: Sequence[tuple[str, str]]) -> str:
    return "(" + " @@ ".join(f"{k} :> {v}" for k, v in entries) + ")"


def _guard(name: str, guard: object, arity: int) -> str:
    rows = truth_table(guard, arity)  # type: ignore[arg-type]
    entries = sorted(
        ("<<" + ", ".join("TRUE" if b else "FALSE" for b in row) + ">>", str(_EVENT_CODE[event]))
        for event, inputs in rows.items()
        for row in inputs
    )
    return f"{name} == {_fcn(entries)}"


def _table(table: Table) -> list[str]:
    lines = [
        "\\* Lifecycle states: " + ", ".join(f"{_STATE_CODE[s]} {s.value}" for s in STATES),
        "\\* Events: " + ", ".join(f"{_EVENT_CODE[e]} {e.value}" for e in EVENTS),
        "\\* NX_<event>[s]: the state after the event in state s (s itself where the table ignores or",
        "\\* rejects it); MV_<event>[s]: whether the table moves the call.",
    ]
    for e in EVENTS:
        outcomes = [table[s][e] for s in STATES]
        nx = [_STATE_CODE[r] if isinstance(r, State) else _STATE_CODE[s] for s, r in zip(STATES, outcomes, strict=True)]
        mv = ["TRUE" if isinstance(r, State) else "FALSE" for r in outcomes]
        lines.append(f"NX_{e.value} == <<{', '.join(map(str, nx))}>>")
        lines.append(f"MV_{e.value} == <<{', '.join(mv)}>>")
    lines.append(f"NX == <<{', '.join(f'NX_{e.value}' for e in EVENTS)}>>")
    lines.append(f"MV == <<{', '.join(f'MV_{e.value}' for e in EVENTS)}>>")
    return lines


def _symmetry(model: SystemModel) -> str:
    groups = [
        "Permutations({" + ", ".join(f"c{i + 1}" for i in members) + "})"
        for members in model.config.calls_of_turn
        if len(members) > 1
    ]
    if not groups:
        return "Symm == {}"
    names = [f"p{n}" for n in range(len(groups))]
    if len(groups) == 1:
        return f"Symm == {groups[0]}"
    binds = ", ".join(f"{p} \\in {g}" for p, g in zip(names, groups, strict=True))
    return f"Symm == {{{' @@ '.join(names)} : {binds}}}"


def lean_module(model: SystemModel, module: str = "CallsafeModel", invariants: Sequence[str] = INVARIANT_IDS) -> str:
    """The lean TLA+ text of ``model`` (see the module's docstring)."""
    c = model.config
    sets: dict[str, tuple[bool, ...]] = {}
    o = LeanOps(model.table, model.guards, set(), {}, sets)
    calls = [f"c{i + 1}" for i in range(c.calls)]
    (initial,) = model.init_states()
    init = _values(o, initial)
    init_lines = []
    for name in _CALL_VARS:
        if len(set(init[name])) != 1:
            raise AssertionError("the initial calls differ: the lean export assumes they do not")
        init_lines.append(f"{name} = [k \\in Calls |-> {init[name][0]}]")
    init_lines += [f"{name} = <<{', '.join(init[name])}>>" for name in _TURN_VARS]
    init_lines += [f"{name} = {init[name][0]}" for name in _SCALARS]
    one = _state([_call("k")], c.turns, "TurnOf[k]")
    invs = [f"{tla_name(inv)} == \\A k \\in Calls : {o.lit(invariant_holds(o, one, inv))}" for inv in invariants]
    call_kinds = [a for a in model.all_actions if KINDS[a.name].scope in ("call", "internal") and a.target == 0]
    others = [a for a in model.all_actions if KINDS[a.name].scope in ("turn", "global")]
    turn_of = _fcn([(k, str(c.turn_of(i) + 1)) for i, k in enumerate(calls)])
    actions = [_generate(model, sets, functools.partial(_call_action, model, a)) + "\n" for a in call_kinds]
    actions += [_generate(model, sets, functools.partial(_other_action, model, a)) + "\n" for a in others]
    membership = [
        f"{name} == <<{', '.join('TRUE' if b else 'FALSE' for b in row)}>>" for name, row in sorted(sets.items())
    ]
    parts = [
        f"---- MODULE {module} ----",
        "\\* Generated by callsafe (callsafe.formal.tla_lean) from the lifecycle table, the guards and the",
        "\\* system rules of callsafe.formal.abstract. Do not edit: regenerate with `callsafe export --tla DIR`.",
        f"\\* Configuration: {json.dumps(c.to_json())}; canonicalised: {model.canonicalise}.",
        "EXTENDS Naturals, TLC",
        "",
        f"CONSTANTS {', '.join(calls)}",
        f"Calls == {{{', '.join(calls)}}}",
        f"TurnOf == {turn_of}",
        "",
        f"VARIABLES {', '.join(_VARIABLES)}",
        f"vars == <<{', '.join(_VARIABLES)}>>",
        "",
        *_table(model.table),
        "",
        "\\* In_<states>[s]: whether lifecycle state s is one of <states>.",
        *membership,
        "",
        _guard("ClassifyOpen", model.guards.classify_open, 3),
        "",
        _guard("ClassifyDispatch", model.guards.classify_dispatch, 6),
        "",
        "Init ==\n    " + "\n    ".join(f"/\\ {line}" for line in init_lines),
        "",
        *actions,
        "Next ==\n    "
        + "\n    ".join(
            [f"\\/ \\E k \\in Calls : {_action_name(a, True)}(k)" for a in call_kinds]
            + [f"\\/ {_action_name(a, False)}" for a in others]
        ),
        "",
        "Spec == Init /\\ [][Next]_vars",
        "",
        *invs,
        "",
        _symmetry(model),
        "",
        "====",
        "",
    ]
    return "\n".join(parts)


def lean_config(model: SystemModel, invariants: Sequence[str] = INVARIANT_IDS, symmetry: bool = False) -> str:
    """The TLC configuration: the calls as model values, the initial predicate, the
    next-state relation, the invariants and, with ``symmetry``, ``SYMMETRY Symm``."""
    calls = [f"c{i + 1}" for i in range(model.config.calls)]
    text = "CONSTANTS\n" + "".join(f"    {k} = {k}\n" for k in calls)
    text += "INIT Init\nNEXT Next\n" + "".join(f"INVARIANT {tla_name(i)}\n" for i in invariants)
    if symmetry and any(len(m) > 1 for m in model.config.calls_of_turn):
        text += "SYMMETRY Symm\n"
    return text


def export_lean(
    model: SystemModel,
    out_dir: Path,
    module: str = "CallsafeModel",
    invariants: Sequence[str] = INVARIANT_IDS,
    symmetry: bool = False,
) -> tuple[Path, Path]:
    """Write the lean ``<module>.tla`` and its ``<module>.cfg`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tla = out_dir / f"{module}.tla"
    cfg = out_dir / f"{module}.cfg"
    tla.write_text(lean_module(model, module, invariants))
    cfg.write_text(lean_config(model, invariants, symmetry))
    return tla, cfg
