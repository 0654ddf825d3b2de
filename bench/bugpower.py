"""The bug-finding benchmark: callsafe's default certification against a plain hypothesis
stateful test, on every mutant of the zoo.

Issue "Benchmarks", item 4: every mutant caught by callsafe within its default budget,
with shorter counterexamples than the alternative.

For each mutant (:mod:`callsafe.campaigns.zoo`):

* **callsafe**: what ``callsafe selftest`` does, :func:`callsafe.certify.harness.certify`
  with the selftest's options (depth 2, seed 0, one counterexample per invariant,
  minimisation on; no budget: the default budget is "until the generators are done").
  Reported: whether it was caught (an expected invariant violated, as the selftest
  scores it), the certification's whole time, the time to the first violation, and the
  minimal counterexample's length in events (the shortest over every violated invariant,
  and the shortest of an expected invariant).
* **hypothesis**: the plain state machine of :mod:`bench.plain_machine` (uniformly chosen
  fine-grained events with random arguments, the invariants judged after every event as
  the harness judges them) against the same mutant, first with the same wall-clock budget
  as callsafe's whole certification of that mutant took, then with a fixed, longer budget.
  Reported: whether it found a violation (and whether of an expected invariant), the time
  to the first one, and the length of hypothesis's shrunk counterexample in events.

How the first violation is timed without touching the harness: the mutant's factory is
wrapped in a recorder (the harness builds a fresh target per trace, so the recorder's
targets are the runs, in order, each with the events it received and the time its run
ended), and the progress callback of :func:`certify` timestamps every result as it is
absorbed. After the run, the first violating trace is the earliest-run of the kept
examples (each invariant keeps its first violating trace), and its time is the first
progress stamp after its run ended. Caches that a process builds once
(the z3-synthesised traces, the coverage suite) are built by an untimed warm-up run
first, and that one-time cost is reported on its own.

A control row runs both on the reference implementation (``reference:memory``), where
neither may find anything; for the hypothesis machine it also says in how many examples
the reference executed a call at all (a test whose events never complete a call cannot
catch a bug in dispatching one).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.common import Config, Section, busy_note, fmt_ratio, markdown_table
from bench.plain_machine import PlainOutcome, run_plain
from callsafe.campaigns.selftest import MutantResult
from callsafe.campaigns.zoo import Mutant, registry
from callsafe.certify.harness import Options, certify
from callsafe.certify.targets import TargetFactory, describe, resolve_target
from callsafe.contract.target import Target, TargetEnv
from callsafe.model.vocabulary import Event, Restart, Trace

__all__ = ["NAME", "TITLE", "run"]

NAME = "bugpower"
TITLE = "Bug-finding power: callsafe's certification against a plain hypothesis state machine"

SELFTEST_OPTIONS = Options(budget=None, depth=2, seed=0, counterexamples=1)  # `callsafe selftest`'s defaults
LONG_BUDGET = 20.0  # seconds: hypothesis's second, fixed budget
QUICK_LONG_BUDGET = 2.0
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
    if not firsts:
        return CallsafeOutcome(result, seconds, None, None, cert.traces_run, by_invariant)
    closed_at, label = min(firsts)
    absorbed = next((t for t in stamps if t >= closed_at), closed_at)
    return CallsafeOutcome(result, seconds, absorbed - started, label, cert.traces_run, by_invariant)


def run_hypothesis(mutant: Mutant, budget: float) -> PlainOutcome:
    factory = resolve_target(mutant.target)
    return run_plain(factory, describe(factory, mutant.target).capabilities, budget)


@dataclass(frozen=True)
class Row:
    mutant: Mutant
    callsafe: CallsafeOutcome
    same: PlainOutcome  # hypothesis with callsafe's time
    long: PlainOutcome  # hypothesis with the fixed budget


def _expected(mutant: Mutant, violated: frozenset[str]) -> bool:
    return bool(violated) and (not mutant.expect or bool(set(mutant.expect) & violated))


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.1f} s"


def _hyp_cell(mutant: Mutant, o: PlainOutcome, mine: CallsafeOutcome) -> tuple[str, str, str]:
    """found?, time to first, shrunk length (with its invariants, and callsafe's minimal
    for one of them)."""
    if not o.found:
        return f"no ({o.examples} examples)", "-", "-"
    found = "yes" if _expected(mutant, o.first_violated | o.shrunk_violated) else "other invariant"
    invs = ", ".join(sorted(o.shrunk_violated))
    shrunk = f"{o.shrunk_events} ({invs}; callsafe: {mine.minimal_for(o.shrunk_violated)})"
    shrunk += "" if o.shrink_finished else ", shrink cut off"
    return found, _secs(o.first_failure), shrunk


def _table(rows: Sequence[Row], long_budget: float) -> str:
    header = [
        "mutant",
        "expected",
        "callsafe caught",
        "callsafe s",
        "callsafe first",
        "callsafe minimal",
        "hyp. same time: found",
        "first",
        "shrunk",
        f"hyp. {long_budget:.0f} s: found",
        "first",
        "shrunk",
    ]
    out = []
    for r in rows:
        c = r.callsafe
        caught = ("yes" if c.result.caught else "other invariant") if c.result.caught_by else "no"
        minimal = "-"
        if c.result.minimal_events is not None:
            minimal = f"{c.result.minimal_events}"
            if c.result.expected_minimal is not None and c.result.expected_minimal != c.result.minimal_events:
                minimal += f" ({c.result.expected_minimal} expected)"
        out.append(
            [
                r.mutant.name,
                ", ".join(r.mutant.expect) or "-",
                caught,
                f"{c.seconds:.2f}",
                _secs(c.first_failure),
                minimal,
                *_hyp_cell(r.mutant, r.same, c),
                *_hyp_cell(r.mutant, r.long, c),
            ]
        )
    return markdown_table(header, out)


def _median_ratio(pairs: Sequence[tuple[float, float]]) -> float | None:
    return statistics.median(h / c for c, h in pairs) if pairs else None


def _headline(rows: Sequence[Row]) -> tuple[dict[str, float], list[str]]:
    """Mutants caught by each side, and medians of hypothesis over callsafe (shrunk
    length, time to first violation) where both found one."""
    n = len(rows)
    ratios: dict[str, float] = {
        "mutants": float(n),
        "caught/callsafe": float(sum(r.callsafe.result.caught for r in rows)),
        "found/callsafe": float(sum(bool(r.callsafe.result.caught_by) for r in rows)),
    }
    lines = []
    for label in ("same", "long"):
        outcomes = [(r, r.same if label == "same" else r.long) for r in rows]
        ratios[f"caught/hypothesis-{label}"] = float(
            sum(_expected(r.mutant, o.first_violated | o.shrunk_violated) for r, o in outcomes)
        )
        ratios[f"found/hypothesis-{label}"] = float(sum(o.found for _, o in outcomes))
        lengths = [
            (float(mine), float(o.shrunk_events))
            for r, o in outcomes
            if o.shrunk_events and (mine := r.callsafe.minimal_for(o.shrunk_violated))
        ]
        times = [
            (r.callsafe.first_failure, o.first_failure)
            for r, o in outcomes
            if r.callsafe.first_failure and o.first_failure is not None
        ]
        length_ratio, time_ratio = _median_ratio(lengths), _median_ratio(times)
        if length_ratio is not None:
            ratios[f"length/hypothesis-{label}"] = length_ratio
        if time_ratio is not None:
            ratios[f"first/hypothesis-{label}"] = time_ratio
        lines.append(
            f"- hypothesis with {'the same time as callsafe' if label == 'same' else 'the fixed budget'}: "
            f"caught {ratios[f'caught/hypothesis-{label}']:.0f}/{n} (a violation of any invariant: "
            f"{ratios[f'found/hypothesis-{label}']:.0f}/{n}); median shrunk length over callsafe's minimal for the "
            "same invariant: "
            + (fmt_ratio(length_ratio) if length_ratio is not None else "n/a (no mutant found by both)")
            + f" over {len(lengths)} mutants found by both; median time to the first violation over callsafe's: "
            + (f"{time_ratio:.1f}x" if time_ratio is not None else "n/a")
        )
    head = (
        f"- callsafe: caught {ratios['caught/callsafe']:.0f}/{n} (a violation of any invariant: "
        f"{ratios['found/callsafe']:.0f}/{n})"
    )
    return ratios, [head, *lines]


def run(config: Config) -> Section:
    """Every mutant of the zoo and the control (three mutants and short budgets with
    ``quick``). Ratios: ``caught/<side>`` and ``found/<side>`` (mutant counts),
    ``length/hypothesis-<same|long>`` (median of hypothesis's shrunk length over callsafe's
    minimal for an invariant the shrunk example violates: >1 means callsafe's
    counterexamples are shorter) and
    ``first/hypothesis-<same|long>`` (median of the times to the first violation, the same way)."""
    mutants = registry()
    if config.quick:
        mutants = [m for m in mutants if m.name in QUICK_MUTANTS]
    long_budget = QUICK_LONG_BUDGET if config.quick else LONG_BUDGET
    note = busy_note()
    warm0 = time.perf_counter()
    certify(mutants[0].target, SELFTEST_OPTIONS)  # builds the per-process caches (z3 synthesis, coverage suite)
    warm = time.perf_counter() - warm0
    rows: list[Row] = []
    for mutant in mutants:
        mine = run_callsafe(mutant)
        rows.append(Row(mutant, mine, run_hypothesis(mutant, mine.seconds), run_hypothesis(mutant, long_budget)))
    mine = run_callsafe(CONTROL)
    control = Row(CONTROL, mine, run_hypothesis(CONTROL, mine.seconds), run_hypothesis(CONTROL, long_budget))
    if control.callsafe.result.caught_by or control.same.found or control.long.found:
        raise AssertionError(
            "a violation on the reference implementation: the judge or the reference is wrong, the rest is noise"
        )
    note = note or busy_note()
    ratios, headline = _headline(rows)
    lines = [
        f"## {TITLE}",
        "",
        "**callsafe**: `callsafe selftest`'s certification of each mutant (depth 2, seed 0, one counterexample per",
        "invariant, minimised; no budget: it runs every generator to the end). **caught** = an invariant the mutant",
        "names was violated (as the selftest scores it); **s** = the whole certification, minimisation included;",
        "**first** = time to the first violating trace's result; **minimal** = the shortest minimised",
        "counterexample in events (in brackets: the shortest of an expected invariant, where longer).",
        "**hypothesis**: a plain `RuleBasedStateMachine` (`bench/plain_machine.py`): one rule per event kind,",
        "uniform choice, random arguments from pools of two ids, fragments from JSON pieces or short random",
        "text, the invariants and the oracle judged after every event as the harness does; derandomized, no",
        "database, 50 steps per example. Once with callsafe's certification time as its budget, once with",
        f"{long_budget:.0f} s.",
        '**found** = a violation ("other invariant": none the mutant names); **shrunk** = hypothesis\'s shrunk',
        "counterexample in events (a replay counts as one, as in callsafe's traces), with what it violates and",
        "callsafe's minimal counterexample for one of those invariants (like with like).",
        f"The per-process caches (z3 synthesis, coverage suite) were built once before timing: {warm:.1f} s.",
        "",
    ]
    if note:  # busy_note's advice is about CPU-time ratios; here every figure is wall-clock
        lines += [f"> {note.split(':')[0]}: every time here, and hypothesis's budget, is wall-clock.", ""]
    lines += [_table([*rows, control], long_budget), "", *headline]
    lines += [
        f"- control (reference): callsafe ran {control.callsafe.traces_run} traces and found nothing; hypothesis ran "
        f"{control.long.examples} examples ({control.long.steps} events) in {long_budget:.0f} s and found nothing, "
        f"and the reference executed a call in {control.long.executing} of those examples",
    ]
    return Section(NAME, TITLE, "\n".join(lines), ratios)
