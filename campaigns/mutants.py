"""The mutant zoo: the reference implementation with one real failure class put back in.

Why: a certifier is only as good as the bugs it catches. Each mutant below wraps the
reference implementation and changes one thing at its boundary, the way a real client
library or executor gets it wrong (the public bug reports the catalog cites): it rewrites
the events the implementation sees, or the services it is handed (executor, validator,
catalog). ``callsafe selftest`` certifies every one and reports which invariant caught it
and how small the minimal counterexample is (:mod:`callsafe.campaigns.zoo` is the
registry, with the invariant each is expected to trip).

The wrappers never touch the reference implementation's internals, so they stay valid
when its internals change; each is a few lines that read as the bug they reproduce.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from callsafe.contract.target import TargetEnv
from callsafe.model.vocabulary import (
    CallAddressed,
    CallKey,
    CallOpened,
    CallTerminal,
    CancelTurn,
    Event,
    Fragment,
    LogLine,
    ToolSpec,
    TurnStarted,
)
from callsafe.targets.reference import ReferenceTarget

__all__ = ["FACTORIES"]

Ident = tuple[str, str, str, str]


def _ident(event: CallAddressed) -> Ident:
    return (event.turn, event.response, event.item, event.call)


class _Mutant:
    """The reference implementation behind a rewriting boundary."""

    name = "mutant"
    protocol = "abstract"

    def __init__(self) -> None:
        self.inner = ReferenceTarget(store="memory")
        self.capabilities = self.inner.capabilities

    def start(self, env: TargetEnv) -> None:
        self.env = env
        self.inner.start(self.wrap(env))

    def wrap(self, env: TargetEnv) -> TargetEnv:
        return env

    def rewrite(self, event: Event) -> Iterable[Event]:
        yield event

    def receive(self, event: Event) -> None:
        for e in self.rewrite(event):
            self.inner.receive(e)

    def restart(self) -> None:
        self.inner.restart()

    def close(self) -> None:
        self.inner.close()


class DispatchOnParse(_Mutant):
    """Runs a call as soon as its buffer parses, before its own terminal event."""

    name = "dispatch-on-parse"

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[Ident, str] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        yield event
        if isinstance(event, Fragment):
            ident = _ident(event)
            self.text[ident] = self.text.get(ident, "") + event.text
            try:
                parsed = json.loads(self.text[ident])
            except ValueError:
                return
            if isinstance(parsed, dict):
                yield CallTerminal(event.turn, event.response, event.item, event.call, f"early-{'/'.join(ident)}")


class MergeByIndex(_Mutant):
    """Keys buffers by the protocol's index (item) alone: parallel calls sharing an index
    are glued into one, in arrival order."""

    name = "merge-by-index"

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: dict[tuple[str, str, str], int] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, CallAddressed):
            merged = dataclasses.replace(event, call=event.item)
            if isinstance(merged, Fragment):
                slot = (event.turn, event.response, event.item)
                position = self.arrivals.get(slot, 0)
                self.arrivals[slot] = position + 1
                merged = dataclasses.replace(merged, position=position)
            yield merged
        else:
            yield event


class ConcatenateNames(_Mutant):
    """Treats a re-sent tool name as a fragment of the name: ``pay`` + ``pay``."""

    name = "concatenate-names"

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[Ident, str] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, CallOpened):
            ident = _ident(event)
            self.names[ident] = self.names.get(ident, "") + event.tool
            yield dataclasses.replace(event, tool=self.names[ident])
        else:
            yield event


class NoDedupe(_Mutant):
    """Appends every delta in arrival order: a repeated delta turns 100 into 1000."""

    name = "no-dedupe"

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: dict[Ident, int] = {}

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, Fragment):
            ident = _ident(event)
            position = self.arrivals.get(ident, 0)
            self.arrivals[ident] = position + 1
            yield dataclasses.replace(event, position=position)
        else:
            yield event


class AcceptLateFragments(_Mutant):
    """Treats data after a call's terminal event as harmless and drops it, so a call that
    was not finished still runs."""

    name = "accept-late-fragments"

    def __init__(self) -> None:
        super().__init__()
        self.ended: set[Ident] = set()

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, CallTerminal):
            self.ended.add(_ident(event))
        if isinstance(event, Fragment) and _ident(event) in self.ended:
            return
        yield event


class NoTurnCheck(_Mutant):
    """Never lets a new turn supersede the old one: an old call runs in a newer turn."""

    name = "no-turn-check"

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, TurnStarted):
            yield dataclasses.replace(event, conversation=f"{event.conversation}/{event.turn}")
        else:
            yield event


class ReviveAfterRestart(_Mutant):
    """Keeps nothing across a restart: terminal ids and decisions are forgotten, so a
    replayed stream runs its calls again and a cancelled call comes back."""

    name = "revive-after-restart"

    def restart(self) -> None:
        self.inner.close()
        self.inner = ReferenceTarget(store="memory")
        self.inner.start(self.wrap(self.env))


class ValidateTwice(_Mutant):
    """Calls the business validator twice per call (a retry wrapper around it)."""

    name = "validate-twice"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        validator = env.business_validator

        def twice(key: CallKey, tool: str, arguments: Mapping[str, Any]) -> str | None:
            validator(key, tool, arguments)
            return validator(key, tool, arguments)

        return dataclasses.replace(env, business_validator=twice)


class LeakArguments(_Mutant):
    """Logs the arguments of every execution."""

    name = "leak-arguments"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        executor = env.executor

        def logged(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            env.observe(LogLine(env.step(), f"executing {tool} with {json.dumps(arguments)}"))
            executor(key, actor, tool, arguments, traceparent)

        return dataclasses.replace(env, executor=logged)


class _NoConfirmation(Mapping[str, ToolSpec]):
    """The live catalog with every tool's confirmation flag dropped."""

    def __init__(self, tools: Mapping[str, ToolSpec]) -> None:
        self.tools = tools

    def __getitem__(self, name: str) -> ToolSpec:
        return dataclasses.replace(self.tools[name], confirm=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)


class BypassConfirmation(_Mutant):
    """Runs tools that need confirmation without asking."""

    name = "bypass-confirmation"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        return dataclasses.replace(env, tools=_NoConfirmation(env.tools))


class ExecuteOnLength(_Mutant):
    """Ignores the stop reason: a call cut off at max_tokens whose JSON parses runs."""

    name = "execute-on-length"

    def rewrite(self, event: Event) -> Iterator[Event]:
        if isinstance(event, CallTerminal) and event.reason != "completed":
            yield dataclasses.replace(event, reason="completed")
        else:
            yield event


class IgnoreCancel(_Mutant):
    """Never hears the user's stop."""

    name = "ignore-cancel"

    def rewrite(self, event: Event) -> Iterator[Event]:
        if not isinstance(event, CancelTurn):
            yield event


class NeverExecute(_Mutant):
    """Safe by doing nothing: the executor is never called."""

    name = "never-execute"

    def wrap(self, env: TargetEnv) -> TargetEnv:
        def nothing(key: CallKey, actor: str, tool: str, arguments: Any, traceparent: str | None = None) -> None:
            return None

        return dataclasses.replace(env, executor=nothing)


FACTORIES: dict[str, type[_Mutant]] = {
    cls.name: cls
    for cls in (
        DispatchOnParse,
        MergeByIndex,
        ConcatenateNames,
        NoDedupe,
        AcceptLateFragments,
        NoTurnCheck,
        ReviveAfterRestart,
        ValidateTwice,
        LeakArguments,
        BypassConfirmation,
        ExecuteOnLength,
        IgnoreCancel,
        NeverExecute,
    )
}


def _factory(cls: type[_Mutant]) -> Any:
    def build() -> _Mutant:
        return cls()

    build.__name__ = cls.__name__
    return build


dispatch_on_parse = _factory(DispatchOnParse)
merge_by_index = _factory(MergeByIndex)
concatenate_names = _factory(ConcatenateNames)
no_dedupe = _factory(NoDedupe)
accept_late_fragments = _factory(AcceptLateFragments)
no_turn_check = _factory(NoTurnCheck)
revive_after_restart = _factory(ReviveAfterRestart)
validate_twice = _factory(ValidateTwice)
leak_arguments = _factory(LeakArguments)
bypass_confirmation = _factory(BypassConfirmation)
execute_on_length = _factory(ExecuteOnLength)
ignore_cancel = _factory(IgnoreCancel)
never_execute = _factory(NeverExecute)
