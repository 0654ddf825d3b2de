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
``generators``, ``walks``, ``minimize``).

Installed with callsafe through the ``pytest11`` entry point (``callsafe =
"callsafe.certify.pytest_plugin"``); without it, enable it with
``-p callsafe.certify.pytest_plugin`` or ``pytest_plugins = ["callsafe.certify.pytest_plugin"]``.
Importing this module is cheap: the harness is imported only when a marked test runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from callsafe.certify.harness import Certification

__all__ = ["InvariantCheck", "callsafe_invariant"]

_CACHE = pytest.StashKey[dict[tuple[Any, ...], "Certification"]]()
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

    @property
    def status(self) -> str:
        return self.certification.invariants[self.invariant].status

    def message(self) -> str:
        summary = self.certification.invariants[self.invariant]
        lines = [
            f"{self.invariant} violated by {summary.traces_violated} of {summary.traces_checked} traces "
            f"against {self.certification.target.spec}: {summary.title}"
        ]
        for ce in self.certification.counterexamples.get(self.invariant, []):
            lines += [f.describe() for f in ce.findings]
            lines.append(f"minimal trace ({len(ce.minimal.events)} events, from {ce.generator}):")
            lines.append(ce.minimal.dumps())
        if not self.certification.counterexamples.get(self.invariant):
            for example in self.certification.examples.get(self.invariant, [])[:1]:
                lines += [f.describe() for f in example.findings]
                lines.append(example.trace.dumps())
        return "\n".join(lines)

    def check(self) -> None:
        """Fail with the minimal counterexample when violated; skip when not applicable."""
        if self.status == "violated":
            pytest.fail(self.message(), pytrace=False)
        if self.status == "not_established":
            cert = self.certification
            first = cert.broken[0].errors[0] if cert.broken and cert.broken[0].errors else None
            detail = f"\n{first.describe()}\n{first.traceback}" if first is not None else ""
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


def _certification(config: pytest.Config, marker: pytest.Mark) -> Certification:
    from callsafe.certify.harness import Options, certify

    kwargs = dict(marker.kwargs)
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
    key = (target if isinstance(target, str) else id(target), tuple(sorted(kwargs.items())))
    if key not in cache:
        cache[key] = certify(target, Options(**kwargs))
    return cache[key]


@pytest.fixture
def callsafe_invariant(request: pytest.FixtureRequest) -> InvariantCheck:
    """The outcome of one invariant (the test's parameter) for the target named by the
    test's ``@pytest.mark.callsafe`` marker."""
    marker = request.node.get_closest_marker("callsafe")
    if marker is None:
        raise pytest.UsageError("the callsafe_invariant fixture needs @pytest.mark.callsafe(target=...)")
    return InvariantCheck(str(request.param), _certification(request.config, marker))
