"""The reachable state space of a bounded configuration, as a networkx graph.

Breadth-first exploration of :class:`callsafe.model.abstract.SystemModel`: every reachable
abstract state is a node, every action an edge labelled with the actions that lead along
it (parallel actions share one edge, so ``transitions`` counts actions, not edges).
Breadth-first order makes the path to any state a shortest one, which is what a
counterexample should be.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from callsafe.model.abstract import AbsState, Action, Config, SystemModel, TableEntry, state_invariants
from callsafe.model.lifecycle import TERMINAL_STATES, TRANSITIONS, State

__all__ = ["Exploration", "GraphStats", "explore", "lifecycle_coverage"]


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
    """The explored graph, with the parent of every state on a shortest path."""

    config: Config
    graph: nx.DiGraph[AbsState]
    transitions: int
    initial: AbsState
    parent: dict[AbsState, tuple[AbsState, Action] | None]
    entries: set[TableEntry]
    violations: dict[AbsState, list[tuple[str, str]]]

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
        g = self.graph
        terminal = sum(1 for n in g.nodes if all(c.state in TERMINAL_STATES for c in n.calls))
        deadlocks = sum(1 for n in g.nodes if g.out_degree(n) == 0)
        covered, total = lifecycle_coverage(self.entries)
        return GraphStats(
            states=g.number_of_nodes(),
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


def explore(
    config: Config | None = None,
    model: SystemModel | None = None,
    invariants: Callable[[AbsState], list[tuple[str, str]]] = state_invariants,
    max_states: int = 2_000_000,
) -> Exploration:
    """Explore every reachable state of ``model`` (built from ``config``) breadth first."""
    model = model or SystemModel(config)
    (initial,) = model.init_states()
    graph: nx.DiGraph[AbsState] = nx.DiGraph()
    transitions = 0
    graph.add_node(initial)
    parent: dict[AbsState, tuple[AbsState, Action] | None] = {initial: None}
    entries: set[TableEntry] = set()
    violations: dict[AbsState, list[tuple[str, str]]] = {}
    queue = deque([initial])
    while queue:
        state = queue.popleft()
        problems = invariants(state)
        if problems:
            violations[state] = problems
        for action in model.actions(state):
            succ, exercised = model.next_state(state, action)
            entries.update(exercised)
            if succ not in parent:
                if len(parent) >= max_states:
                    raise RuntimeError(f"more than {max_states} states: lower the bounds")
                parent[succ] = (state, action)
                queue.append(succ)
            transitions += 1
            edge = graph.get_edge_data(state, succ)
            if edge is None:
                graph.add_edge(state, succ, actions=[action])
            else:
                edge["actions"].append(action)
    return Exploration(model.config, graph, transitions, initial, parent, entries, violations)
