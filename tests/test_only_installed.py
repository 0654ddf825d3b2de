"""Only what is installed: every command runs with any subset of the extras, a library that
is missing is a "not installed" row naming the extra that installs it, and nothing reaches
for the network (client libraries' own downloads included).

The commands run as programs (``python -m callsafe ...``) in which a meta-path finder makes
the frameworks and some SDKs unimportable, as in an environment with ``.[sdks]`` and no
framework extra (or fewer SDKs still). The finder raises ``ModuleNotFoundError`` for any
module under a blocked name, which is what ``importlib.util.find_spec`` does for a dotted
name whose parent package is missing (``google.adk`` without ``google``): the case that
crashed ``callsafe matrix``. The programs run under the tests' network guard
(``tests/conftest.py``), so a library that tries a download fails the test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from loaded import TRACE_TIMEOUT

from callsafe.offline import OFFLINE_ENVIRONMENT, keep_offline
from callsafe.targets._common import EXTRA_OF, install_hint, library_available, module_installed
from callsafe.targets.framework_rows import FRAMEWORK_ROWS
from callsafe.targets.libraries import LIBRARY_TARGETS, make
from callsafe.targets.programs import ProgramRow

ROOT = Path(__file__).resolve().parents[1]
# Import names made unimportable in the programs below: every framework, and the SDKs
# beyond openai and anthropic.
BLOCKED = ("google", "strands", "crewai", "llama_index", "agents", "pydantic_ai", "litellm", "langchain_core")
BOOTSTRAP = f"""
import importlib.abc, runpy, sys

class Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
sys.argv[0] = "callsafe"
runpy.run_module("callsafe", run_name="__main__", alter_sys=True)
"""
CHAT_RECORDING = "\n".join(
    json.dumps(p)
    for p in (
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather"}}
                        ],
                    },
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]},
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        },
    )
)


def callsafe(tmp_path: Path, *args: str, blocked: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m callsafe ARGS`` (with the frameworks and some SDKs unimportable), the
    ``openai<3`` environment absent, under the network guard the environment carries."""
    env = {**os.environ, "CALLSAFE_OPENAI2_PYTHON": str(tmp_path / "no-such-venv" / "python")}
    head = ["-c", BOOTSTRAP] if blocked else ["-m", "callsafe"]
    return subprocess.run(
        [sys.executable, *head, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TRACE_TIMEOUT,
        check=False,
    )


def test_a_missing_parent_package_is_not_installed_rather_than_a_crash() -> None:
    with pytest.raises(ModuleNotFoundError):  # what crashed `callsafe matrix`
        importlib.util.find_spec("nosuchparent_xyz.child")
    assert not module_installed("nosuchparent_xyz.child") and not module_installed("nosuchparent_xyz")
    assert module_installed("json.decoder")
    assert library_available("litellm", "nosuchparent_xyz.child") == (
        "litellm is not installed (pip install 'callsafe[sdks]')"
    )
    row = ProgramRow("x:openai-chat:agent", "google-adk", "python", "gemini", "agent", ("x",), ("nosuchparent_xyz.y",))
    assert row.unavailable() == (
        "google-adk is not installed: nosuchparent_xyz.y cannot be imported (pip install 'callsafe[frameworks]')"
    )


def test_every_library_callsafe_drives_is_named_with_the_extra_that_installs_it() -> None:
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]

    def distribution(requirement: str) -> str:
        name = requirement
        for stop in "[<>=!~; ":
            name = name.split(stop, 1)[0]
        return name.strip().lower()

    pinned = {distribution(r): extra for extra in extras if extra != "dev" for r in extras[extra]}
    for dist, extra in EXTRA_OF.items():
        assert dist in [distribution(r) for r in extras[extra]], f"{dist} is not in callsafe[{extra}]"
    drives = {type(make(name)).library for name in LIBRARY_TARGETS} | {r.library for r in FRAMEWORK_ROWS}
    assert drives <= set(EXTRA_OF), drives - set(EXTRA_OF)
    assert all(EXTRA_OF[d] == pinned[d] or d == "openai" for d in drives)  # openai is pinned in two extras
    assert install_hint("no-such-distribution") == "pip install no-such-distribution"


def test_the_matrix_completes_with_not_installed_rows_naming_the_extra(tmp_path: Path) -> None:
    report = tmp_path / "matrix"
    rows = ("openai:openai-chat:final", "litellm", "pydantic", "openai-agents", "google-adk", "strands", "crewai")
    only = [arg for text in rows for arg in ("--only", text)]
    done = callsafe(
        tmp_path, "matrix", "--report", str(report), "--ecosystem", "python", "--depth", "1", "--walks", "1", *only
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    for name in ("matrix.md", "matrix.json", "matrix.html"):
        assert (report / name).is_file()
    doc: dict[str, Any] = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    by_spec = {r["spec"]: r for r in doc["rows"]}
    ran = by_spec["library:openai:openai-chat:final"]
    assert ran["available"] and ran["traces_run"] > 0
    expected = {
        "library:litellm:openai-chat:final": "callsafe[sdks]",
        "library:pydantic-ai-slim:openai-chat:agent": "callsafe[sdks]",
        "library:openai-agents:openai-chat:agent": "callsafe[frameworks]",
        "library:google-adk:gemini:agent": "callsafe[frameworks]",
        "library:strands-agents:openai-chat:agent": "callsafe[frameworks]",
        "library:crewai:openai-chat:agent": "callsafe[frameworks-openai2]",
    }
    markdown = (report / "matrix.md").read_text(encoding="utf-8")
    for spec, extra in expected.items():
        row = by_spec[spec]
        assert not row["available"] and row["traces_run"] == 0, row
        assert "not installed" in row["unavailable"] and f"'{extra}'" in row["unavailable"], row["unavailable"]
        assert row["version"] is None  # whatever metadata the package left, it cannot be imported
        assert all(cell["status"] == "not_applicable" for cell in row["cells"].values())
        assert f"(not installed: {row['unavailable']})" in markdown
    assert "not installed: library:litellm:openai-chat:final" in done.stdout


def test_certify_of_a_missing_library_says_what_to_install(tmp_path: Path) -> None:
    for target, extra in (
        ("library:litellm:openai-chat:final", "callsafe[sdks]"),
        ("library:google-adk:gemini:agent", "callsafe[frameworks]"),
        ("library:crewai:openai-chat:agent", "callsafe[frameworks-openai2]"),
    ):
        done = callsafe(tmp_path, "certify", target, "--depth", "1", "--walks", "1", "--report", str(tmp_path / "r"))
        assert done.returncode == 2, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        assert f"{target} cannot run here" in done.stderr and extra in done.stderr, done.stderr[-2000:]
    guard = callsafe(tmp_path, "certify", "guard:memory:openai-chat", "--depth", "1", "--walks", "1", "--report", "g")
    assert guard.returncode == 0, guard.stderr[-2000:]


def test_inspect_and_scenarios_run_without_the_missing_libraries(tmp_path: Path) -> None:
    recording = tmp_path / "chat.jsonl"
    recording.write_text(CHAT_RECORDING + "\n", encoding="utf-8")
    done = callsafe(tmp_path, "inspect", str(recording), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    libraries = {r["name"]: r for r in json.loads(done.stdout)["libraries"]}
    assert libraries["openai:openai-chat:final"]["status"] == "ran"
    litellm = libraries["litellm:openai-chat:final"]
    assert litellm["status"] == "unavailable" and "pip install 'callsafe[sdks]'" in litellm["reason"]
    listed = callsafe(tmp_path, "scenarios", "list")
    assert listed.returncode == 0 and "surrogate-pair-split-across-fragments" in listed.stdout


def test_inspect_through_litellm_stays_offline_and_quiet(tmp_path: Path) -> None:
    """litellm installed: its import would fetch the model price list (warnings on stderr and
    seconds of retries offline; the network guard would fail this test); callsafe keeps it
    on its bundled copy."""
    if not module_installed("litellm"):
        pytest.skip("litellm is not installed: pip install 'callsafe[sdks]'")
    recording = tmp_path / "chat.jsonl"
    recording.write_text(CHAT_RECORDING + "\n", encoding="utf-8")
    done = callsafe(
        tmp_path, "inspect", str(recording), "--library", "litellm:openai-chat:final", "--json", blocked=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (litellm,) = json.loads(done.stdout)["libraries"]
    assert litellm["status"] == "ran" and litellm["presented"][0]["arguments"] == {"city": "Paris"}
    assert done.stderr == ""  # no download warnings, no banner


def test_keep_offline_sets_each_switch_the_user_did_not(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OFFLINE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")  # the user's own choice stays
    keep_offline()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"
    assert os.environ["LITELLM_OFFLINE_MODE"] == "true" and os.environ["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
