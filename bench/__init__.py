"""callsafe's benchmarks: ``python -m bench`` from the repository root.

Why a package outside ``callsafe``: benchmarks measure the installed code from the
outside, the way a user runs it, and must never ship in the wheel (``pyproject.toml``
lists the packages; ``tests/test_packaging.py`` checks that ``bench/`` stays out).

Each benchmark is one module (``bench/assembly.py``, ...) registered in
:data:`bench.registry.BENCHMARKS`; ``python -m bench`` runs them all (``--only NAME`` one,
``--quick`` a small, noisy variant for smoke tests). Every benchmark reports *ratios*
against a floor measured in the same run, never absolute times: machines differ, ratios
measured side by side mostly do not.
"""
