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
  large enough to finish reproduce a run exactly, whatever runs it: this process, local
  workers or a Dask cluster. Each generator's traces are cut into partitions
  (:mod:`callsafe.certify.partitions`), an executor (:mod:`callsafe.certify.execution`)
  runs them wherever it likes, and results are absorbed in partition order, which is the
  single-process order. A run stopped by its budget is not reproducible (where it stops
  depends on the machine), but what it did run is a prefix of that order.
* **Counterexamples are minimal**: the first violating traces of each invariant are
  shrunk (:mod:`callsafe.certify.minimize`) while the same invariant is still violated,
  named after what they show, and merged when two shrink to the same story.
* **Target errors are verdicts.** A run the target broke (it raised, hung past the
  per-trace timeout, or its process died: :mod:`callsafe.certify.target_errors`) is
  counted apart: an invariant such a run checked is "not established", never "holds", and
  the certification's verdict is "target_errors" (exit status 3) unless something was
  violated. Ctrl-C ends the run with what ran so far, marked partial; ``fail_fast`` stops
  at the first violation or broken run.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from callsafe import __version__
from callsafe.certify.checking import (
    BYTE_CAPS,
    HANG_LIMIT,
    Checked,
    Counterexample,
    Example,
    check_trace,
    hung,
    run_checked,
    run_partition,
)
from callsafe.certify.execution import Execution, Executor, TraceResult
from callsafe.certify.local import InProcess, Processes
from callsafe.certify.minimize import counterexample_name, minimize_counterexample
from callsafe.certify.partitions import Partition, exhaustive_partitions, listed_partitions, walk_partitions
from callsafe.certify.target_errors import TargetError, TraceTimeout, error_from_exception
from callsafe.certify.targets import TargetFactory, TargetInfo, TargetSpecError, describe, resolve_target, spec_of
from callsafe.certify.trace_cache import cached_traces
from callsafe.certify.watchdog import DEFAULT_TRACE_TIMEOUT, LastResort, first_trace_allowance, trace_deadline
from callsafe.certify.wire import ABSTRACT
from callsafe.certify.wire_adversities import PROTOCOLS, adversity_sources, adversity_traces
from callsafe.certify.wire_traces import wire_traces
from callsafe.contract.target import CAPABILITIES
from callsafe.formal.abstract import Config
from callsafe.generators.catalog import CATALOG, Scenario
from callsafe.generators.coverage import (
    ALL_TRANSITIONS,
    CoverageSuite,
    Pair,
    Transition,
    config_for,
    coverage_suite,
)
from callsafe.generators.domain import Domain
from callsafe.generators.edges import edge_traces
from callsafe.generators.exhaustive import Bound
from callsafe.generators.needs import exhaustive_controls
from callsafe.generators.store_faults import store_fault_traces
from callsafe.generators.walks import walk_configs
from callsafe.model.invariants import INVARIANTS
from callsafe.model.vocabulary import Trace, TraceFormatError

__all__ = [
    "ADVERSITIES_GENERATOR",
    "BYTE_CAPS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TARGET_ERRORS",
    "EXIT_USAGE",
    "EXIT_VIOLATED",
    "GENERATORS",
    "KNOWN_GENERATORS",
    "NAMED_GENERATORS",
    "WIRE_GENERATOR",
    "BrokenTrace",
    "Certification",
    "Checked",
    "Counterexample",
    "GeneratorStats",
    "InvariantSummary",
    "Options",
    "ProgressCallback",
    "ReadingTaken",
    "ScenarioResult",
    "TraceResult",
    "certify",
    "check_trace",
    "exhaustive_bound",
    "generators_for",
    "load_trace_folder",
    "plan_partitions",
    "run_partition",
    "select_scenarios",
]

GENERATORS: Final = ("catalog", "coverage", "synthesis", "walks", "exhaustive", "edges")
TRACES_GENERATOR: Final = "traces"  # the user's own trace files (--traces DIR)
# Exit statuses of `callsafe certify` (docs/cli.md, --help): what CI reads.
EXIT_OK: Final = 0  # certified: nothing violated, no target error
EXIT_VIOLATED: Final = 1  # an invariant violated
EXIT_USAGE: Final = 2  # a usage error (click's own code)
EXIT_TARGET_ERRORS: Final = 3  # the target raised or hung, or no trace ran, and nothing was violated
EXIT_INTERRUPTED: Final = 130  # Ctrl-C: a partial report was written, nothing violated so far
BROKEN_KEPT: Final = 20  # broken traces kept in full (the report counts them all)
# With --max-hangs N > 0, a run also stops once hangs are HANG_SHARE of the traces run, from
# HANG_SHARE_MIN traces on: a target that hangs on every other trace is caught as well.
HANG_SHARE: Final = 0.5
HANG_SHARE_MIN: Final = 10
# The concrete domains (callsafe.generators.domain): "rich", the default, or "plain", the
# single domain of the generators before it (one tenant, one tool, {"v":100}, roomy caps).
DOMAINS: Final = ("rich", "plain")
# Traces per partition when workers share a run: a few seconds of work for a slow target
# (SQLite: about 15 ms a trace), far more than a task's overhead for a fast one.
PARTITION_SIZE: Final = 256
WIRE_GENERATOR: Final = "wire"  # wire-shaped traces (callsafe.certify.wire_traces)
ADVERSITIES_GENERATOR: Final = "wire-adversities"  # mutated streams (callsafe.certify.wire_adversities)
KNOWN_GENERATORS: Final = (*GENERATORS, WIRE_GENERATOR, TRACES_GENERATOR, ADVERSITIES_GENERATOR)


def exhaustive_bound(
    depth: int,
    capabilities: frozenset[str] = CAPABILITIES,
    protocol: str = ABSTRACT,
    *,
    calls: int = 2,
    turns: int = 2,
    fragments: int = 2,
) -> Bound:
    """The exhaustive generator's bound for ``--depth N``: ``calls`` call ids (two by
    default), ``turns`` turns (one without cancellation: a second turn supersedes the
    first), ``fragments`` per call, the common controls the target can take, one restart if
    it can restart, and up to N events after the turn start.

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
        calls=calls,
        turns=turns if cancellation else 1,
        fragments=fragments,
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
    workers: int = 1  # local worker processes
    scheduler: str | None = None  # a Dask scheduler's address: run the traces on that cluster
    partition_size: int | None = None  # traces per partition with workers (PARTITION_SIZE)
    generators: tuple[str, ...] = GENERATORS
    walks: int = 200
    # The size of the model the walks and the exhaustive enumeration draw from: call ids,
    # turns of the conversation (one for a target without cancellation), fragments per call.
    calls: int = 2
    turns: int = 2
    fragments: int = 2
    domain: str = "rich"  # the concrete domain the generators draw from (DOMAINS)
    minimize: bool = True
    # Distinct causes kept per invariant (Finding.cause), each minimised into its own
    # counterexample: one disputed reading must not hide another finding of the invariant.
    counterexamples: int = 5
    minimize_budget: float = 30.0  # seconds, all counterexamples together
    trace_timeout: float | None = DEFAULT_TRACE_TIMEOUT  # seconds per trace before it is a hang
    fail_fast: bool = False  # stop at the first violation or target error
    scenarios: tuple[str, ...] = ()  # fnmatch patterns: the catalog scenarios to run (none: all)
    traces_dir: str | None = None  # a folder of the user's trace files (the "traces" generator)
    # Stop the run after this many consecutive hangs, or when hangs are at least half of at
    # least HANG_SHARE_MIN traces run (0: never stop for hangs); see Certification.stop_reason.
    max_hangs: int = HANG_LIMIT

    def __post_init__(self) -> None:
        unknown = set(self.generators) - set(KNOWN_GENERATORS)
        if unknown:
            raise ValueError(f"unknown generators {sorted(unknown)}; known: {', '.join(KNOWN_GENERATORS)}")
        if self.workers < 1 or self.depth < 0 or (self.budget is not None and self.budget <= 0):
            raise ValueError("workers >= 1, depth >= 0 and a positive budget")
        if self.walks < 0:
            raise ValueError("walks >= 0")
        if self.max_hangs < 0:
            raise ValueError("--max-hangs is at least 0 (0: never stop for hangs)")
        if self.trace_timeout is not None and self.trace_timeout <= 0:
            raise ValueError("a positive --trace-timeout")
        if TRACES_GENERATOR in self.generators and not self.traces_dir:
            raise ValueError("the traces generator runs the files of --traces DIR")
        if self.scenarios and not select_scenarios(self.scenarios):
            raise ValueError(f"no catalog scenario matches {', '.join(self.scenarios)} (callsafe scenarios list)")
        if self.domain not in DOMAINS:
            raise ValueError(f"unknown domain {self.domain!r}; known: {', '.join(DOMAINS)}")
        # the model's own Config says which sizes its explorer takes (the walks draw from it)
        Config(calls=self.calls, turns=self.turns, fragments=self.fragments)
        if self.partition_size is not None and self.partition_size < 1:
            raise ValueError("a partition holds at least one trace")
        if self.scheduler and self.workers > 1:
            raise ValueError("--workers starts local processes; with --scheduler the cluster's workers run the traces")

    def to_json(self) -> dict[str, Any]:
        """What was certified and how hard; how it was executed (workers, scheduler,
        partitions) is the report's ``execution`` object instead, so that the same options
        give the same report wherever they ran."""
        return {
            "budget_seconds": self.budget,
            "depth": self.depth,
            "seed": self.seed,
            "generators": list(self.generators),
            "walks": self.walks,
            "calls": self.calls,
            "turns": self.turns,
            "fragments": self.fragments,
            "domain": self.domain,
            "minimize": self.minimize,
            "counterexamples_per_invariant": self.counterexamples,
            "minimize_budget_seconds": self.minimize_budget,
            "trace_timeout_seconds": self.trace_timeout,
            "fail_fast": self.fail_fast,
            "scenarios": list(self.scenarios),
            "traces_dir": self.traces_dir,
            "max_hangs": self.max_hangs,
        }


def _executor(options: Options, factory: TargetFactory, info: TargetInfo) -> Executor:
    size = options.partition_size or PARTITION_SIZE
    if options.scheduler:
        from callsafe.certify.distributed import DaskExecutor

        return DaskExecutor(options.scheduler, info, size)
    if options.workers > 1:
        return Processes(info, options.workers, size, options.trace_timeout, options.max_hangs)
    return InProcess(factory, info.capabilities, options.trace_timeout)


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
    covered: Counter[str] = field(default_factory=Counter)  # domain feature -> traces that ran
    total: int | None = None  # traces planned (for progress; not in the report)
    planned_at: float = 0.0  # time.perf_counter() when its planning began (for wall_seconds)

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
            **({"domain_covered": dict(sorted(self.covered.items()))} if self.covered else {}),
        }


@dataclass
class InvariantSummary:
    id: str
    title: str
    kind: str
    spec: str
    status: str  # "holds" | "violated" | "not_established" | "not_applicable"
    traces_checked: int  # on runs the target did not break off
    traces_violated: int
    needs: list[str]
    traces_broken: int = 0  # applicable traces whose run the target broke (an error or a hang)
    about: list[str] = field(default_factory=lambda: ["action"])  # its sections (Invariant.about)
    # violating traces by what their findings are about: "action" and/or "records"
    violated_by: dict[str, int] = field(default_factory=dict)
    causes: int = 0  # distinct causes seen (counterexamples keep at most Options.counterexamples)


@dataclass
class BrokenTrace:
    """A trace whose run the target broke: it raised, hung, or its process died. ``trace``
    is what it was given (a hang: cut after the event it hung on), to replay."""

    generator: str
    index: int
    name: str
    trace: Trace
    errors: list[TargetError]
    files: dict[str, str] = field(default_factory=dict)  # kind -> path (set by the report)

    @property
    def kind(self) -> str:
        """ "hang" when any error is a hang, "crash" for a process that died, else "error"."""
        kinds = {e.kind for e in self.errors}
        return "hang" if "hang" in kinds else "crash" if "crash" in kinds else "error"


@dataclass
class ReadingTaken:
    """The traces judged under one reading: how many, per invariant how many of them the
    parser's own reading would have found violated and this one does not (``spared``), and
    how many this one still finds violated (``violated``)."""

    traces: int = 0
    spared: Counter[str] = field(default_factory=Counter)
    violated: Counter[str] = field(default_factory=Counter)


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
    execution: Execution = field(default_factory=Execution)  # how it ran, never what it found
    broken: list[BrokenTrace] = field(default_factory=list)  # the first BROKEN_KEPT broken traces
    broken_count: dict[str, int] = field(default_factory=dict)  # "error" | "hang" | "crash" -> traces
    # None, "interrupted" (Ctrl-C: the report is partial), "fail-fast" or "hangs" (the target kept hanging)
    stopped: str | None = None
    stop_reason: str = ""  # why the run stopped early, in words (for "hangs")
    scenarios: list[ScenarioResult] = field(default_factory=list)  # per named trace, in run order
    # Wire runs judged under another defensible reading of their stream than the protocol's
    # own parser (:mod:`callsafe.certify.wire_readings`), by reading (with its operator).
    readings: dict[str, ReadingTaken] = field(default_factory=dict)

    @property
    def violated(self) -> list[str]:
        return [i for i, s in self.invariants.items() if s.status == "violated"]

    @property
    def action_violated(self) -> list[str]:
        """Invariants some trace violated in what reached the executor, the validators or
        the confirmation prompt (the spec's action safety, and liveness)."""
        return [i for i, s in self.invariants.items() if s.violated_by.get("action")]

    @property
    def records_violated(self) -> list[str]:
        """Invariants some trace violated in what the target recorded: ledger, audit,
        logs, status ("Test visible status separately from action safety")."""
        return [i for i, s in self.invariants.items() if s.violated_by.get("records")]

    @property
    def violation_kind(self) -> str:
        """ "action", "records" (action safety held; only the records are untrue),
        "action+records", or "" when nothing was violated; the exit status is 1 for each
        (docs/reading-a-report.md)."""
        action, records = bool(self.action_violated), bool(self.records_violated)
        return "action+records" if action and records else "action" if action else "records" if records else ""

    @property
    def broken_traces(self) -> int:
        return sum(self.broken_count.values())

    @property
    def partial(self) -> bool:
        """Ctrl-C stopped the run: what is reported is what ran until then."""
        return self.stopped == "interrupted"

    @property
    def ok(self) -> bool:
        """Certified: nothing violated, no target error, not interrupted (exit status 0)."""
        return not self.violated and not self.broken_traces and not self.partial

    @property
    def verdict(self) -> str:
        """ "pass", "fail" (a violation), "target_errors" (none, but the target broke runs),
        "partial" (interrupted before anything of the kind) or "nothing_ran" (no trace ran:
        every one needed a capability the target lacks, or none was selected; a run that
        checked nothing certifies nothing)."""
        if self.violated:
            return "fail"
        if self.broken_traces:
            return "target_errors"
        if self.partial:
            return "partial"
        return "nothing_ran" if self.traces_run == 0 else "pass"

    @property
    def exit_code(self) -> int:
        return {
            "pass": EXIT_OK,
            "fail": EXIT_VIOLATED,
            "target_errors": EXIT_TARGET_ERRORS,
            "partial": EXIT_INTERRUPTED,
            "nothing_ran": EXIT_TARGET_ERRORS,
        }[self.verdict]

    @property
    def traces_run(self) -> int:
        return sum(g.ran for g in self.generators.values())


ProgressCallback = Callable[[str, int, "int | None"], None]


@functools.lru_cache(maxsize=8)
def _coverage_suite(config: Config, during: bool) -> CoverageSuite:
    """The coverage suite of a configuration (a second or so to build: built once)."""
    return coverage_suite(config, during=during)


def _plan(
    name: str,
    options: Options,
    capabilities: frozenset[str],
    stats: GeneratorStats,
    size: int | None,
    protocol: str = ABSTRACT,
) -> tuple[Iterator[Partition], int]:
    """A generator's traces, configured for what the target can take, as partitions of
    ``size`` traces (None: one partition), and how many traces there are."""
    rich = options.domain == "rich"
    domain = Domain.for_capabilities(capabilities, rich=rich and protocol == ABSTRACT)
    if name in ("catalog", WIRE_GENERATOR, ADVERSITIES_GENERATOR, "synthesis", "coverage", TRACES_GENERATOR, "edges"):
        if name == "catalog":
            traces: Sequence[Trace] = [s.trace for s in select_scenarios(options.scenarios)]
        elif name == TRACES_GENERATOR:
            assert options.traces_dir is not None
            traces = load_trace_folder(Path(options.traces_dir))
        elif name == WIRE_GENERATOR:
            traces = list(wire_traces())
        elif name == ADVERSITIES_GENERATOR:
            # an abstract target reads every protocol's streams as events; a wire target its own
            traces = list(adversity_traces(PROTOCOLS if protocol == ABSTRACT else (protocol,)))
            stats.info = {"operators": adversity_sources(PROTOCOLS if protocol == ABSTRACT else (protocol,))}
        elif name == "edges":
            # part of the rich concrete domain: the plain domain (and a wire) has none
            traces = list(edge_traces()) if domain.rich else []
            # store faults need a store that can be made to fail; elsewhere they are not run
            faults = domain.rich and "store_faults" in capabilities
            if faults:
                traces += store_fault_traces()
            stats.info = {"families": sorted({t.name.split(":")[0] for t in traces})}
            if domain.rich and not faults:
                stats.info["not run"] = {"edges/faults": "needs the store_faults capability"}
        elif name == "synthesis":
            traces = _synthesised()
            stats.info = {"traces": [f"{t.name}: {t.source}" for t in traces]}
        else:
            suite = _coverage_suite(config_for(capabilities), "business_validation" in capabilities)
            stats.info = suite.summary()
            traces = suite.traces
            if domain.rich:  # the suite again, each path under every event treatment of the domain
                traces = [*traces, *suite.dressed(domain)]
                stats.info["domain"] = domain.to_json()
        return listed_partitions(name, traces, size), len(traces)
    if name == "walks":
        configs = walk_configs(
            capabilities, calls=options.calls, turns=options.turns, fragments=options.fragments, rich=domain.rich
        )
        stats.info = {"config": configs[0].to_json(), "seed": options.seed}
        if domain.rich:
            stats.info["configs"] = [c.to_json() for c in configs]
            stats.info["domain"] = domain.to_json()
        during = "business_validation" in capabilities
        walks = walk_partitions(
            name, options.seed, options.walks, configs, during, size, domain if domain.rich else None
        )
        return walks, options.walks
    bound = exhaustive_bound(
        options.depth, capabilities, protocol, calls=options.calls, turns=options.turns, fragments=options.fragments
    )
    if domain.rich:
        bound = dataclasses.replace(bound, domain=domain)
    stats.info = {"bound": bound.to_json()}
    return exhaustive_partitions(name, bound, size)


def select_scenarios(patterns: Sequence[str]) -> list[Scenario]:
    """The catalog scenarios whose names match any of ``patterns`` (``fnmatch``: ``*``,
    ``?``); every scenario when there are none."""
    if not patterns:
        return list(CATALOG)
    return [s for s in CATALOG if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]


def load_trace_folder(folder: Path) -> list[Trace]:
    """Every ``*.json`` trace in ``folder`` (sorted by file name; a trace without a name is
    named after its file). A file that is not a trace raises
    :class:`~callsafe.model.vocabulary.TraceFormatError` naming the file."""
    traces: list[Trace] = []
    for path in sorted(folder.glob("*.json")):
        try:
            trace = Trace.loads(path.read_text(encoding="utf-8"))
        except (TraceFormatError, ValueError, OSError) as exc:
            raise TraceFormatError(f"{path}: {exc}") from None
        if not trace.name:
            trace = Trace(
                events=trace.events, tools=trace.tools, limits=trace.limits, name=path.stem, source=trace.source
            )
        traces.append(trace)
    if not traces:
        raise TraceFormatError(f"{folder}: no *.json trace files")
    return traces


def plan_partitions(
    options: Options, info: TargetInfo, gen_stats: dict[str, GeneratorStats], size: int | None
) -> Iterator[Partition]:
    """Every generator's partitions, one generator after the other (each planned only when
    the previous one's partitions are all out, so its lists are built while the first
    partitions run); ``gen_stats`` gets each generator's description and trace count."""
    for name in generators_for(options, info):
        stats = gen_stats.setdefault(name, GeneratorStats(name))
        stats.planned_at = time.perf_counter()
        partitions, stats.total = _plan(name, options, info.capabilities, stats, size, info.protocol)
        yield from partitions


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
    once per process, and read from disk when this source computed them before
    (:mod:`callsafe.certify.trace_cache`)."""

    def build() -> tuple[Trace, ...]:  # z3 is imported only here: a cached run never loads it
        from callsafe.generators.fragmentation import synthesised_fragmentations
        from callsafe.generators.synthesis import synthesised_traces

        hazards = [trace for _, trace in synthesised_traces()]
        fragmentations = [trace for _, trace in synthesised_fragmentations(_PAYMENT_SCHEMA, _PAYMENT, tool="pay")]
        return (*hazards, *fragmentations)

    return cached_traces("synthesis", build)  # the same traces, kept on disk between processes


def generators_for(options: Options, info: TargetInfo) -> tuple[str, ...]:
    """The generators a certification runs: ``options.generators``, and for a
    provider-protocol target left at the default, the wire-shaped traces first (the other
    generators' traces mostly cannot be said on a wire, see :mod:`callsafe.certify.wire_traces`)."""
    if info.protocol != ABSTRACT and options.generators == GENERATORS:
        return (WIRE_GENERATOR, *GENERATORS)
    return options.generators


@dataclass
class ScenarioResult:
    """The outcome of one named trace (a catalog scenario, a synthesised hazard, one of the
    user's trace files): what JUnit and the reports show per scenario."""

    generator: str
    name: str
    outcome: str  # "passed" | "violated" | "target_error" | "hang" | "not_applicable"
    violated: list[str] = field(default_factory=list)
    detail: str = ""  # the first finding, the target error, or the missing capabilities
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            "name": self.name,
            "outcome": self.outcome,
            "violated": list(self.violated),
            "detail": self.detail,
        }


# Generators whose traces are named scenarios (each gets its own JUnit test case).
NAMED_GENERATORS: Final = ("catalog", "synthesis", WIRE_GENERATOR, "traces")


def _scenario_result(result: TraceResult) -> ScenarioResult:
    if not result.applicable:
        return ScenarioResult(
            result.generator, result.name, "not_applicable", [], f"needs {', '.join(result.missing)}", result.seconds
        )
    judgement = result.judgement
    assert judgement is not None
    violated = sorted(judgement.violated)
    if violated:
        first = judgement.findings[0].describe() if judgement.findings else ""
        return ScenarioResult(result.generator, result.name, "violated", violated, first, result.seconds)
    if judgement.broken:
        error = next(e for e in judgement.errors if e.breaks_run)
        outcome = "hang" if error.kind == "hang" else "target_error"
        return ScenarioResult(result.generator, result.name, outcome, [], error.describe(), result.seconds)
    return ScenarioResult(result.generator, result.name, "passed", [], "", result.seconds)


def certify(
    target: str | TargetFactory,
    options: Options | None = None,
    progress: ProgressCallback | None = None,
) -> Certification:
    """Certify ``target`` (a name, see :mod:`callsafe.certify.targets`, or a factory).

    Ctrl-C ends the run with what ran so far (``stopped="interrupted"``, a partial report);
    ``options.fail_fast`` stops at the first violation or target error."""
    options = options or Options()
    factory = resolve_target(target) if isinstance(target, str) else target
    spec = target if isinstance(target, str) else spec_of(factory)
    try:
        with trace_deadline(first_trace_allowance(f"building {spec}", options.trace_timeout)):
            info = describe(factory, spec)
    except TargetSpecError:
        raise
    except Exception as exc:  # the factory (or the target's attributes) raised: a target error, no traces
        return _unbuildable(spec, options, error_from_exception(exc, "factory"))
    except TraceTimeout as timeout:  # the factory never returned
        return _unbuildable(spec, options, TargetError("hang", "factory", str(timeout), None, timeout.stack))
    handshake = info.run.get("handshake_error")
    if isinstance(handshake, str):  # a program that never answered init properly: nothing can run
        error = TargetError(
            "hang" if info.run.get("handshake_error_kind") == "hang" else "crash", "factory", handshake[:500]
        )
        return _unbuildable(spec, options, error, info)
    if (options.workers > 1 or options.scheduler) and not isinstance(target, str):
        raise ValueError(
            "--workers and --scheduler need a target named by a string ('module:factory'), built in each worker"
        )

    started_at = time.time()
    t0 = time.perf_counter()
    deadline = started_at + options.budget if options.budget else None
    generator_names = generators_for(options, info)
    gen_stats: dict[str, GeneratorStats] = {name: GeneratorStats(name) for name in generator_names}
    checked: dict[str, int] = {inv.id: 0 for inv in INVARIANTS}
    broken_checked: dict[str, int] = {inv.id: 0 for inv in INVARIANTS}
    violated: dict[str, int] = {inv.id: 0 for inv in INVARIANTS}
    violated_by: dict[str, Counter[str]] = {inv.id: Counter() for inv in INVARIANTS}
    examples: dict[str, list[Example]] = {}
    causes: dict[str, set[str]] = {inv.id: set() for inv in INVARIANTS}  # at most CAUSES_COUNTED each
    transitions: set[Transition] = set()
    transition_hits: Counter[Transition] = Counter()
    pairs: set[Pair] = set()
    missing_counts: dict[str, int] = {}
    errors: list[str] = []
    broken: list[BrokenTrace] = []
    broken_count: Counter[str] = Counter()
    scenarios: list[ScenarioResult] = []
    readings: dict[str, ReadingTaken] = {}
    budget_exhausted = False
    stopped: str | None = None
    hangs = {"consecutive": 0, "total": 0, "ran": 0}
    stop_reason = ""

    def too_many_hangs(result: TraceResult) -> str:
        """Why the run stops for hangs after this result, or "" (see Options.max_hangs)."""
        if not options.max_hangs or not result.applicable:
            return ""
        hangs["ran"] += 1
        if hung(result):
            hangs["consecutive"] += 1
            hangs["total"] += 1
        else:
            hangs["consecutive"] = 0
        timeout = f"{options.trace_timeout:g} s" if options.trace_timeout else "its own timeout"
        if hangs["consecutive"] and hangs["consecutive"] >= options.max_hangs:
            return (
                f"the target hung on {hangs['consecutive']} traces in a row (each stopped after {timeout}; "
                f"--max-hangs {options.max_hangs}): the rest of the run would hang too"
            )
        if hangs["ran"] >= HANG_SHARE_MIN and hangs["total"] >= HANG_SHARE * hangs["ran"]:
            return (
                f"the target hung on {hangs['total']} of the {hangs['ran']} traces run (each stopped after "
                f"{timeout}; at least {HANG_SHARE:.0%} stops the run, --max-hangs 0 never does)"
            )
        return ""

    def absorb(result: TraceResult) -> bool:
        """Count one result; True when it is a reason to stop (with --fail-fast)."""
        stats = gen_stats[result.generator]
        stats.generated += 1
        stats.seconds += result.seconds
        if result.generator in NAMED_GENERATORS:
            scenarios.append(_scenario_result(result))
        if not result.applicable:
            stats.not_applicable += 1
            for cap in result.missing:
                missing_counts[cap] = missing_counts.get(cap, 0) + 1
            return False
        stats.ran += 1
        stats.covered.update(result.features)
        transitions.update(result.transitions)
        transition_hits.update(result.transitions)
        pairs.update(result.pairs)
        judgement = result.judgement
        assert judgement is not None
        if judgement.errors:
            stats.errors += 1
            if len(errors) < BROKEN_KEPT:
                errors.append(f"{result.name}: {judgement.errors[0].describe()}")
        if judgement.errors and judgement.broken:
            kind = BrokenTrace(result.generator, result.index, result.name, Trace(events=()), judgement.errors).kind
            broken_count[kind] += 1
            if len(broken) < BROKEN_KEPT and result.trace is not None:
                broken.append(BrokenTrace(result.generator, result.index, result.name, result.trace, judgement.errors))
        if judgement.violated:
            stats.violating += 1
        if judgement.reading:
            taken = readings.setdefault(judgement.reading, ReadingTaken())
            taken.traces += 1
            taken.spared.update(judgement.spared)
            taken.violated.update(judgement.violated)
        broken_run = judgement.broken
        for inv, found in judgement.results.items():
            if found is None:
                continue
            if broken_run:
                broken_checked[inv] += 1
            else:
                checked[inv] += 1
                stats.checked[inv] = stats.checked.get(inv, 0) + 1
            if found:
                violated[inv] += 1
                violated_by[inv].update({f.about for f in found})
                stats.violated[inv] = stats.violated.get(inv, 0) + 1
                _keep_causes(examples.setdefault(inv, []), causes[inv], result, found, options.counterexamples)
        return options.fail_fast and (broken_run or bool(judgement.violated))

    executor = _executor(options, factory, info)
    size = None if isinstance(executor, InProcess) else options.partition_size or PARTITION_SIZE
    guard = LastResort(options.trace_timeout if isinstance(executor, InProcess) else None)
    try:
        with guard:
            for piece in executor.run(plan_partitions(options, info, gen_stats, size), deadline):
                name = piece.partition.generator
                stats = gen_stats[name]
                for result in piece.results:
                    if absorb(result) and not stopped:
                        stopped = "fail-fast"
                    why = too_many_hangs(result)
                    if why and not stopped:
                        stopped, stop_reason = "hangs", why
                    if progress is not None:
                        progress(name, stats.generated, stats.total)
                stats.skipped_equivalent += piece.skipped
                stats.info["wall_seconds"] = round(time.perf_counter() - stats.planned_at, 3)
                if not piece.complete or stopped:
                    budget_exhausted = not piece.complete
                    later = generator_names[generator_names.index(name) :]
                    for stopped_gen in later:
                        gen_stats[stopped_gen].complete = False
                    break
    except KeyboardInterrupt:
        stopped = "interrupted"
        executor.close(abort=True)
    except BaseException:
        executor.close(abort=True)
        raise
    else:
        executor.close(abort=budget_exhausted or stopped is not None)
    run_seconds = time.perf_counter() - t0

    counterexamples: dict[str, list[Counterexample]] = {}
    t1 = time.perf_counter()
    if options.minimize and stopped != "interrupted":
        min_deadline = t1 + options.minimize_budget
        try:
            for inv, example in _round_robin(examples, options.counterexamples):
                counterexamples.setdefault(inv, []).append(
                    minimize_counterexample(
                        factory,
                        info.capabilities,
                        inv,
                        example,
                        deadline=min_deadline,
                        timeout=options.trace_timeout,
                    )
                )
        except KeyboardInterrupt:
            stopped = "interrupted"
    for inv, example in _round_robin(examples, options.counterexamples):  # unshrunk: as found
        if not any(ce.cause == example.cause for ce in counterexamples.get(inv, [])):
            counterexamples.setdefault(inv, []).append(_as_found(inv, example))
    counterexamples = {inv: _merged(ces) for inv, ces in sorted(counterexamples.items())}
    minimize_seconds = time.perf_counter() - t1

    invariants = _summaries(info, checked, violated, broken_checked)
    for inv_id, summary in invariants.items():
        summary.violated_by = dict(sorted(violated_by[inv_id].items()))
        summary.causes = len(causes[inv_id])
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
        execution=executor.execution(),
        broken=broken,
        broken_count=dict(broken_count),
        stopped=stopped,
        stop_reason=stop_reason,
        scenarios=scenarios,
        readings=dict(sorted(readings.items())),
    )


# Distinct causes counted per invariant (the report says how many there were); the set
# stays bounded whatever a run finds.
CAUSES_COUNTED: Final = 1000


def _keep_causes(kept: list[Example], seen: set[str], result: TraceResult, found: Sequence[Any], limit: int) -> None:
    """Keep the first violating trace of each distinct cause of an invariant's findings
    (:attr:`Finding.cause`), up to ``limit`` causes, and count the traces of each kept cause:
    one counterexample per invariant let a single disputed reading hide every other
    finding of that invariant."""
    for cause in dict.fromkeys(f.cause for f in found):
        if len(seen) < CAUSES_COUNTED:
            seen.add(cause)
        known = next((e for e in kept if e.cause == cause), None)
        if known is not None:
            known.traces += 1
        elif len(kept) < max(limit, 1) and result.trace is not None:
            kept.append(Example(result.generator, result.trace, list(found), cause))


def _round_robin(examples: dict[str, list[Example]], limit: int) -> Iterator[tuple[str, Example]]:
    """The examples to minimise, the first cause of every invariant before any second one:
    the minimisation budget is shared, and a budget spent on one invariant's fifth cause
    would leave another invariant's only counterexample unshrunk."""
    for rank in range(max(limit, 1)):
        for inv in sorted(examples):
            if rank < len(examples[inv]):
                yield inv, examples[inv][rank]


def _as_found(invariant: str, example: Example) -> Counterexample:
    """A kept example shown as it was found (``--no-minimize``, Ctrl-C during minimisation):
    every distinct cause is shown, shrunk or not."""
    findings = [f for f in example.findings if f.cause == example.cause] + [
        f for f in example.findings if f.cause != example.cause
    ]
    name = counterexample_name(invariant, example.trace, findings)
    return Counterexample(
        invariant=invariant,
        generator=example.generator,
        original=example.trace,
        minimal=dataclasses.replace(example.trace, name=name, source=f"as found by {example.generator}"),
        findings=findings,
        observations=[],
        errors=[],
        explanation=[],
        tests_run=0,
        cause=example.cause,
        traces=example.traces,
    )


def _merged(ces: list[Counterexample]) -> list[Counterexample]:
    """One counterexample per cause and story (the same decisive events: its name says
    both): two traces that shrink to the same story are one finding, counted in ``merged``."""
    out: dict[tuple[str, str], Counterexample] = {}
    for ce in ces:
        ident = (ce.minimal.name, ce.cause)
        if ident in out:
            out[ident].merged += ce.merged
            out[ident].traces += ce.traces
        else:
            out[ident] = ce
    return list(out.values())


def _summaries(
    info: TargetInfo, checked: dict[str, int], violated: dict[str, int], broken_checked: dict[str, int]
) -> dict[str, InvariantSummary]:
    """Each invariant's status: violated when any run violated it; not established when a
    run the target broke (an error, a hang) checked it, since the claim would leave out
    exactly the runs the target could not finish; holds when runs checked it, none broken
    and none violating; not applicable otherwise (the target lacks what it needs, or no
    applicable trace ran)."""
    invariants: dict[str, InvariantSummary] = {}
    for invariant in INVARIANTS:
        applicable = invariant.needs <= info.capabilities
        if violated[invariant.id]:
            status = "violated"
        elif applicable and broken_checked[invariant.id]:
            status = "not_established"
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
            broken_checked[invariant.id],
            list(invariant.about),
        )
    return invariants


def _unbuildable(spec: str, options: Options, error: TargetError, info: TargetInfo | None = None) -> Certification:
    """The certification of a target whose factory raised when asked for the first target,
    or whose program failed its handshake (``info`` then says what it declared and how it
    ran): nothing ran, every invariant is not established, and the error is the verdict."""
    info = info or TargetInfo(spec, spec, ABSTRACT, frozenset())
    zero = {inv.id: 0 for inv in INVARIANTS}
    invariants = _summaries(info, zero, zero, zero)
    for summary in invariants.values():
        summary.status = "not_established"
    broken = BrokenTrace("factory", 0, "building the target", Trace(events=()), [error])
    kind = broken.kind
    return Certification(
        target=info,
        options=options,
        generators={},
        invariants=invariants,
        transitions=set(),
        pairs=set(),
        counterexamples={},
        examples={},
        not_applicable={},
        started_at=time.time(),
        timings={"run_seconds": 0.0, "minimize_seconds": 0.0, "total_seconds": 0.0},
        budget_exhausted=False,
        errors=[f"building the target: {error.describe()}"],
        broken=[broken],
        broken_count={kind: 1},
    )


def run_traces(target: str | TargetFactory, traces: Sequence[Trace]) -> list[Checked]:
    """Check several traces against fresh targets, in this process (for tests and tools)."""
    factory = resolve_target(target) if isinstance(target, str) else target
    info = describe(factory, target if isinstance(target, str) else None)
    return [run_checked(factory, info.capabilities, t) for t in traces]
