"""The bug-finding benchmark: callsafe's default certification against hypothesis state
machines, on every mutant of the zoo, with equal time budgets.

Issue "Benchmarks", item 4, and issue 20, item 4 (fair baselines). For each mutant
(:mod:`callsafe.campaigns.zoo`) and each time budget (1 s and 20 s):

* **callsafe**: what ``callsafe selftest`` does, :func:`callsafe.certify.harness.certify`
  with the selftest's options (depth 2, seed 0, one counterexample per invariant,
  minimisation on) and the budget (for running traces; minimisation has its own). Reported:
  whether it was caught (an expected invariant violated, as the selftest scores it), the
  certification's whole time, the time to the first violation, and the minimal
  counterexample's length in events. A run that finishes every generator within 1 s is its
  own 20 s run (the same deterministic run), and is not repeated.
* **competent hypothesis** (:mod:`bench.competent_machine`): the state machine a competent
  hypothesis user writes (a bundle of opened calls, a JSON document per call cut into
  pieces, a "finish" rule, the controls);
* **certify_machine**: callsafe's own hypothesis machine
  (:func:`callsafe.certify.machine.certify_machine`'s rules), under the same judge;
* **plain hypothesis** (:mod:`bench.plain_machine`, the old strawman: uniform events to
  random ids), at the short budget only, for reference.

Every hypothesis machine is judged after every event as the harness judges a run and
scored as callsafe is, by the mutant's own invariant: a violation of another invariant is
noted and the run goes on (a mutant that names none: any invariant). Each runs
derandomized, so its 20 s run repeats its 1 s run's examples: a mutant found within 1 s
is found the same way within 20 s, and only a mutant not found is run again with 20 s.
Shrinking has its own budget (:data:`SHRINK_BUDGET`), reported when it cut it off.

How callsafe's first violation is timed without touching the harness: the mutant's factory
is wrapped in a recorder (the harness builds a fresh target per trace, so the recorder's
targets are the runs, in order, each with the events it received and the time its run
ended), and the progress callback of :func:`certify` timestamps every result as it is
absorbed. After the run, the first violating trace is the earliest-run of the kept
examples (each invariant keeps its first violating trace), and its time is the first
progress stamp after its run ended. Caches that a process builds once
(the z3-synthesised traces, the coverage suite) are built by an untimed warm-up run
first, and that one-time cost is reported on its own.

A control row runs every side on the reference implementation (``reference:memory``),
where none may find anything; it also says in how many examples the reference executed a
call at all (a test whose events never complete a call cannot catch a bug in dispatching one).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench.common import Config, Section, busy_note, fmt_ratio, markdown_table
from bench.competent_machine import run_certify_machine, run_competent
from bench.plain_machine import PlainOutcome, run_plain
from callsafe.campaigns.selftest import MutantResult
from callsafe.campaigns.zoo import Mutant, registry
from callsafe.certify.harness import Options, certify
from callsafe.certify.targets import TargetFactory, describe, resolve_target
from callsafe.contract.target import Target, TargetEnv
from callsafe.model.vocabulary import Event, Restart, Trace

__all__ = ["NAME", "TITLE", "run"]

NAME = "bugpower"
TITLE = "Bug-finding power: callsafe's certification against hypothesis state machines, equal budgets"

SELFTEST_OPTIONS = Options(budget=None, depth=2, seed=0, counterexamples=1)  # `callsafe selftest`'s defaults
BUDGETS = (1.0, 20.0)  # seconds, every side
QUICK_BUDGETS = (1.0, 2.0)
SHRINK_BUDGET = 5.0  # seconds for hypothesis to shrink a violation it found
QUICK_SHRINK_BUDGET = 1.0
SIDES = ("competent", "certify_machine")  # the hypothesis machines run at every budget
STRAWMAN = "plain"  # run at the short budget only
QUICK_MUTANTS = ("dispatch-on-parse", "merge-by-index", "never-execute")
CONTROL = Mutant("reference (control)", "reference:memory", "the reference implementation: nothing to find")


@dataclass(frozen=True)
class CallsafeOutcome:
    """callsafe's certification of one target."""

    result: MutantResult  # the selftest's scoring (caught, minimal sizes)
    seconds: float  # the whole certification, minimisation included
    first_failure: float | None  # seconds from the start to the first violating trace's result
    first_trace: str | None  # "generator: name" of that trace
    traces_run: int
    minimal_by_invariant: dict[str, int]  # the minimal counterexample's length, per violated invariant
    exhausted: bool = False  # the budget stopped it before every generator was done

    def minimal_for(self, invariants: frozenset[str]) -> int | None:
        """The shortest of callsafe's minimal counterexamples for one of ``invariants`` (to
        compare like with like), else the shortest of all."""
        same = [n for inv, n in self.minimal_by_invariant.items() if inv in invariants]
        return min(same, default=self.result.minimal_events)


class _RecordingTarget:
    """A target passed through, remembering the events it received and when its run ended."""

    def __init__(self, inner: Target) -> None:
        self.inner = inner
        self.name, self.protocol, self.capabilities = inner.name, inner.protocol, inner.capabilities
        self.events: list[Event] = []
        self.closed_at = float("inf")

    def start(self, env: TargetEnv) -> None:
        self.inner.start(env)

    def receive(self, event: Event) -> None:
        self.events.append(event)
        self.inner.receive(event)

    def restart(self) -> None:
        self.inner.restart()

    def close(self) -> None:
        self.inner.close()
        self.closed_at = time.perf_counter()


class _Recorder:
    """A target factory that keeps every target it built, in order: the harness builds a
    fresh target per trace, so the list is the runs, in the order they ran."""

    def __init__(self, factory: TargetFactory) -> None:
        self.factory = factory
        self.built: list[_RecordingTarget] = []
        self.__qualname__ = getattr(factory, "__qualname__", "target")

    def __call__(self) -> Target:
        target = _RecordingTarget(self.factory())
        self.built.append(target)
        return target

    def first_run_of(self, trace: Trace) -> _RecordingTarget | None:
        """The first target that received exactly ``trace``'s events (a restart is a call
        to ``restart()``, not an event)."""
        wanted = [e for e in trace.delivered() if not isinstance(e, Restart)]
        return next((t for t in self.built if t.events == wanted), None)


def run_callsafe(mutant: Mutant, options: Options = SELFTEST_OPTIONS) -> CallsafeOutcome:
    """Certify ``mutant`` as the selftest does, and time its first violation.

    The first violating trace is the earliest-run of the kept examples (each invariant
    keeps its first violating trace, so the first of all is among them): the recorder
    says which target ran each example first and when that run ended; the progress
    callback, called as each trace's result is absorbed (one worker: in order), says
    when that result was in."""
    stamps: list[float] = []

    def progress(generator: str, done: int, total: int | None) -> None:
        stamps.append(time.perf_counter())

    recorder = _Recorder(resolve_target(mutant.target))
    started = time.perf_counter()
    cert = certify(recorder, options, progress=progress)
    seconds = time.perf_counter() - started
    result = MutantResult.of(mutant, cert, seconds)
    by_invariant = {inv: min(len(ce.minimal.events) for ce in ces) for inv, ces in cert.counterexamples.items() if ces}
    firsts = []
    for examples in cert.examples.values():
        for example in examples:
            ran = recorder.first_run_of(example.trace)
            if ran is None:
                raise AssertionError(f"{mutant.name}: no target received the events of {example.trace.name!r}")
            firsts.append((ran.closed_at, f"{example.generator}: {example.trace.name}"))
    exhausted = cert.budget_exhausted
    if not firsts:
        return CallsafeOutcome(result, seconds, None, None, cert.traces_run, by_invariant, exhausted)
    closed_at, label = min(firsts)
    absorbed = next((t for t in stamps if t >= closed_at), closed_at)
    return CallsafeOutcome(result, seconds, absorbed - started, label, cert.traces_run, by_invariant, exhausted)


RUNNERS = {"competent": run_competent, "certify_machine": run_certify_machine, "plain": run_plain}


def run_hypothesis(mutant: Mutant, side: str, budget: float, shrink_budget: float = SHRINK_BUDGET) -> PlainOutcome:
    """One hypothesis machine against ``mutant``, scored by its own invariants."""
    factory = resolve_target(mutant.target)
    caps = describe(factory, mutant.target).capabilities
    return RUNNERS[side](factory, caps, budget, shrink_budget, frozenset(mutant.expect))


@dataclass(frozen=True)
class Row:
    mutant: Mutant
    callsafe: dict[float, CallsafeOutcome]  # per budget
    machines: dict[tuple[str, float], PlainOutcome]  # per (side, budget)


def measure_row(mutant: Mutant, budgets: Sequence[float], shrink_budget: float) -> Row:
    """Every side at every budget; a run that ended before its budget (callsafe done, a
    machine's violation found) stands for the longer budgets too (derandomized: the same run)."""
    mine: dict[float, CallsafeOutcome] = {}
    for budget in budgets:
        if mine and not mine[budgets[0]].exhausted:
            mine[budget] = mine[budgets[0]]
            continue
        mine[budget] = run_callsafe(mutant, replace(SELFTEST_OPTIONS, budget=budget))
    machines: dict[tuple[str, float], PlainOutcome] = {}
    for side in SIDES:
        for budget in budgets:
            shorter = machines.get((side, budgets[0]))
            if shorter is not None and shorter.found:
                machines[(side, budget)] = shorter
                continue
            machines[(side, budget)] = run_hypothesis(mutant, side, budget, shrink_budget)
    machines[(STRAWMAN, budgets[0])] = run_hypothesis(mutant, STRAWMAN, budgets[0], shrink_budget)
    return Row(mutant, mine, machines)


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.1f} s"


def _machine_cell(o: PlainOutcome, mine: CallsafeOutcome) -> str:
    if not o.found:
        others = f"; other invariants: {', '.join(sorted(o.others))}" if o.others else ""
        return f"no ({o.examples} examples{others})"
    cut = ", shrink cut off" if not o.shrink_finished else ""
    theirs = mine.minimal_for(o.shrunk_violated)
    return f"yes, {_secs(o.first_failure)}, {o.shrunk_events} events (callsafe: {theirs}){cut}"


def _callsafe_cell(c: CallsafeOutcome) -> str:
    if not c.result.caught_by:
        return f"no ({c.traces_run} traces)"
    caught = "yes" if c.result.caught else "other invariant"
    minimal = c.result.expected_minimal if c.result.expected_minimal is not None else c.result.minimal_events
    done = ", budget spent" if c.exhausted else ""
    return f"{caught}, {_secs(c.first_failure)}, {minimal} events ({c.seconds:.2f} s{done})"


def _label(side: str, budget: float) -> str:
    return f"{side} {budget:g} s"


def _columns(budgets: Sequence[float]) -> list[tuple[str, float]]:
    return [(side, b) for side in SIDES for b in budgets] + [(STRAWMAN, budgets[0])]


def _table(rows: Sequence[Row], budgets: Sequence[float]) -> str:
    header = ["mutant", "expected", *(f"callsafe {b:g} s" for b in budgets)]
    header += [_label(side, b) for side, b in _columns(budgets)]
    out = []
    for r in rows:
        cells = [r.mutant.name, ", ".join(r.mutant.expect) or "-"]
        cells += [_callsafe_cell(r.callsafe[b]) for b in budgets]
        cells += [_machine_cell(r.machines[key], r.callsafe[key[1]]) for key in _columns(budgets)]
        out.append(cells)
    return markdown_table(header, out)


def _median_ratio(pairs: Sequence[tuple[float, float]]) -> float | None:
    return statistics.median(h / c for c, h in pairs) if pairs else None


def _headline(rows: Sequence[Row], budgets: Sequence[float]) -> tuple[dict[str, float], list[str]]:
    """Mutants caught by each side at each budget, and medians of the machine over callsafe
    (shrunk length, time to the first violation) where both caught it."""
    n = len(rows)
    ratios: dict[str, float] = {"mutants": float(n)}
    lines = []
    for b in budgets:
        caught = sum(r.callsafe[b].result.caught for r in rows)
        ratios[f"caught/callsafe@{b:g}s"] = float(caught)
        ratios[f"found/callsafe@{b:g}s"] = float(sum(bool(r.callsafe[b].result.caught_by) for r in rows))
        firsts = [
            r.callsafe[b].first_failure for r in rows if r.callsafe[b].result.caught and r.callsafe[b].first_failure
        ]
        median = f"{statistics.median(firsts) * 1e3:.0f} ms" if firsts else "n/a"
        lines.append(f"- callsafe, {b:g} s: caught {caught}/{n}; median time to the first violation {median}")
    ratios["caught/callsafe"] = ratios[f"caught/callsafe@{budgets[-1]:g}s"]
    ratios["found/callsafe"] = ratios[f"found/callsafe@{budgets[-1]:g}s"]
    for side, b in _columns(budgets):
        key = f"{side}@{b:g}s"
        outcomes = [(r, r.machines[(side, b)]) for r in rows]
        ratios[f"caught/{key}"] = float(sum(o.found for _, o in outcomes))
        ratios[f"found/{key}"] = float(sum(o.found or bool(o.others) for _, o in outcomes))
        lengths = [
            (float(mine), float(o.shrunk_events))
            for r, o in outcomes
            if o.shrunk_events and (mine := r.callsafe[b].minimal_for(o.shrunk_violated))
        ]
        times = [
            (r.callsafe[b].first_failure, o.first_failure)
            for r, o in outcomes
            if r.callsafe[b].first_failure and o.first_failure is not None
        ]
        length_ratio, time_ratio = _median_ratio(lengths), _median_ratio(times)
        if length_ratio is not None:
            ratios[f"length/{key}"] = length_ratio
        if time_ratio is not None:
            ratios[f"first/{key}"] = time_ratio
        lines.append(
            f"- {_label(side, b)}: caught {ratios[f'caught/{key}']:.0f}/{n} (a violation of any invariant: "
            f"{ratios[f'found/{key}']:.0f}/{n}); median shrunk length over callsafe's minimal for the same "
            "invariant: "
            + (fmt_ratio(length_ratio) if length_ratio is not None else "n/a")
            + f" over {len(lengths)} mutants; median time to the first violation over callsafe's: "
            + (f"{time_ratio:.1f}x" if time_ratio is not None else "n/a")
        )
    return ratios, lines


def run(config: Config) -> Section:
    """Every mutant of the zoo and the control (three mutants and budgets of 1 s and 2 s
    with ``quick``). Ratios: ``caught/<side>@<budget>s`` and ``found/<side>@<budget>s``
    (mutant counts; ``caught/callsafe`` is callsafe's at the long budget),
    ``length/<machine>@<budget>s`` (median of the machine's shrunk length over callsafe's
    minimal for an invariant the shrunk example violates: >1 means callsafe's
    counterexamples are shorter) and ``first/<machine>@<budget>s`` (median of the times to
    the first violation, the same way)."""
    mutants = registry()
    if config.quick:
        mutants = [m for m in mutants if m.name in QUICK_MUTANTS]
    budgets = QUICK_BUDGETS if config.quick else BUDGETS
    shrink = QUICK_SHRINK_BUDGET if config.quick else SHRINK_BUDGET
    note = busy_note()
    started = time.perf_counter()
    warm0 = time.perf_counter()
    certify(mutants[0].target, SELFTEST_OPTIONS)  # builds the per-process caches (z3 synthesis, coverage suite)
    warm = time.perf_counter() - warm0
    rows = [measure_row(mutant, budgets, shrink) for mutant in mutants]
    control = measure_row(CONTROL, budgets, shrink)
    if any(c.result.caught_by for c in control.callsafe.values()) or any(o.found for o in control.machines.values()):
        raise AssertionError(
            "a violation on the reference implementation: the judge or the reference is wrong, the rest is noise"
        )
    note = note or busy_note()
    ratios, headline = _headline(rows, budgets)
    long = budgets[-1]
    lines = [
        f"## {TITLE}",
        "",
        f"Every side gets the same wall-clock budgets, {' s and '.join(f'{b:g}' for b in budgets)} s, on every mutant,",
        "and is scored the same way: **caught** = a violation of an invariant the mutant names (any, where it",
        "names none), as `callsafe selftest` scores it.",
        "**callsafe**: `callsafe selftest`'s certification (depth 2, seed 0, one counterexample per invariant,",
        "minimised) with the budget for running traces; the cell gives the time to the first violating trace's",
        "result, the shortest minimised counterexample of an expected invariant in events, and the whole",
        "certification's time (a run that finished every generator within the short budget is its own long run).",
        "**competent** (`bench/competent_machine.py`): a `RuleBasedStateMachine` as a competent hypothesis user",
        "writes it: a `Bundle` of opened calls, a JSON document per call cut into pieces, `send_piece`, a `finish`",
        "rule (the rest of the pieces, then the completed terminal event), repeated and conflicting pieces, stop",
        "reasons, confirm/deny, reconnect replays, and one `control` rule for every stop (new turn, cancel,",
        "disconnect, response end, quarantine, tool disabled/renamed/removed/changed, tenant stopped, restart).",
        "**certify_machine**: the rules of callsafe's own machine (`callsafe.certify.machine.certify_machine`).",
        "**plain**: the old strawman (`bench/plain_machine.py`: uniform events to random ids), short budget only.",
        "Every machine is judged after every event as the harness judges a run (invariants and oracle); a",
        "violation of another invariant is noted and the run goes on. Derandomized, no database, 50 steps per",
        f"example; shrinking gets {shrink:g} s more. The cell gives the time to the first violation and the",
        "length of hypothesis's shrunk counterexample in events (a replay counts as one), with callsafe's minimal",
        "for one of the invariants it violates (like with like); a machine's run that found the mutant within the",
        "short budget stands for its long run too (derandomized: the same examples in the same order).",
        f"The per-process caches (z3 synthesis, coverage suite) were built once before timing: {warm:.1f} s.",
        "",
    ]
    if note:  # busy_note's advice is about CPU-time ratios; here every figure is wall-clock
        lines += [f"> {note.split(':')[0]}: every time here, and every budget, is wall-clock.", ""]
    lines += [_table([*rows, control], budgets), "", *headline]
    c = control.callsafe[long]
    executing = ", ".join(
        f"{_label(side, b)}: {o.executing} of {o.examples}" for (side, b), o in control.machines.items()
    )
    lines += [
        f"- control (reference): callsafe ran {c.traces_run} traces and found nothing; no machine found anything; "
        f"examples in which the reference executed a call: {executing}",
        f"- the whole benchmark took {time.perf_counter() - started:.0f} s",
    ]
    return Section(NAME, TITLE, "\n".join(lines), ratios)
