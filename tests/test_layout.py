"""The layout the design page (``docs/design.md``) states is the layout the code has.

Every import of every module (also those inside functions and ``TYPE_CHECKING`` blocks:
a lazy import is still a dependency) is read from the source; the folder order is read
from the design page's folder table, so the table cannot drift from what is enforced.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import networkx as nx
import pytest

from callsafe._aliases import MOVED

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = {"tests", "bench", "notebooks", "docs", "tools", "build", "dist", "reports", "out"}


def _folders() -> set[str]:
    return {
        p.parent.name
        for p in ROOT.glob("*/__init__.py")
        if not p.parent.name.startswith(".") and p.parent.name not in OUTSIDE
    }


def folder_table() -> dict[str, tuple[int, str]]:
    """The design page's folder table (its "Folders" section): folder -> (floor, role)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("\n## Folders\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[int, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`/")
        rows[name] = (int(cells[1]), cells[2])
    return rows


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = ["callsafe", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {_module_name(p): p for p in ROOT.glob("*.py")}
    for folder in _folders():
        found |= {_module_name(p): p for p in (ROOT / folder).rglob("*.py")}
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("callsafe")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            if not base.startswith("callsafe"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return out


def _floor_of(module: str, table: dict[str, tuple[int, str]]) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "__main__":
        return max(f for f, _ in table.values()) + 1
    if len(parts) == 1 or parts[1] not in table:
        # the package itself and its loose modules (the version, the alias finder, safe text):
        # below everything, so they may import nothing of the folders
        return -1
    return table[parts[1]][0]


def _graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for dep in _imports(name, path, set(modules)):
            graph.add_edge(name, dep)
    return graph


def test_the_design_page_folder_table_matches_the_tree() -> None:
    table = folder_table()
    assert set(table) == _folders()
    for name, (_, role) in table.items():
        assert role, f"{name}/ has no role in the folder table of docs/design.md"


def test_every_folder_docstring_states_its_one_role() -> None:
    for folder in sorted(_folders()):
        doc = ast.get_docstring(ast.parse((ROOT / folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"{folder}/__init__.py has no docstring"
        assert re.search(r"^Role: \S", doc, re.M), f"{folder}/__init__.py does not say its role ('Role: ...')"


def test_no_module_imports_a_higher_folder() -> None:
    table = folder_table()
    graph = _graph()
    upward = [
        f"{a} (floor {_floor_of(a, table)}) imports {b} (floor {_floor_of(b, table)})"
        for a, b in graph.edges
        if _floor_of(b, table) > _floor_of(a, table)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_circle_among_the_modules() -> None:
    graph = _graph()
    graph.remove_edges_from(nx.selfloop_edges(graph))
    cycles = [c for c in nx.simple_cycles(graph) if not _package_and_child(c)]
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles[:10])


def _package_and_child(cycle: list[str]) -> bool:
    """``pkg/__init__.py`` re-exporting ``pkg.mod`` that imports a sibling through ``pkg``
    is the package's public face, not a circle between modules of different roles."""
    return len(cycle) == 2 and (cycle[0].startswith(cycle[1] + ".") or cycle[1].startswith(cycle[0] + "."))


def test_the_project_never_imports_an_old_path() -> None:
    graph = _graph()
    old = [f"{a} imports {b}" for a, b in graph.edges if b in MOVED]
    for path in ROOT.glob("*/**/*.py"):
        if path.relative_to(ROOT).parts[0] in {"tests", "bench"} and path.name != "test_layout.py":
            text = path.read_text(encoding="utf-8")
            old += [f"{path.name} imports {m}" for m in MOVED if re.search(rf"\b{re.escape(m)}\b(?!\.\w)", text)]
    assert not old, "\n".join(old)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_import_path_is_the_new_module(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_an_old_path_import_from_gives_the_same_objects() -> None:
    from callsafe.certify.contract import TargetEnv as old
    from callsafe.contract.target import TargetEnv as new
    from callsafe.formal.abstract import Config as new_config
    from callsafe.model.abstract import Config as old_config

    assert old is new and old_config is new_config
