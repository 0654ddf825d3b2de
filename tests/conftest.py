"""What every test runs under: no network beyond loopback (``tests/netguard/``).

The guard is installed in the test process when this file is imported, before any test
module imports a client library, and switched on for every Python program a test starts:
``CALLSAFE_TEST_OFFLINE=1`` and ``tests/netguard`` first on ``PYTHONPATH`` go into
``os.environ``, which ``subprocess``, callsafe's exec targets and the framework programs pass
on (a test that builds an environment of its own passes it through
:func:`netguard.guarded_env`). Every blocked attempt, in this process or a child, is appended
to one log; after each test the log is read, and a test during which anything tried to
reach the network fails, also when the library that tried caught the error and carried on.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "netguard"))

import netguard

_handle, _LOG = tempfile.mkstemp(prefix="callsafe-netlog-", suffix=".txt")
os.close(_handle)
os.environ.update(netguard.guarded_env(os.environ, _LOG))
netguard.install()


def _size() -> int:
    try:
        return os.path.getsize(_LOG)
    except OSError:
        return 0


def _logged_since(offset: int) -> str:
    try:
        with open(_LOG, "rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    """Fails the test if anything in it (or in a program it started) reached beyond loopback."""
    before = _size()
    yield
    attempts = _logged_since(before)
    if attempts:
        pytest.fail(f"the test tried to reach the network (tests/netguard blocked it):\n{attempts[:6000]}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    Path(_LOG).unlink(missing_ok=True)
