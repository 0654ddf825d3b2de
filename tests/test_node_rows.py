"""The TypeScript rows of the matrix (``targets/node_rows.py``, ``adapters/node/rows``) and their
findings (``campaigns/findings_node.py``, ``adapters/node/repro``): the programs build, each row
runs a whole call through its real SDK over HTTP and runs it once under the key the stream
carried, honours a cancel through its library's abort API, and every repro stands alone and
exits 1 on the pinned packages. (The findings' witnesses run in
``tests/test_matrix_findings.py``, with every other finding's.)

Skipped, with the reason, when node, npm or the packages (``npm ci`` in adapters/node) are
missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from loaded import TRACE_TIMEOUT

from callsafe.campaigns.findings import FINDINGS
from callsafe.campaigns.findings_node import NODE_FINDINGS, NODE_REPRO_DIR, ONE, WHOLE, _one
from callsafe.certify.harness import check_trace
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import ToolSpec, Trace
from callsafe.targets.node_rows import NODE_ROWS
from callsafe.targets.programs import NODE_DIR

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted({p for row in NODE_ROWS for p in (row.library, *row.needs)})
MISSING = (
    "node or npm is not on PATH"
    if shutil.which("node") is None or shutil.which("npm") is None
    else next(
        (
            f"{p} is not installed (cd adapters/node && npm ci)"
            for p in (*PACKAGES, "typescript")
            if not (NODE_DIR / "node_modules" / p).is_dir()
        ),
        None,
    )
)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
REPROS = sorted((ROOT / NODE_REPRO_DIR).glob("*.mjs"))
PAY = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """``npm run build`` (tsc), so that the rows run the sources as they are, never a stale dist/."""
    done = subprocess.run(
        ["npm", "run", "--silent", "build"], cwd=NODE_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for row in NODE_ROWS:
        assert row.unavailable() is None, (row.name, row.unavailable())


def test_the_rows_are_named_after_their_package_and_read_a_protocol() -> None:
    assert len(NODE_ROWS) >= 5 and len({r.name for r in NODE_ROWS}) == len(NODE_ROWS)
    for row in NODE_ROWS:
        assert row.ecosystem == "node" and row.name == f"node/{row.library}:{row.protocol}:{row.surface}"
        assert row.version() is not None, row.library  # read from node_modules/<pkg>/package.json


def _cancelled_mid_call() -> Trace:
    b = TraceBuilder(tools={"pay": ToolSpec(schema=PAY)}).turn("t1", actor="u1", tenant="acme", response="r1")
    b.open("call_a", "pay", item="0").fragment("call_a", '{"amount":1').cancel("t1").fragment("call_a", "00}")
    return b.terminal("call_a").response_end().build()


@pytest.mark.parametrize("row", NODE_ROWS, ids=[r.name for r in NODE_ROWS])
def test_each_row_runs_a_whole_call_once_and_stops_on_a_cancel(row: object) -> None:
    from callsafe.targets.programs import ProgramRow

    assert isinstance(row, ProgramRow)
    spec = f"library:{row.name}"
    checked = check_trace(spec, ONE, TRACE_TIMEOUT)
    assert not checked.missing and checked.run is not None and not checked.run.errors, checked.run
    executed = [o for o in checked.run.observations if o.kind == "executed"]
    # every row, LangChain.js too: callsafe's Chat stream opens with role assistant, as the cloud APIs do
    assert [(o.key.tenant, o.key.turn, o.key.call, o.tool, o.arguments) for o in executed] == [
        ("acme", "t1", "call_a", "pay", {"amount": 100})
    ]
    assert executed[0].key.response and executed[0].key.item  # from the wire, as the oracle keys it
    # openai's responses.stream runs a call at its arguments.done, one event before the item's
    # end: a defensible terminal point (the reading "the arguments' done event ends the call")
    assert not checked.violated, checked.judgement.findings
    # a cancel mid-call aborts the request (the library's AbortSignal): nothing runs after it
    cancelled = check_trace(spec, _cancelled_mid_call(), TRACE_TIMEOUT)
    assert not cancelled.missing, "every row declares cancellation"
    assert cancelled.run is not None and not cancelled.run.errors, cancelled.run
    assert [o for o in cancelled.run.observations if o.kind == "executed"] == []
    assert not cancelled.violated


def test_acks_put_what_a_row_ran_at_the_step_of_the_payload_it_ran_it_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP callsafe used to wait only for a quiet window after each payload: a row whose
    SDK was slower than that (the first trace of a fresh process, a loaded machine) had its
    run recorded a step late, and the matrix's counts changed from run to run. With no quiet
    window at all, the rows' ``read`` acknowledgements alone put the run where it belongs:
    responses.stream presents the call at function_call_arguments.done, which is delivered
    at the step before the call's terminal event (allowed under the reading that the
    arguments' done event ends the call, so nothing is violated; the step is what counts)."""
    monkeypatch.setenv("CALLSAFE_EXEC_SETTLE", "0")
    trace = _one(WHOLE, end=None)
    steps = set()
    for _ in range(3):
        checked = check_trace("library:node/openai:openai-responses:responses.stream", trace, TRACE_TIMEOUT)
        assert checked.run is not None
        steps |= {o.step for o in checked.run.observations if o.kind == "executed"}
        assert checked.violated == set(), checked.violated
    assert steps == {3}


def test_every_repro_is_a_node_finding_script_and_stands_alone() -> None:
    scripts = {f.script for f in NODE_FINDINGS}
    assert scripts == {f"{NODE_REPRO_DIR}/{p.name}" for p in REPROS}
    assert all(f in FINDINGS for f in NODE_FINDINGS)  # wired into the matrix's table
    names = {r.name for r in NODE_ROWS}
    for f in NODE_FINDINGS:
        assert f.surfaces and set(f.surfaces) <= names, f.id
        assert all(s.split(":")[0] == f"node/{f.library}" for s in f.surfaces), f.id
    for path in REPROS:
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 30, path.name
        assert "callsafe" not in text, path.name


@pytest.mark.parametrize("script", REPROS, ids=[p.name for p in REPROS])
def test_each_repro_exits_1_on_the_pinned_package(script: Path) -> None:
    done = subprocess.run(["node", str(script)], cwd=NODE_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
