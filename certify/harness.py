"""Certification: run the generators' traces against a target and judge every run.

Why it is shaped this way:

* **A fresh target per trace.** A trace must not see what an earlier trace left behind;
  a target is named by a factory (:mod:`callsafe.certify.targets`), which is also what lets
  ``workers`` build their own targets in their own processes.
* **Not applicable is not passed.** A trace that needs a capability the target does not
  declare (:func:`callsafe.generators.needs.needed_capabilities`) is counted as not
  applicable and never run; an invariant whose observations the target cannot produce is
  not applicable (never "holds") for it.
* **Provider-protocol targets** (client libraries, :mod:`callsafe.targets`) get every trace
  rendered for their protocol (:mod:`callsafe.certify.wire`). A trace the protocol (or a
  target that reads one stream at a time) cannot express is not applicable, counted under
  ``"<protocol> rendering"``; the relabelled trace is the one that runs and is judged; and
  a liveness shortfall counts only for calls whose response ended normally (a library
  presents calls at the end of the response).
* **Safety apart from liveness.** Each run is judged by the invariant checkers and by a
  direct comparison with the oracle (:mod:`callsafe.certify.judge`); findings keep their
  kind.
* **Coverage is what the runs reached**: the lifecycle transitions (and per-call pairs)
  the oracle's account of the traces that ran exercised.
* **Budget and seed.** Generation stops at the budget (the report says so); the seed
  drives the random walks, and everything else is deterministic, so a seed and a budget
  large enough to finish reproduce a run exactly, whatever the number of workers (results
  are consumed in generation order).
* **Counterexamples are minimal**: the first violating traces of each invariant are
  shrunk (:mod:`callsafe.certify.minimize`) while the same invariant is still violated.
"""

from __future__ import annotations

import functools
import multiprocessing
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe import __version__
from callsafe.certify.contract import CAPABILITIES, Target
from callsafe.certify.judge import Finding, Judgement, judge_observations
from callsafe.certify.runner import Run, run_trace
from callsafe.certify.targets import TargetFactory, TargetInfo, describe, resolve_target, spec_of
from callsafe.certify.wire import ABSTRACT, NotRepresentable, not_applicable_reason, prepare, response_deferred_liveness
from callsafe.certify.wire_traces import wire_traces
from callsafe.generators.catalog import CATALOG
from callsafe.generators.coverage import (
    ALL_TRANSITIONS,
    CoverageSuite,
    Pair,
    Transition,
    config_for,
    coverage_suite,
)
from callsafe.generators.coverage import reached_by_steps as _reached_by_steps
from callsafe.generators.exhaustive import Bound, ExhaustiveStats, exhaustive_traces
from callsafe.generators.needs import exhaustive_controls, needed_capabilities
from callsafe.generators.walks import random_walks, walk_config
from callsafe.model.abstract import Config
from callsafe.model.invariants import INVARIANTS
from callsafe.model.lifecycle import CallEvent
from callsafe.model.oracle import Oracle, judge
from callsafe.model.vocabulary import Observation, Trace

__all__ = [
    "BYTE_CAPS",
    "GENERATORS",
    "KNOWN_GENERATORS",
    "WIRE_GENERATOR",
    "Certification",
    "Checked",
    "Counterexample",
    "GeneratorStats",
    "InvariantSummary",
    "Options",
    "ProgressCallback",
    "TraceResult",
    "certify",
    "check_trace",
    "exhaustive_bound",
    "generators_for",
]

GENERATORS: Final = ("catalog", "coverage", "synthesis", "walks", "exhaustive")
WIRE_GENERATOR: Final = "wire"  # wire-shaped traces (callsafe.certify.wire_traces)
KNOWN_GENERATORS: Final = (*GENERATORS, WIRE_GENERATOR)


def exhaustive_bound(depth: int, capabilities: frozenset[str] = CAPABILITIES, protocol: str = ABSTRACT) -> Bound:
    """The exhaustive generator's bound for ``--depth N``: two call ids, two turns (one
    without cancellation: a second turn supersedes the first), two fragments per call,
    the common controls the target can take, one restart if it can restart, and up to N
    events after the turn start.

    For a provider-protocol target a response's end replaces the replay of everything so
    far: no wire opens a call twice, so such replays are never representable, while a
    wire cannot end a call without its response (Chat Completions) unless the trace can
    end the response."""
    cancellation = "cancellation" in capabilities
    restart = "restart" in capabilities
    controls = exhaustive_controls(capabilities)
    if protocol != ABSTRACT:
        controls = (controls - {"replay"}) | {"response_end"}
    return Bound(
        calls=2,
        turns=2 if cancellation else 1,
        fragments=2,
        controls=controls,
        restarts=1 if restart else 0,
        length=depth,
    )


@dataclass(frozen=True)
class Options:
    """How a certification runs."""

    budget: float | None = None  # seconds for running traces (minimisation has its own)
    depth: int = 3
    seed: int = 0
    workers: int = 1
    generators: tuple[str, ...] = GENERATORS
    walks: int = 200
    minimize: bool = True
    counterexamples: int = 1  # per invariant
    minimize_budget: float = 30.0  # seconds, all counterexamples together

    def __post_init__(self) -> None:
        unknown = set(self.generators) - set(KNOWN_GENERATORS)
        if unknown:
            raise ValueError(f"unknown generators {sorted(unknown)}; known: {', '.join(KNOWN_GENERATORS)}")
        if self.workers < 1 or self.depth < 0 or (self.budget is not None and self.budget <= 0):
            raise ValueError("workers >= 1, depth >= 0 and a positive budget")

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_seconds": self.budget,
            "depth": self.depth,
            "seed": self.seed,
            "workers": self.workers,
            "generators": list(self.generators),
            "walks": self.walks,
            "minimize": self.minimize,
            "counterexamples_per_invariant": self.counterexamples,
            "minimize_budget_seconds": self.minimize_budget,
        }


@dataclass
class TraceResult:
    """One trace's outcome, as a worker returns it (small, picklable)."""

    generator: str
    index: int
    name: str
    missing: tuple[str, ...]  # capabilities the trace needs and the target lacks
    judgement: Judgement | None  # None when not applicable
    seconds: float = 0.0
    transitions: frozenset[Transition] = frozenset()
    pairs: frozenset[Pair] = frozenset()

    @property
    def applicable(self) -> bool:
        return not self.missing


@dataclass
class Checked:
    """One trace checked against one target: the run, the oracle and the judgement."""

    trace: Trace
    missing: tuple[str, ...]
    run: Run | None
    oracle: Oracle
    judgement: Judgement
    note: str = ""  # why the trace is not applicable, beyond the missing capabilities

    @property
    def violated(self) -> set[str]:
        return self.judgement.violated

    def explain(self, invariant: str | None = None) -> str:
        return self.judgement.explain(invariant)


def _not_applicable_judgement() -> Judgement:
    return Judgement({inv.id: None for inv in INVARIANTS})


def _run_checked(factory: TargetFactory, capabilities: frozenset[str], trace: Trace) -> Checked:
    missing = tuple(sorted(needed_capabilities(trace) - capabilities))
    if missing:
        return Checked(trace, missing, None, judge(trace), _not_applicable_judgement())
    try:
        target: Target = factory()
    except Exception as exc:  # a target that cannot even be built: recorded, judged on nothing
        oracle = judge(trace)
        run = Run(trace, errors=[f"start: {type(exc).__name__}: {exc}"])
        return Checked(trace, missing, run, oracle, judge_observations(trace, [], capabilities, run.errors, oracle))
    if target.protocol != ABSTRACT:
        return _run_checked_wire(target, capabilities, trace)
    oracle = judge(trace)
    try:
        run = run_trace(target, trace)
    except Exception as exc:  # a target that cannot even start: recorded, judged on nothing
        run = Run(trace, errors=[f"start: {type(exc).__name__}: {exc}"])
    judgement = judge_observations(trace, run.observations, capabilities, run.errors, oracle)
    return Checked(trace, missing, run, oracle, judgement)


BYTE_CAPS: Final = "byte caps"


def _run_checked_wire(target: Target, capabilities: frozenset[str], trace: Trace) -> Checked:
    """One trace against a provider-protocol target: relabelled, rendered, run, judged (see
    :mod:`callsafe.certify.wire` for the rules).

    A trace whose verdicts turn on a byte cap (the model refuses a call for exceeding
    it) is not applicable, counted under :data:`BYTE_CAPS`: the caps in ``env.limits`` are
    the application's configuration, no provider's wire carries them, and a client library
    has no setting for them, so a library that runs such a call has broken no promise of
    its own. (A capability for caps would let a wire target that enforces them opt in.)"""
    try:
        trace, plan = prepare(trace, target.protocol)
    except NotRepresentable as exc:
        reason = not_applicable_reason(target.protocol)
        return Checked(trace, (reason,), None, judge(trace), _not_applicable_judgement(), str(exc))
    oracle = judge(trace)
    if any(step.event is CallEvent.OVER_LIMIT for step in oracle.steps):
        note = "the model refuses a call for a byte cap, which is the application's setting, not the wire's"
        return Checked(trace, (BYTE_CAPS,), None, oracle, _not_applicable_judgement(), note)
    try:
        run = run_trace(target, trace, plan=plan)
    except Exception as exc:  # a target that cannot even start: recorded, judged on nothing
        run = Run(trace, errors=[f"start: {type(exc).__name__}: {exc}"])
    judgement = judge_observations(trace, run.observations, capabilities, run.errors, oracle)
    live = judgement.results.get("LIVE-DISPATCH")
    if live:
        counts = response_deferred_liveness(trace)
        judgement.results["LIVE-DISPATCH"] = [f for f in live if counts(f.key)]
    return Checked(trace, (), run, oracle, judgement)


def check_trace(target: str | TargetFactory, trace: Trace) -> Checked:
    """Run one trace against a fresh target and judge it (``callsafe replay``, and the
    pytest files written for counterexamples)."""
    factory = resolve_target(target) if isinstance(target, str) else target
    info = describe(factory, target if isinstance(target, str) else None)
    return _run_checked(factory, info.capabilities, trace)


def _result(generator: str, index: int, checked: Checked, seconds: float) -> TraceResult:
    if checked.missing:
        return TraceResult(generator, index, checked.trace.name, checked.missing, None, seconds)
    got = _reached_by_steps(checked.oracle.steps)
    return TraceResult(
        generator,
        index,
        checked.trace.name,
        (),
        checked.judgement,
        seconds,
        frozenset(got.transitions),
        frozenset(got.pairs),
    )


def _run_one(
    factory: TargetFactory, capabilities: frozenset[str], generator: str, index: int, trace: Trace
) -> TraceResult:
    started = time.perf_counter()
    checked = _run_checked(factory, capabilities, trace)
    return _result(generator, index, checked, time.perf_counter() - started)


# --------------------------------------------------------------------------------------
# Workers: each process builds its own targets from the target's name
# --------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _worker_init(spec: str, path: list[str]) -> None:
    sys.path[:] = path
    factory = resolve_target(spec)
    _WORKER["factory"] = factory
    _WORKER["capabilities"] = describe(factory, spec).capabilities


def _worker_run(batch: list[tuple[str, int, Trace]]) -> list[TraceResult]:
    return [_run_one(_WORKER["factory"], _WORKER["capabilities"], g, i, t) for g, i, t in batch]


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass
class GeneratorStats:
    """Per generator: how many traces it produced, ran, could not apply, and so on."""

    name: str
    generated: int = 0
    ran: int = 0
    not_applicable: int = 0
    skipped_equivalent: int = 0
    violating: int = 0
    errors: int = 0
    seconds: float = 0.0
    complete: bool = True  # False when the budget stopped it
    violated: dict[str, int] = field(default_factory=dict)  # invariant -> traces
    checked: dict[str, int] = field(default_factory=dict)  # invariant -> applicable traces
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "generated": self.generated,
            "ran": self.ran,
            "not_applicable": self.not_applicable,
            "skipped_equivalent": self.skipped_equivalent,
            "violating": self.violating,
            "target_errors": self.errors,
            "seconds": round(self.seconds, 3),
            "complete": self.complete,
            "violated": dict(sorted(self.violated.items())),
            **({"info": self.info} if self.info else {}),
        }


@dataclass
class Example:
    """A violating trace kept for minimisation."""

    generator: str
    trace: Trace
    findings: list[Finding]


@dataclass
class Counterexample:
    """A minimal trace that still violates ``invariant``, with its run on the target."""

    invariant: str
    generator: str
    original: Trace
    minimal: Trace
    findings: list[Finding]
    observations: list[Observation]
    errors: list[str]
    explanation: list[str]
    tests_run: int
    files: dict[str, str] = field(default_factory=dict)  # kind -> path (set by the report)


@dataclass
class InvariantSummary:
    id: str
    title: str
    kind: str
    spec: str
    status: str  # "holds" | "violated" | "not_applicable"
    traces_checked: int
    traces_violated: int
    needs: list[str]


@dataclass
class Certification:
    """Everything a certification run found; the reports are views of it."""

    target: TargetInfo
    options: Options
    generators: dict[str, GeneratorStats]
    invariants: dict[str, InvariantSummary]
    transitions: set[Transition]
    pairs: set[Pair]
    counterexamples: dict[str, list[Counterexample]]
    examples: dict[str, list[Example]]
    not_applicable: dict[str, int]  # missing capability -> traces
    started_at: float
    timings: dict[str, float]
    budget_exhausted: bool
    errors: list[str]
    version: str = __version__
    # lifecycle transition -> traces that took it (the coverage heat map's colour)
    transition_hits: dict[Transition, int] = field(default_factory=dict)

    @property
    def violated(self) -> list[str]:
        return [i for i, s in self.invariants.items() if s.status == "violated"]

    @property
    def ok(self) -> bool:
        """Nothing violated (the exit status of ``callsafe certify`` is 0 only then)."""
        return not self.violated

    @property
    def traces_run(self) -> int:
        return sum(g.ran for g in self.generators.values())


ProgressCallback = Callable[[str, int, "int | None"], None]


@functools.lru_cache(maxsize=8)
def _coverage_suite(config: Config, during: bool) -> CoverageSuite:
    """The coverage suite of a configuration (a second or so to build: built once)."""
    return coverage_suite(config, during=during)


def _traces(
    name: str,
    options: Options,
    capabilities: frozenset[str],
    stats: GeneratorStats,
    exhaustive: ExhaustiveStats,
    protocol: str = ABSTRACT,
) -> tuple[Iterator[Trace], int | None]:
    """A generator's traces, configured for what the target can take."""
    if name == "catalog":
        return (s.trace for s in CATALOG), len(CATALOG)
    if name == WIRE_GENERATOR:
        traces = list(wire_traces())
        return iter(traces), len(traces)
    if name == "synthesis":
        synthesised = _synthesised()
        stats.info = {"traces": [f"{t.name}: {t.source}" for t in synthesised]}
        return iter(synthesised), len(synthesised)
    during = "business_validation" in capabilities
    if name == "coverage":
        suite = _coverage_suite(config_for(capabilities), during)
        stats.info = suite.summary()
        return iter(suite.traces), len(suite.traces)
    if name == "walks":
        config = walk_config(capabilities)
        stats.info = {"config": config.to_json(), "seed": options.seed}
        return random_walks(options.seed, options.walks, config, during=during), options.walks
    bound = exhaustive_bound(options.depth, capabilities, protocol)
    stats.info = {"bound": bound.to_json()}
    return exhaustive_traces(bound, exhaustive), None


# The document the fragmentation synthesis cuts up: a payment whose amount a repeated
# fragment or a cut-off prefix changes, and a memo with an escape and multi-byte text.
_PAYMENT_SCHEMA: Final = {
    "type": "object",
    "required": ["amount"],
    "properties": {"amount": {"type": "integer"}, "memo": {"type": "string"}},
    "additionalProperties": False,
}
_PAYMENT: Final = {"amount": 100, "memo": 'café "1" 🦄'}


@functools.lru_cache(maxsize=1)
def _synthesised() -> tuple[Trace, ...]:
    """z3-synthesised traces (labelled ``synthesised: ...`` in their source): one per named
    hazard, and the fragmentations that fool weak assemblers. Deterministic; computed
    once per process."""
    from callsafe.generators.fragmentation import synthesised_fragmentations
    from callsafe.generators.synthesis import synthesised_traces

    hazards = [trace for _, trace in synthesised_traces()]
    fragmentations = [trace for _, trace in synthesised_fragmentations(_PAYMENT_SCHEMA, _PAYMENT, tool="pay")]
    return (*hazards, *fragmentations)


class _Executor:
    """Runs traces in this process, or in a pool of worker processes in batches (a trace
    takes well under a millisecond, less than sending it to another process), returning
    results in submission order."""

    BATCH: Final = 64

    def __init__(self, factory: TargetFactory, info: TargetInfo, workers: int) -> None:
        self.factory = factory
        self.info = info
        self.workers = workers
        self.pool: Any = None
        if workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self.pool = ctx.Pool(workers, initializer=_worker_init, initargs=(info.spec, list(sys.path)))
        self.batch: list[tuple[str, int, Trace]] = []
        self.window: deque[Any] = deque()

    def submit(self, generator: str, index: int, trace: Trace) -> Iterator[TraceResult]:
        """Submit one trace; yield whatever results are ready, in order."""
        if self.pool is None:
            yield _run_one(self.factory, self.info.capabilities, generator, index, trace)
            return
        self.batch.append((generator, index, trace))
        if len(self.batch) >= self.BATCH:
            self._send()
        while len(self.window) > self.workers * 2:
            yield from self.window.popleft().get()

    def _send(self) -> None:
        if self.batch:
            self.window.append(self.pool.apply_async(_worker_run, (self.batch,)))
            self.batch = []

    def drain(self) -> Iterator[TraceResult]:
        if self.pool is not None:
            self._send()
        while self.window:
            yield from self.window.popleft().get()

    def close(self, abort: bool = False) -> None:
        """Let the workers finish, or (``abort``: an error or Ctrl-C) stop them now."""
        if self.pool is not None:
            if abort:
                self.pool.terminate()
            else:
                self.pool.close()
            self.pool.join()


def generators_for(options: Options, info: TargetInfo) -> tuple[str, ...]:
    """The generators a certification runs: ``options.generators``, and for a
    provider-protocol target left at the default, the wire-shaped traces first (the other
    generators' traces mostly cannot be said on a wire, see :mod:`callsafe.certify.wire_traces`)."""
    if info.protocol != ABSTRACT and options.generators == GENERATORS:
        return (WIRE_GENERATOR, *GENERATORS)
    return options.generators


def certify(
    target: str | TargetFactory,
    options: Options | None = None,
    progress: ProgressCallback | None = None,
) -> Certification:
    """Certify ``target`` (a name, see :mod:`callsafe.certify.targets`, or a factory)."""
    from callsafe.certify.minimize import minimize_counterexample

    options = options or Options()
    factory = resolve_target(target) if isinstance(target, str) else target
    spec = target if isinstance(target, str) else spec_of(factory)
    info = describe(factory, spec)
    if options.workers > 1 and not isinstance(target, str):
        raise ValueError("--workers needs a target named by a string ('module:factory'), built in each worker")

    started_at = time.time()
    t0 = time.perf_counter()
    deadline = t0 + options.budget if options.budget else None
    gen_stats: dict[str, GeneratorStats] = {}
    checked: dict[str, int] = {inv.id: 0 for inv in INVARIANTS}
    violated: dict[str, int] = {inv.id: 0 for inv in INVARIANTS}
    examples: dict[str, list[Example]] = {}
    transitions: set[Transition] = set()
    transition_hits: Counter[Transition] = Counter()
    pairs: set[Pair] = set()
    missing_counts: dict[str, int] = {}
    errors: list[str] = []
    budget_exhausted = False
    pending: dict[tuple[str, int], Trace] = {}

    executor = _Executor(factory, info, options.workers)

    def absorb(result: TraceResult) -> None:
        stats = gen_stats[result.generator]
        trace = pending.pop((result.generator, result.index))
        stats.seconds += result.seconds
        if not result.applicable:
            stats.not_applicable += 1
            for cap in result.missing:
                missing_counts[cap] = missing_counts.get(cap, 0) + 1
            return
        stats.ran += 1
        transitions.update(result.transitions)
        transition_hits.update(result.transitions)
        pairs.update(result.pairs)
        judgement = result.judgement
        assert judgement is not None
        if judgement.errors:
            stats.errors += 1
            if len(errors) < 20:
                errors.append(f"{trace.name}: {judgement.errors[0]}")
        if judgement.violated:
            stats.violating += 1
        for inv, found in judgement.results.items():
            if found is None:
                continue
            checked[inv] += 1
            stats.checked[inv] = stats.checked.get(inv, 0) + 1
            if found:
                violated[inv] += 1
                stats.violated[inv] = stats.violated.get(inv, 0) + 1
                kept = examples.setdefault(inv, [])
                if len(kept) < max(options.counterexamples, 1):
                    kept.append(Example(result.generator, trace, found))

    generator_names = generators_for(options, info)
    try:
        for name in generator_names:
            stats = gen_stats[name] = GeneratorStats(name)
            exhaustive = ExhaustiveStats()
            begun = time.perf_counter()
            traces, total = _traces(name, options, info.capabilities, stats, exhaustive, info.protocol)
            done = 0
            for index, trace in enumerate(traces):
                if deadline is not None and time.perf_counter() > deadline:
                    budget_exhausted = True
                    stats.complete = False
                    break
                stats.generated += 1
                pending[(name, index)] = trace
                for result in executor.submit(name, index, trace):
                    absorb(result)
                    done += 1
                    if progress is not None:
                        progress(name, done, total)
            for result in executor.drain():
                absorb(result)
                done += 1
                if progress is not None:
                    progress(name, done, total)
            stats.skipped_equivalent = exhaustive.skipped
            stats.info.setdefault("wall_seconds", round(time.perf_counter() - begun, 3))
            if budget_exhausted:
                break
    except BaseException:
        executor.close(abort=True)
        raise
    executor.close()
    run_seconds = time.perf_counter() - t0
    for name in generator_names:
        if name not in gen_stats:
            gen_stats[name] = GeneratorStats(name, complete=False)

    counterexamples: dict[str, list[Counterexample]] = {}
    t1 = time.perf_counter()
    if options.minimize:
        min_deadline = t1 + options.minimize_budget
        for inv in sorted(examples):
            for example in examples[inv][: options.counterexamples]:
                counterexamples.setdefault(inv, []).append(
                    minimize_counterexample(factory, info.capabilities, inv, example, deadline=min_deadline)
                )
    minimize_seconds = time.perf_counter() - t1

    invariants: dict[str, InvariantSummary] = {}
    for invariant in INVARIANTS:
        applicable = invariant.needs <= info.capabilities
        if violated[invariant.id]:
            status = "violated"
        elif applicable and checked[invariant.id]:
            status = "holds"
        else:
            status = "not_applicable"
        invariants[invariant.id] = InvariantSummary(
            invariant.id,
            invariant.title,
            invariant.kind,
            invariant.spec,
            status,
            checked[invariant.id],
            violated[invariant.id],
            sorted(invariant.needs),
        )
    return Certification(
        target=info,
        options=options,
        generators=gen_stats,
        invariants=invariants,
        transitions=transitions & set(ALL_TRANSITIONS),
        pairs=pairs,
        counterexamples=counterexamples,
        examples=examples,
        not_applicable=missing_counts,
        started_at=started_at,
        timings={
            "run_seconds": round(run_seconds, 3),
            "minimize_seconds": round(minimize_seconds, 3),
            "total_seconds": round(time.perf_counter() - t0, 3),
        },
        budget_exhausted=budget_exhausted,
        errors=errors,
        transition_hits={t: n for t, n in transition_hits.items() if t in ALL_TRANSITIONS},
    )


def run_traces(target: str | TargetFactory, traces: Sequence[Trace]) -> list[Checked]:
    """Check several traces against fresh targets, in this process (for tests and tools)."""
    factory = resolve_target(target) if isinstance(target, str) else target
    info = describe(factory, target if isinstance(target, str) else None)
    return [_run_checked(factory, info.capabilities, t) for t in traces]
