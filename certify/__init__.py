"""The harness: the Target contract, the runner, the oracle check, counterexample
minimisation, reports, the ``callsafe`` command line and the pytest plugin."""
