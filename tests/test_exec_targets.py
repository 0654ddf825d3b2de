"""exec:COMMAND targets: the target protocol loses nothing (the reference through it gives
the reference's verdicts and observations), and a program that crashes, hangs, prints
garbage or speaks another protocol version is reported with its trace and stderr tail
while the certification finishes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from callsafe.certify.checking import check_trace
from callsafe.certify.harness import Options, certify
from callsafe.contract.exec_protocol import SCHEMA
from callsafe.generators.catalog import CATALOG
from callsafe.model.vocabulary import observation_to_json
from callsafe.reporting.report import report_json
from callsafe.targets.reference import ReferenceTarget

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "exec_programs"
REFERENCE = f"exec:{sys.executable} -m callsafe.adapters.reference"
CATALOG_RUN = Options(generators=("catalog",), minimize=False)


class _ReferenceWithoutStoreFaults(ReferenceTarget):
    """The in-process reference as the protocol can carry it: the protocol has no message
    that makes a store fail, so the store-fault traces are not run through it."""

    capabilities = ReferenceTarget.capabilities - {"store_faults"}

    def __init__(self) -> None:
        super().__init__(store="memory")


def _verdicts(doc: dict) -> dict:
    return {inv["id"]: (inv["status"], inv["traces_checked"], inv["traces_violated"]) for inv in doc["invariants"]}


def test_the_schema_in_docs_is_the_protocol_module_schema() -> None:
    on_disk = json.loads((ROOT / "docs" / "target-protocol.schema.json").read_text(encoding="utf-8"))
    assert on_disk == SCHEMA
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    validator.validate({"type": "init", "id": 0, "protocol": "callsafe-target", "version": 1})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"type": "execute", "tool": "pay"})


def test_the_reference_through_the_protocol_gives_the_reference_verdicts_on_the_default_run() -> None:
    """The Done-when of issue 19: the default run, compared verdict for verdict."""
    exec_doc = report_json(certify(REFERENCE, Options(minimize=False)))
    memory_doc = report_json(certify(_ReferenceWithoutStoreFaults, Options(minimize=False)))
    assert _verdicts(exec_doc) == _verdicts(memory_doc)
    assert exec_doc["summary"] == memory_doc["summary"]
    assert exec_doc["target_errors"] == []
    assert exec_doc["target"]["run"] == {
        "mode": "exec",
        "command": f"{sys.executable} -m callsafe.adapters.reference",
        "protocol": "callsafe-target",
        "protocol_version": 1,
        "process_per_trace": False,
    }
    assert memory_doc["target"]["run"] == {"mode": "in process"}


@pytest.mark.parametrize("per_trace", [False, True])
def test_every_catalog_trace_gives_the_same_observations_in_and_out_of_process(per_trace: bool) -> None:
    """Stronger than equal verdicts: the same observations, at the same steps (also with
    one process per trace)."""
    spec = REFERENCE + (" --process-per-trace" if per_trace else "")
    traces = [s.trace for s in CATALOG][: (12 if per_trace else None)]
    for trace in traces:
        here = check_trace("reference:memory", trace)
        there = check_trace(spec, trace)
        assert there.run is not None and here.run is not None
        assert [observation_to_json(o) for o in there.run.observations] == [
            observation_to_json(o) for o in here.run.observations
        ], trace.name
        assert there.violated == here.violated
        assert there.run.errors == []


def _misbehaving(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, list[str]]:
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(tmp_path / f"{mode}.mark"))
    monkeypatch.setenv("CALLSAFE_EXEC_MESSAGE_TIMEOUT", "1")
    cert = certify(f"exec:{sys.executable} {PROGRAMS / 'misbehave.py'} {mode}", CATALOG_RUN)
    return report_json(cert), [str(e) for e in cert.errors]


@pytest.mark.parametrize(
    ("mode", "what", "status", "kind"),
    [
        ("crash", "the program exited while handling 'fragment'", "exit status 3", "crash"),
        ("hang", "no answer to 'fragment' within 1 s", "still running, killed", "hang"),
        ("garbage", "protocol: a line that is not JSON: 'this is not JSON'", "still running, killed", "crash"),
        ("another-version", "protocol: unexpected message type 'done_v2'", "still running, killed", "crash"),
    ],
)
def test_a_misbehaving_program_is_reported_with_its_trace_and_stderr_and_the_run_goes_on(
    mode: str, what: str, status: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc, errors = _misbehaving(mode, tmp_path, monkeypatch)
    assert doc["summary"]["traces_run"] == len(CATALOG)  # every trace ran: the run went on
    assert len(errors) == 1, errors  # once: the next trace got a fresh process
    (error,) = errors
    trace_name, _, text = error.partition(": ")
    assert trace_name in {s.trace.name for s in CATALOG} | {s.name for s in CATALOG}
    assert text.startswith(f"{kind} in receive at step ")  # the harness's TargetError, of that kind
    assert what in text and status in text
    assert doc["target_errors"] == errors
    assert f"misbehave: about to {mode}" in text  # the stderr tail


def test_a_program_of_another_protocol_version_certifies_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc, errors = _misbehaving("version", tmp_path, monkeypatch)
    assert doc["target"]["run"]["handshake_error"].startswith(
        "handshake: the program speaks 'callsafe-target' version 2"
    )
    assert doc["target"]["capabilities"] == []  # it declared nothing callsafe could read
    assert doc["verdict"] == "target_errors" and doc["summary"]["traces_run"] == 0  # exit 3, never "certified"
    assert len(errors) == 1 and errors[0].startswith("building the target: crash in factory: handshake")
    for error in errors:
        assert "version 2; callsafe speaks 'callsafe-target' version 1" in error
        assert "misbehave: speaking version 2" in error


def test_a_program_reading_a_provider_wire_over_stdio_gets_the_library_verdicts() -> None:
    """The openai library adapter behind the protocol, reading payloads as 'wire' messages."""
    options = Options(generators=("wire",), minimize=False)
    there = report_json(certify(f"exec:{sys.executable} {PROGRAMS / 'stdio_library.py'}", options))
    here = report_json(certify("library:openai:openai-chat:final", options))
    assert _verdicts(there) == _verdicts(here)
    assert there["target"]["run"]["mode"] == "exec, wire mode" and there["target"]["run"]["wire"] == "stdio"
    assert there["target_errors"] == here["target_errors"]  # the same words for what the library raised


def test_workers_each_run_their_own_program() -> None:
    """--workers 2: each worker process resolves exec:COMMAND and starts its own program;
    the report is the one of a single process."""
    options = Options(generators=("catalog", "coverage"), minimize=False)
    one = report_json(certify(REFERENCE, options))
    two = report_json(certify(REFERENCE, Options(generators=("catalog", "coverage"), minimize=False, workers=2)))
    assert _verdicts(one) == _verdicts(two) and one["summary"] == two["summary"]
    assert two["execution"]["workers"] == 2


def test_the_harness_per_trace_timeout_stops_a_hung_program_and_the_next_trace_gets_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLSAFE_TEST_MARK", str(tmp_path / "hang.mark"))
    monkeypatch.setenv("CALLSAFE_EXEC_MESSAGE_TIMEOUT", "60")  # the harness's 2 s per trace comes first
    options = Options(generators=("catalog",), minimize=False, trace_timeout=2)
    # another command line than the hang test above, so no process of its pool (started
    # with that test's marker file in its environment) is reused
    cert = certify(f"exec:{sys.executable} {PROGRAMS / 'misbehave.py'} hang harness-timeout", options)
    errors = [str(e) for e in cert.errors]
    assert len(errors) == 1, errors
    assert ": hang in receive at step " in errors[0]
    assert report_json(cert)["summary"]["traces_run"] == len(CATALOG)
