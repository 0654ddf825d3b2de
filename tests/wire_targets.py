"""Provider-protocol targets for testing the runner's wire path (``wire_targets:<factory>``).

* :class:`ParsedReference`: the reference implementation behind callsafe's own wire parser,
  a correct implementation that reads a provider's payloads. Whatever it is charged with
  on a rendered trace is a flaw of the wire path (rendering, the payload-to-step mapping,
  the liveness rule), not of an implementation: it must pass everything that applies.
* :class:`Recorder`: writes down what it was given and when (steps included), and runs a
  call at a chosen wire event, for testing the delivery itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callsafe.contract.target import CAPABILITIES, TargetEnv
from callsafe.model.vocabulary import CallKey, Disconnect, Event, TurnStarted
from callsafe.providers import registry
from callsafe.providers.base import Parser, ProviderError
from callsafe.providers.registry import unnamed_response
from callsafe.targets.reference import ReferenceTarget


class ParsedReference:
    """Payloads through ``callsafe.providers``' parser, the events it reads into the
    reference implementation (memory store)."""

    def __init__(self, protocol: str, capabilities: frozenset[str] = CAPABILITIES - {"store_faults"}) -> None:
        self.name = f"parsed-reference:{protocol}"
        self.protocol = protocol
        self.capabilities = capabilities
        self.inner = ReferenceTarget(store="memory")
        self.parser: Parser | None = None
        self.turn = ""
        self.streams: dict[str, int] = {}  # turn -> streams read for it

    def start(self, env: TargetEnv) -> None:
        self.streams = {}
        self.inner.start(env)

    def receive(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event.turn
        if isinstance(event, Disconnect) and self.parser is not None:
            parser, self.parser = self.parser, None
            for parsed in parser.finish(clean=False):
                self.inner.receive(parsed)
            return
        self.inner.receive(event)

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        if self.parser is None:
            # where the wire names no response (Bedrock), the turn's streams are numbered, as the
            # harness names a trace's responses; elsewhere the wire's own id wins over "r1"
            named = unnamed_response(self.protocol)
            nth = self.streams.get(self.turn, 0)
            self.streams[self.turn] = nth + 1
            rid = named(self.turn, nth) if named is not None else "r1"
            self.parser = registry.get(self.protocol).new_parser(self.turn, rid)
        try:
            events = self.parser.feed(dict(payload))
        except ProviderError:
            events = []
        for parsed in events:
            self.inner.receive(parsed)

    def end_stream(self) -> None:
        parser, self.parser = self.parser, None
        if parser is not None:
            for parsed in parser.finish(clean=True):
                self.inner.receive(parsed)

    def restart(self) -> None:
        self.parser = None
        self.inner.restart()

    def close(self) -> None:
        self.inner.close()


def parsed_chat() -> ParsedReference:
    return ParsedReference("openai-chat")


def parsed_responses() -> ParsedReference:
    return ParsedReference("openai-responses")


def parsed_anthropic() -> ParsedReference:
    return ParsedReference("anthropic-messages")


class Recorder:
    """Records every delivery as ``(kind, step, what)``; executes call ``call_a`` (turn t1,
    as the wire names it) when it sees a payload whose ``type`` is ``run_at``."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self, protocol: str = "openai-responses", run_at: str | None = None) -> None:
        self.name = f"recorder:{protocol}"
        self.protocol = protocol
        self.run_at = run_at
        self.log: list[tuple[str, int, Any]] = []
        self.env: TargetEnv | None = None

    def start(self, env: TargetEnv) -> None:
        self.env = env

    def _step(self) -> int:
        return self.env.step() if self.env is not None else -2

    def receive(self, event: Event) -> None:
        self.log.append(("event", self._step(), event.kind))

    def receive_wire(self, payload: Mapping[str, Any]) -> None:
        self.log.append(("wire", self._step(), payload.get("type")))
        if self.run_at is not None and payload.get("type") == self.run_at and self.env is not None:
            self.env.executor(CallKey("acme", "t1", "r1", "0", "call_a"), "u1", "pay", {"amount": 100})

    def end_stream(self) -> None:
        self.log.append(("end_stream", self._step(), None))

    def restart(self) -> None:
        self.log.append(("restart", self._step(), None))

    def close(self) -> None:
        self.log.append(("close", self._step(), None))
