"""The layers' import rules: tools -> server -> (protocol, captures). The server imports
nothing from the tools, protocol and captures nothing from either, and the test broker and the
metadata shell read the metadata through the server's image, not through each other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(package: str) -> dict[str, set[str]]:
    """Every module imported anywhere in ``package`` (also inside functions), by file."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def _importing(package: str, forbidden: set[str]) -> dict[str, list[str]]:
    offending = {path: sorted(n for n in names if n.split(".")[0] in forbidden)
                 for path, names in imported_modules(package).items()}
    return {path: names for path, names in offending.items() if names}


def test_the_server_imports_no_tools() -> None:
    assert _importing("server", {"tools"}) == {}


def test_the_lower_layers_import_neither_server_nor_tools() -> None:
    assert _importing("protocol", {"server", "tools"}) == {}
    assert _importing("captures", {"server", "tools"}) == {}


def test_the_broker_does_not_import_the_metadata_shell() -> None:
    offending = {path: sorted(n for n in names if n.startswith("tools.metadata_shell"))
                 for path, names in imported_modules("tools/broker").items()}
    assert {path: names for path, names in offending.items() if names} == {}


def _module_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (``from pkg import mod`` too)."""
    prefix = package.replace("/", ".")
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = str(path.relative_to(ROOT).with_suffix("")).replace("/", ".").removesuffix(".__init__")
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                edges.add(node.module)
                edges.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {e for e in edges if e.startswith(prefix + ".") and e != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the graph's modules, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done or node not in graph:
            return None
        for nxt in sorted(graph[node]):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_the_replay_modules_import_no_circle() -> None:
    """The validation job and its summary share what both need (tools.replay.tables) instead of
    importing each other."""
    assert _cycle(_module_graph("tools/replay")) is None


def test_the_server_imports_no_circle() -> None:
    """The Raft core's helpers (transitions, membership) reach it through what it hands them,
    never by importing it; the same holds everywhere in the server."""
    assert _cycle(_module_graph("server")) is None
