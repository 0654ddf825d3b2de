"""The reachable state space of a bounded configuration, as a networkx graph.

Breadth-first exploration of :class:`callsafe.formal.abstract.SystemModel`: every reachable
abstract state is a node, every action an edge labelled with the actions that lead along
it (parallel actions share one edge, so ``transitions`` counts actions, not edges).
Breadth-first order makes the path to any state a shortest one, which is what a
counterexample should be.

Why the search looks the way it does: it is the hot loop of ``callsafe model``, the coverage
suites and the formal cross-checks against TLC, so it runs the rules compiled
(:mod:`callsafe.formal.compiled`: one generated function per configuration), over states
coded as integers with that function memoised per slot (:mod:`callsafe.formal.slots`),
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

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel, TableEntry, state_invariants, symmetric
from callsafe.formal.compiled import CompiledModel, compile_model
from callsafe.formal.slots import SlotOverflow, SlotSearch, SlotsFound
from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, State

__all__ = ["Exploration", "GraphStats", "StateBoundExceeded", "Transitions", "explore", "lifecycle_coverage"]


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
    use, exactly as the search used to build them: same nodes, edges and insertion orders.

    Explored with ``graph=False``, the transitions are counted, not kept (:attr:`graph`
    is then unavailable; statistics, violations and shortest paths are not). Explored
    with ``symmetry=True``, the states are representatives (:func:`~callsafe.formal.abstract.symmetric`)
    and a path names calls by their place in them; :meth:`concrete_path` maps it back."""

    config: Config
    transitions: int
    initial: AbsState
    entries: set[TableEntry]
    violations: dict[AbsState, list[tuple[str, str]]]
    store: Transitions
    model: SystemModel | None = None
    symmetry: bool = False
    terminal_states: int = -1  # counted by the search (-1: count from the states)
    deadlocks: int = -1
    violation_index: dict[AbsState, int] = field(default_factory=dict)

    @functools.cached_property
    def states(self) -> list[AbsState]:
        """Every reachable state, in breadth-first discovery order (``states[0]`` is the
        initial state)."""
        return self.store.decoded()

    @functools.cached_property
    def graph(self) -> nx.DiGraph[AbsState]:
        """Every state a node, every pair of states linked by some action an edge whose
        ``actions`` attribute lists those actions (``transitions`` counts actions)."""
        if not self.store.kept:
            raise ValueError("explored without its transitions (explore(..., graph=False)): no graph to build")
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
        """A shortest sequence of actions from the initial state to ``state`` (a state of
        this exploration: a representative, explored with symmetry)."""
        index = self.violation_index.get(state)
        if index is not None:  # by number: decodes the path's states only
            s = self.store
            steps: list[tuple[Action, AbsState]] = []
            while index > 0:
                steps.append((s.actions[s.via[index]], s.decode(s.keys[index])))
                index = s.parents[index]
            return list(reversed(steps))
        steps = []
        node = state
        while True:
            link = self.parent[node]
            if link is None:
                break
            prev, action = link
            steps.append((action, node))
            node = prev
        return list(reversed(steps))

    def concrete_path(self, path: list[tuple[Action, AbsState]]) -> list[tuple[Action, AbsState]]:
        """``path`` (from :meth:`path_to`) as a run of the unreduced system: the same kinds of
        action, each on the call that is at that place in the representative, and the
        states as they are, not sorted. The identity without symmetry.

        Why it always exists: the representative of a state is a permutation of it within
        turns, and that permutation maps the representative's successors to the state's
        (:func:`~callsafe.formal.abstract.symmetric`); so from the concrete state, some action
        of the same kind leads to a state whose representative is the next one on ``path``."""
        if not self.symmetry:
            return path
        model = self.model or SystemModel(self.config)
        state = self.initial
        out: list[tuple[Action, AbsState]] = []
        for action, target in path:
            for candidate in model.actions(state):
                if candidate.name != action.name:
                    continue
                succ, _ = model.next_state(state, candidate)
                if symmetric(self.config, succ) == target:
                    out.append((candidate, succ))
                    state = succ
                    break
            else:
                raise AssertionError(f"no {action.name} from {state} reaches the representative {target}")
        return out

    def shortest_violation(self, invariant: str | None = None) -> list[tuple[Action, AbsState]] | None:
        """A shortest path to a state violating ``invariant`` (any, when None), as a run of
        the unreduced system (:meth:`concrete_path`)."""
        best: list[tuple[Action, AbsState]] | None = None
        for state, problems in self.violations.items():
            if invariant is None or any(inv == invariant for inv, _ in problems):
                path = self.path_to(state)
                if best is None or len(path) < len(best):
                    best = path
        return None if best is None else self.concrete_path(best)

    def stats(self) -> GraphStats:
        s = self.store
        terminal = self.terminal_states
        if terminal < 0:
            terminal = sum(1 for n in self.states if all(c.state in TERMINAL_STATES for c in n.calls))
        deadlocks = self.deadlocks
        if deadlocks < 0:
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
    shortest path and the action from there (``-1`` and ``0`` for the initial state).
    Without :attr:`kept` transitions, ``offsets``, ``targets`` and ``labels`` stay empty."""

    actions: list[Action]
    keys: list[Any]  # what identifies a state in the search: slot codes (int) or bytes, or the AbsState
    decode: Callable[[Any], AbsState]
    kept: bool = True
    offsets: array[int] = field(default_factory=lambda: array("q", [0]))
    targets: array[int] = field(default_factory=lambda: array("l"))
    labels: array[int] = field(default_factory=lambda: array("H"))
    parents: array[int] = field(default_factory=lambda: array("l", [-1]))
    via: array[int] = field(default_factory=lambda: array("H", [0]))

    def __len__(self) -> int:
        return len(self.keys)

    def decoded(self) -> list[AbsState]:
        return [self.decode(k) for k in self.keys]


class StateBoundExceeded(RuntimeError):
    """The search reached ``max_states`` before it had seen every reachable state."""

    def __init__(self, max_states: int) -> None:
        super().__init__(f"more than {max_states} states: lower the bounds or raise the state bound")
        self.max_states = max_states


def explore(
    config: Config | None = None,
    model: SystemModel | None = None,
    invariants: Callable[[AbsState], list[tuple[str, str]]] = state_invariants,
    max_states: int = 2_000_000,
    compiled: bool = True,
    symmetry: bool = False,
    graph: bool = True,
) -> Exploration:
    """Explore every reachable state of ``model`` (built from ``config``) breadth first.

    By default the rules run compiled (:mod:`callsafe.formal.compiled`); ``compiled=False``
    interprets them step by step over :class:`~callsafe.formal.ops.Concrete` (the
    reference the compiled rules are tested against), as does a model whose class
    overrides :meth:`~SystemModel.actions` or :meth:`~SystemModel.next_state`.

    ``symmetry=True`` explores one representative per set of states that differ only by
    which call of a turn is which (:func:`~callsafe.formal.abstract.symmetric`): the same
    verdicts, up to 2x fewer states at two calls per turn, 6x at three. It is off by
    default because the graph's callers that turn paths into traces (the coverage suite,
    the diagrams, the mutant cross-checks) name calls; :meth:`Exploration.concrete_path`
    maps a reduced path back. ``graph=False`` counts the transitions instead of keeping
    them (statistics, violations and shortest paths only): what ``callsafe model`` needs.
    Raises :class:`StateBoundExceeded` past ``max_states``."""
    model = model or SystemModel(config)
    (initial,) = model.init_states()
    plain = type(model).actions is SystemModel.actions and type(model).next_state is SystemModel.next_state
    search = _search_compiled if compiled and plain else _search_generic
    found = search(model, initial, invariants, max_states, symmetry, graph)
    return Exploration(
        model.config,
        found.transitions,
        initial,
        found.entries,
        found.violations,
        found.store,
        model,
        symmetry,
        found.terminal,
        found.deadlocks,
        found.violation_index,
    )


@dataclass
class _Found:
    store: Transitions
    entries: set[TableEntry]
    violations: dict[AbsState, list[tuple[str, str]]] = field(default_factory=dict)
    violation_index: dict[AbsState, int] = field(default_factory=dict)
    transitions: int = 0
    terminal: int = 0
    deadlocks: int = 0


def _search_compiled(
    model: SystemModel,
    initial: AbsState,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
    symmetry: bool,
    graph: bool,
) -> _Found:
    """Breadth first with the compiled rules, over slot-coded states with the step memoised
    per slot (:mod:`callsafe.formal.slots`), or over byte states where the slot coding does
    not fit (past 255 restarts, or more distinct records in a slot than its bits hold).
    Invariants: the compiled check first, the messages from ``invariants`` only where it
    fails (or for every state, when ``invariants`` is not the model's own
    :func:`state_invariants`)."""
    cm = compile_model(model)
    start = cm.flatten(initial)
    if isinstance(start, bytes):
        try:
            return _search_slots(model, cm, start, invariants, max_states, symmetry, graph)
        except SlotOverflow:
            pass
    return _search_flat(model, cm, initial, invariants, max_states, symmetry, graph)


def _search_slots(
    model: SystemModel,
    cm: CompiledModel,
    start: bytes,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
    symmetry: bool,
    graph: bool,
) -> _Found:
    """The search of :class:`~callsafe.formal.slots.SlotSearch`; states are stored as their
    slot codes and decoded on demand."""
    slots = SlotSearch(model, cm)
    reduce = symmetry and any(len(m) > 1 for m in model.config.calls_of_turn)
    store = Transitions(list(model.all_actions), [], lambda k: cm.unflatten(slots.decode(k)), kept=graph)
    got = SlotsFound(store.keys, store.parents, store.via, store.targets, store.labels, store.offsets)
    slots.run(start, got, reduce, graph, max_states, StateBoundExceeded)
    found = _Found(store, cm.entries(got.mask))
    checked = got.failing if invariants is state_invariants else range(len(store.keys))
    for i in checked:
        state = store.decode(store.keys[i])
        problems = invariants(state)
        if problems:
            found.violations[state] = problems
            found.violation_index[state] = i
    found.transitions, found.terminal, found.deadlocks = got.transitions, got.terminal, got.deadlocks
    return found


def _search_flat(
    model: SystemModel,
    cm: CompiledModel,
    initial: AbsState,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
    symmetry: bool,
    graph: bool,
) -> _Found:
    """Breadth first over flat states (bytes, or tuples past 255 restarts) with the compiled step."""
    step, holds, decode, terminal = cm.step, cm.holds, cm.unflatten, cm.terminal
    sym = cm.symmetric if symmetry and any(len(m) > 1 for m in model.config.calls_of_turn) else None
    own = invariants is state_invariants
    start = cm.flatten(initial)
    store = Transitions(list(model.all_actions), [start], decode, kept=graph)
    found = _Found(store, set())
    keys, offsets, targets, labels, parents, via = (
        store.keys,
        store.offsets,
        store.targets,
        store.labels,
        store.parents,
        store.via,
    )
    # Numbered states when the transitions are kept (a successor's number is stored), else
    # only a set: the search never needs a successor's number, and a number per state costs
    # an int object in the dict.
    index: dict[Hashable, int] = {start: 0}
    seen: set[Hashable] = {start}
    mask = transitions = terminals = deadlocks = 0
    i = 0
    while i < len(keys):
        flat = keys[i]
        if not own or not holds(flat):
            state = decode(flat)
            problems = invariants(state)
            if problems:
                found.violations[state] = problems
                found.violation_index[state] = i
        if terminal(flat):
            terminals += 1
        m, succs = step(flat)
        mask |= m
        transitions += len(succs)
        if not succs:
            deadlocks += 1
        for a, succ in succs:
            if sym is not None and succ not in seen:  # a seen state is a representative already
                succ = sym(succ)
            if graph:
                j = index.get(succ)
                if j is None:
                    j = len(keys)
                    if j >= max_states:
                        raise StateBoundExceeded(max_states)
                    index[succ] = j
                    seen.add(succ)
                    keys.append(succ)
                    parents.append(i)
                    via.append(a)
                targets.append(j)
                labels.append(a)
            elif succ not in seen:
                if len(keys) >= max_states:
                    raise StateBoundExceeded(max_states)
                seen.add(succ)
                keys.append(succ)
                parents.append(i)
                via.append(a)
        if graph:
            offsets.append(len(targets))
        i += 1
    found.entries = cm.entries(mask)
    found.transitions, found.terminal, found.deadlocks = transitions, terminals, deadlocks
    return found


def _search_generic(
    model: SystemModel,
    initial: AbsState,
    invariants: Callable[[AbsState], list[tuple[str, str]]],
    max_states: int,
    symmetry: bool,
    graph: bool,
) -> _Found:
    """Breadth first with the rules interpreted per step (:meth:`SystemModel.next_state`)."""
    store = Transitions(list(model.all_actions), [initial], _same, kept=graph)
    found = _Found(store, set())
    number = {a: n for n, a in enumerate(store.actions)}
    index: dict[Hashable, int] = {initial: 0}
    c = model.config
    i = 0
    while i < len(store.keys):
        state = cast(AbsState, store.keys[i])
        problems = invariants(state)
        if problems:
            found.violations[state] = problems
            found.violation_index[state] = i
        if all(k.state in TERMINAL_STATES for k in state.calls):
            found.terminal += 1
        moves = 0
        for action in model.actions(state):
            succ, exercised = model.next_state(state, action)
            if symmetry:
                succ = symmetric(c, succ)
            moves += 1
            found.entries.update(exercised)
            a = number.get(action)
            if a is None:  # an action outside ``all_actions`` (a subclass's own)
                a = number[action] = len(store.actions)
                store.actions.append(action)
            j = index.get(succ)
            if j is None:
                j = len(store.keys)
                if j >= max_states:
                    raise StateBoundExceeded(max_states)
                index[succ] = j
                store.keys.append(succ)
                store.parents.append(i)
                store.via.append(a)
            if graph:
                store.targets.append(j)
                store.labels.append(a)
        found.transitions += moves
        found.deadlocks += moves == 0
        if graph:
            store.offsets.append(len(store.targets))
        i += 1
    return found


def _same(state: Any) -> AbsState:
    return cast(AbsState, state)
