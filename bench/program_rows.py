"""Program rows over HTTP: traces per second before and after, and a row at the default options.

Issue 30, item 2. A program row (``exec:``, wire mode over HTTP) runs each trace through a
real SDK in a program process reading callsafe's loopback provider. What a trace cost, and
what this benchmark measures side by side in one run, on the same traces:

* **before**: the guard program over the ``openai`` SDK
  (``exec:python -m callsafe.adapters.guard_sdk --protocol openai-chat``) as it was: every
  stream builds its HTTP client, and ``httpx.HTTPTransport()`` loads the CA bundle into a
  new TLS context each time (about 150 ms here, most of a trace). The program is the
  shipped one with :func:`callsafe.adapters.http_reads.tls_context` uncached;
* **after**: the shipped program, one TLS context per process;
* **after, 2 workers** (not with ``--quick``): the same with ``--workers 2``: each worker
  process runs its own program and its own loopback provider. Its time includes starting
  both workers and their programs (each run starts them again), a fixed cost that a sample
  this small does not amortise, and two workers only help when two CPUs are free.

Traces per second are the sample's applicable traces over the run's seconds (best of the
rounds, rounds interleaved; the first round also pays the program's start). The verdicts
of every variant are compared (each invariant's status and violating-trace count, and the
target errors): a speed-up that changed a verdict would be no speed-up, and the benchmark
fails. Then the row's time at the matrix's default options is projected: the traces it
runs there (counted with a do-nothing in-process target declaring the program's protocol
and capabilities, which decide what applies) over the traces per second measured; and
beside it, for a framework row (``cancellation`` only), the traces at the default options
against the depth 2, 10 walks those rows ran before.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.common import Config, Section, busy_note, fmt_ratio, markdown_table

__all__ = ["NAME", "TITLE", "run"]

NAME = "program_rows"
TITLE = "Program rows over HTTP: traces per second before and after, and a row at the default options"

PROTOCOL = "openai-chat"
SAMPLE, QUICK_SAMPLE = ("wire",), ("coverage",)  # the generators timed: 94 and 19 applicable traces
ROUNDS, QUICK_ROUNDS = 2, 1
OLD_FRAMEWORK_OPTIONS: Mapping[str, int] = {"depth": 2, "walks": 10}
# The shipped program with the TLS context built for every client, as before the change.
_BEFORE = (
    "import ssl, callsafe.adapters.http_reads as h; h.tls_context = ssl.create_default_context; "
    f"from callsafe.adapters.guard_sdk import main; raise SystemExit(main(['--protocol', '{PROTOCOL}']))"
)


@dataclass
class _Run:
    traces: int
    seconds: float
    verdicts: dict[str, Any]

    @property
    def per_second(self) -> float:
        return self.traces / self.seconds if self.seconds > 0 else 0.0


def _commands() -> dict[str, str]:
    after = shlex.join([sys.executable, "-m", "callsafe.adapters.guard_sdk", "--protocol", PROTOCOL])
    return {"before": shlex.join([sys.executable, "-c", _BEFORE]), "after": after}


def _verdicts(cert: Any) -> dict[str, Any]:
    out: dict[str, Any] = {i: (s.status, s.traces_violated) for i, s in sorted(cert.invariants.items())}
    out["target errors"] = dict(sorted(cert.broken_count.items()))
    return out


def _certify(command: str, generators: tuple[str, ...], workers: int) -> _Run:
    from callsafe.certify.harness import Options, certify

    options = Options(generators=generators, walks=0, minimize=False, workers=workers, partition_size=16)
    started = time.perf_counter()
    cert = certify(f"exec:{command}", options)
    seconds = time.perf_counter() - started
    return _Run(sum(g.ran for g in cert.generators.values()), seconds, _verdicts(cert))


_STEPS = (  # the exec target's steps timed for the breakdown, by what they wait for
    ("start", "start: a fresh target in the program (`start`)"),
    ("close", "close: `reset` after the trace"),
    ("receive", "application events (`event`)"),
    ("_await_bytes", "stream payloads: until the program has read them"),
    ("_await_read", "stream payloads: until the program has handled them (event acks)"),
    ("_finish_stream", "the end of a stream: until the program's handler returns"),
)


@contextmanager
def _breakdown() -> Iterator[dict[str, list[float]]]:
    """Seconds spent in each of the exec target's steps (:data:`_STEPS`, exclusive of the
    steps nested in them), and the first payload of each stream apart from the others."""
    from callsafe.targets import exec_target

    spent: dict[str, list[float]] = {}
    nested: list[float] = []
    originals = {name: getattr(exec_target.ExecTarget, name) for name, _ in _STEPS}

    def timed(name: str, method: Any) -> Any:
        def wrapper(self: Any, *args: Any) -> Any:
            label = name
            if name == "_await_bytes":
                stream = self._trace.stream if self._trace is not None else None
                label = "first payload" if stream is not None and stream.count == 1 else "later payloads"
            started = time.perf_counter()
            nested.append(0.0)
            try:
                return method(self, *args)
            finally:
                took = time.perf_counter() - started
                inner = nested.pop()
                spent.setdefault(label, []).append(took - inner)
                if nested:
                    nested[-1] += took

        return wrapper

    for name, method in originals.items():
        setattr(exec_target.ExecTarget, name, timed(name, method))
    try:
        yield spent
    finally:
        for name, method in originals.items():
            setattr(exec_target.ExecTarget, name, method)


def _null_factory(protocol: str, capabilities: frozenset[str]) -> Any:
    """A target that does nothing and declares ``protocol`` and ``capabilities``: what
    applies to a program row, without running it."""

    class Null:
        name = "null"

        def __init__(self) -> None:
            self.protocol = protocol
            self.capabilities = capabilities
            self.reconnects = True  # as an exec target over HTTP

        def start(self, env: Any) -> None: ...
        def receive(self, event: Any) -> None: ...
        def receive_wire(self, payload: Any) -> None: ...
        def end_stream(self) -> None: ...
        def restart(self) -> None: ...
        def close(self) -> None: ...

    return Null


def _count(protocol: str, capabilities: frozenset[str], overrides: Mapping[str, int]) -> int:
    """The traces a program row with ``capabilities`` runs in the matrix with ``overrides``."""
    from callsafe.campaigns.matrix import MATRIX_GENERATORS
    from callsafe.certify.harness import Options, certify

    options = Options(generators=MATRIX_GENERATORS, minimize=False, **dict(overrides))
    cert = certify(_null_factory(protocol, capabilities), options)
    return sum(g.ran for g in cert.generators.values())


def run(config: Config) -> Section:
    from callsafe.targets._common import module_installed

    if not module_installed("openai") or not module_installed("uvicorn"):
        text = "Not run: the guard program needs the `openai` SDK and `uvicorn` (`pip install -e .[sdks]`)."
        return Section(NAME, TITLE, text, {})
    from callsafe.targets.exec_target import ExecTarget

    commands = _commands()
    sample = QUICK_SAMPLE if config.quick else SAMPLE
    rounds = QUICK_ROUNDS if config.quick else ROUNDS
    variants: list[tuple[str, str, int]] = [("before", commands["before"], 1), ("after", commands["after"], 1)]
    if not config.quick:  # each run starts its two workers and their programs: a fixed cost, in the time
        variants.append(("after, 2 workers", commands["after"], 2))
    best: dict[str, _Run] = {}
    verdicts: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for name, command, workers in variants:
            result = _certify(command, sample, workers)
            verdicts.setdefault(name, result.verdicts)
            if result.verdicts != verdicts[name] or result.verdicts != verdicts["before"]:
                raise AssertionError(f"{name}: the verdicts changed: {result.verdicts} != {verdicts['before']}")
            if name not in best or result.seconds < best[name].seconds:
                best[name] = result

    with _breakdown() as spent:  # once more, after, in this process (its program already started)
        timed = _certify(commands["after"], sample, 1)
    capabilities = ExecTarget(commands["after"]).capabilities
    defaults: Mapping[str, int] = {"depth": 1, "walks": 2} if config.quick else {}
    at_defaults = _count(PROTOCOL, capabilities, defaults)
    framework = frozenset({"cancellation"})
    framework_old = _count(PROTOCOL, framework, OLD_FRAMEWORK_OPTIONS)
    framework_new = _count(PROTOCOL, framework, defaults)

    base = best["before"].per_second
    rows = [
        [name, f"{r.traces}", f"{r.seconds:.1f}", f"{r.per_second:.1f}", fmt_ratio(r.per_second / base)]
        for name, r in best.items()
    ]
    after = best["after"].per_second
    warm = timed.per_second  # the breakdown's run: the program already started
    projected = f"{at_defaults / warm:.0f}" if warm else "-"
    options_text = "depth 1, 2 walks (quick)" if config.quick else "the defaults (depth 3, 200 walks)"
    lines = [
        f"## {TITLE}",
        "",
        f"The guard program over the openai SDK (`exec:python -m callsafe.adapters.guard_sdk --protocol {PROTOCOL}`),"
        f" generators {', '.join(sample)}, best of {rounds}; verdicts identical in every variant and round.",
        "",
        markdown_table(["variant", "traces", "seconds", "traces/s", "vs before"], rows),
        "",
        f"Where a trace's time goes (after, one process, {timed.traces} traces in {timed.seconds:.1f} s; the rest "
        "is the harness's own work: building and judging each trace):",
        "",
        markdown_table(["step", "calls", "ms each", "seconds"], _steps_rows(spent)),
        "",
        f"Projected at {options_text}, after, in one process: {at_defaults} traces with the program's "
        f"capabilities at {warm:.1f} traces/s (the breakdown's run): {projected} projected seconds "
        "(the program's start and the minimisation of counterexamples not included).",
        "",
        f"A framework row (`cancellation` only): {framework_old} traces at depth 2, 10 walks; "
        f"{framework_new} at {options_text}.",
    ]
    if busy_note():  # no CPU-time column here: the work is in the program and worker processes
        lines += [
            "",
            "The machine was busy (its load average is below): these are wall-clock times, waiting for a "
            "CPU included; the variants ran interleaved under the same load.",
        ]
    ratios = {"after/before": after / base if base else 0.0, "verdicts-identical": 1.0}
    if "after, 2 workers" in best and after:
        ratios["2-workers/after"] = best["after, 2 workers"].per_second / after
    ratios["framework-traces/defaults-vs-old"] = framework_new / framework_old if framework_old else 0.0
    return Section(NAME, TITLE, "\n".join(lines), ratios)


def _steps_rows(spent: Mapping[str, list[float]]) -> list[list[str]]:
    labels = dict(_STEPS) | {
        "first payload": "first payload of a stream: the program's request, until it has read it",
        "later payloads": "later payloads: until the program has read them",
    }
    rows = sorted(spent.items(), key=lambda item: -sum(item[1]))
    return [
        [labels.get(name, name), f"{len(times)}", f"{1000 * sum(times) / len(times):.1f}", f"{sum(times):.2f}"]
        for name, times in rows
        if times
    ]
