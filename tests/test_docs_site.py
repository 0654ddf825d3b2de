"""The documentation site builds, strictly and offline, and what its pages show runs.

``mkdocs build --strict`` fails on a broken link or anchor, a page the navigation leaves out,
a snippet whose file is gone, or a command-line reference mkdocs-click cannot generate; so
``make test`` fails on them too. The README is a front door of at most 400 lines whose
links all lead somewhere, and the programs a tutorial prints are run here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _mkdocs() -> str:
    found = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if found is None:
        pytest.skip(
            "mkdocs is not installed: pip install -e '.[dev]' (it brings mkdocs, mkdocs-material, mkdocs-click)"
        )
    return found


def _env() -> dict[str, str]:
    """The test's own environment (its PYTHONPATH, so mkdocs-click documents this checkout's
    commands), without proxies: the build must not need the network."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_MKDOCS_2_WARNING"] = "1"
    return env


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    out = subprocess.run(
        [_mkdocs(), "build", "--strict", "--clean", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    site = tmp_path / "site"
    # the command line reference was generated from the click commands: every command is there
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    from callsafe.cli.main import main

    for name in main.commands:
        assert f">{name}<" in cli or f"callsafe {name}" in cli, name
    assert "--trace-timeout" in cli
    # the changelog page is the root CHANGELOG.md, not a copy that could drift
    assert "Keep a Changelog" in (site / "changelog" / "index.html").read_text(encoding="utf-8")


def test_the_theme_fetches_nothing_at_build_time() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+font: false", config, re.M), "theme.font: false, or Material links Google Fonts"
    assert "privacy" not in config and "social" not in config, "these plugins download at build time"


def test_every_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s+([\w/.-]+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed, f"not in the nav: {sorted(pages - listed)}; gone: {sorted(listed - pages)}"


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert not re.search(r"\bissue \d+|#\d{2,}\b", text), "the README says no issue numbers (history: CHANGELOG.md)"
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which is not there"


def test_the_guard_tutorial_program_prints_what_the_page_shows(tmp_path: Path) -> None:
    page = (DOCS / "tutorial-guard.md").read_text(encoding="utf-8")
    program = page.split("```python\n", 1)[1].split("```", 1)[0]
    shown = page.split("$ python agent_loop.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "agent_loop.py").write_text(program, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "agent_loop.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == shown


def test_the_ci_workflow_runs_certify_with_options_that_exist() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((DOCS / "ci" / "callsafe.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["certify"]["steps"]
    run = " ".join(s.get("run", "") for s in steps)
    assert "callsafe certify" in run and "git+https://" in run
    from click.testing import CliRunner

    from callsafe.cli.main import main

    help_text = CliRunner().invoke(main, ["certify", "--help"]).output
    for option in re.findall(r"(--[a-z-]+)", run.split("callsafe certify", 1)[1]):
        assert option in help_text, option
    junit = [s for s in steps if "junit" in str(s.get("with", {})).lower()]
    assert junit and "callsafe-report/junit.xml" in str(junit[0]["with"])


def test_the_readme_matrix_headline_is_the_recorded_run() -> None:
    """The README's matrix headline counts what docs/matrix-summary.json (the run the matrix
    page shows) holds: measure the matrix again and these numbers must follow."""
    import json
    from collections import Counter

    summary = json.loads((DOCS / "matrix-summary.json").read_text(encoding="utf-8"))
    libraries = [r for r in summary["rows"] if r["spec"].startswith("library:")]
    violated = Counter(inv for r in libraries for inv, cell in r["cells"].items() if cell == "violated")
    failing = sum(1 for r in libraries if "violated" in r["cells"].values())
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"Measured on {summary['measured_on']}" in text
    assert f"{len(libraries)} surfaces of {len({r['library'] for r in libraries})} client libraries" in text
    if failing == len(libraries):
        assert f"all {failing} library surfaces violate at least one" in text
    else:
        assert f"{failing} of the {len(libraries)} library surfaces violate at least one" in text
    for count, words in (
        (violated["INV-TERMINAL"], "run a call before it ended under its protocol (INV-TERMINAL"),
        (violated["INV-CANCEL"], "run a call a stop should have ended (INV-CANCEL)"),
        (violated["LIVE-DISPATCH"], "lose a valid call (LIVE-DISPATCH)"),
        (violated["INV-EXACT-ARGS"], "run wrong arguments (INV-EXACT-ARGS)"),
        (violated["INV-ONCE"], "run a call twice (INV-ONCE)"),
    ):
        assert f"{count} {words}" in text, (count, words)
    own = [r for r in summary["rows"] if not r["spec"].startswith("library:")]
    assert own and all(set(r["cells"].values()) <= {"holds"} for r in own), "the README says they hold everything"
    findings = (DOCS / "findings.md").read_text(encoding="utf-8")
    table = findings.split("<!-- findings:start -->\n", 1)[1].split("<!-- findings:end -->", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")][2:]  # less the header and its rule
    assert f"one of {len(rows)} findings" in text
