"""callsafe.guard is certified by the toolkit: its matrix rows hold every invariant, over
the memory, SQLite and PostgreSQL stores, through the same wire path (and the same wire
adversities) as the client libraries; and the certification fails a guard that breaks one.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import skips

from callsafe.campaigns.matrix import GUARD_PROTOCOLS, GUARD_ROWS, MATRIX_GENERATORS, run_matrix
from callsafe.certify.harness import ADVERSITIES_GENERATOR, WIRE_GENERATOR, Options, certify
from callsafe.certify.targets import TargetSpecError, describe, resolve_target
from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.invariants import INVARIANTS
from callsafe.targets.guard import GuardTarget

QUICK = Options(
    depth=1, walks=5, generators=(WIRE_GENERATOR, ADVERSITIES_GENERATOR, "catalog", "coverage"), minimize_budget=20
)


def _holds_everything(cert: Any) -> None:
    statuses = {inv.id: cert.invariants[inv.id].status for inv in INVARIANTS}
    assert statuses == {inv.id: "holds" for inv in INVARIANTS}
    assert all(cert.invariants[inv.id].traces_checked > 0 for inv in INVARIANTS)
    assert cert.traces_run > 50


def test_the_guard_rows_of_the_matrix_hold_every_invariant() -> None:
    """The matrix's own generators at its default depth (a counterexample of 3 events after
    the turn, a call stopped by ``length`` in a response that ends ``completed``, needs depth
    3: it found that the renderers drew that as a call the response leaves open)."""
    matrix = run_matrix(Options(depth=3, walks=20, generators=MATRIX_GENERATORS, minimize_budget=20), list(GUARD_ROWS))
    assert [r.row.protocol for r in matrix.rows] == list(GUARD_PROTOCOLS)
    for row in matrix.rows:
        assert row.unavailable is None and row.traces_run > 100
        assert {c.status for c in row.cells.values()} == {"holds"}, row.row.spec


def test_over_sqlite() -> None:
    _holds_everything(
        certify("guard:sqlite:openai-chat", Options(depth=1, walks=5, generators=(WIRE_GENERATOR, "catalog")))
    )


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("CALLSAFE_PG_DSN"), reason=skips.POSTGRES)
def test_over_postgres() -> None:
    _holds_everything(
        certify("guard:postgres:anthropic-messages", Options(depth=1, walks=5, generators=(WIRE_GENERATOR, "catalog")))
    )


class _TwiceGuard(GuardTarget):
    """A guard whose application runs each handed-over call twice (a retry loop around
    the executor): the certification must catch it."""

    def _open(self, *, create: bool) -> Any:
        env = self._env
        assert env is not None
        original = env.executor

        def twice(*args: Any) -> None:
            original(*args)
            original(*args)

        self._env = TargetEnv(
            twice, env.business_validator, env.tools, env.limits, env.observe, env.step, env.clock, env.store_dir
        )
        try:
            return super()._open(create=create)
        finally:
            self._env = env


def test_a_guard_that_runs_a_call_twice_is_caught() -> None:
    cert = certify(
        lambda: _TwiceGuard("memory", "openai-chat"),
        Options(depth=1, walks=3, generators=(WIRE_GENERATOR,), minimize_budget=10),
    )
    assert cert.invariants["INV-ONCE"].status == "violated"


def test_guard_target_names() -> None:
    info = describe(resolve_target("guard:memory:anthropic-messages"))
    assert (info.name, info.protocol, info.capabilities) == (
        "guard:memory:anthropic-messages",
        "anthropic-messages",
        CAPABILITIES - {"store_faults"},
    )
    assert describe(resolve_target("guard")).name == "guard:sqlite:openai-chat"
    for bad in ("guard:disk", "guard:memory:grpc", "guard:memory:openai-chat:x"):
        with pytest.raises(TargetSpecError, match="guard:STORE:PROTOCOL"):
            resolve_target(bad)
