"""Traces that reach a named hazard, synthesised by z3 from the model.

Why: the catalog holds the hazards people wrote down; the exhaustive generator holds all
short traces. Between them sits the question "give me the shortest trace in which a
confirmation races a tenant stop, with two calls": a constraint problem over paths of the
model, which z3 answers directly. A hazard (:class:`Hazard`) is a sequence of steps that
must occur in order along a path (each an action, possibly with a condition on the states
around it), bound to one call; :func:`synthesise` asks z3 for the shortest path of the
model (:mod:`callsafe.formal.z3_encoding`, the same transition relation the proofs use)
that contains them, under a length bound and a configuration (number of calls, turns,
fragments, controls).

A path of the model is not yet a trace: internal steps (parse, validate, dispatch)
interleave freely in the model, while a synchronous implementation runs them right after
the input that enables them. The search is therefore restricted to paths a concrete trace
can reproduce: :func:`concretisable` is the rule of
:func:`callsafe.generators.concretise.concretisable` written over :class:`Ops`, so z3
can impose it (a test checks the two agree on every explored state and action). The path
then becomes a :class:`~callsafe.model.vocabulary.Trace` through
:func:`~callsafe.generators.concretise.concretise`, labelled ``source="synthesised:
<hazard>"``, with the verdicts the model's path implies (executed or not, per call). Each
synthesised trace is checked before it is handed out: the oracle
(:func:`callsafe.model.oracle.judge`) must agree with those verdicts and end every call in
the state the path ends it in, and the trace's events must show the hazard's steps in
order. A path whose trace fails the check is excluded and the search goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import z3

from callsafe.formal.abstract import AbsState, Action, Config, SystemModel
from callsafe.formal.ops import Ops, Val
from callsafe.formal.z3_context import isolated_z3
from callsafe.formal.z3_encoding import Encoding
from callsafe.generators.concretise import DURING_CAPABLE, concretise
from callsafe.model.lifecycle import State
from callsafe.model.oracle import judge
from callsafe.model.vocabulary import (
    CallAddressed,
    CallTerminal,
    CancelTurn,
    Confirm,
    Event,
    Fragment,
    QuarantineResponse,
    Restart,
    StopTenant,
    Trace,
    TurnStarted,
)

__all__ = [
    "HAZARDS",
    "Hazard",
    "Step",
    "Synthesis",
    "concretisable",
    "synthesise",
    "synthesised_traces",
]

S = State

# --------------------------------------------------------------------------------------
# What a concrete trace can reproduce, over Ops
# --------------------------------------------------------------------------------------

_INTERNAL: Final = frozenset({"parse_ok", "parse_failed", "valid", "invalid", "dispatch", "dispatch_denied"})


def concretisable(o: Ops, s: AbsState, a: Action) -> Val:
    """Whether a synchronous implementation can take ``a`` in ``s``: while a call is
    between its terminal event and its dispatch decision only internal steps happen,
    except that an input able to arrive during validation may arrive once the call is
    parsed; a call awaiting its confirmation is at rest."""
    if a.name in _INTERNAL:
        return True
    during = a.name in DURING_CAPABLE
    rules = []
    for k in s.calls:
        rules.append(o.or_(o.not_(o.eq(k.state, S.TERMINAL_CANDIDATE)), o.and_(k.parsed, during)))
        rules.append(o.or_(o.not_(o.eq(k.state, S.VALIDATED)), o.and_(k.confirm_requested, o.not_(k.confirmed))))
    return o.and_(*rules)


# --------------------------------------------------------------------------------------
# Hazards
# --------------------------------------------------------------------------------------


def _always(o: Ops, before: AbsState, after: AbsState, call: int) -> Val:
    return True


@dataclass(frozen=True)
class Step:
    """One step of a hazard: an action ``matches(config, action, call)`` taken where
    ``when(ops, before, after, call)`` holds (``call`` is the hazard's bound call)."""

    matches: Callable[[Config, Action, int], bool]
    when: Callable[[Ops, AbsState, AbsState, int], Val] = _always


def _named(*names: str) -> Callable[[Config, Action, int], bool]:
    """The bound call's own action (for call actions), or any action of these names."""

    def matches(config: Config, a: Action, call: int) -> bool:
        if a.name not in names:
            return False
        if a.name in ("cancel", "disconnect", "quarantine", "response_end"):
            return a.target == config.turn_of(call)
        if a.name == "start_turn":
            return a.target > config.turn_of(call)
        if a.target >= 0:
            return a.target == call
        return True

    return matches


def _state_is(*states: State) -> Callable[[Ops, AbsState, AbsState, int], Val]:
    return lambda o, before, after, i: o.is_in(before.calls[i].state, states)


def _after_is(*states: State) -> Callable[[Ops, AbsState, AbsState, int], Val]:
    return lambda o, before, after, i: o.is_in(after.calls[i].state, states)


def _in_validation(o: Ops, before: AbsState, after: AbsState, i: int) -> Val:
    call = before.calls[i]
    return o.and_(o.eq(call.state, S.TERMINAL_CANDIDATE), call.parsed)


def _awaiting(o: Ops, before: AbsState, after: AbsState, i: int) -> Val:
    call = before.calls[i]
    return o.and_(o.eq(call.state, S.VALIDATED), call.confirm_requested, o.not_(call.confirmed))


def _seen(*kinds: type[Event]) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, kinds)


@dataclass(frozen=True)
class Hazard:
    """A named hazard: ``steps`` in order along a path, for one call; ``controls`` the
    model needs for it; ``config`` the default configuration to search in. ``evidence``
    is the same order in the concrete trace: event kinds that must be delivered in this
    order (the last ones addressed to the bound call when they address a call)."""

    name: str
    description: str
    steps: tuple[Step, ...]
    config: Config
    evidence: tuple[Callable[[Event], bool], ...] = field(default_factory=tuple)


def _config(calls: int, turns: int, *controls: str, restarts: int = 0) -> Config:
    return Config(calls=calls, turns=turns, fragments=1, controls=frozenset(controls), restarts=restarts)


HAZARDS: Final[dict[str, Hazard]] = {
    h.name: h
    for h in (
        Hazard(
            "terminal-after-cancel",
            "The call's terminal event arrives after its turn was cancelled (a late terminal must be rejected by"
            " turn ownership, not revived because its JSON parses).",
            (Step(_named("cancel"), _state_is(S.COLLECTING)), Step(_named("terminal_completed"))),
            _config(1, 1, "cancel"),
            (_seen(CancelTurn), _seen(CallTerminal)),
        ),
        Hazard(
            "replay-after-restart",
            "A reconnect after a restart re-delivers the terminal event of a call that already ran.",
            (
                Step(_named("dispatch"), _after_is(S.DISPATCHED)),
                Step(_named("restart")),
                Step(_named("terminal_repeat")),
            ),
            _config(1, 1, "restart", "replay", restarts=1),
            (_seen(Restart), _seen(CallTerminal)),
        ),
        Hazard(
            "confirmation-races-stop",
            "The user confirms a call after an operator stopped the tenant while the call awaited confirmation.",
            (Step(_named("stop_tenant"), _awaiting), Step(_named("confirm"))),
            _config(1, 1, "stop_tenant", "confirmation"),
            (_seen(StopTenant), _seen(Confirm)),
        ),
        Hazard(
            "stop-during-validation",
            "An operator stops the tenant while the call's arguments are being validated.",
            (Step(_named("stop_tenant"), _in_validation),),
            _config(1, 1, "stop_tenant"),
            (lambda e: isinstance(e, StopTenant) and e.during_validation,),
        ),
        Hazard(
            "cancel-during-validation",
            "The user cancels the turn while the call's arguments are being validated.",
            (Step(_named("cancel"), _in_validation),),
            _config(1, 1, "cancel"),
            (lambda e: isinstance(e, CancelTurn) and e.during_validation,),
        ),
        Hazard(
            "new-turn-while-old-fragments",
            "A new user turn starts while the old turn's call is still collecting, and its fragments keep coming.",
            (Step(_named("start_turn"), _state_is(S.COLLECTING)), Step(_named("fragment"))),
            _config(1, 2),
            (_seen(TurnStarted), _seen(Fragment)),
        ),
        Hazard(
            "quarantine-across-restart",
            "A response is quarantined while its call collects; after a restart, the adapter reconnects and"
            " re-delivers the call's open and terminal events.",
            (
                Step(_named("quarantine"), _state_is(S.COLLECTING)),
                Step(_named("restart")),
                Step(_named("terminal_completed")),
            ),
            _config(1, 1, "quarantine", "restart", "replay", restarts=1),
            (_seen(QuarantineResponse), _seen(Restart), _seen(CallTerminal)),
        ),
        Hazard(
            "late-fragment-awaiting-confirmation",
            "Argument data for a call that already ended arrives while the call awaits its confirmation.",
            (Step(_named("fragment"), _awaiting),),
            _config(1, 1, "confirmation"),
            (_seen(Fragment),),
        ),
    )
}


# --------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Synthesis:
    """A synthesised path, its trace, and the call the hazard is about."""

    hazard: Hazard
    call: int
    initial: AbsState
    path: tuple[tuple[Action, AbsState], ...]
    trace: Trace


def _occurs(enc: Encoding, hazard: Hazard, call: int, length: int) -> Val:
    """The hazard's steps occur in order (at increasing steps) within ``length`` steps."""
    c = enc.config
    options: list[list[tuple[int, Step]]] = [
        [(n, step) for n, a in enumerate(enc.actions) if step.matches(c, a, call)] for step in hazard.steps
    ]
    if any(not o for o in options):
        return z3.BoolVal(False)
    reached: list[Val] = [z3.BoolVal(True)] + [z3.BoolVal(False)] * len(hazard.steps)
    for j in range(length):
        before, after, act = enc.state(j), enc.state(j + 1), enc.action(j)
        here = [
            z3.Or(*(z3.And(act == n, enc.ops.lit(step.when(enc.ops, before, after, call))) for n, step in opts))
            for opts in options
        ]
        reached = [reached[0]] + [z3.Or(reached[m + 1], z3.And(reached[m], here[m])) for m in range(len(hazard.steps))]
    return reached[-1]


def _eager(enc: Encoding, j: int) -> Val:
    s, act = enc.state(j), enc.action(j)
    return z3.And(*(z3.Implies(act == n, enc.ops.lit(concretisable(enc.ops, s, a))) for n, a in enumerate(enc.actions)))


def _short(config: Config, call: int) -> str:
    return f"t{config.turn_of(call) + 1}/c{call}"


def _verdicts(config: Config, path: Sequence[tuple[Action, AbsState]], initial: AbsState) -> dict[str, object]:
    final = path[-1][1] if path else initial
    return {
        _short(config, i): {"execute": k.executions > 0, "state": k.state.value}
        for i, k in enumerate(final.calls)
        if k.state is not S.ABSENT
    }


def _check(synth: Synthesis, config: Config) -> list[str]:
    """Why the trace does not realise the path (empty: it does)."""
    problems = []
    verdicts = judge(synth.trace).by_short_name()
    for name, want in synth.trace.verdicts.items():
        got = verdicts.get(name)
        if got is None:
            problems.append(f"{name}: the oracle has no verdict")
            continue
        if not got.matches_author(dict(want)):
            problems.append(f"{name}: the path executes it: {want['execute']}, the oracle says {got.execute}")
        if got.state.value != want["state"]:
            problems.append(f"{name}: the path ends it {want['state']}, the oracle {got.state.value}")
    delivered = synth.trace.delivered()
    position = 0
    mine = _short(config, synth.call)
    for expected in synth.hazard.evidence:
        while position < len(delivered):
            e = delivered[position]
            position += 1
            own = not isinstance(e, CallAddressed) or f"{e.turn}/{e.call}" == mine
            if expected(e) and own:
                break
        else:
            problems.append("the trace does not show the hazard's events in order")
            break
    return problems


def synthesise(
    hazard: Hazard, config: Config | None = None, max_length: int = 16, solutions: int = 1, attempts: int = 20
) -> Iterator[Synthesis]:
    """The shortest paths (up to ``solutions`` of them, all of the least length found)
    that reach ``hazard`` within ``max_length`` steps in ``config`` (default: the
    hazard's), each as a checked trace. The search runs in a z3 context of its own
    (:mod:`callsafe.formal.z3_context`): the paths found are a function of the query, not
    of what the process did with z3 before."""
    with isolated_z3():
        found = list(_synthesise(hazard, config, max_length, solutions, attempts))
    yield from found


def _synthesise(
    hazard: Hazard, config: Config | None, max_length: int, solutions: int, attempts: int
) -> Iterator[Synthesis]:
    config = config or hazard.config
    # Without canonicalisation: it keeps the states the invariants need, not every path
    # (once every call is over it sets the restart count to its bound, so no restart
    # follows; a replay after a restart needs one).
    model = SystemModel(config, canonicalise=False)
    enc = Encoding(model)
    solver = z3.SolverFor("QF_BV")
    solver.add(enc.init(enc.state(0)))
    found = 0
    for length in range(1, max_length + 1):
        solver.add(enc.step(length - 1), _eager(enc, length - 1))
        goal = z3.Or(*(_occurs(enc, hazard, i, length) for i in range(config.calls)))
        solver.push()
        solver.add(goal)
        tries = 0
        while found < solutions and tries < attempts and solver.check() == z3.sat:
            tries += 1
            m = solver.model()
            initial, steps = enc.decode_path(m, length)
            solver.add(z3.Or(*(enc.action(j) != m.eval(enc.action(j), True) for j in range(length))))
            for call in range(config.calls):
                if not z3.is_true(m.eval(_occurs(enc, hazard, call, length), True)):
                    continue
                synth = _synthesis(hazard, config, call, initial, steps, found + 1)
                if not _check(synth, config):
                    found += 1
                    yield synth
                break
        solver.pop()
        if found:
            return


def _synthesis(
    hazard: Hazard, config: Config, call: int, initial: AbsState, steps: Sequence[tuple[Action, AbsState]], n: int
) -> Synthesis:
    trace = concretise(config, initial, steps)
    trace = dataclasses.replace(
        trace,
        name=f"synthesised-{hazard.name}-{n}",
        source=f"synthesised: {hazard.name}",
        verdicts=_verdicts(config, steps, initial),
    )
    return Synthesis(hazard, call, initial, tuple(steps), trace)


def synthesised_traces(
    hazards: Iterable[str] | None = None,
    config: Config | None = None,
    max_length: int = 16,
    per_hazard: int = 1,
) -> Iterator[tuple[str, Trace]]:
    """``(name, trace)`` for each hazard (all of :data:`HAZARDS` by default): a generator
    the certification harness can run. With ``config``, hazards whose controls it lacks
    are skipped; without, each hazard uses its own small configuration."""
    for name in hazards if hazards is not None else HAZARDS:
        hazard = HAZARDS[name]
        if config is not None and not hazard.config.controls <= config.controls:
            continue
        for synth in synthesise(hazard, config, max_length, per_hazard):
            yield synth.trace.name, synth.trace
