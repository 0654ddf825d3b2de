"""The ``callsafe`` command line, one module per command group: ``main`` (the group,
``certify``, ``replay``, ``selftest``, ``model``, ``render``), ``formal`` (``prove``,
``export``), ``inspect`` and ``matrix``.

Role: the top floor; it parses options, calls the packages below and prints.
"""
