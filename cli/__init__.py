"""The ``callsafe`` command line, one module per command group: ``main`` (the group,
``certify``, ``replay``, ``selftest``, ``model``, ``render``), ``formal`` (``prove``,
``export``), ``inspect`` and ``matrix``.

Role: the top floor; it parses options, calls the packages below and prints.
"""

from callsafe.offline import keep_offline

# Every command may import a client library (inspect, matrix, certify of a library target)
# or start a program that does: their own downloads and telemetry are off from here on.
keep_offline()
