"""From a name on the command line to a target factory.

Why a factory rather than a target: the harness starts a fresh target for every trace (a
trace must not see what an earlier one left behind), and ``--workers N`` builds targets
inside each worker process from the same name. So a target is named by something that
can be imported anywhere:

* ``reference`` (the SQLite store over an in-memory database per run: ``reference:sqlite-ram``),
  ``reference:sqlite`` (the SQLite store in a file per run, with its fsyncs), ``reference:memory``,
  ``reference:postgres``: :class:`callsafe.targets.reference.ReferenceTarget`, imported when a
  run starts, never at import time;
* ``library:NAME``: a third-party client library behind its adapter, ``NAME`` from the
  catalog :data:`callsafe.targets.libraries.LIBRARY_TARGETS` (``library:openai:openai-chat:final``);
  these read a provider's wire (:mod:`callsafe.certify.wire`); a name of
  :func:`callsafe.targets.program_catalog.program_rows` (``library:node/ai:openai-chat:streamText``,
  a TypeScript library or a Python agent framework) is a program run as ``exec:`` over HTTP;
* ``exec:COMMAND``: any program that speaks the callsafe target protocol on its stdin and
  stdout (:mod:`callsafe.targets.exec_target`), e.g. ``exec:node naive.js``; the command is
  split as a shell would split it, and run without a shell;
* ``agent:COMMAND`` (``agent:--protocol anthropic-messages --cancel-signal INT -- COMMAND``):
  an unmodified agent program certified through its model endpoint and its MCP tool server
  alone (:mod:`callsafe.adapters.mcp_agent`, run as ``exec:``);
* ``guard:STORE:PROTOCOL`` (``guard:memory:openai-chat``, ``guard:sqlite:anthropic-messages``,
  ``guard:postgres:openai-responses``; ``guard`` alone is ``guard:sqlite:openai-chat``):
  :class:`callsafe.targets.guard.GuardTarget`, the ``callsafe.guard`` library reading that
  provider's wire as an application's agent loop does;
* ``module:factory``: any callable in an importable module that returns a fresh
  :class:`~callsafe.contract.target.Target` each time it is called (a class works). The
  current directory is importable, as with ``python -m``.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from callsafe.contract.target import CAPABILITIES, ProtocolTarget, Target
from callsafe.model.record_words import RecordWordsError, record_words_of

__all__ = [
    "REFERENCE_STORES",
    "TARGET_FORMS",
    "TargetFactory",
    "TargetInfo",
    "TargetSpecError",
    "describe",
    "replay_command",
    "resolve_target",
    "run_description",
    "spec_of",
]

TargetFactory = Callable[[], Target]
REFERENCE_STORES: Final = ("sqlite", "sqlite-ram", "memory", "postgres")
# What ``reference`` means: SQLite in memory, per trace (a file per trace waits on the disk;
# see callsafe.targets.reference).
DEFAULT_REFERENCE_STORE: Final = "sqlite-ram"


# Every form a target name takes, one per line: what `callsafe certify --help` and
# `callsafe replay --help` list (the module docstring says what each one builds).
TARGET_FORMS: Final = (
    ("reference", "the reference implementation over SQLite in memory, a fresh database per trace"),
    ("reference:STORE", f"the reference implementation over STORE, one of {', '.join(REFERENCE_STORES)}"),
    ("module:factory", "a callable in an importable module that returns a fresh target (a class works)"),
    ("exec:COMMAND", "a program in any language speaking the target protocol on stdin/stdout"),
    ("guard:STORE:PROTOCOL", "callsafe.guard reading a provider's wire (guard alone: guard:sqlite:openai-chat)"),
    ("library:NAME", "a client library or agent framework behind its adapter (an unknown NAME lists the known ones)"),
)


def replay_command(trace: object, spec: str) -> str:
    """The command that replays the trace file ``trace`` against the target ``spec``, quoted
    for a POSIX shell (an ``exec:`` target's command has spaces): what every report and
    console line suggests."""
    return f"callsafe replay {shlex.quote(str(trace))} {shlex.quote(spec)}"


class TargetSpecError(ValueError):
    """A target name that does not resolve to a target factory; the message says why."""


@dataclass(frozen=True)
class TargetInfo:
    """What a target says about itself, and the name it was resolved from. ``setup`` is
    the target's own ``setup`` attribute when it has one: what it runs over, in words (the
    reference target's store setup), so that a report says which setup it certified."""

    spec: str
    name: str
    protocol: str
    capabilities: frozenset[str]
    run: Mapping[str, Any] = field(default_factory=dict)  # how every trace is run: run_description()
    setup: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "spec": self.spec,
            "name": self.name,
            "protocol": self.protocol,
            "capabilities": sorted(self.capabilities),
            "run": dict(self.run) or run_description(None, self.protocol),
        }
        if self.setup is not None:
            doc["setup"] = self.setup
        return doc


def _reference(store: str) -> TargetFactory:
    def factory() -> Target:
        try:
            module = importlib.import_module("callsafe.targets.reference")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("callsafe.targets"):
                raise TargetSpecError(
                    "the reference implementation (callsafe.targets.reference) is not available in this installation"
                ) from None
            raise
        target: Target = module.ReferenceTarget(store=store)
        return target

    factory.__qualname__ = f"reference:{store}"
    return factory


def _library(name: str) -> TargetFactory:
    from callsafe.targets.libraries import LIBRARY_TARGETS, unavailable
    from callsafe.targets.program_catalog import program_rows

    programs = program_rows() if name not in LIBRARY_TARGETS else {}
    if name not in LIBRARY_TARGETS and name not in programs:
        known = [*LIBRARY_TARGETS, *programs]
        raise TargetSpecError(f"unknown library target {name!r}; known: {', '.join(known)}")
    # a library that is not installed is said once, with what to install, rather than as a
    # target error on every trace
    reason = unavailable(name)
    if reason is not None:
        raise TargetSpecError(f"library:{name} cannot run here: {reason}")
    if name in programs:  # a library run as a program: its exec target
        return _exec(programs[name].command())
    make = LIBRARY_TARGETS[name]

    def factory() -> Target:
        target: Target = make()
        return target

    factory.__qualname__ = f"library:{name}"
    return factory


def _exec(command: str) -> TargetFactory:
    if not command:
        raise TargetSpecError("exec: needs a command, as in 'exec:node my-target.js'")
    from callsafe.targets.exec_target import exec_factory

    factory: TargetFactory = exec_factory(command)

    return factory


def _agent(command: str) -> TargetFactory:
    if not command:
        raise TargetSpecError("agent: needs a command, as in 'agent:python my_agent.py'")
    words = shlex.split(command)
    if words[0] != "--" and not words[0].startswith("--"):
        words = ["--", *words]
    return _exec(shlex.join([sys.executable, "-m", "callsafe.adapters.mcp_agent", *words]))


def _guard(spec: str) -> TargetFactory:
    from callsafe.providers import registry
    from callsafe.targets.guard import GUARD_STORES, GuardTarget

    parts = spec.split(":")
    store = parts[1] if len(parts) > 1 else "sqlite"
    protocol = parts[2] if len(parts) > 2 else "openai-chat"
    if len(parts) > 3 or store not in GUARD_STORES or protocol not in registry.names():
        raise TargetSpecError(
            f"a guard target is guard:STORE:PROTOCOL with STORE one of {', '.join(GUARD_STORES)} and PROTOCOL one "
            f"of {', '.join(registry.names())}; got {spec!r}"
        )

    def factory() -> Target:
        return GuardTarget(store, protocol)

    factory.__qualname__ = f"guard:{store}:{protocol}"
    return factory


def resolve_target(spec: str) -> TargetFactory:
    """The factory for a target name (see the module docstring for the forms)."""
    if spec == "reference":
        return _reference(DEFAULT_REFERENCE_STORE)
    if spec == "guard" or spec.startswith("guard:"):
        return _guard(spec)
    if spec.startswith("library:"):
        return _library(spec.partition(":")[2])
    if spec.startswith("exec:"):
        return _exec(spec.partition(":")[2].strip())
    if spec.startswith("agent:"):
        return _agent(spec.partition(":")[2].strip())
    if spec.startswith("reference:"):
        store = spec.partition(":")[2]
        if store not in REFERENCE_STORES:
            raise TargetSpecError(f"unknown reference store {store!r}; known: {', '.join(REFERENCE_STORES)}")
        return _reference(store)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise TargetSpecError(f"a target is one of {', '.join(form for form, _ in TARGET_FORMS)}; got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetSpecError(f"cannot import {module_name!r}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetSpecError(f"module {module_name!r} has no {attr!r}") from None
    if not callable(obj):
        raise TargetSpecError(f"{spec!r} is not callable: name a class or a function that returns a fresh target")
    factory: Callable[[], Any] = obj

    def build() -> Target:
        target = factory()
        check_target(target, spec)
        return target  # type: ignore[no-any-return]

    build.__qualname__ = spec
    return build


def check_target(target: object, spec: str = "target") -> None:
    """Refuse what does not meet the Target contract, with a message that says how."""
    if not isinstance(target, Target):
        missing = [
            m
            for m in ("name", "protocol", "capabilities", "start", "receive", "restart", "close")
            if not hasattr(target, m)
        ]
        raise TargetSpecError(f"{spec} built {type(target).__name__}, which lacks {', '.join(missing)} (see Target)")
    unknown = set(target.capabilities) - CAPABILITIES
    if unknown:
        raise TargetSpecError(f"{spec} declares unknown capabilities {sorted(unknown)}; known: {sorted(CAPABILITIES)}")
    try:
        record_words_of(target)
    except RecordWordsError as exc:
        raise TargetSpecError(f"{spec} declares record_words callsafe cannot read: {exc}") from None
    if target.protocol != "abstract":
        from callsafe.providers import registry

        if target.protocol not in registry.names():
            raise TargetSpecError(
                f"{spec} reads protocol {target.protocol!r}; known: 'abstract', {', '.join(registry.names())}"
            )
        if not isinstance(target, ProtocolTarget):
            raise TargetSpecError(
                f"{spec} reads {target.protocol!r} but lacks receive_wire(payload) and end_stream() "
                "(see ProtocolTarget)"
            )


def describe(factory: TargetFactory, spec: str | None = None) -> TargetInfo:
    """Build one target to read its name, protocol and capabilities."""
    target = factory()
    check_target(target, spec or "target")
    setup = getattr(target, "setup", None)
    return TargetInfo(
        spec or spec_of(factory),
        target.name,
        target.protocol,
        frozenset(target.capabilities),
        run_description(target, target.protocol),
        setup if isinstance(setup, str) else None,
    )


def run_description(target: object, protocol: str) -> dict[str, Any]:
    """How a target's traces are run, as reports say it: ``mode`` is ``in process``,
    ``in process, wire mode`` (a provider's payloads rendered for it), ``exec`` or ``exec,
    wire mode``; an exec target adds its command, the protocol it speaks and its version,
    and how it reads a wire (``stdio`` or ``http``, through the loopback provider)."""
    own = getattr(target, "run_description", None)
    if callable(own):
        described: dict[str, Any] = dict(own())
        return described
    return {"mode": "in process" if protocol == "abstract" else "in process, wire mode"}


def spec_of(factory: TargetFactory) -> str:
    """A name for a factory: its spec when it came from :func:`resolve_target`, else
    ``module:qualname`` (importable when it is a module-level callable)."""
    qualname = getattr(factory, "__qualname__", "") or getattr(factory, "__name__", "target")
    if ":" in qualname:
        return str(qualname)
    return f"{getattr(factory, '__module__', '?')}:{qualname}"
