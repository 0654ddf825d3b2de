"""The Python agent-framework rows of the conformance matrix: frameworks that run the tools
themselves, run as programs over the target protocol (:mod:`callsafe.targets.programs`),
their HTTP clients reading the loopback provider. The programs are
``callsafe.adapters.frameworks.*``; the frameworks are pinned exactly in three extras.

Why several extras and two interpreters: ``crewai`` 1.15.30 and ``llama-index-llms-openai``
0.8.3 require ``openai<3``, while the project's ``sdks`` extra (and ``openai-agents``
0.24.0) require ``openai>=3``; no single environment holds both. ``callsafe[frameworks]``
(openai-agents, google-adk, strands-agents) and ``callsafe[frameworks-more]`` (smolagents,
agno, langgraph with langchain-openai; issue 34) install beside ``.[dev,sdks]``; the two
``openai<3`` frameworks are ``callsafe[frameworks-openai2]``, installed in a virtual
environment of their own (``make venv-openai2``: ``.venv-openai2`` at the repository root,
or the interpreter named by ``CALLSAFE_OPENAI2_PYTHON``). Their rows run that interpreter
(:class:`OtherVenvRow`); each row is skipped with the reason when its framework is missing.

Options: the rows run at the matrix's options, those of the in-process rows
(``FRAMEWORK_OPTIONS`` overrides nothing). They once ran 10 walks at depth 2 because HTTP
costs time, but what a framework row runs is mostly the ``wire`` and ``wire-adversities``
generators, which no depth or walk count changes: 277 traces at the defaults against 236 at
the reduced options for a row that declares ``cancellation`` alone (``bench/program_rows.py``
counts them; ``docs/speed.md`` has the times).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from callsafe.targets._common import install_hint
from callsafe.targets.programs import ProgramRow

__all__ = ["FRAMEWORK_OPTIONS", "FRAMEWORK_ROWS", "OPENAI2_KEY", "OPENAI2_VENV", "OtherVenvRow", "openai2_python"]

ROOT: Final = Path(__file__).resolve().parents[1]
OPENAI2_VENV: Final = ROOT / ".venv-openai2"
FRAMEWORK_OPTIONS: Final[dict[str, int]] = {}


def openai2_python() -> Path:
    """The interpreter of the ``openai<3`` frameworks' environment."""
    named = os.environ.get("CALLSAFE_OPENAI2_PYTHON")
    return Path(named) if named else OPENAI2_VENV / "bin" / "python"


# The key prefix of a version installed in the openai<3 environment, in the matrix's
# ``versions`` (its openai is not the main environment's).
OPENAI2_KEY: Final = ".venv-openai2"


@dataclass(frozen=True)
class _Probe:
    missing: str | None  # what is not installed there, or None
    version: str | None  # the library's version there
    dependencies: dict[str, str]  # distribution -> version there, of those installed


@functools.cache
def _probe(python: str, needs: tuple[str, ...], library: str, dependencies: tuple[str, ...]) -> _Probe:
    """What is missing, and the installed versions of ``library`` and ``dependencies``, in
    another interpreter."""
    code = (
        "import importlib.util as u, importlib.metadata as m, json\n"
        "def found(n):\n"  # a dotted name whose parent package is missing raises: not installed
        "    try:\n"
        "        return u.find_spec(n) is not None\n"
        "    except (ImportError, ValueError, AttributeError):\n"
        "        return False\n"
        f"missing = [n for n in {list(needs)!r} if not found(n)]\n"
        "def version(d):\n"
        "    try:\n"
        "        return m.version(d)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        "print(','.join(missing))\n"
        f"print(version({library!r}) if not missing else '')\n"
        f"print(json.dumps({{d: version(d) for d in {list(dependencies)!r}}}))\n"
    )
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return _Probe(f"{python} cannot run ({exc})", None, {})
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 3:
        return _Probe(f"{python} failed: {done.stderr.strip()[-200:]}", None, {})
    try:
        found = json.loads(lines[2])
    except ValueError:
        found = {}
    versions = {d: v for d, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}
    return _Probe(lines[0].strip() or None, lines[1].strip() or None, versions)


@dataclass(frozen=True)
class OtherVenvRow(ProgramRow):
    """A framework row whose program runs in the ``openai<3`` environment's interpreter
    (``{python}`` is that interpreter; its version and what is missing are asked there)."""

    def resolved_argv(self) -> list[str]:
        return [a.replace("{python}", str(openai2_python())) for a in self.argv]

    def _state(self) -> _Probe:
        python = openai2_python()
        if not python.exists():
            return _Probe(f"{python} does not exist (make venv-openai2)", None, {})
        return _probe(str(python), self.needs, self.library, self.dependencies)

    def version(self) -> str | None:
        return self._state().version

    def dependency_versions(self) -> dict[str, str]:
        """The :attr:`dependencies` as installed in that environment, as
        ``.venv-openai2:DISTRIBUTION`` (its openai is not the main environment's)."""
        return {f"{OPENAI2_KEY}:{name}": version for name, version in self._state().dependencies.items()}

    def unavailable(self) -> str | None:
        python = openai2_python()
        how = f"make venv-openai2: {install_hint(self.library, 'frameworks-openai2')} in that environment"
        if not python.exists():
            return f"{self.library} is not installed: {python} does not exist ({how})"
        missing = self._state().missing
        if missing is None:
            return None
        return f"{missing} not installed in {python} ({how})"


def _row(
    module: str,
    library: str,
    protocol: str,
    surface: str,
    needs: tuple[str, ...],
    dependencies: tuple[str, ...],
    cls: type[ProgramRow] = ProgramRow,
    options: dict[str, int] = FRAMEWORK_OPTIONS,
) -> ProgramRow:
    return cls(
        name=f"{library}:{protocol}:{surface}",
        library=library,
        ecosystem="python",
        protocol=protocol,
        surface=surface,
        argv=("{python}", "-m", f"callsafe.adapters.frameworks.{module}"),
        needs=needs,
        options=options,
        dependencies=dependencies,
    )


# Each row's dependencies: the SDK that reads the stream under the framework, and its HTTP client.
FRAMEWORK_ROWS: Final[tuple[ProgramRow, ...]] = (
    _row("openai_agents", "openai-agents", "openai-chat", "agent", ("agents",), ("openai", "httpx")),
    _row("crewai_agent", "crewai", "openai-chat", "agent", ("crewai", "openai"), ("openai", "httpx"), OtherVenvRow),
    _row("google_adk", "google-adk", "gemini", "agent", ("google.adk", "google.genai"), ("google-genai", "httpx")),
    _row(
        "llama_index_agent",
        "llama-index-core",
        "openai-chat",
        "agent",
        ("llama_index.core", "llama_index.llms.openai"),
        ("llama-index-llms-openai", "openai", "httpx"),
        OtherVenvRow,
    ),
    _row("strands_agent", "strands-agents", "openai-chat", "agent", ("strands", "openai"), ("openai", "httpx")),
    _row("smolagents_agent", "smolagents", "openai-chat", "agent", ("smolagents", "openai"), ("openai", "httpx")),
    _row(
        "langgraph_agent",
        "langgraph",
        "openai-chat",
        "agent",
        ("langgraph.prebuilt", "langchain_openai"),
        ("langchain-openai", "langchain-core", "openai", "httpx"),
    ),
    _row("agno_agent", "agno", "openai-chat", "agent", ("agno", "openai"), ("openai", "httpx")),
)
