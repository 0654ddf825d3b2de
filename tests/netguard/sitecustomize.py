"""Installs the tests' network guard (``netguard.py`` beside this file) in every Python
process started with this folder on ``PYTHONPATH`` and ``CALLSAFE_TEST_OFFLINE=1``: the
programs the tests run (``python -m callsafe``, the framework programs, exec targets)."""

import os

if os.environ.get("CALLSAFE_TEST_OFFLINE") == "1":
    import netguard

    netguard.install()
