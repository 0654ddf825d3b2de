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

import dataclasses
import random
from collections.abc import Iterator, Sequence

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel
from callsafe.generators.concretise import concretisable, concretise
from callsafe.generators.domain import Domain, Variant
from callsafe.generators.needs import model_controls
from callsafe.model.lifecycle import TERMINAL_STATES, State
from callsafe.model.vocabulary import Trace

__all__ = ["RICH_CONTROLS", "WALK_CONFIG", "random_walks", "walk_config", "walk_configs", "walk_rng"]

WALK_CONFIG = Config(
    calls=2,
    turns=2,
    fragments=2,
    controls=frozenset(
        {"cancel", "conflict", "disconnect", "malformed", "quarantine", "replay", "restart", "stop_tenant"}
    ),
)

# The controls of the rich domain's walks: every control the model has, as far as the
# target can take it (walks are drawn, not enumerated, so a control costs no more walks).
RICH_CONTROLS = frozenset(
    {
        "cancel",
        "catalog_change",
        "confirmation",
        "conflict",
        "disable_tool",
        "disconnect",
        "limits",
        "malformed",
        "permission",
        "quarantine",
        "replay",
        "response_end",
        "restart",
        "stop_tenant",
    }
)

_INTERNAL = frozenset({"parse_ok", "parse_failed", "valid", "invalid", "dispatch", "dispatch_denied"})
_NATURAL_WEIGHT = 40


def _weight(state: AbsState, action: Action, config: Config, natural_weight: int = _NATURAL_WEIGHT) -> int:
    """The natural next step of a call (open it, send its next fragment, end it, run its
    internal steps, confirm it) is drawn more often than anything else, so a walk usually
    gets calls to their terminal event before a control or a stray event ends them."""
    name, x = action.name, action.target
    if name in _INTERNAL:
        return natural_weight
    if name == "start_turn":  # natural once the earlier turns' calls are over
        earlier = [c for i, c in enumerate(state.calls) if config.turn_of(i) < x]
        return natural_weight if all(c.state in TERMINAL_STATES for c in earlier) else 1
    if name in ("open", "fragment", "terminal_completed", "confirm") and x >= 0:
        call = state.calls[x]
        natural = (
            (name == "open" and call.state is State.ABSENT)
            or (name == "fragment" and call.state is State.COLLECTING and call.frags < config.fragments)
            or (name == "terminal_completed" and call.state is State.COLLECTING and call.frags == config.fragments)
            or (name == "confirm" and call.state is State.VALIDATED and call.confirm_requested)
        )
        return natural_weight if natural else 1
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


def walk_configs(
    capabilities: frozenset[str], *, calls: int = 2, turns: int = 2, fragments: int = 2, rich: bool = True
) -> tuple[Config, ...]:
    """The configurations walks cycle through (walk ``n`` uses number ``n mod`` their
    count): :func:`walk_config`, and in the rich domain two more with every control the
    target can take: one of the same size, and an agent loop of three calls, two of them
    in one turn, four fragments each (so that digits of one number are pieces of their
    own, and several calls share a turn's byte cap)."""
    base = walk_config(capabilities, calls=calls, turns=turns, fragments=fragments)
    if not rich:
        return (base,)
    controls = RICH_CONTROLS & model_controls(capabilities)
    wide = Config(calls=calls, turns=base.turns, fragments=fragments, controls=controls, restarts=base.restarts)
    loop = Config(
        calls=max(calls, 3), turns=base.turns, fragments=max(fragments, 4), controls=controls, restarts=base.restarts
    )
    return (base, wide, loop)


def _variant(domain: Domain, rng: random.Random, config: Config) -> Variant:
    """A walk's variant. Where a turn holds several calls (the agent-loop configuration),
    half the walks put the per-turn cap at the turn's size and half make the calls an agent
    loop: that configuration exists to put several calls and responses under one turn's
    cap, which a uniform draw would reach in one walk of a hundred."""
    variant = domain.sample(rng)
    if any(len(calls) > 1 for calls in config.calls_of_turn):
        allowed = dict(domain.choices)
        turn_caps = [v for v in allowed["limits"] if v.startswith("turn-")]
        if turn_caps and rng.random() < 0.5:
            variant = dataclasses.replace(variant, limits=rng.choice(turn_caps))
        if "agent-loop" in allowed["identities"] and rng.random() < 0.5:
            variant = dataclasses.replace(variant, identities="agent-loop")
    return variant


def walk_rng(seed: int, n: int) -> random.Random:
    """The random source of walk ``n`` of ``seed`` (a string seed is hashed with SHA-512,
    the same in every process and on every machine, whatever ``PYTHONHASHSEED``)."""
    return random.Random(f"callsafe walk {seed}/{n}")


def random_walks(
    seed: int = 0,
    count: int | None = 200,
    config: Config | Sequence[Config] | None = None,
    max_steps: int = 24,
    during: bool = True,
    start: int = 0,
    domain: Domain | None = None,
) -> Iterator[Trace]:
    """Walks ``start``, ``start + 1``, ... (``count`` of them, forever when None) of at most
    ``max_steps`` actions each (more for a configuration with more calls or fragments),
    from the initial state, stopping early once every call is in a terminal state.
    ``during=False`` leaves out inputs delivered during validation. With several
    configurations, walk ``n`` uses number ``n mod`` their count; with a ``domain``, each
    walk's data, identities and caps are a variant drawn from the walk's own random source
    after its path (so the paths are those of the plain domain)."""
    configs = (config,) if isinstance(config, Config) else tuple(config or (WALK_CONFIG,))
    models = [SystemModel(c) for c in configs]
    initials = [m.init_states()[0] for m in models]
    n = start
    while count is None or n < start + count:
        rng = walk_rng(seed, n)
        which = n % len(configs)
        config, model, initial = configs[which], models[which], initials[which]
        state = initial
        path: list[tuple[Action, AbsState]] = []
        steps = max_steps + 6 * max(0, config.calls * config.fragments - 4)
        # with more controls than the plain walks, the natural steps weigh more, so that a
        # walk still usually takes its calls to their terminal event and confirmation
        natural = _NATURAL_WEIGHT if config.controls <= WALK_CONFIG.controls else 4 * _NATURAL_WEIGHT
        for _ in range(steps):
            actions: list[Action] = [a for a in model.actions(state) if concretisable(state, a, during)]
            if not actions or (all(c.state in TERMINAL_STATES for c in state.calls) and path):
                break
            weights = [_weight(state, a, config, natural) for a in actions]
            action = rng.choices(actions, weights)[0]
            state, _ = model.next_state(state, action)
            path.append((action, state))
        variant = _variant(domain, rng, config) if domain is not None and domain.rich else None
        trace = concretise(config, initial, path, variant) if variant else concretise(config, initial, path)
        where = f", domain {variant.describe()}" if variant else ""
        yield Trace(
            events=trace.events,
            tools=trace.tools,
            limits=trace.limits,
            name=f"walk {seed}/{n}: " + " ".join(str(a) for a, _ in path),
            source=f"random walk, seed {seed}, config {config.to_json()}{where}",
        )
        n += 1
