"""Seeded random walks over the state graph, as concrete traces.

Why next to the coverage suite: the suite visits each transition (and pair) once, on the
shortest way there; random walks visit them again in company they would not otherwise
keep (two calls, a control in between, a restart later), which is where implementations
that pass every fixture still break. Walk ``n`` of seed ``s`` is driven by its own
``random.Random`` seeded with ``(s, n)`` over the concretisable steps of
:class:`~callsafe.formal.abstract.SystemModel`, so the same seed always gives the same
traces, and any range of walks (``start``) can be drawn without drawing the walks before
it: a distributed certification hands each worker a range of walk numbers
(:mod:`callsafe.certify.partitions`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel
from callsafe.generators.concretise import concretisable, concretise
from callsafe.generators.needs import model_controls
from callsafe.model.lifecycle import TERMINAL_STATES, State
from callsafe.model.vocabulary import Trace

__all__ = ["WALK_CONFIG", "random_walks", "walk_config", "walk_rng"]

WALK_CONFIG = Config(
    calls=2,
    turns=2,
    fragments=2,
    controls=frozenset(
        {"cancel", "conflict", "disconnect", "malformed", "quarantine", "replay", "restart", "stop_tenant"}
    ),
)

_INTERNAL = frozenset({"parse_ok", "parse_failed", "valid", "invalid", "dispatch", "dispatch_denied"})
_NATURAL_WEIGHT = 40


def _weight(state: AbsState, action: Action, config: Config) -> int:
    """The natural next step of a call (open it, send its next fragment, end it, run its
    internal steps, confirm it) is drawn more often than anything else, so a walk usually
    gets calls to their terminal event before a control or a stray event ends them."""
    name, x = action.name, action.target
    if name in _INTERNAL:
        return _NATURAL_WEIGHT
    if name == "start_turn":  # natural once the earlier turns' calls are over
        earlier = [c for i, c in enumerate(state.calls) if config.turn_of(i) < x]
        return _NATURAL_WEIGHT if all(c.state in TERMINAL_STATES for c in earlier) else 1
    if name in ("open", "fragment", "terminal_completed", "confirm") and x >= 0:
        call = state.calls[x]
        natural = (
            (name == "open" and call.state is State.ABSENT)
            or (name == "fragment" and call.state is State.COLLECTING and call.frags < config.fragments)
            or (name == "terminal_completed" and call.state is State.COLLECTING and call.frags == config.fragments)
            or (name == "confirm" and call.state is State.VALIDATED and call.confirm_requested)
        )
        return _NATURAL_WEIGHT if natural else 1
    return 1


def walk_config(capabilities: frozenset[str], *, calls: int = 2, turns: int = 2, fragments: int = 2) -> Config:
    """:data:`WALK_CONFIG` cut down to what a target with ``capabilities`` can take, with
    ``calls`` call ids, ``turns`` turns (one without cancellation: a later turn supersedes,
    that is cancels, the earlier one) and ``fragments`` per call."""
    return Config(
        calls=calls,
        turns=turns if "cancellation" in capabilities else 1,
        fragments=fragments,
        controls=WALK_CONFIG.controls & model_controls(capabilities),
        restarts=1 if "restart" in capabilities else 0,
    )


def walk_rng(seed: int, n: int) -> random.Random:
    """The random source of walk ``n`` of ``seed`` (a string seed is hashed with SHA-512,
    the same in every process and on every machine, whatever ``PYTHONHASHSEED``)."""
    return random.Random(f"callsafe walk {seed}/{n}")


def random_walks(
    seed: int = 0,
    count: int | None = 200,
    config: Config | None = None,
    max_steps: int = 24,
    during: bool = True,
    start: int = 0,
) -> Iterator[Trace]:
    """Walks ``start``, ``start + 1``, ... (``count`` of them, forever when None) of at most
    ``max_steps`` actions each, from the initial state, stopping early once every call is
    in a terminal state. ``during=False`` leaves out inputs delivered during validation."""
    config = config or WALK_CONFIG
    model = SystemModel(config)
    (initial,) = model.init_states()
    n = start
    while count is None or n < start + count:
        rng = walk_rng(seed, n)
        state = initial
        path: list[tuple[Action, AbsState]] = []
        for _ in range(max_steps):
            actions: list[Action] = [a for a in model.actions(state) if concretisable(state, a, during)]
            if not actions or (all(c.state in TERMINAL_STATES for c in state.calls) and path):
                break
            weights = [_weight(state, a, config) for a in actions]
            action = rng.choices(actions, weights)[0]
            state, _ = model.next_state(state, action)
            path.append((action, state))
        trace = concretise(config, initial, path)
        yield Trace(
            events=trace.events,
            tools=trace.tools,
            limits=trace.limits,
            name=f"walk {seed}/{n}: " + " ".join(str(a) for a, _ in path),
            source=f"random walk, seed {seed}, config {config.to_json()}",
        )
        n += 1
