"""Targets for the Dask tests (importable as ``dask_targets:<factory>`` on the workers of a
``LocalCluster``, which start with the test process's ``sys.path``).

* :func:`slow_on_workers`: the model target, which takes :data:`DELAY` seconds per trace
  when it runs on a Dask worker, so that a run on the cluster lasts long enough to lose a
  worker in the middle of a partition; in the test process it is as fast as the model.
* :func:`kills_workers`: ends the process of any Dask worker that builds it, as a target
  that crashes its interpreter would.
"""

from __future__ import annotations

import os
import time

import toy_targets

DELAY = 0.03  # seconds per trace on a Dask worker


def on_dask_worker() -> bool:
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


class SlowOnWorkers(toy_targets.ModelTarget):
    name = "model-slow-on-workers"

    def close(self) -> None:
        if on_dask_worker():
            time.sleep(DELAY)
        super().close()


def slow_on_workers() -> SlowOnWorkers:
    return SlowOnWorkers()


def kills_workers() -> toy_targets.ModelTarget:
    if on_dask_worker():
        os._exit(3)
    return toy_targets.ModelTarget()
