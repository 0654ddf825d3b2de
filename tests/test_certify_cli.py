"""``callsafe certify``, ``callsafe replay`` and ``callsafe selftest``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from callsafe.campaigns import zoo as mutants
from callsafe.cli.main import main
from callsafe.generators.catalog import by_name


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_certify_a_broken_target_exits_1_and_writes_reports(tmp_path: Path) -> None:
    junit = tmp_path / "ci" / "junit.xml"
    code, out = invoke(
        "certify",
        "toy_targets:dispatch_on_first_parse",
        "--generators",
        "catalog",
        "--report",
        str(tmp_path / "r"),
        "--junit",
        str(junit),
        "--seed",
        "4",
    )
    assert code == 1, out
    assert "INV-TERMINAL" in out and "not certified" in out and "[t1/a]" in out.replace("\n", "")
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["verdict"] == "fail" and doc["seed"] == 4
    assert junit.exists() and (tmp_path / "r" / "report.html").exists()
    assert list((tmp_path / "r" / "counterexamples").glob("test_*.py"))


def test_certify_a_correct_target_exits_0(tmp_path: Path) -> None:
    code, out = invoke(
        "certify",
        "toy_targets:model_target",
        "--depth",
        "1",
        "--report",
        str(tmp_path),
        "--generators",
        "catalog,coverage",
    )
    assert code == 0, out
    assert "certified: no invariant violated" in out and "of 55 lifecycle transitions" in out


def test_certify_refuses_bad_names_and_options(tmp_path: Path) -> None:
    code, out = invoke("certify", "no_such_module:factory", "--report", str(tmp_path))
    assert code == 2 and "cannot import" in out
    code, out = invoke("certify", "toy_targets:simple", "--generators", "catalog,dreams", "--report", str(tmp_path))
    assert code == 2 and "unknown generators" in out


def test_certify_walks_sets_how_many_random_walks_run(tmp_path: Path) -> None:
    counts = {}
    for walks in ("7", "0"):
        code, out = invoke(
            "certify", "toy_targets:model_target", "--generators", "walks", "--walks", walks, "--report", str(tmp_path)
        )
        assert code == (0 if walks != "0" else 3), out  # no walk: no trace ran, nothing is certified
        doc = json.loads((tmp_path / "report.json").read_text())
        counts[walks] = (doc["options"]["walks"], doc["generators"]["walks"]["generated"])
    assert counts == {"7": (7, 7), "0": (0, 0)}
    code, out = invoke("certify", "toy_targets:model_target", "--walks", "-1", "--report", str(tmp_path))
    assert code == 2 and "'--walks'" in out


def test_certify_model_size_options_reach_the_walks_and_the_exhaustive_enumeration(tmp_path: Path) -> None:
    """--calls/--turns/--fragments size the model both generators draw from: the report
    says so, the exhaustive generator ran exactly the enumeration of that bound, the walks
    used that many calls, and the reference still keeps every invariant there."""
    from callsafe.certify.harness import exhaustive_bound
    from callsafe.certify.targets import describe, resolve_target
    from callsafe.generators.exhaustive import exhaustive_count

    code, out = invoke(
        "certify",
        "reference:memory",
        *("--generators", "walks,exhaustive", "--depth", "2", "--walks", "40"),
        *("--calls", "3", "--turns", "3", "--fragments", "3", "--report", str(tmp_path)),
    )
    assert code == 0, out
    doc = json.loads((tmp_path / "report.json").read_text())
    assert {k: doc["options"][k] for k in ("calls", "turns", "fragments")} == {"calls": 3, "turns": 3, "fragments": 3}
    caps = describe(resolve_target("reference:memory")).capabilities
    bound = exhaustive_bound(2, caps, calls=3, turns=3, fragments=3)
    assert doc["generators"]["exhaustive"]["generated"] == exhaustive_count(bound)
    assert exhaustive_count(bound) > exhaustive_count(exhaustive_bound(2, caps))
    assert doc["generators"]["exhaustive"]["info"]["bound"]["calls"] == 3
    config = doc["generators"]["walks"]["info"]["config"]
    assert (config["calls"], config["turns"], config["fragments"]) == (3, 3, 3)
    code, out = invoke("certify", "reference:memory", "--calls", "5", "--report", str(tmp_path))
    assert code == 2 and "'--calls'" in out and "1<=x<=4" in out


def test_replay_exit_status_says_what_happened(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(by_name("cancel-before-terminal").trace.dumps())
    assert invoke("replay", str(trace), "--target", "toy_targets:model_target")[0] == 0
    code, out = invoke("replay", str(trace), "--target", "toy_targets:ignore_cancel")
    assert code == 1 and "INV-CANCEL" in out and "harness -> target" in out
    code, out = invoke("replay", str(trace), "--target", "toy_targets:ignore_cancel", "--json")
    assert code == 1 and json.loads(out)["findings"]
    restart = tmp_path / "restart.json"
    restart.write_text(by_name("restart-fails-unfinished-call").trace.dumps())
    code, out = invoke("replay", str(restart), "--target", "toy_targets:simple")
    assert code == 3 and "restart" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"events": [{"teleport": {}}]}')
    assert invoke("replay", str(bad), "--target", "toy_targets:simple")[0] == 2


def test_selftest_scores_the_registered_mutants(monkeypatch: pytest.MonkeyPatch) -> None:
    # one correct variant, not the zoo's nine at depth 4 (tests/test_selftest.py runs those)
    monkeypatch.setattr(
        mutants, "CORRECT_VARIANTS", [mutants.Mutant("model", "toy_targets:model_target", "the model", correct=True)]
    )
    monkeypatch.setattr(mutants, "MUTANTS", [])
    code, out = invoke("selftest")
    assert code == 0 and "no mutants registered" in out
    monkeypatch.setattr(
        mutants,
        "MUTANTS",
        [
            mutants.Mutant("first-parse", "toy_targets:dispatch_on_first_parse", "runs on the first parse"),
            mutants.Mutant("ignores-cancel", "toy_targets:ignore_cancel", expect=("INV-CANCEL",)),
            mutants.Mutant("correct", "toy_targets:model_target", "not a mutant at all"),
        ],
    )
    code, out = invoke("selftest", "--depth", "1", "--correct-depth", "0")
    assert code == 1, out  # the "correct" mutant is not caught
    assert "first-parse" in out and "INV-TER" in out and "not caught" in out
    assert "mutation score: 2/3" in out and "events" in out
