"""Certifications of many targets at once: ``matrix`` (every installed client-library
surface and the reference, one row each), ``selftest`` (every mutant of the zoo, with the
invariant that caught it) and ``zoo`` (the registry of those mutants).

Role: campaigns built on the harness; each writes its own summary.
"""
