"""Certify a target inside your own pytest run: one test per invariant.

Why a plugin: a team that already runs pytest in CI should see "INV-ONCE failed" next to
its other tests, with the minimal counterexample in the failure message, without a second
tool. Mark a test that takes the ``callsafe_invariant`` fixture:

    import pytest

    @pytest.mark.callsafe(target="mypkg.adapter:factory", budget=30, depth=2)
    def test_callsafe(callsafe_invariant):
        callsafe_invariant.check()

pytest then runs ``test_callsafe[INV-TERMINAL]``, ``test_callsafe[INV-ONCE]``, ... one per
invariant. The certification runs once per distinct marker (cached for the session);
``check()`` fails with the minimal counterexample when the invariant was violated, and
skips when it does not apply to the target (never passes in its place). ``target`` is a
name (``module:factory``, ``reference``) or a factory callable; the other marker arguments
are those of :class:`callsafe.certify.harness.Options` (``budget``, ``depth``, ``seed``,
``generators``, ``walks``, ``minimize``), and ``report`` (a folder) for the trace files.

A failure is compact: the invariant, what was found, the minimal trace one event a line (at
most :data:`TRACE_LINES`) and the command that replays it from its trace file. The trace
files of the counterexamples are written once per certification, in pytest's temporary
folder unless the marker names one (``callsafe certify`` writes the full reports).

Installed with callsafe through the ``pytest11`` entry point (``callsafe =
"callsafe.certify.pytest_plugin"``); without it, enable it with
``-p callsafe.certify.pytest_plugin`` or ``pytest_plugins = ["callsafe.certify.pytest_plugin"]``.
Importing this module is cheap: the harness is imported only when a marked test runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from callsafe.certify.harness import Certification

__all__ = ["TRACE_LINES", "InvariantCheck", "callsafe_invariant"]

TRACE_LINES: Final = 15  # events of a minimal trace shown in a failure (the trace file has all)

_CACHE = pytest.StashKey[dict[tuple[Any, ...], tuple["Certification", Path]]]()
_OPTION_NAMES = (
    "budget",
    "depth",
    "seed",
    "generators",
    "walks",
    "calls",
    "turns",
    "fragments",
    "minimize",
    "counterexamples",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "callsafe(target, **options): certify TARGET (module:factory, reference, or a factory); one test per "
        "invariant through the callsafe_invariant fixture",
    )
    config.stash[_CACHE] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "callsafe_invariant" not in metafunc.fixturenames:
        return
    from callsafe.model.invariants import INVARIANTS

    ids = [inv.id for inv in INVARIANTS]
    metafunc.parametrize("callsafe_invariant", ids, indirect=True, ids=ids)


@dataclass
class InvariantCheck:
    """One invariant's outcome in a certification run."""

    invariant: str
    certification: Certification
    report_dir: Path | None = None  # where the counterexamples' trace files were written
    spec: str = field(default="")  # the target's name, for the replay command

    @property
    def status(self) -> str:
        return self.certification.invariants[self.invariant].status

    def message(self) -> str:
        """The failure: what was violated and how often, the findings of the first minimal
        counterexample, its events one a line, the replay command and the report."""
        from callsafe.certify.targets import replay_command
        from callsafe.diagrams.sequence import describe_event

        cert = self.certification
        summary = cert.invariants[self.invariant]
        lines = [
            f"{self.invariant} violated by {summary.traces_violated} of {summary.traces_checked} traces "
            f"against {cert.target.spec}: {summary.title}"
        ]
        ces = cert.counterexamples.get(self.invariant, [])
        examples = cert.examples.get(self.invariant, [])[:1]  # not minimised: the first as found
        ce = ces[0] if ces else None
        findings = ce.findings if ce is not None else examples[0].findings if examples else []
        trace = ce.minimal if ce is not None else examples[0].trace if examples else None
        lines += [f"  {f.describe()}" for f in findings[:3]]
        if len(findings) > 3:
            lines.append(f"  ... and {len(findings) - 3} more findings")
        if trace is not None:
            events = trace.delivered()
            what = "minimal trace" if ce is not None else "violating trace (not minimised)"
            lines.append(f"{what}, {len(events)} events{f' ({trace.name})' if trace.name else ''}:")
            lines += [f"  {describe_event(i, e)}" for i, e in enumerate(events[:TRACE_LINES])]
            if len(events) > TRACE_LINES:
                lines.append(f"  ... {len(events) - TRACE_LINES} more events (the trace file has them all)")
        if ce is not None and self.report_dir is not None:
            path = self.report_dir / trace_file_name(self.invariant, 1)
            lines.append(f"replay: {replay_command(path, self.spec or cert.target.spec)}")
        if len(ces) > 1:
            lines.append(f"{len(ces) - 1} more counterexamples of {self.invariant} beside it ({self.report_dir})")
        return "\n".join(lines)

    def check(self) -> None:
        """Fail with the minimal counterexample when violated; skip when not applicable."""
        if self.status == "violated":
            pytest.fail(self.message(), pytrace=False)
        if self.status == "not_established":
            cert = self.certification
            first = cert.broken[0].errors[0] if cert.broken and cert.broken[0].errors else None
            tail = "\n".join(first.traceback.rstrip().splitlines()[-TRACE_LINES:]) if first is not None else ""
            detail = f"\n{first.describe()}\n{tail}" if first is not None else ""
            pytest.fail(
                f"{self.invariant} not established: the target broke {cert.broken_traces} traces "
                f"(target errors){detail}",
                pytrace=False,
            )
        if self.status == "not_applicable":
            summary = self.certification.invariants[self.invariant]
            missing = sorted(set(summary.needs) - self.certification.target.capabilities)
            why = f"the target lacks {', '.join(missing)}" if missing else "no applicable trace ran"
            pytest.skip(f"{self.invariant} not applicable: {why}")


def _certification(request: pytest.FixtureRequest, marker: pytest.Mark) -> tuple[Certification, Path, str]:
    """The marker's certification (run once per distinct marker), the folder its reports
    were written to, and the target's name."""
    from callsafe.certify.harness import Options, certify
    from callsafe.certify.targets import spec_of

    config = request.config
    kwargs = dict(marker.kwargs)
    report = kwargs.pop("report", None)
    target = kwargs.pop("target", marker.args[0] if marker.args else None)
    if target is None:
        raise pytest.UsageError("@pytest.mark.callsafe needs a target: @pytest.mark.callsafe(target='module:factory')")
    unknown = set(kwargs) - set(_OPTION_NAMES)
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.callsafe: unknown options {sorted(unknown)}; known: {_OPTION_NAMES}")
    if "generators" in kwargs:
        kwargs["generators"] = tuple(kwargs["generators"])
    kwargs.setdefault("depth", 2)
    cache = config.stash[_CACHE]
    key = (target if isinstance(target, str) else id(target), tuple(sorted(kwargs.items())), report)
    if key not in cache:
        cert = certify(target, Options(**kwargs))
        out = Path(report) if report else request.getfixturevalue("tmp_path_factory").mktemp("callsafe-report")
        out.mkdir(parents=True, exist_ok=True)
        for invariant, ces in cert.counterexamples.items():
            for n, ce in enumerate(ces, 1):
                text = ce.minimal.dumps() + "\n"
                (out / trace_file_name(invariant, n)).write_text(text, encoding="utf-8", errors="backslashreplace")
        cache[key] = (cert, out)
    cert, out = cache[key]
    return cert, out, target if isinstance(target, str) else spec_of(target)


def trace_file_name(invariant: str, n: int) -> str:
    """The file of an invariant's n-th counterexample (1-based) in the marker's folder."""
    return f"{invariant.lower()}-{n}.json"


@pytest.fixture
def callsafe_invariant(request: pytest.FixtureRequest) -> InvariantCheck:
    """The outcome of one invariant (the test's parameter) for the target named by the
    test's ``@pytest.mark.callsafe`` marker."""
    marker = request.node.get_closest_marker("callsafe")
    if marker is None:
        raise pytest.UsageError("the callsafe_invariant fixture needs @pytest.mark.callsafe(target=...)")
    cert, out, spec = _certification(request, marker)
    return InvariantCheck(str(request.param), cert, out, spec)
