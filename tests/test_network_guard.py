"""The tests' network guard (``tests/netguard/``, installed by ``tests/conftest.py``) refuses
what leaves loopback, in the test process and in the programs the tests start, and lets
loopback through."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import netguard
import pytest
from loaded import TRACE_TIMEOUT as PROCESS_TIMEOUT

OUTSIDE = "203.0.113.1"  # TEST-NET-3 (RFC 5737): never routed; a real attempt would hang, not fail


def test_the_guard_is_on_in_the_test_process_and_for_its_children() -> None:
    assert netguard.installed()
    assert os.environ[netguard.SWITCH] == "1"
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(netguard.DIRECTORY)


def test_a_connect_beyond_loopback_fails_with_the_guards_error() -> None:
    with netguard.expected(), socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        with pytest.raises(netguard.NetworkBlockedError, match=re.escape(OUTSIDE)):
            sock.connect((OUTSIDE, 443))
    with netguard.expected(), pytest.raises(netguard.NetworkBlockedError, match=re.escape("example.com")):
        socket.getaddrinfo("example.com", 443)
    with netguard.expected(), pytest.raises(netguard.NetworkBlockedError, match=re.escape(OUTSIDE)):
        socket.create_connection((OUTSIDE, 80), timeout=5)


def test_a_loopback_connect_works() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        accepted: list[bytes] = []

        def accept() -> None:
            conn, _ = server.accept()
            with conn:
                accepted.append(conn.recv(16))

        thread = threading.Thread(target=accept)
        thread.start()
        with socket.create_connection(("localhost", server.getsockname()[1]), timeout=PROCESS_TIMEOUT) as client:
            client.sendall(b"ping")
        thread.join(PROCESS_TIMEOUT)
    assert accepted == [b"ping"]


def test_a_child_process_is_guarded_and_its_attempt_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "netlog.txt"  # a log of its own: this attempt is meant, the test's log stays clean
    program = (
        "import socket\n"
        f"for attempt in (lambda: socket.socket().connect(({OUTSIDE!r}, 443)), "
        "lambda: socket.create_connection(('example.com', 443), timeout=5)):\n"
        "    try:\n"
        "        attempt()\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "with socket.create_server(('127.0.0.1', 0)) as s:\n"
        "    socket.create_connection(s.getsockname(), timeout=5).close()\n"
        "print('loopback ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=netguard.guarded_env(os.environ, str(log)),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=True,
    )
    assert f"NetworkBlockedError network access blocked in a test: connect to ('{OUTSIDE}', 443)" in done.stdout
    assert "NetworkBlockedError network access blocked in a test: name lookup of 'example.com'" in done.stdout
    assert "loopback ok" in done.stdout
    assert OUTSIDE in log.read_text(encoding="utf-8")
