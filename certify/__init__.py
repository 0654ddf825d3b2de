"""The harness: the Target contract (:mod:`~callsafe.certify.contract`), the runner,
target names (:mod:`~callsafe.certify.targets`), judging a run against the invariants and
the oracle (:mod:`~callsafe.certify.judge`), certification over the generators
(:mod:`~callsafe.certify.harness`), counterexample minimisation, the reports, the
``callsafe`` command line, the pytest plugin, the hypothesis state machine bound to a
target, and the mutant registry for ``callsafe selftest``."""
