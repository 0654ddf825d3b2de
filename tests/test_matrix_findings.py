"""The findings behind the matrix's violated cells (``callsafe.campaigns.findings``): each one's
witness traces violate, through the harness, exactly the invariants recorded for each
surface, and each one's reproduction script exists and stands alone. (The scripts themselves
run in ``tests/test_targets_libraries.py``, with every script of ``campaigns/repro``.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from loaded import EXEC_ENV, TRACE_TIMEOUT

from callsafe.campaigns.findings import FINDINGS, NOTES, findings_for, notes_for
from callsafe.campaigns.findings_node import NODE_REPRO_DIR
from callsafe.certify.harness import check_trace
from callsafe.targets.libraries import LIBRARY_TARGETS, unavailable
from callsafe.targets.program_catalog import program_rows

ROOT = Path(__file__).resolve().parents[1]
PREFIX = {
    "openai": "openai_",
    "anthropic": "anthropic_",
    "langchain-core": "langchain_core_",
    "pydantic-ai-slim": "pydantic_ai_",
    "litellm": "litellm_",
    "openai-agents": "openai_agents_",
    "crewai": "crewai_",
    "strands-agents": "strands_",
    "google-adk": "google_adk_",
    "llama-index-core": "llama_index_",
    "smolagents": "smolagents_",
    "agno": "agno_",
    "langgraph": "langgraph_",
    "boto3": "boto3_",
}


@pytest.fixture(autouse=True)
def _loaded_machine_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Programs (TypeScript rows, agent frameworks) get minutes to start and answer (:mod:`loaded`)."""
    for name, value in EXEC_ENV.items():
        monkeypatch.setenv(name, value)


def test_findings_are_named_once_and_name_known_surfaces() -> None:
    assert len({f.id for f in FINDINGS}) == len(FINDINGS)
    for f in FINDINGS:
        assert f.surfaces and f.witnesses, f.id
        for surface in f.surfaces:
            known = surface in LIBRARY_TARGETS or surface in program_rows()
            # a TypeScript row is named node/<npm package>:protocol:surface
            assert known and surface.split(":")[0].removeprefix("node/") == f.library, (f.id, surface)
    for surface, invariant in NOTES:
        assert surface in LIBRARY_TARGETS and notes_for(f"library:{surface}", invariant)


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.id for f in FINDINGS])
def test_witnesses_violate_exactly_what_is_recorded(finding: object) -> None:
    from callsafe.campaigns.findings import Finding

    assert isinstance(finding, Finding)
    for surface, recorded in finding.surfaces.items():
        reason = unavailable(surface)
        if reason is not None:
            pytest.skip(reason)
        violated: set[str] = set()
        for witness in finding.witnesses:
            checked = check_trace(f"library:{surface}", witness, TRACE_TIMEOUT)
            assert not checked.missing, (finding.id, surface, checked.note)
            violated |= checked.violated
        assert violated == recorded, f"{finding.id} on {surface}: {sorted(violated)}, recorded {sorted(recorded)}"
        assert finding in findings_for(f"library:{surface}", next(iter(recorded)))


def test_every_script_stands_alone() -> None:
    for f in FINDINGS:
        assert f.script_path is not None, f.id
        path = ROOT / f.script_path
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 30, f.script
        assert "callsafe" not in text, f.script
        if f.script.startswith(f"{NODE_REPRO_DIR}/"):
            continue  # a TypeScript library's repro (JavaScript, run by tests/test_node_rows.py)
        assert f.script.startswith(PREFIX[f.library]), f.script


# A repro whose problem is that the library raises: its cell is a target error ("not
# established"), not a violated invariant, so it has no finding of its own in FINDINGS.
RAISES: dict[str, tuple[str, str, str, str]] = {
    "openai_chat_missing_index.py": (
        "openai:openai-chat:final",
        "openai-chat",
        "missing-index",
        "tool-call deltas without index (Mistral)",
    ),
}


def test_every_repro_is_a_finding_whose_problem_shows_in_its_cell() -> None:
    """Issue 18: no repro-only findings. Every script in campaigns/repro is the script of one
    finding here (whose witnesses, run as the matrix runs them, violate its recorded cells:
    the test above), or of a library exception that the matrix shows as a target error."""
    from callsafe.campaigns.findings import WHOLE, _one
    from callsafe.providers.adversities import wire_trace

    scripts = {f.script for f in FINDINGS if not (f.script or "").startswith(f"{NODE_REPRO_DIR}/")}
    on_disk = {p.name for p in (ROOT / "campaigns" / "repro").glob("*.py")}
    assert scripts | set(RAISES) == on_disk
    assert not scripts & set(RAISES)
    for script, (surface, protocol, operator, label) in RAISES.items():
        reason = unavailable(surface)
        if reason is not None:
            pytest.skip(reason)
        trace = wire_trace(_one(WHOLE), protocol, operator, label)
        checked = check_trace(f"library:{surface}", trace, TRACE_TIMEOUT)
        assert checked.judgement.errors, script
