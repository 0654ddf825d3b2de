"""The harness: running traces against a target and judging every run.

``targets`` (target names to factories), ``runner`` (one trace through one target, with
the executor spy and the validator), ``wire`` and ``wire_traces`` (abstract traces through
a provider protocol), ``judge`` (a run against the invariants and the oracle),
``checking`` (one checked trace and its result: the small core that minimisation, the
executors and the planner share), ``minimize`` (the smallest failing trace),
``partitions``, ``execution`` and ``distributed`` (where the work runs: in process, local
processes, Dask), ``harness`` (the plan over the generators and ``certify()``),
``machine`` (the hypothesis state machine bound to a target), ``pytest_plugin``.

Role: execution and judgement; reports, campaigns and the command line are built on it.
"""
