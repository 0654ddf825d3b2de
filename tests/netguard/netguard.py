"""No test reaches the network: a guard on the socket layer that refuses any connection or
name lookup beyond loopback, loudly.

Why at the socket layer: a client library (litellm's model price list, a framework's
telemetry, a tokenizer's encoding download) reaches the network from code callsafe does not
own, through whichever HTTP client it bundles; every one of them ends in ``socket.connect``,
``socket.getaddrinfo`` or ``sendto``. The guard replaces those for the process: a loopback or
unix-socket address goes through; anything else raises :class:`NetworkBlockedError` and is
written to the log named by ``CALLSAFE_TEST_NETLOG`` (one line per attempt, with the stack
that made it), so that an attempt a library catches and retries around still fails the test
(``tests/conftest.py`` reads the log after every test). A subprocess gets the same guard
through ``sitecustomize.py`` beside this file when this folder is on its ``PYTHONPATH`` and
``CALLSAFE_TEST_OFFLINE=1`` is in its environment (``conftest.py`` puts both in ``os.environ``,
which every program a test or callsafe starts inherits; :func:`guarded_env` adds them to an
environment a test builds itself).

Standard library only: the guard runs first in every interpreter the tests start, also the
``openai<3`` environment's.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["DIRECTORY", "LOG_VARIABLE", "SWITCH", "NetworkBlockedError", "guarded_env", "install", "installed"]

DIRECTORY = Path(__file__).resolve().parent
SWITCH = "CALLSAFE_TEST_OFFLINE"  # "1": sitecustomize installs the guard in that interpreter
LOG_VARIABLE = "CALLSAFE_TEST_NETLOG"  # file every blocked attempt is appended to

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_state = threading.local()
_original: dict[str, Any] = {}


class NetworkBlockedError(RuntimeError):
    """A connection or a name lookup beyond loopback, in a test. Deliberately not an
    ``OSError``: a library that retries on connection errors would swallow one quietly."""


def _is_local(host: object) -> bool:
    if host is None or host == "" or host == b"":
        return True  # getaddrinfo(None, port): a listening address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower().rstrip(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _refuse(what: str, target: object) -> None:
    if getattr(_state, "expected", False):
        raise NetworkBlockedError(f"network access blocked in a test: {what} {target!r}")
    stack = "".join(traceback.format_stack(limit=25)[:-2])
    line = f"[pid {os.getpid()}] {what} {target!r} (argv {sys.argv!r})\n{stack}"
    log = os.environ.get(LOG_VARIABLE)
    if log:
        with contextlib.suppress(OSError), open(log, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    print(f"callsafe test guard: blocked {what} {target!r}", file=sys.stderr)
    raise NetworkBlockedError(
        f"network access blocked in a test: {what} {target!r} (tests talk only to loopback; see tests/netguard)"
    )


def _check_address(what: str, family: int, address: object) -> None:
    if family == getattr(socket, "AF_UNIX", None) or family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_local(host):
        _refuse(what, address)


def _connect(self: socket.socket, address: Any) -> None:
    _check_address("connect to", self.family, address)
    _original["connect"](self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check_address("connect to", self.family, address)
    result: int = _original["connect_ex"](self, address)
    return result


def _sendto(self: socket.socket, data: Any, *args: Any) -> int:
    address = args[-1] if args else None
    _check_address("send to", self.family, address)
    result: int = _original["sendto"](self, data, *args)
    return result


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _is_local(host):
        _refuse("name lookup of", host)
    return _original["getaddrinfo"](host, *args, **kwargs)


def _gethostbyname(host: Any) -> Any:
    if not _is_local(host):
        _refuse("name lookup of", host)
    return _original["gethostbyname"](host)


def _gethostbyname_ex(host: Any) -> Any:
    if not _is_local(host):
        _refuse("name lookup of", host)
    return _original["gethostbyname_ex"](host)


def install() -> None:
    """Put the guard in place for this process (idempotent)."""
    if _original:
        return
    _original.update(
        connect=socket.socket.connect,
        connect_ex=socket.socket.connect_ex,
        sendto=socket.socket.sendto,
        getaddrinfo=socket.getaddrinfo,
        gethostbyname=socket.gethostbyname,
        gethostbyname_ex=socket.gethostbyname_ex,
    )
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = _sendto  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _gethostbyname
    socket.gethostbyname_ex = _gethostbyname_ex


def installed() -> bool:
    return bool(_original)


@contextlib.contextmanager
def expected() -> Iterator[None]:
    """Attempts inside are still refused, but not logged: for the test that shows the guard."""
    _state.expected = True
    try:
        yield
    finally:
        _state.expected = False


def guarded_env(env: Mapping[str, str], log: str | None = None) -> dict[str, str]:
    """``env`` with the guard switched on for a subprocess: this folder first on its
    ``PYTHONPATH`` (its ``sitecustomize`` installs the guard), the switch, and the log."""
    out = dict(env)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(DIRECTORY)]
    out["PYTHONPATH"] = os.pathsep.join([str(DIRECTORY), *parts])
    out[SWITCH] = "1"
    chosen = log or os.environ.get(LOG_VARIABLE)
    if chosen:
        out[LOG_VARIABLE] = chosen
    return out
