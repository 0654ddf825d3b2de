"""Bounded stalls: a black-holed PostgreSQL connection gives a typed error within the bound.

A small TCP proxy on 127.0.0.1 forwards to the PostgreSQL server, then, on command, stops
forwarding without closing anything (what a partition or a dead host looks like to the
client: no FIN, no RST, and the proxy's kernel still acknowledges what is sent, so neither
keepalives nor ``tcp_user_timeout`` can fire). The guard's store is bounded to 2 s per
operation; the test waits up to 60 s for the error, so a loaded machine cannot break it,
and never asserts a duration. ``status()`` answers meanwhile, and an operator control
answers (applied or a typed error) too. The status test without a server holds the
guard's lock from another thread, which is what a thread stuck in store I/O does.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections import Counter
from typing import Any

import pytest
import skips

from callsafe.guard import Guard, GuardStoreError, ToolCall
from callsafe.model.vocabulary import CallOpened, CallTerminal, Event, Fragment, ResponseTerminal
from callsafe.providers.streams import render_payloads
from callsafe.reference_impl.errors import TRANSIENT_FAULTS
from callsafe.reference_impl.postgres_store import PostgresStore, with_timeouts

DSN = os.environ.get("CALLSAFE_PG_DSN", "")
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
MARGIN = 60.0  # seconds to wait for what the 2 s bound promises (never asserted as a duration)
needs_pg = pytest.mark.skipif(not DSN, reason=skips.POSTGRES)


def call(turn: str, response: str, call_id: str) -> list[Event]:
    text = json.dumps({"city": "Paris"})
    return [
        CallOpened(turn, response, "0", call_id, "get_weather"),
        Fragment(turn, response, "0", call_id, 0, text[:5]),
        Fragment(turn, response, "0", call_id, 1, text[5:]),
        CallTerminal(turn, response, "0", call_id, "", "completed"),
        ResponseTerminal(turn, response, "completed"),
    ]


class BlackHoleProxy:
    """Forwards 127.0.0.1:port to ``target`` until :meth:`black_hole`; from then on it
    reads and drops what either side sends (counting the client's bytes) and closes
    nothing; new connections are accepted and get nothing. :meth:`restore` forwards new
    connections again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.holed = threading.Event()
        self.dropped = 0  # client bytes swallowed since the black hole began
        self.stop = threading.Event()
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = None if self.holed.is_set() else socket.create_connection(self.target)
            self.sockets += [s for s in (client, upstream) if s is not None]
            thread = threading.Thread(target=self._pump, args=(client, upstream), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _pump(self, client: socket.socket, upstream: socket.socket | None) -> None:
        ends = [client] if upstream is None else [client, upstream]
        while not self.stop.is_set():
            readable, _, _ = select.select(ends, [], [], 0.2)
            for sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if self.holed.is_set() or upstream is None:
                    if sock is client:
                        self.dropped += len(data)
                    continue
                (upstream if sock is client else client).sendall(data)

    def black_hole(self) -> None:
        self.dropped = 0
        self.holed.set()

    def restore(self) -> None:
        self.holed.clear()

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        for thread in self.threads:
            thread.join(timeout=5)
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def test_the_client_side_timeouts_are_set_unless_the_dsn_sets_them() -> None:
    params = with_timeouts("postgresql://u@127.0.0.1:1/db", operation_timeout=2)
    assert params["keepalives"] == "1" and params["keepalives_idle"] == "10"
    assert params["keepalives_interval"] == "5" and params["keepalives_count"] == "3"
    assert params["tcp_user_timeout"] == "2000" and params["connect_timeout"] == "5"
    assert "statement_timeout=30s" in params["options"] and "lock_timeout=5s" in params["options"]
    mine = with_timeouts("postgresql://u@127.0.0.1:1/db?connect_timeout=9&tcp_user_timeout=7&keepalives_idle=3")
    assert (mine["connect_timeout"], mine["tcp_user_timeout"], mine["keepalives_idle"]) == ("9", "7", "3")


def test_status_and_pending_confirmations_answer_while_another_thread_holds_the_lock() -> None:
    guard = Guard({"get_weather": SCHEMA}, executor=None, store="memory:")
    turn = guard.turn("t", "u", "acme")
    assert [c.id for c in turn.stream(render_payloads("openai-chat", call("t", "r1", "c1")))] == ["c1"]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # what a thread stuck in store I/O does: it keeps the lock
        with guard._lock:
            held.set()
            release.wait(MARGIN)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert held.wait(MARGIN)
        answers: list[Any] = []
        reader = threading.Thread(target=lambda: answers.extend([guard.status("t"), guard.pending_confirmations()]))
        reader.start()
        reader.join(MARGIN)
        assert not reader.is_alive(), "status() waited for the lock"
        assert answers == ["done", []]
    finally:
        release.set()
        holder.join(MARGIN)


@needs_pg
@pytest.mark.postgres
def test_a_black_holed_connection_gives_a_typed_error_within_the_bound_and_status_answers() -> None:
    params = with_timeouts(DSN)
    proxy = BlackHoleProxy((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    dsn = f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{proxy.port}/{params.get('dbname', 'postgres')}"
    runs: Counter[str] = Counter()

    def executor(c: ToolCall) -> str:
        runs[c.id] += 1
        return "sunny"

    namespace = f"callsafe_stall_{os.getpid()}"
    guard = Guard(
        {"get_weather": SCHEMA}, executor=executor, store=dsn, namespace=namespace, create=True, store_timeout=2
    )
    try:
        turn = guard.turn("t", "u", "acme")
        assert [c.id for c in turn.stream(render_payloads("openai-chat", call("t", "r1", "c1")))] == ["c1"]
        proxy.black_hole()
        failure: list[BaseException] = []
        done = threading.Event()

        def stream() -> None:
            try:
                list(turn.stream(render_payloads("openai-chat", call("t", "r2", "c2"))))
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()

        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        # the streamer's store I/O reached the black hole (or already failed)
        for _ in range(int(MARGIN * 10)):
            if proxy.dropped or done.is_set():
                break
            done.wait(0.1)
        assert proxy.dropped or done.is_set()
        assert guard.status("t") in ("done", "preparing")  # answers, lock or no lock
        control: list[BaseException | None] = []
        operator = threading.Thread(target=lambda: control.append(_quietly(guard.disable_tool, "get_weather")))
        operator.start()
        streamer.join(MARGIN)
        assert not streamer.is_alive(), "turn.stream() still blocked on a black-holed connection"
        assert len(failure) == 1 and isinstance(failure[0], GuardStoreError), failure
        assert failure[0].fault in TRANSIENT_FAULTS
        operator.join(MARGIN)
        assert not operator.is_alive(), "an operator control blocked on a black-holed connection"
        assert control and (control[0] is None or isinstance(control[0], GuardStoreError))
        assert runs["c2"] == 0  # nothing ran on a store that could not claim it
        proxy.restore()
    finally:
        guard.close()
        proxy.close()
        with contextlib.suppress(Exception):
            PostgresStore(DSN, namespace).drop()
    assert runs == Counter({"c1": 1})


def _quietly(control: Any, *args: Any) -> BaseException | None:
    try:
        control(*args)
    except GuardStoreError as exc:
        return exc
    return None


@pytest.mark.parametrize("bound", [0, -1, float("inf"), float("nan"), True, "2"])
def test_a_store_timeout_that_is_not_a_bound_is_a_config_error(bound: Any) -> None:
    from callsafe.guard import ConfigError

    with pytest.raises(ConfigError, match="store_timeout"):
        Guard({"get_weather": SCHEMA}, store="memory:", store_timeout=bound)


def test_the_watchdog_ends_an_operation_that_outlives_its_bound_and_only_that() -> None:
    from callsafe.reference_impl.deadline import Watchdog

    dog = Watchdog("test-watchdog")
    fired = threading.Event()
    try:
        dog.arm(3600, fired.set)  # disarmed in time: never fires
        dog.disarm()
        dog.arm(0.05, fired.set)  # outlives its bound
        assert fired.wait(MARGIN)
        assert dog.expired == 1
        fired.clear()
        dog.arm(3600, fired.set)
        dog.disarm()
    finally:
        dog.close()
    assert not fired.is_set() and dog.expired == 1


def test_an_earlier_deadline_wakes_a_watchdog_waiting_out_a_later_one() -> None:
    """A watchdog whose thread already waits out a long deadline must take a shorter one
    armed after it (it slept the hour through before: a stall bound that never fired)."""
    from callsafe.reference_impl.deadline import Watchdog

    dog = Watchdog("test-watchdog-earlier")
    fired = threading.Event()
    try:
        dog.arm(3600, fired.set)
        time.sleep(0.2)  # gives the thread the time to start waiting out the hour (not asserted)
        dog.disarm()
        dog.arm(0.05, fired.set)
        assert fired.wait(MARGIN)
        assert dog.expired == 1
    finally:
        dog.close()
