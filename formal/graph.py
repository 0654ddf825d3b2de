"""The reachable state space of a bounded configuration, as a networkx graph.

Breadth-first exploration of :class:`callsafe.formal.abstract.SystemModel`: every reachable
abstract state is a node, every action an edge labelled with the actions that lead along
it (parallel actions share one edge, so ``transitions`` counts actions, not edges).
Breadth-first order makes the path to any state a shortest one, which is what a
counterexample should be.

Why the search looks the way it does: it is the hot loop of ``callsafe model``, the coverage
suites and the formal cross-checks against TLC, so it runs the rules compiled
(:mod:`callsafe.formal.compiled`: flat tuples, one generated function per configuration)
and stores the graph as arrays of state and action numbers (:class:`Transitions`); the
networkx graph, the parent map and the decoded states are built from them when first
asked for. ``explore(..., compiled=False)`` runs the same search interpreting the rules step
by step, the reference both are tested against (``tests/test_model_compiled.py``).
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, cast

import networkx as nx

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel, TableEntry, state_invariants
from callsafe.formal.compiled import compile_model
from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, State

__all__ = ["Exploration", "GraphStats", "Transitions", "explore", "lifecycle_coverage"]


@dataclass(frozen=True)
class GraphStats:
    states: int
    transitions: int
    terminal_states: int  # states in which every call is in a terminal lifecycle state
    deadlocks: int  # states with no action at all
    lifecycle_transitions_covered: int
    lifecycle_transitions_total: int
    violations: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Exploration:
    """The explored graph, with the parent of every state on a shortest path.

    The search stores the graph compactly (why: a networkx ``DiGraph`` keeps three dicts per
    node and an attribute dict per edge, several times the memory of the states
    themselves, and building it costs more than the search): states by number in discovery
    order, each state's transitions as arrays of successor numbers and action numbers
    (:class:`Transitions`). :attr:`graph` and :attr:`parent` are built from them on first
    use, exactly as the search used to build them: same nodes, edges and insertion orders."""

    config: Config
    transitions: int
    initial: AbsState
    entries: set[TableEntry]
    violations: dict[AbsState, list[tuple[str, str]]]
    store: Transitions

    @functools.cached_property
    def states(self) -> list[AbsState]:
        """Every reachable state, in breadth-first discovery order (``states[0]`` is the
        initial state)."""
        return self.store.decoded()

    @functools.cached_property
    def graph(self) -> nx.DiGraph[AbsState]:
        """Every state a node, every pair of states linked by some action an edge whose
        ``actions`` attribute lists those actions (``transitions`` counts actions)."""
        states, s = self.states, self.store
        g: nx.DiGraph[AbsState] = nx.DiGraph()
        g.add_nodes_from(states)
        for i, src in enumerate(states):
            out: dict[int, list[Action]] = {}
            for k in range(s.offsets[i], s.offsets[i + 1]):
                out.setdefault(s.targets[k], []).append(s.actions[s.labels[k]])
            g.add_edges_from((src, states[j], {"actions": acts}) for j, acts in out.items())
        return g

    @functools.cached_property
    def parent(self) -> dict[AbsState, tuple[AbsState, Action] | None]:
        """Each state's predecessor on a shortest path from the initial state, and the action."""
        states, s = self.states, self.store
        links: dict[AbsState, tuple[AbsState, Action] | None] = {states[0]: None}
        for i in range(1, len(states)):
            links[states[i]] = (states[s.parents[i]], s.actions[s.via[i]])
        return links

    def path_to(self, state: AbsState) -> list[tuple[Action, AbsState]]:
        """A shortest sequence of actions from the initial state to ``state``."""
        steps: list[tuple[Action, AbsState]] = []
        node = state
        while True:
            link = self.parent[node]
            if link is None:
                break
            prev, action = link
            steps.append((action, node))
            node = prev
        return list(reversed(steps))

    def shortest_violation(self, invariant: str | None = None) -> list[tuple[Action, AbsState]] | None:
        """A shortest path to a state violating ``invariant`` (any, when None)."""
        best: list[tuple[Action, AbsState]] | None = None
        for state, problems in self.violations.items():
            if invariant is None or any(inv == invariant for inv, _ in problems):
                path = self.path_to(state)
                if best is None or len(path) < len(best):
                    best = path
        return best

    def stats(self) -> GraphStats:
        s = self.store
        terminal = sum(1 for n in self.states if all(c.state in TERMINAL_STATES for c in n.calls))
        deadlocks = sum(1 for i in range(len(s)) if s.offsets[i] == s.offsets[i + 1])
        covered, total = lifecycle_coverage(self.entries)
        return GraphStats(
            states=len(s),
            transitions=self.transitions,
            terminal_states=terminal,
            deadlocks=deadlocks,
            lifecycle_transitions_covered=len(covered),
            lifecycle_transitions_total=total,
            violations=len(self.violations),
        )


def lifecycle_coverage(entries: set[TableEntry]) -> tuple[set[tuple[State, Any]], int]:
    """Which state-changing table entries (``(state, event) -> State``) were exercised,
    out of how many the table has."""
    all_moves = {(s, e) for s, row in TRANSITIONS.items() for e, o in row.items() if isinstance(o, State)}
    covered = {(e.state, e.event) for e in entries if isinstance(e.outcome, State)} & all_moves
    return covered, len(all_moves)


@dataclass
class Transitions:
    """The graph as the search stores it: state ``i`` is ``decode(keys[i])``; its transitions
    are ``offsets[i]`` to ``offsets[i + 1]`` in ``targets`` (successor numbers) and ``labels``
    (action numbers in ``actions``); ``parents[i]`` and ``via[i]`` are its predecessor on a
    shortest path and the action from there (``-1`` and ``0`` for the initial state)."""

    actions: list[Action]
    keys: list[Any]  # what identifies a state in the search: a flat tuple (compiled) or the AbsState
    decode: Callable[[Any], AbsState]
    offsets: array[int] = field(default_factory=lambda: array("q", [0]))
    targets: array[int] = field(default_factory=lambda: array("l"))
    labels: array[int] = field(default_factory=lambda: array("H"))
    parents: array[int] = field(default_factory=lambda: array("l", [-1]))
    via: array[int] = field(default_factory=lambda: array("H", [0]))

    def __len__(self) -> int:
        return len(self.keys)

    def decoded(self) -> list[AbsState]:
        return [self.decode(k) for k in self.keys]


def explore(
    config: Config | None = None,
    model: SystemModel | None = None,
    invariants: Callable[[AbsState], list[tuple[str, str]]] = state_invariants,
    max_states: int = 2_000_000,
    compiled: bool = True,
) -> Exploration:
    """Explore every reachable state of ``model`` (built from ``config``) breadth first.

    By default the rules run compiled (:mod:`callsafe.formal.compiled`); ``compiled=False``
    interprets them step by step over :class:`~callsafe.formal.ops.Concrete` (the
    reference the compiled rules are tested against), as does a model whose class
    overrides :meth:`~SystemModel.actions` or :meth:`~SystemModel.next_state`."""
    model = model or SystemModel(config)
    (initial,) = model.init_states()
    plain = type(model).actions is SystemModel.actions and type(model).next_state is SystemModel.next_state
    if compiled and plain:
        store, entries, violations = _search_compiled(model, initial, invariants, max_states)
    else:
        store, entries, violations = _search_generic(model, initial, invariants, max_states)
    return Exploration(model.config, len(store.targets), initial, entries, violations, store)


Found = tuple[Transitions, set[TableEntry], dict[AbsState, list[tuple[str, str]]]]


def _too_many(max_states: int) -> RuntimeError:
    return RuntimeError(f"more than {max_states} states: lower the bounds")


def _search_compiled(
    model: SystemModel,
    initial: AbsState,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
) -> Found:
    """Breadth first over flat states with the compiled rules. Invariants: the compiled
    check first, the messages from ``invariants`` only where it fails (or for every state,
    when ``invariants`` is not the model's own :func:`state_invariants`)."""
    cm = compile_model(model)
    step, holds, decode = cm.step, cm.holds, cm.unflatten
    own = invariants is state_invariants
    start = cm.flatten(initial)
    index: dict[Hashable, int] = {start: 0}
    store = Transitions(list(model.all_actions), [start], decode)
    keys, offsets, targets, labels, parents, via = (
        store.keys,
        store.offsets,
        store.targets,
        store.labels,
        store.parents,
        store.via,
    )
    violations: dict[AbsState, list[tuple[str, str]]] = {}
    mask = 0
    i = 0
    while i < len(keys):
        flat = keys[i]
        if not own or not holds(flat):
            state = decode(flat)
            problems = invariants(state)
            if problems:
                violations[state] = problems
        m, succs = step(flat)
        mask |= m
        for a, succ in succs:
            j = index.get(succ)
            if j is None:
                j = len(keys)
                if j >= max_states:
                    raise _too_many(max_states)
                index[succ] = j
                keys.append(succ)
                parents.append(i)
                via.append(a)
            targets.append(j)
            labels.append(a)
        offsets.append(len(targets))
        i += 1
    return store, cm.entries(mask), violations


def _search_generic(
    model: SystemModel,
    initial: AbsState,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
) -> Found:
    """Breadth first with the rules interpreted per step (:meth:`SystemModel.next_state`)."""
    store = Transitions(list(model.all_actions), [initial], _same)
    number = {a: n for n, a in enumerate(store.actions)}
    index: dict[Hashable, int] = {initial: 0}
    entries: set[TableEntry] = set()
    violations: dict[AbsState, list[tuple[str, str]]] = {}
    i = 0
    while i < len(store.keys):
        state = cast(AbsState, store.keys[i])
        problems = invariants(state)
        if problems:
            violations[state] = problems
        for action in model.actions(state):
            succ, exercised = model.next_state(state, action)
            entries.update(exercised)
            a = number.get(action)
            if a is None:  # an action outside ``all_actions`` (a subclass's own)
                a = number[action] = len(store.actions)
                store.actions.append(action)
            j = index.get(succ)
            if j is None:
                j = len(store.keys)
                if j >= max_states:
                    raise _too_many(max_states)
                index[succ] = j
                store.keys.append(succ)
                store.parents.append(i)
                store.via.append(a)
            store.targets.append(j)
            store.labels.append(a)
        store.offsets.append(len(store.targets))
        i += 1
    return store, entries, violations


def _same(state: Any) -> AbsState:
    return cast(AbsState, state)
