"""Adapters that make an implementation certifiable: the reference implementation
(``reference``), third-party client libraries (one module per library, ``libraries`` lists
them), the mutant zoo (``mutants``: deliberately broken variants of the reference) and the
findings behind the library matrix (``findings``).

Role: adapters. Each implements :mod:`callsafe.contract`; none imports the harness.
"""
