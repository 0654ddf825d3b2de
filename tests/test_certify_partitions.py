"""Partitions (work units that workers regenerate) hold exactly the traces of the plain
generators, in their order, whatever the partition size; and the harness merges their
results into the single-process report."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callsafe.certify.harness import GeneratorStats, Options, certify, exhaustive_bound, plan_partitions
from callsafe.certify.partitions import Partition, exhaustive_partitions, listed_partitions, walk_partitions
from callsafe.certify.targets import describe, resolve_target
from callsafe.cli.main import main
from callsafe.generators.catalog import CATALOG
from callsafe.generators.exhaustive import (
    Bound,
    ExhaustiveStats,
    exhaustive_count,
    exhaustive_parts,
    exhaustive_subtree,
    exhaustive_traces,
)
from callsafe.generators.walks import WALK_CONFIG, random_walks, walk_config
from callsafe.reporting.report import comparable_text


def _unrolled(partitions: list[Partition]) -> tuple[list[tuple[int, str]], int]:
    """(index, name) of every trace the partitions make, and the skipped count."""
    stats = ExhaustiveStats()
    out: list[tuple[int, str]] = []
    for p in partitions:
        made = [t.name for t in p.traces(stats)]
        assert len(made) == p.size, p.describe()
        out += [(p.start + k, name) for k, name in enumerate(made)]
    return out, stats.skipped


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("size", [1, 5, 64, None])
def test_exhaustive_partitions_are_the_enumeration_cut_in_order(depth: int, size: int | None) -> None:
    bound = exhaustive_bound(depth)
    whole = ExhaustiveStats()
    expected = list(enumerate(t.name for t in exhaustive_traces(bound, whole)))
    partitions, total = exhaustive_partitions("exhaustive", bound, size)
    got, skipped = _unrolled(list(partitions))
    assert got == expected and total == len(expected) == exhaustive_count(bound)
    assert skipped == whole.skipped


def test_exhaustive_parts_respect_the_size_and_count_without_enumerating() -> None:
    bound = exhaustive_bound(3)
    parts = list(exhaustive_parts(bound, 50))
    assert all(p.traces <= 50 for p in parts) and sum(p.traces for p in parts) == exhaustive_count(bound)
    assert any(not p.descend for p in parts) and any(len(p.prefix) == 2 for p in parts)  # split twice down
    huge = Bound(calls=3, turns=3, fragments=3, controls=frozenset({"cancel", "restart"}), restarts=2, length=40)
    assert exhaustive_count(huge) > 10**30  # counted, never enumerated
    first = next(exhaustive_parts(huge, 1000))
    assert first.prefix == () and not first.descend
    with pytest.raises(ValueError, match="canonical"):
        next(exhaustive_subtree(bound, (("open", 1),)))  # c1 before c0: never produced


def test_walk_ranges_are_the_walks_of_the_seed() -> None:
    expected = list(enumerate(t.name for t in random_walks(7, 23, WALK_CONFIG)))
    got, _ = _unrolled(list(walk_partitions("walks", 7, 23, WALK_CONFIG, True, 5)))
    assert got == expected
    assert [t.name for t in random_walks(7, 3, start=20)] == [name for _, name in expected[20:]]
    assert random_walks(7, 1).__next__().name != random_walks(8, 1).__next__().name


def test_listed_partitions_slice_in_order() -> None:
    traces = [s.trace for s in CATALOG]
    parts = list(listed_partitions("catalog", traces, 10))
    assert [p.size for p in parts] == [10] * (len(traces) // 10) + [len(traces) % 10]
    assert _unrolled(parts)[0] == [(i, t.name) for i, t in enumerate(traces)]


def test_the_plan_covers_every_generator_once_in_order() -> None:
    info = describe(resolve_target("toy_targets:model_target"), "toy_targets:model_target")
    options = Options(depth=2, walks=12)
    stats: dict[str, GeneratorStats] = {}
    partitions = list(plan_partitions(options, info, stats, 16))
    order = [name for name, _ in itertools.groupby(p.generator for p in partitions)]
    assert order == list(options.generators) == list(stats)
    for name, group in itertools.groupby(partitions, key=lambda p: p.generator):
        starts = [(p.number, p.start, p.size) for p in group]
        assert [n for n, _, _ in starts] == list(range(len(starts)))
        assert all(a[1] + a[2] == b[1] for a, b in itertools.pairwise(starts)), name  # no gap, no overlap
        assert starts[-1][1] + starts[-1][2] == stats[name].total


def test_a_budget_run_is_a_prefix_and_says_how_it_ran() -> None:
    full = certify("toy_targets:model_target", Options(depth=3, generators=("exhaustive",), minimize=False))
    cut = certify("toy_targets:model_target", Options(budget=0.2, depth=3, generators=("exhaustive",)))
    assert cut.budget_exhausted and not cut.generators["exhaustive"].complete
    assert 0 < cut.generators["exhaustive"].generated < full.generators["exhaustive"].generated
    assert full.execution.to_json() == {
        "executor": "in-process",
        "workers": 1,
        "scheduler": None,
        "partition_size": None,
        "partitions": 1,
        "rerun_partitions": [],
        "lost_workers": [],
    }
    assert "workers" not in full.options.to_json()  # how it ran is not what was asked


def test_cli_partition_size_reaches_the_executor_and_keeps_the_report(tmp_path: Path) -> None:
    """``--partition-size`` cuts the local pool's work finer; the findings are the
    single-process ones, and the execution record says how the run was cut."""
    args = ["certify", "toy_targets:ignore_cancel", "--depth", "1", "--generators", "catalog,walks,exhaustive"]
    alone = CliRunner().invoke(main, [*args, "--report", str(tmp_path / "one")])
    cut = CliRunner().invoke(
        main, [*args, "--workers", "2", "--partition-size", "7", "--report", str(tmp_path / "cut")]
    )
    assert alone.exit_code == cut.exit_code == 1, cut.output  # INV-CANCEL is violated
    one = (tmp_path / "one" / "report.json").read_text(encoding="utf-8")
    doc = json.loads((tmp_path / "cut" / "report.json").read_text(encoding="utf-8"))
    assert comparable_text(doc) == comparable_text(json.loads(one))
    execution = doc["execution"]
    assert execution["executor"] == "processes" and execution["partition_size"] == 7
    assert execution["partitions"] >= doc["summary"]["traces_run"] // 7 >= 30  # by default: one per generator


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--partition-size", "5"], "partitions are for --workers"),
        (["--workers", "2", "--partition-size", "0"], "--partition-size"),
    ],
)
def test_cli_partition_size_misuse_is_a_usage_error(extra: list[str], says: str) -> None:
    done = CliRunner().invoke(main, ["certify", "reference:memory", *extra])
    assert done.exit_code == 2 and says in done.output, done.output


def test_the_model_size_options_shape_the_traces_themselves() -> None:
    """The walks and the exhaustive enumeration of a 3-call, 3-turn model open three calls
    and start three turns; the default (2, 2) never does."""
    from callsafe.model.vocabulary import CallOpened, TurnStarted

    caps = describe(resolve_target("reference:memory")).capabilities

    def widest(traces: list[Any]) -> tuple[int, int]:
        calls = max(len({(e.turn, e.item, e.call) for e in t.events if isinstance(e, CallOpened)}) for t in traces)
        turns = max(len({e.turn for e in t.events if isinstance(e, TurnStarted)}) for t in traces)
        return calls, turns

    big = {"calls": 3, "turns": 3, "fragments": 1}
    assert widest(list(random_walks(0, 60, walk_config(caps, **big)))) == (3, 3)
    assert widest(list(random_walks(0, 60, walk_config(caps)))) == (2, 2)
    assert widest(list(exhaustive_traces(exhaustive_bound(3, caps, **big)))) == (3, 3)
    assert widest(list(exhaustive_traces(exhaustive_bound(3, caps)))) == (2, 2)
