"""The Node helper (``adapters/node/src/callsafe-target.ts``) nests what arrives during a
validation, as the protocol intends (``docs/target-protocol.md``, "Nesting"): a target whose
``receive()`` awaits ``env.validate(...)`` gets the events "during validation" while it
waits, in order, and a restart there is a crash inside the validator (the waiting
``receive()`` never resumes and is never answered). Before the fix the helper queued every
message behind the one waiting for its validation, and such a target hung on every trace
that delivers an event during validation (issue 29, B2).

Skipped, with the reason, when node or adapters/node's packages are missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.certify.checking import check_trace
from callsafe.cli.main import main
from callsafe.generators.catalog import CATALOG
from callsafe.model.builder import TraceBuilder
from callsafe.model.vocabulary import CallTerminal, Executed, LogLine, Restart, ToolSpec, Trace
from callsafe.targets.programs import NODE_DIR

PROGRAMS = Path(__file__).resolve().parent / "exec_programs"
EXAMPLE = NODE_DIR / "dist" / "examples" / "validating-target.js"
SPEC = f"exec:node {EXAMPLE}"
CRASHING = f"exec:node {PROGRAMS / 'node_crash_in_validator.mjs'}"
PAY = ToolSpec(schema={"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}})

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None
    or shutil.which("npm") is None
    or not (NODE_DIR / "node_modules" / "typescript").is_dir(),
    reason="node, npm, or adapters/node's packages (npm ci in adapters/node) not installed",
)


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """``npm run build`` (tsc), so that the tests run the helper as it is, never a stale dist/."""
    done = subprocess.run(
        ["npm", "run", "--silent", "build"], cwd=NODE_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert EXAMPLE.is_file()


@pytest.fixture(autouse=True)
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def _executed(trace: Trace, spec: str) -> list[tuple[int, str]]:
    checked = check_trace(spec, trace, TRACE_TIMEOUT)
    assert not checked.missing and checked.run is not None, checked.missing
    assert checked.run.errors == [], checked.run.errors  # no hang, no protocol error, nothing raised
    assert not checked.judgement.broken
    return [(o.step, o.key.short()) for o in checked.run.observations if isinstance(o, Executed)]


@pytest.mark.parametrize("name", ["cancel-during-validation", "new-turn-during-validation"])
def test_a_target_awaiting_validate_in_receive_sees_the_events_during_validation(name: str) -> None:
    (scenario,) = [s for s in CATALOG if s.name == name]
    checked = check_trace(SPEC, scenario.trace, TRACE_TIMEOUT)
    assert not checked.missing and checked.run is not None
    assert checked.run.errors == [], checked.run.errors
    assert not checked.judgement.broken and not checked.violated, checked.violated
    # the event arrived while the validator ran (its step is after the validation's), and the
    # call whose turn it stopped never ran
    kinds = [o.kind for o in checked.run.observations]
    assert "business_validated" in kinds and "executed" not in kinds


def test_validations_nest_and_each_call_runs_once_in_the_order_the_answers_came() -> None:
    """Call b's terminal arrives while a's validator runs; b's receive awaits its own
    validation inside a's: both pass, b runs first (its answer comes first), then a."""
    b = TraceBuilder(tools={"pay": PAY}).turn("t1", actor="u1", tenant="acme")
    b.open("a", "pay").open("b", "pay").fragment("a", '{"amount":1}').fragment("b", '{"amount":2}')
    b.terminal("a")
    b.add(CallTerminal("t1", b.current_response, "i-b", "b", "done-t1-b", during_validation=True))
    trace = b.response_end().build()
    assert _executed(trace, SPEC) == [(6, "t1/b"), (6, "t1/a")]
    assert _executed(trace, "reference:memory") == [(6, "t1/b"), (6, "t1/a")]  # as in process


def test_a_restart_during_validation_is_a_crash_there_and_the_trace_goes_on() -> None:
    b = TraceBuilder(tools={"pay": PAY}).turn("t1", actor="u1", tenant="acme")
    b.call("a", "pay", '{"amount":1}')
    b.add(Restart(during_validation=True))
    b.turn("t2", actor="u1", tenant="acme", conversation="other").call("b", "pay", '{"amount":2}')
    trace = b.build()
    checked = check_trace(CRASHING, trace, TRACE_TIMEOUT)
    assert checked.run is not None and checked.run.errors == [], checked.run.errors
    assert not checked.judgement.broken
    executed = [o.key.short() for o in checked.run.observations if isinstance(o, Executed)]
    logs = [(o.step, o.text) for o in checked.run.observations if isinstance(o, LogLine)]
    # a never ran and its receive never resumed ("validated t1/a" is never logged); the
    # restart ran at its step; b, after it, ran as usual
    assert executed == ["t2/b"]
    assert logs == [(4, "restarted"), (8, "validated t2/b")]


def test_replay_of_cancel_during_validation_agrees_with_the_reference(tmp_path: Path) -> None:
    """The reproduction of issue 29: `callsafe replay` of the catalog trace against the example."""
    trace = tmp_path / "cdv.json"
    runner = CliRunner()
    exported = runner.invoke(main, ["scenarios", "export", "cancel-during-validation", "--out", str(trace)])
    assert exported.exit_code == 0, exported.output
    result = runner.invoke(main, ["replay", str(trace), SPEC])
    assert result.exit_code == 0, result.output
    assert "same verdicts as the reference implementation on this trace" in result.output
    assert "target hang" not in result.output and "broke the run" not in result.output


# A body of three chunks read through the helper's reporting wrapper, then one the reader
# cancels after its first chunk: the reports, in order, as JSON lines on stdout.
_REPORTING = """
import { reportingResponse } from "./dist/src/callsafe-target.js";
const chunks = ["data: 1\\n\\n", "data: 22\\n\\n", "data: 333\\n\\n"].map((t) => new TextEncoder().encode(t));
let pulls = 0;
const body = () => {
  let i = 0;
  return new ReadableStream({ pull(c) { pulls += 1; if (i < chunks.length) c.enqueue(chunks[i++]); else c.close(); } }, { highWaterMark: 0 });
};
const turn = () => new Promise((resolve) => setImmediate(resolve));
async function run(name, cancelAfter) {
  const seen = [];
  pulls = 0;
  const response = reportingResponse(new Response(body(), { headers: { "content-type": "text/event-stream" } }), (bytes, closed) => seen.push([bytes, closed]));
  const reader = response.body.getReader();
  let got = 0;
  for (;;) {
    await turn();
    const { done, value } = await reader.read();
    if (done) break;
    got += value.byteLength;
    if (cancelAfter && got > 0) { await reader.cancel(); break; }
  }
  await turn(); await turn();
  console.error(JSON.stringify({ name, seen, got, pulls }));
}
await run("whole", false);
await run("cancelled", true);
"""


def test_the_fetch_wrapper_reports_each_pull_after_what_came_before_and_the_end() -> None:
    """``reportingResponse`` (what the helper wraps the model stream's ``fetch`` responses
    in, ``acks: "bytes"``): a report at each pull, of the bytes handed over before it (0 at
    the first), in the next turn of the event loop, and ``closed`` with the total when the
    body ends or the reader cancels; nothing is read ahead of the reader."""
    import json

    done = subprocess.run(
        ["node", "--input-type=module", "-e", _REPORTING],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=TRACE_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    runs = {r["name"]: r for r in (json.loads(line) for line in done.stderr.splitlines() if line.startswith("{"))}
    whole, cancelled = runs["whole"], runs["cancelled"]
    sizes = [len("data: 1\n\n"), len("data: 22\n\n"), len("data: 333\n\n")]
    assert whole["got"] == sum(sizes)
    offsets = [0, sizes[0], sizes[0] + sizes[1], sum(sizes)]
    assert whole["seen"] == [[o, False] for o in offsets] + [[sum(sizes), True]]
    # the reader cancels after the first chunk: no pull past it, and the end says closed
    assert cancelled["got"] == sizes[0] and cancelled["pulls"] == 1
    assert cancelled["seen"] == [[0, False], [sizes[0], True]]
