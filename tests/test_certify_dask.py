"""Certification on a Dask cluster: a real ``LocalCluster`` on loopback with two worker
processes gives the report a single process gives (apart from timings and the execution
account), runs every trace exactly once, loses no result when a worker is killed in the
middle of a partition (and says which partitions ran again), and stops with a clear error
when a partition keeps killing workers. Skipped when Dask is not installed."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from callsafe.certify.execution import ExecutionError
from callsafe.certify.harness import (
    Certification,
    GeneratorStats,
    Options,
    certify,
    exhaustive_bound,
    plan_partitions,
)
from callsafe.certify.targets import describe, resolve_target
from callsafe.cli.main import main
from callsafe.generators.catalog import CATALOG
from callsafe.generators.domain import Domain
from callsafe.generators.exhaustive import ExhaustiveStats, exhaustive_traces
from callsafe.generators.walks import random_walks, walk_configs
from callsafe.reporting.report import comparable_text, report_json

SMALL = Options(depth=2, walks=40, generators=("catalog", "walks", "exhaustive"), minimize=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two single-threaded worker processes and their scheduler, on loopback."""
    distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (callsafe[dask])")
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client


def normalised(doc: dict[str, Any]) -> str:
    return comparable_text(doc)


def _report(cert: Certification) -> str:
    return normalised(report_json(cert))


def test_partitions_on_the_cluster_run_every_trace_exactly_once(cluster: Any) -> None:
    from callsafe.certify.distributed import DaskExecutor

    spec = "toy_targets:model_target"
    info = describe(resolve_target(spec), spec)
    options = Options(depth=2, walks=30, generators=("catalog", "walks", "exhaustive"))
    executor = DaskExecutor(cluster.scheduler.address, info, partition_size=7)
    stats: dict[str, GeneratorStats] = {}
    ran: list[tuple[str, int, str]] = []
    skipped = 0
    try:
        for piece in executor.run(plan_partitions(options, info, stats, 7), None):
            assert piece.complete and len(piece.results) == piece.partition.size
            ran += [(r.generator, r.index, r.name) for r in piece.results]
            skipped += piece.skipped
    finally:
        executor.close()

    # the generators themselves, in one process, without partitions
    whole = ExhaustiveStats()
    bound = exhaustive_bound(2, info.capabilities)
    expected = [("catalog", i, s.trace.name) for i, s in enumerate(CATALOG)]
    walks = random_walks(0, 30, walk_configs(info.capabilities), domain=Domain.for_capabilities(info.capabilities))
    expected += [("walks", i, t.name) for i, t in enumerate(walks)]
    expected += [("exhaustive", i, t.name) for i, t in enumerate(exhaustive_traces(bound, whole))]
    assert len(ran) == len(set(ran)) == len(expected), "a trace ran twice, or one was skipped"
    assert ran == expected  # same traces, same (generator, index), merged in order
    assert skipped == whole.skipped > 0
    assert executor.execution().partitions > 20 and executor.execution().workers == 2


def test_the_cluster_and_local_workers_give_the_single_process_report(cluster: Any) -> None:
    spec = "toy_targets:ignore_cancel"  # violates INV-CANCEL: counterexamples are compared too
    one = certify(spec, SMALL)
    local = certify(spec, Options(**{**vars(SMALL), "workers": 2, "partition_size": 16}))
    dask = certify(spec, Options(**{**vars(SMALL), "scheduler": cluster.scheduler.address, "partition_size": 16}))
    assert one.counterexamples and not one.ok
    assert _report(local) == _report(one)
    assert _report(dask) == _report(one)
    assert (one.execution.executor, local.execution.executor, dask.execution.executor) == (
        "in-process",
        "processes",
        "dask",
    )
    assert dask.execution.partitions > len(SMALL.generators) and dask.execution.workers == 2
    assert dask.execution.rerun_partitions == []


def test_a_worker_killed_mid_run_loses_no_result(cluster: Any) -> None:
    """The slow target takes 30 ms a trace on a worker and a partition holds 8 traces, so
    a partition whose start the scheduler logged less than 120 ms ago is still running:
    killing its worker then must make the scheduler run it again elsewhere."""
    cluster.wait_for_workers(2, timeout=60)
    spec = "dask_targets:slow_on_workers"
    options = Options(depth=1, walks=80, generators=("catalog", "walks"), partition_size=8)
    pids: dict[str, int] = cluster.run(os.getpid)
    killed: list[tuple[str, str]] = []  # (worker, partition)

    def kill_one_busy_worker(generator: str, done: int, total: int | None) -> None:
        if killed:
            return
        starts = [e for topic, events in cluster.get_events().items() if topic.startswith("callsafe-") for e in events]
        when, latest = max(starts, key=lambda e: e[0])
        if time.time() - when < 0.12 and latest["worker"] in pids:
            os.kill(pids[latest["worker"]], signal.SIGKILL)
            killed.append((latest["worker"], latest["partition"]))

    dask = certify(spec, Options(**{**vars(options), "scheduler": cluster.scheduler.address}), kill_one_busy_worker)
    assert killed, "no partition was seen running in time to kill its worker"
    one = certify(spec, options)
    assert _report(dask) == _report(one)
    assert one.generators["walks"].ran == 80 and not dask.budget_exhausted
    worker, partition = killed[0]
    assert worker in dask.execution.lost_workers
    assert any(p.startswith(partition + " ") for p in dask.execution.rerun_partitions), dask.execution
    assert "re-run after a worker was lost" in dask.execution.summary()
    assert report_json(dask)["execution"]["rerun_partitions"] == dask.execution.rerun_partitions


def test_a_partition_that_keeps_killing_workers_is_an_error_not_a_hang() -> None:
    distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (callsafe[dask])")
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        distributed.LocalCluster(
            n_workers=1, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        ) as local,
    ):
        options = Options(depth=0, generators=("catalog",), scheduler=local.scheduler_address, partition_size=64)
        with pytest.raises(ExecutionError, match=r"catalog-0 .*allowed-failures"):  # an error, not a wait
            certify("dask_targets:kills_workers", options)


def test_cli_certify_on_a_scheduler_writes_the_single_process_report(cluster: Any, tmp_path: Path) -> None:
    address = cluster.scheduler.address
    assert address.startswith("tcp://127.0.0.1:")
    args = ["certify", "toy_targets:ignore_cancel", "--depth", "1", "--generators", "catalog,walks,exhaustive"]
    alone = CliRunner().invoke(main, [*args, "--report", str(tmp_path / "one")])
    remote = CliRunner().invoke(main, [*args, "--scheduler", address, "--report", str(tmp_path / "dask")])
    assert alone.exit_code == remote.exit_code == 1, remote.output  # INV-CANCEL is violated
    assert f"on the Dask cluster at {address} (2 workers)" in remote.output.replace("\n", "")
    one = json.loads((tmp_path / "one" / "report.json").read_text(encoding="utf-8"))
    doc = json.loads((tmp_path / "dask" / "report.json").read_text(encoding="utf-8"))
    assert normalised(doc) == normalised(one)
    assert doc["execution"]["executor"] == "dask" and doc["execution"]["scheduler"] == address
    assert one["execution"] == {**one["execution"], "executor": "in-process", "scheduler": None}


def test_cli_scheduler_errors_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from callsafe.certify import distributed

    monkeypatch.setattr(distributed, "dask_available", lambda: True)
    both = CliRunner().invoke(main, ["certify", "reference:memory", "--workers", "2", "--scheduler", "tcp://x:1"])
    assert both.exit_code == 2 and "--workers starts local processes" in both.output
    monkeypatch.setattr(distributed, "dask_available", lambda: False)
    missing = CliRunner().invoke(main, ["certify", "reference:memory", "--scheduler", "tcp://127.0.0.1:1"])
    assert missing.exit_code == 2 and "pip install 'callsafe[dask]'" in missing.output
