"""Coverage suites from the state graph, and the measure of what concrete traces reach.

Why: "every transition of the table was exercised" is the claim a certification report
should be able to make, and "every pair of consecutive transitions of one call" is the
next step up (it is what separates "a cancel reached a collecting call" from "a cancel
reached a collecting call *right after a repeated fragment*").

:func:`coverage_suite` explores a bounded configuration (:func:`callsafe.formal.graph.explore`)
and picks paths that cover every lifecycle transition (a state-changing table entry) and
every pair of consecutive transitions of one call. The choice is **greedy**, not optimal:
from the end of the current path it goes to the nearest step that covers something new
(breadth first over the graph, extended with each call's last transition when pairs are
wanted), and starts a new path when nothing new is reachable. Each path is turned into a
concrete trace (:mod:`callsafe.generators.concretise`), and only what that trace reaches
in the oracle's run counts as covered; a target the abstract path aimed at but the
concrete trace missed is retried once alone on a shortest path, then reported as not
reached.

:func:`reached` measures which transitions and pairs any set of concrete traces reaches,
from the oracle's step-by-step account (``Semantics.steps``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel, TableEntry
from callsafe.formal.graph import Exploration, explore
from callsafe.generators.concretise import INTERNAL_ACTIONS, concretisable, concretise
from callsafe.generators.domain import Domain, Variant
from callsafe.generators.needs import model_controls
from callsafe.model.lifecycle import TRANSITIONS, CallEvent, State
from callsafe.model.system import run_semantics
from callsafe.model.vocabulary import Trace

__all__ = [
    "ALL_TRANSITIONS",
    "DEFAULT_CONFIG",
    "CoverageSuite",
    "Pair",
    "Reached",
    "Transition",
    "config_for",
    "coverage_suite",
    "reached",
]

Transition = tuple[State, CallEvent]
Pair = tuple[Transition, Transition]

ALL_TRANSITIONS: Final[frozenset[Transition]] = frozenset(
    (s, e) for s, row in TRANSITIONS.items() for e, o in row.items() if isinstance(o, State)
)

# One call, two turns (so a new turn can supersede the first), every control: small
# enough to extend with each call's last transition, and it reaches every transition of
# the table.
DEFAULT_CONFIG: Final = Config(calls=1, turns=2, fragments=1)

_CALL_ACTIONS: Final = INTERNAL_ACTIONS | {
    "open",
    "fragment",
    "fragment_repeat",
    "fragment_conflict",
    "fragment_over_limit",
    "terminal_completed",
    "terminal_stopped",
    "terminal_repeat",
    "confirm",
    "deny",
}


@dataclass
class Reached:
    """Transitions and per-call pairs of consecutive transitions some traces exercised."""

    transitions: set[Transition] = field(default_factory=set)
    pairs: set[Pair] = field(default_factory=set)

    def update(self, other: Reached) -> None:
        self.transitions |= other.transitions
        self.pairs |= other.pairs

    def missing(self) -> list[Transition]:
        return sorted(ALL_TRANSITIONS - self.transitions)


def reached(traces: Iterable[Trace]) -> Reached:
    """What the oracle's runs of ``traces`` exercise: each step that changed a call's
    state (a table entry whose outcome is a state), and each pair of consecutive such
    steps of one call."""
    out = Reached()
    for trace in traces:
        out.update(reached_by_steps(run_semantics(trace).steps))
    return out


def reached_by_steps(steps: Iterable[object]) -> Reached:
    """:func:`reached` from a ``Semantics.steps`` list (for callers that already ran it)."""
    out = Reached()
    last: dict[object, Transition] = {}
    for step in steps:
        note = getattr(step, "note", "")
        if note:
            continue  # ignored or rejected: no transition
        transition: Transition = (step.before, step.event)  # type: ignore[attr-defined]
        out.transitions.add(transition)
        key = step.key  # type: ignore[attr-defined]
        if key in last:
            out.pairs.add((last[key], transition))
        last[key] = transition
    return out


@dataclass
class _Edge:
    action: Action
    target: AbsState
    per_call: tuple[tuple[int, Transition], ...]


class _Walker:
    """The explored graph with, per edge, which call took which transition."""

    def __init__(self, exploration: Exploration, during: bool = True) -> None:
        self.exploration = exploration
        self.during = during
        self.model = SystemModel(exploration.config)
        self.calls = exploration.config.calls
        self._edges: dict[AbsState, list[_Edge]] = {}

    def edges(self, state: AbsState) -> list[_Edge]:
        cached = self._edges.get(state)
        if cached is not None:
            return cached
        out: list[_Edge] = []
        for succ, data in self.exploration.graph[state].items():
            for action in data["actions"]:
                if not concretisable(state, action, self.during):
                    continue
                _, entries = self.model.next_state(state, action)
                out.append(_Edge(action, succ, self._attribute(state, succ, action, entries)))
        out.sort(key=lambda e: (e.action.name, e.action.target))  # deterministic
        self._edges[state] = out
        return out

    @staticmethod
    def _attribute(
        before: AbsState, after: AbsState, action: Action, entries: tuple[TableEntry, ...]
    ) -> tuple[tuple[int, Transition], ...]:
        moves = [e for e in entries if isinstance(e.outcome, State)]
        if action.name in _CALL_ACTIONS:
            return tuple((action.target, (e.state, e.event)) for e in moves)
        out: list[tuple[int, Transition]] = []
        for i, (b, a) in enumerate(zip(before.calls, after.calls, strict=True)):
            if b.state is a.state:
                continue
            match = next((e for e in moves if e.state is b.state and e.outcome is a.state), None)
            if match is not None:
                out.append((i, (match.state, match.event)))
        return tuple(out)


_Node = tuple[AbsState, tuple[Transition | None, ...]]
_Target = Transition | Pair


def _covers(node: _Node, edge: _Edge, pairs: bool) -> tuple[list[_Target], _Node]:
    _, lasts = node
    targets: list[_Target] = []
    new_lasts = list(lasts)
    for i, tr in edge.per_call:
        targets.append(tr)
        if pairs:
            previous = new_lasts[i]
            if previous is not None:
                targets.append((previous, tr))
            new_lasts[i] = tr
    return targets, (edge.target, tuple(new_lasts) if pairs else lasts)


def _is_pair(target: _Target) -> bool:
    return isinstance(target[0], tuple)


@dataclass
class CoverageSuite:
    """The traces, what they reach, and what the abstract graph offered."""

    config: Config
    traces: list[Trace]
    reached: Reached
    abstract_transitions: set[Transition]  # reachable over concretisable steps
    abstract_pairs: set[Pair]
    not_reached: list[_Target]  # aimed at, but no concrete trace reached them
    paths_tried: int
    # the abstract path of each trace (``(action, state after)`` pairs from ``initial``),
    # so that the suite can be concretised again under another variant of the domain
    paths: list[list[tuple[Action, AbsState]]] = field(default_factory=list)
    initial: AbsState | None = None

    def concretised(self, variants: Sequence[Variant]) -> list[Trace]:
        """The suite's paths concretised again, path ``k`` under ``variants[k % len]``
        (the traces as they are when there are no variants)."""
        if not variants or self.initial is None:
            return list(self.traces)
        return [
            concretise(self.config, self.initial, path, variants[k % len(variants)])
            for k, path in enumerate(self.paths)
        ]

    def dressed(self, domain: Domain) -> list[Trace]:
        """Every path once under each value of the domain's ``events`` axis (repeated,
        re-announced, continued after a stop, followed by a restart and a reused call),
        the other axes taking the next values of :meth:`Domain.nth`'s round robin that
        keep the path's verdicts. Why every path under every event treatment: each path
        takes one transition (a stop, a refusal, a confirmation) the shortest way, so
        this is where each control meets each treatment at least once, for a few
        hundred short traces."""
        if self.initial is None:
            return []
        treatments = dict(domain.choices)["events"]
        out: list[Trace] = []
        for k, path in enumerate(self.paths):
            for j, events in enumerate(treatments):
                variant = dataclasses.replace(domain.nth(k * len(treatments) + j, faithful=True), events=events)
                out.append(concretise(self.config, self.initial, path, variant))
        return out

    def summary(self) -> dict[str, object]:
        return {
            "config": self.config.to_json(),
            "traces": len(self.traces),
            "paths_tried": self.paths_tried,
            "transitions_total": len(ALL_TRANSITIONS),
            "transitions_abstract": len(self.abstract_transitions),
            "transitions_reached": len(self.reached.transitions & ALL_TRANSITIONS),
            "pairs_abstract": len(self.abstract_pairs),
            "pairs_reached": len(self.reached.pairs & self.abstract_pairs),
            "transitions_missing": [f"{s}/{e}" for s, e in self.reached.missing()],
        }


def coverage_suite(
    config: Config | None = None,
    exploration: Exploration | None = None,
    pairs: bool = True,
    max_path: int = 60,
    during: bool = True,
) -> CoverageSuite:
    """Greedy paths over the state graph of ``config`` covering every transition and (with
    ``pairs``) every pair of consecutive transitions of a call, as concrete traces.
    ``during=False`` leaves out inputs delivered during validation (for targets that do
    not call the harness's business validator)."""
    exploration = exploration or explore(config or DEFAULT_CONFIG)
    walker = _Walker(exploration, during)
    init: _Node = (exploration.initial, tuple(None for _ in range(walker.calls)))

    abstract_t: set[Transition] = set()
    abstract_p: set[Pair] = set()
    seen = {init}
    queue = deque([init])
    while queue:  # the universe: everything reachable over concretisable steps
        node = queue.popleft()
        for edge in walker.edges(node[0]):
            targets, succ = _covers(node, edge, pairs)
            for t in targets:
                if _is_pair(t):
                    abstract_p.add(t)  # type: ignore[arg-type]
                else:
                    abstract_t.add(t)  # type: ignore[arg-type]
            if succ not in seen:
                seen.add(succ)
                queue.append(succ)

    covered: set[_Target] = set()
    blocked: set[_Target] = set()
    traces: list[Trace] = []
    total = Reached()
    tried = 0

    def nearest(start: _Node, wanted: Callable[[_Target], bool]) -> tuple[list[_Edge], _Node, list[_Target]] | None:
        parent: dict[_Node, tuple[_Node, _Edge] | None] = {start: None}
        q = deque([start])
        while q:
            node = q.popleft()
            for edge in walker.edges(node[0]):
                targets, succ = _covers(node, edge, pairs)
                if any(wanted(t) for t in targets):
                    steps = [edge]
                    back = node
                    while parent[back] is not None:
                        prev, via = parent[back]  # type: ignore[misc]
                        steps.append(via)
                        back = prev
                    steps.reverse()
                    hit: list[_Target] = []
                    n = start
                    for e in steps:
                        ts, n = _covers(n, e, pairs)
                        hit.extend(ts)
                    return steps, succ, hit
                if succ not in parent:
                    parent[succ] = (node, edge)
                    q.append(succ)
        return None

    paths: dict[int, list[tuple[Action, AbsState]]] = {}

    def credit(path: list[_Edge]) -> tuple[Trace, Reached]:
        nonlocal tried
        tried += 1
        steps = [(e.action, e.target) for e in path]
        trace = concretise(exploration.config, exploration.initial, steps)
        paths[id(trace)] = steps
        got = reached([trace])
        return trace, got

    def as_targets(r: Reached) -> set[_Target]:
        out: set[_Target] = set(r.transitions)
        if pairs:
            out |= set(r.pairs)
        return out

    universe: set[_Target] = set(abstract_t) | (set(abstract_p) if pairs else set())

    # Phase 1: long greedy paths.
    while True:
        path: list[_Edge] = []
        node = init
        planned: set[_Target] = set()
        while len(path) < max_path:

            def wanted(
                t: _Target,
                planned: set[_Target] = planned,
                covered: set[_Target] = covered,
                blocked: set[_Target] = blocked,
            ) -> bool:
                return t in universe and t not in covered and t not in blocked and t not in planned

            found = nearest(node, wanted)
            if found is None:
                break
            steps, node, hit = found
            path.extend(steps)
            planned.update(hit)
        if not path:
            break
        trace, got = credit(path)
        new = as_targets(got) - covered
        covered |= as_targets(got)
        total.update(got)
        blocked |= {t for t in planned if t not in covered}
        if new:
            traces.append(trace)

    # Phase 2: each target still missing, alone, on a shortest path.
    not_reached: list[_Target] = []
    for target in sorted(blocked - covered, key=repr):
        if target in covered:
            continue
        found = nearest(init, lambda t, want=target: t == want)  # type: ignore[misc]
        if found is not None:
            trace, got = credit(found[0])
            if target in as_targets(got):
                covered |= as_targets(got)
                total.update(got)
                traces.append(trace)
                continue
        not_reached.append(target)

    return CoverageSuite(
        exploration.config,
        traces,
        total,
        abstract_t,
        abstract_p,
        not_reached,
        tried,
        [paths[id(t)] for t in traces],
        exploration.initial,
    )


def config_for(capabilities: frozenset[str]) -> Config:
    """:data:`DEFAULT_CONFIG` cut down to what a target with ``capabilities`` can take."""
    controls = model_controls(capabilities)
    return Config(
        calls=1,
        turns=2 if "cancellation" in capabilities else 1,  # a second turn supersedes the first
        fragments=1,
        controls=controls,
        restarts=1 if "restart" in controls else 0,
    )
