"""What every third-party library adapter shares: the turn binding, the call-key mapping of
each wire protocol, and the one place where "the library presents a finished call" turns
into what an application does with it (call the executor, or not, and why).

The library adapters (:mod:`callsafe.targets.openai_chat` and its siblings) certify a
library as an application uses it: the adapter builds the library's *own* chunk or event
type from each wire payload, feeds the library, and calls the harness's executor at the
moment an application typically would, which is when the library first presents a call as
finished (a ``done`` event, a stopped content block, the final message). Everything the
library presents is also kept in :attr:`WireTarget.presented`, executed or not, so a test
can show what the library claimed, not only what ran.

A library accumulates; it does not bind turns, confirm, or take operator controls. The
adapters therefore declare no capabilities: the harness reports the scenarios that need
one as "not applicable". The adapter itself binds calls to the latest
:class:`~callsafe.model.vocabulary.TurnStarted` (tenant, turn, actor), as the application
around the library would, so that executions carry a turn at all.

Call keys: ``tenant`` and ``turn`` come from the current turn; ``response``, ``item`` and
``call`` come from the wire, through one helper per protocol below. The values are the ones
*the library presents* (a library that concatenates two call ids presents, and executes
under, the concatenation), because that is what an application would use.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from callsafe import span_recording
from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import CallKey, Disconnect, Event, Executed, Limits, ToolSpec, TurnStarted

__all__ = [
    "CHAT_COMPLETED_REASONS",
    "DEFAULT_TURN",
    "EXTRA_OF",
    "Presented",
    "StreamErrorPayload",
    "TargetUnavailable",
    "WireRun",
    "WireTarget",
    "anthropic_ids",
    "install_hint",
    "library_available",
    "library_version",
    "module_installed",
    "openai_chat_ids",
    "openai_responses_ids",
    "run_wire",
]

# Chat Completions finish reasons that mean "the model ended its turn normally". A careful
# application executes a final result's tool calls only under one of these; ``length`` and
# ``content_filter`` (and a missing reason) mean the output was cut off or withheld.
CHAT_COMPLETED_REASONS: Final = frozenset({"tool_calls", "stop", "function_call"})


class TargetUnavailable(RuntimeError):
    """The library an adapter drives is not installed (or cannot be imported)."""


class StreamErrorPayload(RuntimeError):
    """A Chat Completions payload carried an ``error``: the SDK's stream raises here."""


# The extra of pyproject.toml that installs each library callsafe drives (tests/test_installed.py
# keeps this table equal to pyproject.toml's optional dependencies): what a "not installed" row
# tells the user to install.
EXTRA_OF: Final[Mapping[str, str]] = {
    "openai": "sdks",
    "anthropic": "sdks",
    "langchain-core": "sdks",
    "pydantic-ai-slim": "sdks",
    "litellm": "sdks",
    "openai-agents": "frameworks",
    "google-adk": "frameworks",
    "strands-agents": "frameworks",
    "smolagents": "frameworks-more",
    "agno": "frameworks-more",
    "langgraph": "frameworks-more",
    "langchain-openai": "frameworks-more",
    "crewai": "frameworks-openai2",
    "llama-index-core": "frameworks-openai2",
    "llama-index-llms-openai": "frameworks-openai2",
}


def install_hint(distribution: str, extra: str | None = None) -> str:
    """How to install ``distribution``: the callsafe extra that pins it (``extra`` for one the
    table does not name), else the package itself."""
    extra = EXTRA_OF.get(distribution, extra)
    return f"pip install 'callsafe[{extra}]'" if extra else f"pip install {distribution}"


def module_installed(module: str) -> bool:
    """Whether ``module`` (a dotted name: ``google.adk``) can be found, without importing it.

    ``importlib.util.find_spec`` imports the parent packages of a dotted name and raises
    ``ModuleNotFoundError`` when one is missing (``google.adk`` without ``google``); a parent
    that fails to import, or a module whose ``__spec__`` is unset, raises too. Every one of
    those means "not installed" here, never a crash of the command that asked."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def library_available(distribution: str, module: str) -> str | None:
    """``None`` when ``module`` can be imported from the installed ``distribution``, else the
    reason it cannot (a message for a skip: what is missing and the extra that installs it)."""
    if not module_installed(module):
        return f"{distribution} is not installed ({install_hint(distribution)})"
    return None


def library_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------------------
# Call-key mapping, one helper per protocol (response, item, call)
# --------------------------------------------------------------------------------------


def openai_chat_ids(response_id: str | None, tool_index: int | None, call_id: str | None) -> tuple[str, str, str]:
    """Chat Completions: response = the chunk ``id`` (``chatcmpl-...``, the same on every chunk
    of one stream); item = the tool call's ``index`` in ``delta.tool_calls`` as a decimal
    string (only choice 0 is read); call = the tool call ``id`` as the library accumulated
    it, or ``<response>#<index>`` when there is none (as ``callsafe.providers.openai_chat``
    names such a call)."""
    response = response_id or ""
    item = "" if tool_index is None else str(tool_index)
    return (response, item, call_id or f"{response}#{item}")


def openai_responses_ids(response_id: str | None, item_id: str | None, call_id: str | None) -> tuple[str, str, str]:
    """Responses: response = ``response.id`` (``resp_...``) from ``response.created``; item = the
    output item ``id`` (``fc_...``); call = the item's ``call_id`` (``call_...``)."""
    return (response_id or "", item_id or "", call_id or "")


def anthropic_ids(message_id: str | None, block_index: int | None, tool_use_id: str | None) -> tuple[str, str, str]:
    """Anthropic Messages: response = ``message.id`` from ``message_start`` (``msg_...``); item =
    the content block ``index``; call = the ``tool_use`` block ``id`` (``toolu_...``)."""
    return (message_id or "", "" if block_index is None else str(block_index), tool_use_id or "")


# --------------------------------------------------------------------------------------
# Presentation and execution
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Presented:
    """One call the library presented as finished (or parsed), and what the adapter did.

    ``arguments`` are the parsed arguments the library presented (or the adapter parsed from
    the raw string it presented); ``raw`` is that raw string when there was one. ``note`` says
    why a presented call was not executed (empty when it was).
    """

    step: int
    surface: str
    key: CallKey
    tool: str
    arguments: Any
    raw: str | None
    executed: bool
    note: str = ""


@dataclass(frozen=True)
class _Binding:
    turn: str
    actor: str
    tenant: str
    traceparent: str | None


class WireTarget:
    """Base of the library adapters: a :class:`~callsafe.contract.target.Target` that consumes
    one provider's wire payloads through :meth:`receive_wire` and the application events
    (turns, disconnects) through :meth:`receive`.

    Subclasses set ``library`` (the distribution), ``module`` (what to import), ``protocol``
    and ``SURFACES``, and implement :meth:`receive_wire`, :meth:`end_stream` and
    :meth:`_reset`.
    """

    library: ClassVar[str] = ""
    module: ClassVar[str] = ""
    protocol: str = ""
    SURFACES: ClassVar[tuple[str, ...]] = ()
    capabilities: frozenset[str] = frozenset()

    def __init__(self, surface: str | None = None) -> None:
        chosen = surface or self.SURFACES[0]
        if chosen not in self.SURFACES:
            raise ValueError(f"{type(self).__name__}: unknown surface {chosen!r}; choose one of {self.SURFACES}")
        self.surface = chosen
        self.name = f"{self.library}:{self.protocol}:{self.surface}"
        self.presented: list[Presented] = []
        self.errors: list[str] = []
        self._env: TargetEnv | None = None
        self._binding: _Binding | None = None

    # -- availability -------------------------------------------------------------------

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this adapter cannot run here (its library is missing), or ``None``."""
        return library_available(cls.library, cls.module)

    @classmethod
    def version(cls) -> str | None:
        return library_version(cls.library)

    # -- the Target contract ------------------------------------------------------------

    def start(self, env: TargetEnv) -> None:
        reason = self.unavailable()
        if reason is not None:
            raise TargetUnavailable(reason)
        self._env = env
        self._binding = None
        self.presented = []
        self.errors = []
        self._reset()

    def receive(self, event: Event) -> None:
        """Application events. A turn binds the calls that follow to its tenant, turn and
        actor. A disconnect ends the current stream the way a dropped connection ends an
        application's read loop: with an exception, so no end-of-stream result is built.
        Everything else (cancel, confirm, operator controls) is outside what a library does,
        and the adapter declares no capability for it."""
        if isinstance(event, TurnStarted):
            self._binding = _Binding(event.turn, event.actor, event.tenant, event.traceparent)
            span_recording.bind_turn(event.turn, event.tenant, event.actor)
        elif isinstance(event, Disconnect):
            self._broken()

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        """Deliver one wire payload (one SSE ``data:`` object) to the library."""
        raise NotImplementedError

    def end_stream(self) -> None:
        """The HTTP body of the current stream ended normally (after ``data: [DONE]`` for Chat
        Completions): where an application reads the library's final result."""

    def restart(self) -> None:
        """A library keeps nothing durable: a restart loses every stream in memory."""
        self._reset()

    def close(self) -> None:
        """The end of the run is the end of the last stream's body."""
        self.end_stream()

    # -- for subclasses -----------------------------------------------------------------

    def _reset(self) -> None:
        """Drop the library's in-memory state (a fresh stream state, no open streams)."""

    def _broken(self) -> None:
        """The connection of the current stream dropped: forget it without a final result."""
        self._reset()

    def _chat_error(self, payload: Mapping[str, Any]) -> None:
        """A Chat Completions payload with an ``error`` ends the read loop with an exception.

        ``openai``'s ``Stream.__stream__`` raises ``APIError`` for every event whose data has
        a truthy ``error`` (``openai/_streaming.py``), before anything else sees it; every
        Chat Completions adapter here stands for code that reads chunks through that stream
        (the ``openai`` SDK itself, ``langchain-openai``, pydantic-ai's ``OpenAIChatModel``,
        LiteLLM's OpenAI-compatible path). So the stream is abandoned, as for a dropped
        connection: no final result is built from it."""
        error = payload.get("error")
        if error:
            exc = StreamErrorPayload(f"error payload: {error!r}"[:300])
            self._failed(exc)
            self._broken()
            raise exc

    def _step(self) -> int:
        return self._env.step() if self._env is not None else -1

    def _failed(self, exc: BaseException) -> None:
        """The library raised: recorded here, and re-raised by the caller so the harness sees
        it too (an application's read loop ends with the same exception)."""
        self.errors.append(f"step {self._step()}: {type(exc).__name__}: {exc}"[:500])

    def _key(self, ids: tuple[str, str, str]) -> CallKey:
        binding = self._binding
        tenant = binding.tenant if binding else ""
        turn = binding.turn if binding else ""
        return CallKey(tenant, turn, *ids)

    def _offer(
        self,
        ids: tuple[str, str, str],
        tool: str | None,
        arguments: Any = None,
        *,
        raw: str | None = None,
        refused: str | None = None,
    ) -> None:
        """The library presents a call as finished: run it as an application would.

        An application looks the tool up by name (an unknown name cannot run), parses a raw
        argument string with ``json.loads`` when the library did not parse it, calls the tool
        with keyword arguments (so the arguments must be an object), and needs a current turn
        for the actor. Anything else is recorded with the reason and not executed.
        ``refused`` is the surface's own policy declining a call the library did present (a
        finish reason that is not a normal end): the call is recorded, with that reason, and
        not executed, so that ``inspect`` shows what the library handed out."""
        env = self._env
        key = self._key(ids)
        name = tool or ""
        note = refused or ""
        if arguments is None and raw is not None:
            try:
                arguments = json.loads(raw)
            except ValueError as exc:
                note = f"arguments do not parse as JSON ({exc})"
        if not note and not isinstance(arguments, dict):
            note = f"arguments are not a JSON object: {arguments!r}"[:200]
        if not note and (env is None or name not in env.tools):
            note = f"no tool named {name!r} in the catalog"
        if not note and self._binding is None:
            note = "no current turn to bind the call to"
        executed = not note
        self.presented.append(Presented(self._step(), self.surface, key, name, arguments, raw, executed, note))
        if executed and env is not None and self._binding is not None:
            env.executor(key, self._binding.actor, name, arguments, self._binding.traceparent)

    def _executed_by_library(self, ids: tuple[str, str, str], tool: str, arguments: Any) -> None:
        """The library itself ran a tool (an agent framework): record and forward it."""
        env = self._env
        key = self._key(ids)
        self.presented.append(Presented(self._step(), self.surface, key, tool, arguments, None, True))
        if env is not None:
            actor = self._binding.actor if self._binding else ""
            env.executor(key, actor, tool, arguments, self._binding.traceparent if self._binding else None)


# --------------------------------------------------------------------------------------
# A minimal wire driver (until the runner delivers provider traces)
# --------------------------------------------------------------------------------------


DEFAULT_TURN: Final = TurnStarted("t1", "u1", "acme")


@dataclass
class WireRun:
    """What one run of wire payloads did: the executor spy's records, what the library
    presented, and the exceptions it raised (by step)."""

    executed: list[Executed] = field(default_factory=list)
    presented: list[Presented] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_wire(
    target: WireTarget,
    items: Iterable[Mapping[str, Any] | Event],
    tools: Mapping[str, ToolSpec],
    *,
    turn: TurnStarted | None = DEFAULT_TURN,
) -> WireRun:
    """Deliver ``turn`` (step 0) and then ``items`` in order: abstract application events go
    to :meth:`WireTarget.receive`, wire payloads to :meth:`WireTarget.receive_wire`. The run
    ends with :meth:`WireTarget.close` (the end of the last stream's body). Exceptions the
    library raises are recorded, never hidden, as the runner does."""
    out = WireRun()
    step = -1

    def executor(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
        out.executed.append(Executed(step, key, actor, tool, json.loads(json.dumps(arguments)), traceparent))

    def validator(key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
        return None

    env = TargetEnv(
        executor=executor,
        business_validator=validator,
        tools=dict(tools),
        limits=Limits(),
        observe=lambda obs: None,
        step=lambda: step,
        clock=lambda: float(max(step, 0)),
    )
    target.start(env)
    sequence: list[Mapping[str, Any] | Event] = ([turn] if turn is not None else []) + list(items)
    for index, item in enumerate(sequence):
        step = index
        try:
            if isinstance(item, Event):
                target.receive(item)
            else:
                target.receive_wire(item)
        except Exception as exc:
            out.errors.append(f"step {index}: {type(exc).__name__}: {exc}"[:500])
    step = len(sequence) - 1
    try:
        target.close()
    except Exception as exc:
        out.errors.append(f"close: {type(exc).__name__}: {exc}"[:500])
    out.presented = list(target.presented)
    return out
