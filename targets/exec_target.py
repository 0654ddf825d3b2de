"""``exec:COMMAND``: any program, in any language, certified through the callsafe target
protocol (:mod:`callsafe.contract.exec_protocol`) on its stdin and stdout.

An :class:`ExecTarget` is a :class:`~callsafe.contract.target.Target` (and a
``ProtocolTarget``) like any other: the harness runs it exactly as it runs an in-process
target, and it turns each call into a message and the program's answers into calls of the
harness's executor, business validator and ``observe``, at the moment they arrive. So an
exec target's observations are the same objects, at the same steps, as those of the same
implementation in process; that is what makes ``exec:python -m callsafe.adapters.reference``
give the verdicts of ``reference:memory``.

Processes: one per worker process and command, started on first use and reused across
traces (``reset`` ends a trace) unless the program asks for one per trace. A program that
crashes, hangs past a timeout, writes a line that is not a message, or breaks the protocol
raises :class:`ExecTargetFailure` once (the runner records it against the trace, with the
exit status and the last lines of the program's stderr); the rest of that trace is not
delivered, the process is killed, and the next trace starts a fresh one.

Timeouts (seconds, from the environment so that ``--workers`` processes see them too):
``CALLSAFE_EXEC_MESSAGE_TIMEOUT`` (default 10) for each answer, and
``CALLSAFE_EXEC_TRACE_TIMEOUT`` (default 60) for a whole trace; a program gets
``CALLSAFE_EXEC_START_TIMEOUT`` (default 30) to start and answer ``init``; over HTTP, each
payload is followed by a quiet window of ``CALLSAFE_EXEC_SETTLE`` (default 0.01), and, for a
program that acknowledges what its SDK has read (``"acks": true``), first by a wait of up to
``CALLSAFE_EXEC_READ_TIMEOUT`` (default 2) for its ``read`` of that payload.

Bounded reads: a message line on stdout may hold at most ``CALLSAFE_EXEC_MAX_LINE`` bytes
(default 16 MiB, :data:`MAX_LINE`); a longer one is a target error (a crash: the program
broke the protocol), read and dropped in pieces of that size, never held whole. A stderr
line keeps its first :data:`STDERR_LINE` bytes (the rest is counted, not kept), and only
the last :data:`STDERR_KEPT` lines are kept: a program's output costs memory in proportion
to the caps, whatever it writes.

Wire mode: a program that reads a provider's protocol (``reads`` in ``init_ok``) gets each
payload as a ``wire`` message, or, with ``"wire": "http"``, reads the stream with its own SDK
from callsafe's loopback provider (:mod:`callsafe.loopback`), whose address it finds in
``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` and ``GOOGLE_GEMINI_BASE_URL``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import os
import queue
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Final

from callsafe.contract import clock
from callsafe.contract.exec_protocol import (
    FROM_TARGET,
    OBSERVATION_KINDS,
    PROTOCOL_NAME,
    VERSION,
    ProtocolError,
    decode,
    encode,
)
from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.record_words import DEFAULT_WORDS, RecordWordsError
from callsafe.model.vocabulary import (
    CallKey,
    Disconnect,
    Event,
    LogLine,
    TraceFormatError,
    event_to_json,
    observation_from_json,
)

__all__ = [
    "ExecTarget",
    "ExecTargetFailure",
    "TargetRaised",
    "exec_factory",
    "run_mode",
]

STDERR_TAIL: Final = 10  # lines of stderr quoted in a failure
STDERR_KEPT: Final = 200  # lines of stderr kept while the program runs
STDERR_LINE: Final = 4096  # bytes kept of one stderr line
MAX_LINE: Final = 16 * 1024 * 1024  # bytes of one stdout message line (CALLSAFE_EXEC_MAX_LINE)
_EOF: Final = object()


@dataclass(frozen=True)
class _LineTooLong:
    """What the stdout reader queues in place of a line longer than the cap."""

    cap: int
    size: int  # bytes read of it (all of it, up to its newline or the end of output)


def _seconds(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class ExecTargetFailure(RuntimeError):
    """The program failed as a process: it crashed, hung, wrote something that is not a
    message, or broke the protocol. Carries what happened, the exit status (``None``
    while it still ran and had to be killed) and the last lines of its stderr."""

    def __init__(self, what: str, exit_status: int | None, stderr_tail: list[str], kind: str = "crash") -> None:
        self.what = what
        self.target_error_kind = kind  # how the harness records it (certify.target_errors)
        self.exit_status = exit_status
        self.stderr_tail = stderr_tail
        status = "still running, killed" if exit_status is None else f"exit status {exit_status}"
        tail = " | ".join(stderr_tail) if stderr_tail else "(empty)"
        super().__init__(f"{what}; {status}; last lines of stderr: {tail}")


class TargetRaised(RuntimeError):
    """The program's code raised while handling a message (``done`` with an ``error``);
    the process is fine and the trace goes on, as for an in-process target."""


@dataclass(frozen=True)
class Handshake:
    """What the program said in ``init_ok``."""

    name: str
    reads: str
    capabilities: frozenset[str]
    version: int
    process_per_trace: bool = False
    wire: str = "stdio"
    # Over HTTP: it says (``read``) what its SDK has handled: ``True`` counts events (the
    # harness waits up to CALLSAFE_EXEC_READ_TIMEOUT), ``"bytes"`` counts body bytes and the
    # harness holds every later step until the program has read past them (the order).
    acks: bool | str = False
    # what its ledger and status words mean (callsafe.model.record_words), over the defaults
    record_words: Mapping[str, Any] | None = None
    error: str | None = None  # the handshake failed: why (the harness then certifies nothing: exit 3)
    error_kind: str = "crash"  # "hang" when it never answered, else "crash"


class _Process:
    """One running program: its pipes, a thread per output stream, its stderr tail."""

    def __init__(self, argv: list[str], env: Mapping[str, str], channel: str) -> None:
        self.argv = argv
        self.channel = channel  # its own path at the loopback provider
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
        self.lines: queue.Queue[Any] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT)
        self.max_line = max(1, int(_seconds("CALLSAFE_EXEC_MAX_LINE", MAX_LINE)))
        self.next_id = 0
        assert self.popen.stdout is not None and self.popen.stderr is not None
        threading.Thread(target=self._pump, args=(self.popen.stdout,), daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._drain, args=(self.popen.stderr,), daemon=True)
        self._stderr_thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        """Queue each stdout line, or a :class:`_LineTooLong` for one past the cap (read on
        in pieces of the cap's size and dropped, so the program is never blocked on a full
        pipe and memory stays within about twice the cap)."""
        cap = self.max_line
        while True:
            line = stream.readline(cap + 1)
            if not line:
                break
            if len(line) <= cap:
                self.lines.put(line)
                continue
            size = len(line)
            while not line.endswith(b"\n"):
                line = stream.readline(cap)
                if not line:
                    break
                size += len(line)
            del line
            self.lines.put(_LineTooLong(cap, size))
        self.lines.put(_EOF)

    def _drain(self, stream: IO[bytes]) -> None:
        """Keep the tail of stderr: the last STDERR_KEPT lines, each cut at STDERR_LINE bytes."""
        while True:
            line = stream.readline(STDERR_LINE)
            if not line:
                break
            text = line.decode("utf-8", errors="replace").rstrip("\n")
            cut = 0
            while not line.endswith(b"\n"):
                line = stream.readline(STDERR_LINE)
                if not line:
                    break
                cut += len(line)
            if cut:
                text += f" [... {cut} more bytes of this line not kept]"
            self.stderr.append(text)

    def send(self, message: dict[str, Any]) -> int:
        mid = message.get("id")
        if mid is None:
            mid = self.next_id
            self.next_id += 1
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(encode({**message, "id": mid}))
        stdin.flush()
        return mid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def failure(self, what: str, kind: str = "crash") -> ExecTargetFailure:
        """Kill the process (if it still runs) and describe what went wrong: a ``crash``
        (it exited, or broke the protocol and was killed) or a ``hang`` (a timeout)."""
        status = self.popen.poll()
        if status is None:
            self.kill()
        else:
            self._stderr_thread.join(timeout=1)
        return ExecTargetFailure(what, status, list(self.stderr)[-STDERR_TAIL:], kind)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.popen.pid, 9)
        with contextlib.suppress(Exception):
            self.popen.wait(timeout=5)
        self._stderr_thread.join(timeout=1)

    def stop(self) -> None:
        """Ask politely (``shutdown``, then end of stdin), then kill."""
        with contextlib.suppress(Exception):
            self.send({"type": "shutdown"})
            assert self.popen.stdin is not None
            self.popen.stdin.close()
            self.popen.wait(timeout=2)
        if self.alive():
            self.kill()


class _Pool:
    """The processes of one command in this worker process."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("exec: needs a command")
        self.idle: list[_Process] = []
        self.handshake: Handshake | None = None
        self.lock = threading.Lock()
        self.closed = False  # a process given back after close() is stopped, never kept

    def _environment(self, channel: str) -> dict[str, str]:
        env = dict(os.environ)
        env["CALLSAFE_TARGET_PROTOCOL"] = f"{PROTOCOL_NAME}/{VERSION}"
        base = _loopback_base(channel)
        if base is not None:
            env["OPENAI_BASE_URL"] = f"{base}/v1"
            env["ANTHROPIC_BASE_URL"] = base
            env.setdefault("OPENAI_API_KEY", "callsafe-loopback")
            env.setdefault("ANTHROPIC_API_KEY", "callsafe-loopback")
            env["GOOGLE_GEMINI_BASE_URL"] = base  # the Gemini SDKs add /v1beta/models/...
            env.setdefault("GEMINI_API_KEY", "callsafe-loopback")
            certfile = _loopback_certificate()
            if certfile is not None:  # the TLS listener's certificate (google-genai's Live client: wss only)
                env["SSL_CERT_FILE"] = certfile
        return env

    def spawn(self) -> tuple[_Process, Handshake]:
        """Start a process and shake hands. The trace's timeout is paused meanwhile: the
        start has its own bound (CALLSAFE_EXEC_START_TIMEOUT), and a framework's imports on a
        busy machine are no hang of the trace."""
        with clock.paused():
            return self._spawn()

    def _spawn(self) -> tuple[_Process, Handshake]:
        try:
            channel = f"p{next(_CHANNELS)}"
            process = _Process(self.argv, self._environment(channel), channel)
        except OSError as exc:
            raise ExecTargetFailure(f"cannot start {self.command!r}: {exc}", None, []) from None
        timeout = max(_seconds("CALLSAFE_EXEC_MESSAGE_TIMEOUT", 10.0), _seconds("CALLSAFE_EXEC_START_TIMEOUT", 30.0))
        try:
            mid = process.send({"type": "init", "protocol": PROTOCOL_NAME, "version": VERSION})
        except OSError:
            raise process.failure("the program closed its stdin before the handshake") from None
        try:
            line = process.lines.get(timeout=timeout)
        except queue.Empty:
            raise process.failure(f"no answer to 'init' within {timeout:g} s", "hang") from None
        except BaseException:  # the harness's timeout or Ctrl-C while waiting: no process left behind
            process.kill()
            raise
        if line is _EOF:
            raise process.failure("the program exited before answering 'init'")
        if isinstance(line, _LineTooLong):
            raise process.failure(f"handshake: {_too_long(line)}")
        try:
            message = decode(line, FROM_TARGET)
            if message["type"] != "init_ok" or message.get("id") != mid:
                raise ProtocolError(f"the answer to 'init' must be 'init_ok', got {message['type']!r}")
            if message.get("protocol") != PROTOCOL_NAME or message.get("version") != VERSION:
                raise ProtocolError(
                    f"the program speaks {message.get('protocol')!r} version {message.get('version')!r}; "
                    f"callsafe speaks {PROTOCOL_NAME!r} version {VERSION}"
                )
            handshake = _handshake(message)
        except ProtocolError as exc:
            raise process.failure(f"handshake: {exc}") from None
        return process, handshake

    def describe(self) -> Handshake:
        """What the program declares (from a first process, kept for the first trace)."""
        with self.lock:
            if self.handshake is None:
                try:
                    process, self.handshake = self.spawn()
                    self.idle.append(process)
                except ExecTargetFailure as exc:
                    name = f"exec:{self.command}"
                    kind = exc.target_error_kind
                    self.handshake = Handshake(name, "abstract", frozenset(), 0, error=str(exc), error_kind=kind)
            return self.handshake

    def acquire(self) -> tuple[_Process, Handshake]:
        with self.lock:
            while self.idle:
                process = self.idle.pop()
                if process.alive() and self.handshake is not None and self.handshake.error is None:
                    return process, self.handshake
                process.kill()
        process, handshake = self.spawn()
        with self.lock:
            if self.handshake is None or self.handshake.error is not None:
                self.handshake = handshake
        return process, handshake

    def release(self, process: _Process) -> None:
        with self.lock:
            if not self.closed:
                self.idle.append(process)
                return
        process.stop()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, []
        for process in idle:
            process.stop()


def _handshake(message: Mapping[str, Any]) -> Handshake:
    capabilities = message.get("capabilities")
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise ProtocolError("'capabilities' must be a list of strings")
    offered = CAPABILITIES - {"store_faults"}  # the protocol has no message that makes a store fail
    unknown = set(capabilities) - offered
    if unknown:
        raise ProtocolError(f"unknown capabilities {sorted(unknown)}; known over the protocol: {sorted(offered)}")
    name, reads = message.get("name"), message.get("reads")
    if not isinstance(name, str) or not isinstance(reads, str):
        raise ProtocolError("'name' and 'reads' must be strings")
    wire = message.get("wire", "stdio")
    if wire not in ("stdio", "http"):
        raise ProtocolError(f"'wire' must be 'stdio' or 'http', got {wire!r}")
    acks = message.get("acks", False)
    if not isinstance(acks, bool) and acks != "bytes":
        raise ProtocolError(f"'acks' must be true, false or \"bytes\", got {acks!r}")
    words = message.get("record_words")
    if words is not None:
        try:
            DEFAULT_WORDS.with_declared(words)
        except RecordWordsError as exc:
            raise ProtocolError(str(exc)) from None
    return Handshake(
        name,
        reads,
        frozenset(capabilities),
        int(message["version"]),
        bool(message.get("process_per_trace", False)),
        str(wire),
        acks,
        record_words=words,
    )


_POOLS: dict[tuple[str, int], _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _pool(command: str) -> _Pool:
    """The pool of ``command``'s processes started under this process's environment as it is
    now. A program reads its environment once, at its start, so one started under another
    environment (a timeout, a switch, a marker set since) is not the program this run asks
    for: its pool is closed and a new one starts."""
    key = (command, hash(frozenset(os.environ.items())))
    stale: list[_Pool] = []
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            stale = [p for k, p in _POOLS.items() if k[0] == command]
            for k in [k for k in _POOLS if k[0] == command]:
                del _POOLS[k]
            pool = _POOLS[key] = _Pool(command)
    for old in stale:
        old.close()
    return pool


@atexit.register
def _stop_all() -> None:
    for pool in list(_POOLS.values()):
        pool.close()


_CHANNELS = itertools.count()
TLS_ONLY: Final = frozenset({"gemini-live"})
"""Protocols whose programs get the loopback's TLS address (:meth:`LoopbackServer.tls_base_url`)."""


def _loopback_base(channel: str) -> str | None:
    """The loopback provider's address for this process's programs, or ``None`` when its
    server (uvicorn) cannot be imported: then no program can use wire mode over HTTP, and
    one that asks is refused when its target is built (:func:`_require_loopback`)."""
    try:
        from callsafe.loopback.server import shared_server
    except ImportError:
        return None
    return shared_server().channel_url(channel)


def _loopback_certificate() -> str | None:
    """The loopback's TLS certificate for a program to trust (``SSL_CERT_FILE``), or None
    when ``cryptography`` cannot make one (then only plain-HTTP programs reach it)."""
    from callsafe.loopback.server import shared_server

    try:
        return str(shared_server().certificate().certfile)
    except ImportError:
        return None


def _require_loopback(command: str) -> None:
    """A program that reads its stream over HTTP cannot run without the loopback provider:
    say so when the target is built (a broken run: every trace is a target error), never
    later inside ``receive_wire``, where an exception reads as the library failing the
    stream and the verdicts would blame the program for callsafe's missing server."""
    try:
        import callsafe.loopback.server  # noqa: F401
    except ImportError as exc:
        raise ExecTargetFailure(
            f"{command!r} reads its stream over HTTP from callsafe's loopback provider, which cannot start here: "
            f"{exc} (install uvicorn)",
            None,
            [],
        ) from None


ORDER_EXACT: Final = "acknowledged"
ORDER_BEST_EFFORT: Final = "best effort"


def order(handshake: Handshake) -> str | None:
    """How the order a program sees over HTTP is made the trace's (reports say it):
    ``acknowledged`` when it reports the body bytes its SDK has read (``"acks": "bytes"``,
    what the shipped adapter libraries declare by default), ``best effort`` when it does
    not (events it counts itself, waited for a bounded time, or only a settle window: load
    can change what it has read when a control event arrives). ``None`` off HTTP, where the
    order is exact (one pipe carries everything)."""
    if handshake.wire != "http" or handshake.reads == "abstract":
        return None
    return ORDER_EXACT if handshake.acks == "bytes" else ORDER_BEST_EFFORT


def order_note(run: Mapping[str, Any]) -> str | None:
    """The console's and the reports' words for a run whose order was best effort."""
    if run.get("order") != ORDER_BEST_EFFORT:
        return None
    counts = run.get("acks") is True
    how = "its own event counts (read {events})" if counts else "a settle window (CALLSAFE_EXEC_SETTLE)"
    return (
        "order best effort: the program does not acknowledge the stream bytes its SDK has read "
        f'(acks "bytes"), so a control event\'s place after stream bytes rests on {how}; '
        "under load a verdict can differ between runs"
    )


def run_mode(handshake: Handshake) -> str:
    """How the program is run, as reports say it: ``exec`` or ``exec, wire mode (...)``."""
    if handshake.reads == "abstract":
        return "exec"
    return f"exec, wire mode ({handshake.reads} over {handshake.wire})"


@dataclass
class _Trace:
    """The state of the trace being run."""

    process: _Process
    env: TargetEnv
    deadline: float
    failed: bool = False
    stream: Any = None  # the open loopback stream (wire mode over HTTP)
    stream_id: int | None = None
    finished_streams: set[int] = field(default_factory=set)
    read_events: int = 0  # what the program acknowledged of the open stream (``read``)
    read_bytes: int = 0  # the same in body bytes (``read`` {bytes})
    read_closed: bool = False  # it stopped reading the open stream's body (``read`` {closed})
    validating: int = 0  # nested inside the program's ``validate``: its reader may be the one waiting
    closing: bool = False  # the trace is over: callsafe is cutting the body it left open
    orphans: set[int] = field(default_factory=set)  # streams cut during validation, handler still inside


class ExecTarget:
    """A program behind the target protocol (see the module docstring)."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._pool = _pool(command)
        handshake = self._pool.describe()
        self.handshake = handshake
        self.name = handshake.name
        self.protocol = handshake.reads
        self.capabilities = handshake.capabilities
        self.record_words = handshake.record_words
        self.protocol_version = VERSION
        # Over HTTP the program's SDK makes a new request after a dropped connection: a
        # response's next events are the body of that request (certify.wire: reconnects).
        self.reconnects = handshake.wire == "http" and handshake.reads != "abstract"
        if handshake.wire == "http":
            _require_loopback(command)
        self._trace: _Trace | None = None
        self.message_timeout = _seconds("CALLSAFE_EXEC_MESSAGE_TIMEOUT", 10.0)
        self.trace_timeout = _seconds("CALLSAFE_EXEC_TRACE_TIMEOUT", 60.0)
        self.settle = _seconds("CALLSAFE_EXEC_SETTLE", 0.01)
        self.read_timeout = _seconds("CALLSAFE_EXEC_READ_TIMEOUT", 2.0)

    @property
    def run_mode(self) -> str:
        return run_mode(self.handshake)

    def run_description(self) -> dict[str, Any]:
        """What reports say about how this target's traces ran."""
        out: dict[str, Any] = {
            "mode": "exec" if self.protocol == "abstract" else "exec, wire mode",
            "command": self.command,
            "protocol": PROTOCOL_NAME,
            "protocol_version": VERSION,
            "process_per_trace": self.handshake.process_per_trace,
        }
        if self.protocol != "abstract":
            out["wire"] = self.handshake.wire
        ordered = order(self.handshake)
        if ordered is not None:
            out["order"] = ordered
            out["acks"] = self.handshake.acks
        if self.handshake.error is not None:
            out["handshake_error"] = self.handshake.error
            out["handshake_error_kind"] = self.handshake.error_kind
        return out

    # -- Target ------------------------------------------------------------------------

    def start(self, env: TargetEnv) -> None:
        process, handshake = self._pool.acquire()
        self.handshake = handshake
        trace = self._trace = _Trace(process, env, time.monotonic() + self.trace_timeout)
        self._call(
            {
                "type": "start",
                "tools": {name: spec.to_json() for name, spec in env.tools.items()},
                "limits": env.limits.to_json(),
                "store_dir": str(env.store_dir) if env.store_dir is not None else None,
            },
            "start",
        )
        del trace

    def receive(self, event: Event) -> None:
        trace = self._trace
        if trace is None or trace.failed:
            return
        if isinstance(event, Disconnect) and trace.stream is not None:
            trace.stream.abort()  # the connection drops under the program's SDK
            if trace.validating and trace.stream_id is not None:
                # The program's reader waits inside the validator for an answer that comes
                # after this event: its SDK sees the drop once it has the answer (see _handle).
                trace.orphans.add(trace.stream_id)
                trace.stream = None
                trace.stream_id = None
            else:
                self._finish_stream(trace)
        message: dict[str, Any] = {"type": "event", "step": trace.env.step(), "event": event_to_json(event)}
        if event.kind == "tool_changed":
            message["tools"] = {name: spec.to_json() for name, spec in trace.env.tools.items()}
        self._call(message, event.kind)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        trace = self._trace
        if trace is None or trace.failed:
            return
        if self.handshake.wire == "http":
            try:
                self._http_payload(trace, payload)
            except (ExecTargetFailure, TargetRaised):
                raise
            except Exception as exc:  # callsafe's side of the stream, not the program's SDK
                # An exception from receive_wire reads as the library failing its stream
                # (certify.target_errors); one from the loopback is no such thing, so the run breaks.
                raise self._fail(trace, f"callsafe's loopback stream failed: {exc!r}") from None
            return
        self._call({"type": "wire", "step": trace.env.step(), "payload": dict(payload)}, "wire")

    def end_stream(self) -> None:
        trace = self._trace
        if trace is None or trace.failed:
            return
        if self.handshake.wire == "http":
            if trace.stream is not None:
                trace.stream.finish(self._done_sentinel())
                self._finish_stream(trace)
            return
        self._call({"type": "end_stream"}, "end_stream")

    def restart(self) -> None:
        trace = self._trace
        if trace is None or trace.failed:
            return
        self._call({"type": "restart"}, "restart")
        if trace.stream is not None and not trace.failed:
            # The connection is gone with the process: the next response is a new request
            # (a new stream), never more bytes in the body the old process was reading. The
            # body is cut after the restart, so the old process's guard (closed) records nothing.
            trace.stream.abort()
            self._finish_stream(trace)

    def close(self) -> None:
        trace, self._trace = self._trace, None
        if trace is None:
            return
        if trace.stream is not None and not trace.failed and self.handshake.acks == "bytes":
            # First the program handles every byte written (a payload pushed while it was
            # inside its validator was not waited for): what it records for them is the trace's.
            with contextlib.suppress(ExecTargetFailure, TargetRaised):
                self._await_bytes(trace, trace.stream.sent)
        if trace.stream is not None and not trace.failed:
            # The trace ended with a body still open (in process, the reader is simply left
            # open). Cutting it is callsafe's teardown, not a step of the trace: what the
            # program records for that drop is no record of the trace (an execution still is).
            trace.closing = True
            trace.stream.abort()
            with contextlib.suppress(ExecTargetFailure, TargetRaised):
                self._finish_stream(trace)
        if trace.failed:
            trace.process.kill()
            return
        if self.handshake.process_per_trace:
            trace.process.stop()
            return
        self._trace = trace
        try:
            self._call({"type": "reset"}, "reset")
        finally:
            self._trace = None
        if trace.failed:
            trace.process.kill()
        else:
            self._pool.release(trace.process)

    # -- the exchange ----------------------------------------------------------------

    def _fail(self, trace: _Trace, what: str, kind: str = "crash") -> ExecTargetFailure:
        trace.failed = True
        if trace.stream is not None:
            trace.stream.abandoned = True
            trace.stream.abort()
        return trace.process.failure(what, kind)

    def _call(self, message: dict[str, Any], what: str) -> None:
        trace = self._trace
        assert trace is not None
        try:
            mid = trace.process.send(message)
        except (OSError, ValueError):
            raise self._fail(trace, f"the program closed its stdin before {what!r}") from None
        self._await(trace, mid, what)

    def _await(
        self,
        trace: _Trace,
        mid: int | None,
        what: str,
        settle: float | None = None,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Handle the program's messages until it answers ``mid`` (or, with ``settle``,
        until it has been quiet that long, or ``until()`` holds after a message)."""
        while True:
            now = time.monotonic()
            if now >= trace.deadline:
                raise self._fail(trace, f"the trace took longer than {self.trace_timeout:g} s (at {what!r})", "hang")
            wait = min(settle if settle is not None else self.message_timeout, trace.deadline - now)
            try:
                line = trace.process.lines.get(timeout=wait)
            except BaseException as stop:
                if not isinstance(stop, queue.Empty):
                    # The harness stopped the wait (its per-trace timeout, an interrupt): the
                    # program is mid-message and cannot be reused. Gone for this trace.
                    trace.failed = True
                    trace.process.kill()
                    raise
                if settle is not None:
                    return
                raise self._fail(trace, f"no answer to {what!r} within {self.message_timeout:g} s", "hang") from None
            if line is _EOF:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    trace.process.popen.wait(timeout=2)
                raise self._fail(trace, f"the program exited while handling {what!r}")
            if isinstance(line, _LineTooLong):
                raise self._fail(trace, f"protocol: {_too_long(line)} (while handling {what!r})")
            try:
                message = decode(line, FROM_TARGET)
                if self._handle(trace, message, mid):
                    return
            except (ProtocolError, TraceFormatError) as exc:
                raise self._fail(trace, f"protocol: {exc}") from None
            if trace.failed:
                return  # a nested delivery lost the process; the rest of the trace is not delivered
            if until is not None and until():
                return

    def _handle(self, trace: _Trace, message: dict[str, Any], mid: int | None) -> bool:
        """One message from the program; True when it is the answer awaited."""
        kind = message["type"]
        env = trace.env
        if kind == "done":
            done = message["id"]
            if done == mid:
                error = message.get("error")
                if error is not None:
                    raise _raised(str(error))
                return True
            if done in trace.orphans:
                trace.orphans.discard(done)
                trace.finished_streams.add(done)
                return mid is None
            if done == trace.stream_id:
                trace.finished_streams.add(done)
                if trace.stream is not None and not trace.stream.served:
                    trace.stream.abandoned = True  # the handler ended without asking for it
                return mid is None
            raise ProtocolError(f"'done' for message {done!r}, which is not awaited (awaiting {mid!r})")
        if kind == "execute":
            env.executor(
                CallKey.from_json(message["key"]),
                _text(message, "actor"),
                _text(message, "tool"),
                message["arguments"],
                message.get("traceparent"),
            )
        elif kind == "validate":
            arguments = message["arguments"]
            if not isinstance(arguments, dict):
                raise ProtocolError("'validate' needs the arguments as an object")
            # a validation in flight while callsafe cuts a body left open: the program was
            # still at the trace's last step (events are delivered in its window), so what
            # it records from now on is the trace's, not the cut's
            trace.closing = False
            trace.validating += 1
            try:
                reason = env.business_validator(CallKey.from_json(message["key"]), _text(message, "tool"), arguments)
            finally:
                trace.validating -= 1
            if not trace.failed:
                try:
                    trace.process.send({"type": "validation", "id": message["id"], "reason": reason})
                except OSError:
                    raise self._fail(trace, "the program closed its stdin while validating") from None
                for sid in sorted(trace.orphans) if not trace.validating else ():
                    self._await_stream(trace, sid)  # its reader, answered, sees the drop and ends
        elif kind == "observe":
            observation = _observation(message["observation"], env.step())
            if not trace.closing:
                env.observe(observation)

        elif kind == "log":
            text = _text(message, "text")
            if not trace.closing:
                env.observe(LogLine(env.step(), text))
        elif kind == "read":
            if "events" not in message and "bytes" not in message:
                raise ProtocolError("'read' needs 'events' or 'bytes'")
            for name in ("events", "bytes"):
                count = message.get(name, 0)
                if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    raise ProtocolError(f"'read' needs {name!r} as a count, got {count!r}")
            trace.read_events = max(trace.read_events, int(message.get("events", 0)))
            trace.read_bytes = max(trace.read_bytes, int(message.get("bytes", 0)))
            trace.read_closed = trace.read_closed or message.get("closed") is True
        else:
            raise ProtocolError(f"the program sent {kind!r} outside the handshake")
        return False

    # -- wire mode over HTTP -----------------------------------------------------------

    def _done_sentinel(self) -> bool:
        from callsafe.providers import registry

        return bool(registry.get(self.protocol).done_sentinel)

    def _http_payload(self, trace: _Trace, payload: Mapping[str, Any]) -> None:
        if trace.stream is None:
            from callsafe.loopback.server import shared_server

            server = shared_server()
            trace.stream = server.open_stream(self.protocol, trace.process.channel)
            channel = trace.process.channel
            # google-genai's Live client speaks only wss: its stream is at the TLS listener
            base_url = server.tls_channel_url(channel) if self.protocol in TLS_ONLY else server.channel_url(channel)
            try:
                trace.stream_id = trace.process.send(
                    {"type": "stream", "protocol": self.protocol, "base_url": base_url}
                )
            except OSError:
                raise self._fail(trace, "the program closed its stdin before 'stream'") from None
            trace.read_events = trace.read_bytes = 0
            trace.read_closed = False
        trace.stream.push(payload)
        if self.handshake.acks == "bytes":
            if not trace.validating:
                self._await_bytes(trace, trace.stream.sent)
            return
        if self.handshake.acks:
            self._await_read(trace, trace.stream.count)
        self._await(trace, None, "stream", settle=self.settle)

    def _await_bytes(self, trace: _Trace, sent: int) -> None:
        """Hold the trace until the program has read past the ``sent`` body bytes written so
        far (``read`` {bytes}), stopped reading this body, or its stream handler returned:
        whatever the program did for those bytes has then been sent and is recorded at this
        step, and the next step (a control event included) reaches it after them, however
        slow the machine. Not while the program is inside its ``validate``: the reader may be
        the thread that waits for the answer, and bytes written meanwhile are read after it,
        as they would be. A program that reads nothing for ``CALLSAFE_EXEC_MESSAGE_TIMEOUT``
        once its request has reached the loopback hangs (a target error, never a verdict taken
        out of order); before its request arrives (its SDK or framework still importing and
        building its client, which takes longer than that on a loaded machine) the wait is
        bounded by the trace's timeout instead."""
        sid = trace.stream_id
        stream = trace.stream

        def read() -> bool:
            return trace.read_bytes >= sent or trace.read_closed or sid in trace.finished_streams

        while not read() and not trace.failed:
            self._await(trace, None, "stream", settle=self.message_timeout, until=read)
            if not read() and not trace.failed and (stream is None or stream.served):
                what = f"the program read no further into its stream within {self.message_timeout:g} s"
                raise self._fail(trace, what, "hang")

    def _await_read(self, trace: _Trace, events: int) -> None:
        """Wait (up to ``CALLSAFE_EXEC_READ_TIMEOUT``) until the program says its SDK has
        handled the first ``events`` events of this stream, or its stream handler ended: what
        it sent for them is then recorded at this step, however slow the machine. A program
        that stopped reading (it aborted the request) costs the wait once per payload."""
        sid = trace.stream_id
        limit = time.monotonic() + self.read_timeout

        def read() -> bool:
            return trace.read_events >= events or sid in trace.finished_streams

        while not read() and not trace.failed:
            left = limit - time.monotonic()
            if left <= 0:
                return
            self._await(trace, None, "stream", settle=left, until=read)

    def _finish_stream(self, trace: _Trace) -> None:
        """Wait until the program's stream handler has returned (its ``done``)."""
        sid = trace.stream_id
        if sid is not None:
            self._await_stream(trace, sid)
        trace.stream = None
        trace.stream_id = None

    def _await_stream(self, trace: _Trace, sid: int) -> None:
        while sid not in trace.finished_streams and not trace.failed:
            self._await(trace, None, "stream", settle=self.message_timeout)
            if sid not in trace.finished_streams and not trace.failed:
                what = f"the program's stream handler did not return within {self.message_timeout:g} s"
                raise self._fail(trace, what, "hang")


def _too_long(line: _LineTooLong) -> str:
    return f"a line of {line.size:,} bytes, past the cap of {line.cap:,} bytes on one message (CALLSAFE_EXEC_MAX_LINE)"


_RAISED: dict[str, type[TargetRaised]] = {}


def _raised(error: str) -> TargetRaised:
    """The program's ``"Type: message"`` as an exception named ``Type`` (a
    :class:`TargetRaised`), so the runner records it in the words it records an in-process
    target's exception with."""
    name, sep, text = error.partition(": ")
    if not sep or not name.isidentifier():
        return TargetRaised(error)
    cls = _RAISED.get(name)
    if cls is None:
        cls = _RAISED[name] = type(name, (TargetRaised,), {"__module__": __name__})
    return cls(text)


def _text(message: Mapping[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str):
        raise ProtocolError(f"{message['type']!r} needs {name!r} as a string")
    return value


def _observation(data: Any, step: int) -> Any:
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError("'observe' needs one observation as a one-key object")
    ((kind, body),) = data.items()
    if kind not in OBSERVATION_KINDS:
        raise ProtocolError(f"a target cannot report {kind!r}; it reports {', '.join(OBSERVATION_KINDS)}")
    if not isinstance(body, dict):
        raise ProtocolError(f"observation {kind!r} must be an object of fields")
    return observation_from_json({kind: {**body, "step": step}})


def exec_factory(command: str) -> Any:
    """The factory for ``exec:COMMAND`` (each call a fresh target over the pooled process)."""

    def factory() -> ExecTarget:
        return ExecTarget(command)

    factory.__qualname__ = f"exec:{command}"
    return factory
