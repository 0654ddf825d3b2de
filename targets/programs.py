"""Library rows that run as programs: a TypeScript library under Node.js, or a Python agent
framework, certified through the callsafe target protocol (``exec:``) with its real SDK
reading real SSE from the loopback provider.

Why programs and not in-process adapters: a framework that runs tools itself owns its event
loop, its HTTP client and its retries, and a TypeScript library only runs under Node; the
faithful way to judge both is to let them do what they do in production (read an HTTP stream
and call the tools they were given) and to watch what reaches the tools. The target protocol
(:mod:`callsafe.targets.exec_target`) already turns a program's tool calls into calls of the
harness's executor, and its HTTP wire mode serves each trace from the loopback provider.

A :class:`ProgramRow` names one such row of the conformance matrix. Its catalog name is used
as ``library:NAME`` everywhere a library name is (``callsafe certify``, ``replay``, the
matrix, the findings), so a row is named the same on every machine; the command is resolved
at run time (``{python}``: this interpreter; ``{node_dir}``: ``adapters/node`` of this
checkout, where ``npm ci && npm run build`` installs the pinned packages and compiles the
programs). The rows themselves are listed by ecosystem in :mod:`callsafe.targets.node_rows`
and :mod:`callsafe.targets.framework_rows`.
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from callsafe.targets._common import install_hint, library_version, module_installed

__all__ = ["ECOSYSTEMS", "NODE_DIR", "ProgramRow", "node_version"]

ECOSYSTEMS: Final = ("python", "node")
NODE_DIR: Final = Path(__file__).resolve().parents[1] / "adapters" / "node"


@dataclass(frozen=True)
class ProgramRow:
    """One matrix row run as a program over the target protocol.

    ``needs`` are what must be installed for the row to run: import names (python) or npm
    package names under ``adapters/node/node_modules`` (node). ``options`` are overrides of
    the matrix's :class:`~callsafe.certify.harness.Options` for this row (a program reading
    HTTP is slower than an in-process adapter; the overrides are fixed, so the row stays a
    function of the seed, and the matrix records them in the row)."""

    name: str  # catalog name: library:NAME
    library: str  # the package as its registry spells it (PyPI distribution, npm package)
    ecosystem: str  # "python" | "node"
    protocol: str  # the provider protocol its SDK reads
    surface: str  # what is judged (the API the program uses)
    argv: tuple[str, ...]  # {python} and {node_dir} are resolved at run time
    needs: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # python: distributions the library drives, judged with it (its HTTP client, the LLM
    # SDK under a framework): the matrix records their versions beside the library's
    dependencies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ecosystem not in ECOSYSTEMS:
            raise ValueError(f"ecosystem is one of {', '.join(ECOSYSTEMS)}, got {self.ecosystem!r}")
        if not self.argv:
            raise ValueError(f"{self.name}: a program row needs a command")

    def resolved_argv(self) -> list[str]:
        return [a.replace("{python}", sys.executable).replace("{node_dir}", str(NODE_DIR)) for a in self.argv]

    def command(self) -> str:
        """The ``exec:`` command line (split again by the exec target as a shell would)."""
        return shlex.join(self.resolved_argv())

    def version(self) -> str | None:
        """The installed version of ``library``: its distribution's metadata, or the
        ``package.json`` npm installed."""
        if self.ecosystem == "python":
            return library_version(self.library)
        return _npm_version(self.library)

    def dependency_versions(self) -> dict[str, str]:
        """The installed versions of what the row also needs, by the key the matrix records
        them under: the npm packages (a provider package beside ``ai``, ``@langchain/openai``
        beside ``@langchain/core``) as ``npm:NAME``, the python :attr:`dependencies` by
        distribution. They are judged with the library, so the matrix records them too."""
        if self.ecosystem == "node":
            versions = {f"npm:{name}": _npm_version(name) for name in self.needs}
        else:
            versions = {name: library_version(name) for name in self.dependencies}
        return {key: version for key, version in versions.items() if version is not None}

    def unavailable(self) -> str | None:
        """Why this row cannot run here, or ``None``: what is missing, and how to get it."""
        if self.ecosystem == "python":
            missing = [m for m in self.needs if not module_installed(m)]
            if missing:
                hint = install_hint(self.library, "frameworks")
                return f"{self.library} is not installed: {', '.join(missing)} cannot be imported ({hint})"
            return None
        if shutil.which("node") is None:
            return "node is not on PATH"
        missing = [p for p in (self.library, *self.needs) if not (NODE_DIR / "node_modules" / p).is_dir()]
        if missing:
            return f"{', '.join(missing)} not installed (cd adapters/node && npm ci && npm run build)"
        for arg in self.resolved_argv()[1:]:
            if arg.endswith(".js") and not Path(arg).is_file():
                return f"{Path(arg).relative_to(NODE_DIR)} is not built (cd adapters/node && npm run build)"
        return None


def _npm_version(package: str) -> str | None:
    """The version in the ``package.json`` npm installed for ``package``, or ``None``."""
    try:
        manifest = json.loads((NODE_DIR / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    return version if isinstance(version, str) else None


@functools.cache
def node_version() -> str | None:
    """``node --version`` without its ``v``, or ``None`` when node is missing or silent."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip()
    return text.removeprefix("v") if done.returncode == 0 and text else None
