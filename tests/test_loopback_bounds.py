"""``callsafe serve`` reads bounded request bodies and logs escaped records.

A body over the cap is answered 413 while the client is still sending it: by its
``Content-Length`` before a byte of it is read, and (chunked, no length) as soon as what
arrived passes the cap. Each test sends only part of a huge body and waits for the answer,
so a server that read the rest first would never answer: the test would fail on its
socket timeout, not on a clock. A body within the cap is still served.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import httpx
import pytest

from callsafe.loopback.server import MAX_BODY, LoopbackServer, StaticTrace
from callsafe.model.builder import TraceBuilder
from callsafe.safe_text import CONTROL

GENEROUS = 120.0  # seconds a loaded machine may take to answer; never reached by a bounded server


def _trace_events() -> list:  # type: ignore[type-arg]
    b = TraceBuilder(tools={"pay": {"type": "object"}}).turn("t1", actor="u1", tenant="acme")
    return b.open("call_1", "pay", item="0").fragment("call_1", "{}").terminal("call_1").response_end().build().events


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer(static=StaticTrace("openai-chat", _trace_events()), max_body=64 * 1024).start()
    try:
        yield srv
    finally:
        srv.stop()


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(GENEROUS)
    out = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        out += data


def test_the_default_cap_is_one_mebibyte() -> None:
    assert MAX_BODY == 1 << 20
    with pytest.raises(ValueError):
        LoopbackServer(max_body=0)


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(server: LoopbackServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=GENEROUS) as sock:
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {400 << 20}\r\n\r\n"
        )
        sock.sendall(head.encode() + b"{" + b" " * 1024)  # 1 KiB of a declared 400 MiB
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"request body over 65536 bytes" in answer and b"connection: close" in answer.lower()
    assert server.requests == 0  # nothing was served


def test_a_chunked_body_is_refused_once_it_passes_the_cap(server: LoopbackServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=GENEROUS) as sock:
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        sock.sendall(head.encode())
        # the cap and one byte more, then nothing: never the final chunk, so a server that
        # waited for the body's end would never answer (and everything sent is read, so the
        # server's close is a clean FIN, not a reset that could drop the answer)
        for chunk in [b" " * 16384] * 4 + [b" "]:
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert server.requests == 0


def test_a_body_within_the_cap_is_served(server: LoopbackServer) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "x" * 60_000}], "stream": True}
    with httpx.Client(timeout=GENEROUS) as http:
        response = http.post(f"{server.base_url}/v1/chat/completions", json=request)
    assert response.status_code == 200 and b"call_1" in response.content
    assert server.requests == 1


def test_uvicorn_log_records_are_escaped() -> None:
    """uvicorn's loggers get the escaping filter: a record with a client's path (uvicorn
    has logged it percent-decoded in some versions), a message and a traceback holding
    control characters comes out escaped, one line per argument."""
    LoopbackServer()  # attaches the filter (the server is never started)
    hostile = "/v1/\x1b[2J\r\nFORGED\u202e"
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    levels = {name: logging.getLogger(name).level for name in ("uvicorn.access", "uvicorn.error")}
    for name in levels:
        logging.getLogger(name).addHandler(keep)
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        logging.getLogger("uvicorn.access").warning(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "POST", hostile, "1.1", 404
        )
        try:
            raise ValueError(hostile)
        except ValueError:
            logging.getLogger("uvicorn.error").exception("bad \x1b[31m request")
    finally:
        for name, level in levels.items():
            logging.getLogger(name).removeHandler(keep)
            logging.getLogger(name).setLevel(level)
    assert len(records) == 2
    text = [logging.Formatter().format(r) for r in records]
    for line in text:
        assert not CONTROL.search(line), repr(line)
    assert "\n" not in text[0] and "/v1/\\x1b[2J\\x0d\\nFORGED\\u202e" in text[0]
    assert "ValueError: /v1/\\x1b[2J" in text[1] and "bad \\x1b[31m request" in text[1]
