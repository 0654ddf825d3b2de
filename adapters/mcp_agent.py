"""``python -m callsafe.adapters.mcp_agent [--protocol P] [--cancel-signal SIG] -- COMMAND``:
an unmodified agent program certified through its two real interfaces, with no adapter code
(``callsafe certify 'agent:COMMAND'``).

The agent is what a user runs: it reads its model's stream from a base URL and takes its
tools from an MCP server. This program speaks the target protocol to callsafe (it is an
``exec:`` program reading over HTTP, so every part of the exec machinery applies: the
process pool, the timeouts, the loopback provider, the failure reports) and, for each model
stream of a trace, starts COMMAND with

- ``OPENAI_BASE_URL`` (``.../model/v1``), ``ANTHROPIC_BASE_URL`` and
  ``GOOGLE_GEMINI_BASE_URL`` (``.../model``; ``--protocol`` names which the agent reads): the
  watched path to callsafe's loopback provider (:class:`~callsafe.loopback.mcp_server.AgentInterfaces`),
- ``CALLSAFE_MCP_URL``: callsafe's MCP server (Streamable HTTP), which lists the trace's
  catalog and records each ``tools/call`` as an execution by the agent,
- ``CALLSAFE_MCP_COMMAND``: the same server as a stdio MCP server command
  (:mod:`callsafe.loopback.mcp_stdio`), for an agent whose MCP entry is a command,

and waits for it to exit. COMMAND's stdout goes to stderr (callsafe's message channel is
this program's stdout).

Call keys: an MCP ``tools/call`` carries a tool name and arguments, no call id. The key is
recovered from the calls the agent was sent on the wire (:class:`WireCalls`): the first
call of that name whose streamed arguments decode to the arguments received and that has
not run yet; else one that has (the agent ran it again: the same key, so a second run is a
second execution of one call); else the first call of that name not run yet (the agent ran
it with other arguments than were streamed); else a key naming no call on the wire. So what
the agent form judges soundly is *what* ran (which call, how often, with which arguments,
whether it was finished or truncated), not the agent's own call ids.

MCP's answers: ``--drop-answers`` loses the first answer to each ``tools/call`` to a dropped
connection (:meth:`AgentInterfaces._dropping`); ``--withhold-answers`` runs each call and
answers it only if the host never gives up on it, so a host's own timeout cancels a call
that already ran (:meth:`AgentInterfaces._withhold`). Either way the tool ran once; a host
that sends the call again runs it twice (INV-ONCE). ``--long-tools SECONDS`` makes each tool
a long-running one: it begins (and is recorded) at once, runs that long, and reports
``notifications/progress`` when the host asked for it; a host's cancellation mid-run ends it
unanswered, and a host that then sends the call again runs it twice (INV-ONCE).

Catalog changes: a trace's :class:`~callsafe.model.vocabulary.ToolChanged` or
:class:`~callsafe.model.vocabulary.DisableTool` changes what ``tools/list`` answers (a
disabled tool is not listed) and sends the host ``notifications/tools/list_changed``; the
program first lets the agent begin reading its model (it starts with its stream), then
waits up to ``CALLSAFE_MCP_RELIST_WAIT`` seconds (default :data:`RELIST_WAIT`) for the host
to list again before the stream goes on. A host that still
calls a tool no longer listed has dispatched it: the call is recorded as an execution (the
oracle judges it as for any call of an unknown, removed or disabled tool) and answered with
MCP's error for an unknown tool.

Controls: the agent exposes no turn, cancel or confirmation API to callsafe, so by default
the program declares only ``catalog_changes`` (above) and the other traces are not
applicable. ``--cancel-signal
INT`` (or ``TERM``) is the optional hook for an agent that stops on a signal: a cancel, a
new turn or a dropped connection sends it the signal and waits for it to exit, and the
program declares ``cancellation``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from callsafe.adapters.frameworks._program import FrameworkProgram, WireIds, main
from callsafe.contract.target import TargetEnv
from callsafe.loopback.mcp_server import AgentInterfaces, decode_arguments
from callsafe.model.vocabulary import CallKey, DisableTool, Event, ToolChanged, TurnStarted

__all__ = ["RELIST_WAIT", "AgentProgram", "WireCalls"]

PROTOCOLS = ("openai-chat", "anthropic-messages", "gemini")
RELIST_WAIT = 5.0  # seconds a host gets to list its tools again after a list_changed notification


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value >= 0 else default


def _waits() -> tuple[float, float]:
    """How long a catalog change waits for the agent to begin reading its model, and then
    for it to list again: within the harness's bound for the program's answer to the event
    (``CALLSAFE_EXEC_MESSAGE_TIMEOUT``), half of it and (by default) at most
    :data:`RELIST_WAIT`; ``CALLSAFE_MCP_RELIST_WAIT`` sets the second."""
    message = _seconds("CALLSAFE_EXEC_MESSAGE_TIMEOUT", 10.0)
    return message / 2, _seconds("CALLSAFE_MCP_RELIST_WAIT", min(RELIST_WAIT, message * 0.4))


class WireCalls(WireIds):
    """:class:`WireIds`, and per call id the tool's name and its streamed argument text."""

    def __init__(self, protocol: str) -> None:
        super().__init__(protocol)
        self.names: dict[str, str] = {}
        self.text: dict[str, str] = {}
        self._open: dict[str, str] = {}  # the index's (block's) current call

    def _read(self, p: Mapping[str, Any]) -> None:
        opened = len(self.order)
        super()._read(p)
        if self.protocol == "gemini":  # each functionCall whole, in the order WireIds noted them
            for (_, call), part in zip(self.order[opened:], _function_calls(p), strict=False):
                self.names[call] = str(part.get("name"))
                self.text[call] = json.dumps(part.get("args") or {})
        elif self.protocol == "openai-chat":
            for choice in p.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                for delta in (choice.get("delta") or {}).get("tool_calls") or []:
                    if isinstance(delta, dict):
                        self._delta(str(delta.get("index", "")), delta.get("id"), delta.get("function") or {})
        elif self.protocol == "anthropic-messages":
            block, index = p.get("content_block"), str(p.get("index", ""))
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self._delta(index, block.get("id"), {"name": block.get("name")})
            delta = p.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                self._delta(index, None, {"arguments": delta.get("partial_json")})

    def _delta(self, index: str, call: Any, function: Mapping[str, Any]) -> None:
        if isinstance(call, str):
            self._open[index] = call
            self.text.setdefault(call, "")
        current = self._open.get(index)
        if current is None:
            return
        if isinstance(function.get("name"), str) and current not in self.names:
            self.names[current] = function["name"]
        if isinstance(function.get("arguments"), str):
            self.text[current] += function["arguments"]


def _function_calls(p: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A Gemini payload's ``functionCall`` parts (first candidate), as WireIds reads them."""
    calls: list[Mapping[str, Any]] = []
    for candidate in (p.get("candidates") or [])[:1]:
        for part in ((candidate or {}).get("content") or {}).get("parts") or []:
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and call.get("name"):
                calls.append(call)
    return calls


class AgentProgram(FrameworkProgram):
    """One agent command behind the target protocol (see the module docstring)."""

    def __init__(
        self,
        command: list[str],
        protocol: str,
        cancel_signal: int | None,
        drop_answers: bool = False,
        withhold_answers: bool = False,
        long_seconds: float = 0.0,
    ) -> None:
        self.protocol = protocol
        super().__init__()
        self.ids = WireCalls(protocol)
        self.command = command
        self.name = f"agent:{protocol}:{shlex.join(command)}"
        # catalog_changes: the host learns of them as MCP says (tools/list_changed); what it
        # then runs is judged like any target's calls after a change
        controls = {"cancellation"} if cancel_signal is not None else set()
        self.capabilities = frozenset({"catalog_changes", *controls})
        self.cancel_signal = cancel_signal
        self.drop_answers = drop_answers
        self.withhold_answers = withhold_answers
        self.long_seconds = long_seconds
        self.disabled: set[str] = set()  # tools an operator disabled in this trace: not listed
        self.offered: dict[str, Any] = {}  # what tools/list answers (the catalog as last announced)
        self.streaming = False  # a model stream of this trace is being read (the agent runs)
        self.ready = threading.Event()  # ... and the server is up, model_base taken
        self.model_base = 0  # model-path requests before this stream's agent started
        self.ran: dict[str, int] = {}  # call id -> times the agent ran it (this stream)
        self.unknown = 0
        self.lock = threading.Lock()
        self.process: asyncio.subprocess.Process | None = None
        self.interfaces: AgentInterfaces | None = None

    # -- the agent's two interfaces ----------------------------------------------------

    def _interfaces(self) -> AgentInterfaces:
        with _SHARED_LOCK:
            if self.interfaces is None:
                self.interfaces = _shared(self)
            return self.interfaces

    def catalog(self) -> dict[str, Any]:
        """What ``tools/list`` answers: the catalog as the agent was last told it stands."""
        return self.offered

    def _current(self) -> dict[str, Any]:
        """The catalog as it stands (the harness applies a change before delivering it),
        without the tools an operator disabled."""
        env = self.env
        if env is None:
            return {}
        return {name: spec.schema for name, spec in env.tools.items() if name not in self.disabled}

    def start(self, env: TargetEnv) -> None:
        super().start(env)
        self.disabled = set()
        self.offered = self._current()

    def receive(self, event: Event) -> None:
        super().receive(event)
        if isinstance(event, (ToolChanged, DisableTool)):
            if isinstance(event, DisableTool):
                self.disabled.add(event.tool)
            start, relist = _waits()
            if self.streaming and self.ready.wait(start) and self.interfaces is not None:
                # the agent starts with its stream: it gets to list its tools (the catalog
                # before the change) and begin reading its model, so the change comes while
                # its call streams; then it is told of the change and gets to list again
                deadline = time.monotonic() + start
                while self.streaming and time.monotonic() < deadline:
                    if self.interfaces.wait_for_model(self.model_base, 0.1):
                        break
                self.offered = self._current()
                if not self.interfaces.tools_changed(relist):
                    print(f"callsafe: the agent did not list its tools again within {relist:g} s", file=sys.stderr)
            else:
                self.offered = self._current()

    def stream(self, base_url: str) -> None:
        """The stream's thread: marked first (the server's first start takes a while, and
        a catalog change delivered meanwhile must wait for it), then ready."""
        self.streaming = True
        try:
            interfaces = self._interfaces()
            self.model_base = interfaces.model_requests
            interfaces.forget_sessions()  # a new agent process: the last one's sessions are gone
            self.ready.set()
            super().stream(base_url)
        finally:
            self.ready.clear()
            self.streaming = False

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """A ``tools/call``: the agent executes ``tool``; recorded under the recovered key."""
        env, turn = self.env, self.turn
        if env is None or turn is None:
            return "error: no trace is running"
        with self.lock:
            key = self._key(turn, tool, arguments)
        env.executor(key, turn.actor, tool, arguments, turn.traceparent)
        return "ok"

    def _key(self, turn: TurnStarted, tool: str, arguments: dict[str, Any]) -> CallKey:
        ids = self.ids
        assert isinstance(ids, WireCalls)
        named = [call for _, call in ids.order if ids.names.get(call) == tool]
        same = [call for call in named if decode_arguments(ids.text.get(call, "")) == arguments]
        for pool in ([c for c in same if c not in self.ran], same, [c for c in named if c not in self.ran]):
            if pool:
                call = pool[0]
                self.ran[call] = self.ran.get(call, 0) + 1
                return ids.key(turn, call)
        self.unknown += 1
        return CallKey(turn.tenant, turn.turn, ids.response, "", f"mcp-call-{self.unknown}")

    # -- the run -------------------------------------------------------------------------

    async def run(self, base_url: str, env: TargetEnv, turn: TurnStarted) -> None:
        interfaces = self._interfaces()
        with self.lock:
            self.ids = WireCalls(self.protocol)
            self.ran = {}
        interfaces.set_upstream(base_url)
        environment = dict(os.environ)
        environment.update(
            {
                "OPENAI_BASE_URL": f"{interfaces.model_url}/v1",
                "ANTHROPIC_BASE_URL": interfaces.model_url,
                "GOOGLE_GEMINI_BASE_URL": interfaces.model_url,
                "OPENAI_API_KEY": "callsafe-loopback",
                "ANTHROPIC_API_KEY": "callsafe-loopback",
                "GOOGLE_API_KEY": "callsafe-loopback",
                "CALLSAFE_MCP_URL": interfaces.mcp_url,
                "CALLSAFE_MCP_COMMAND": shlex.join([sys.executable, "-m", "callsafe.loopback.mcp_stdio"]),
            }
        )
        environment.pop("CALLSAFE_TARGET_PROTOCOL", None)  # the agent speaks no protocol to callsafe
        self.process = process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr, env=environment
        )
        try:
            status = await process.wait()
        except asyncio.CancelledError:
            process.kill()
            await process.wait()
            raise
        finally:
            self.process = None
        if status != 0 and not self.cancelled:
            raise RuntimeError(f"the agent exited with status {status}")

    def cancel(self, task: asyncio.Task[None]) -> None:
        process = self.process
        if process is not None and self.cancel_signal is not None:
            process.send_signal(self.cancel_signal)  # the agent's own way to stop; run() returns when it exits
        else:
            task.cancel()


_SHARED_LOCK = threading.Lock()
_INTERFACES: list[AgentInterfaces] = []
_CURRENT: list[AgentProgram] = []


def _shared(program: AgentProgram) -> AgentInterfaces:
    """One server for the process; it serves the program of the running trace."""
    if _CURRENT:
        _CURRENT[0] = program
    else:
        _CURRENT.append(program)
    if not _INTERFACES:
        _INTERFACES.append(
            AgentInterfaces(
                catalog=lambda: _CURRENT[0].catalog(),
                on_call=lambda tool, arguments: _CURRENT[0].call(tool, arguments),
                on_bytes=lambda data: _CURRENT[0].ids.feed(data),
                drop_answers=program.drop_answers,
                withhold_answers=program.withhold_answers,
                long_seconds=program.long_seconds,
            ).start()
        )
    return _INTERFACES[0]


def parse(argv: list[str]) -> tuple[list[str], str, int | None, bool, bool, float]:
    parser = argparse.ArgumentParser(prog="python -m callsafe.adapters.mcp_agent")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="openai-chat")
    parser.add_argument("--cancel-signal", choices=("INT", "TERM"), default=None)
    parser.add_argument("--drop-answers", action="store_true", help="lose the first answer to each tools/call")
    parser.add_argument(
        "--withhold-answers",
        action="store_true",
        help="run each tools/call, and answer it only when the host cancels it (then not at all)",
    )
    parser.add_argument(
        "--long-tools",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="each tools/call runs this long, sending notifications/progress when the host asks for them",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        parser.error("name the agent's command")
    sig = None if args.cancel_signal is None else int(getattr(signal, f"SIG{args.cancel_signal}"))
    if not 0 <= args.long_tools <= 3600:
        parser.error("--long-tools takes 0 to 3600 seconds")
    return command, args.protocol, sig, bool(args.drop_answers), bool(args.withhold_answers), float(args.long_tools)


if __name__ == "__main__":
    _command, _protocol, _signal, _drop, _withhold, _long = parse(sys.argv[1:])
    raise SystemExit(main(lambda: AgentProgram(_command, _protocol, _signal, _drop, _withhold, _long)))
