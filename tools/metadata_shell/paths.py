"""Paths in the metadata tree: absolute or relative, ``.`` and ``..``, and glob patterns."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from tools.metadata_shell.tree import Dir, Node

_GLOB = re.compile(r"[*?\[]")


class NoSuchNode(Exception):
    pass


def components(cwd: list[str], text: str) -> list[str]:
    """The absolute components ``text`` names, seen from ``cwd``."""
    parts = [] if text.startswith("/") else list(cwd)
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return parts


def to_text(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def lookup(root: Dir, parts: list[str]) -> Node | None:
    node: Node = root
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def expand(root: Dir, cwd: list[str], text: str) -> list[tuple[list[str], Node]]:
    """Every node ``text`` names; a pattern may match many. Raises NoSuchNode if none."""
    matches: list[tuple[list[str], Node]] = [([], root)]
    for part in components(cwd, text):
        found = []
        for parts, node in matches:
            if not isinstance(node, dict):
                continue
            if _GLOB.search(part):
                found += [([*parts, name], node[name])
                          for name in sorted_names(node) if fnmatchcase(name, part)]
            elif part in node:
                found.append(([*parts, part], node[part]))
        matches = found
    if not matches:
        raise NoSuchNode(text)
    return matches


def sorted_names(node: Dir) -> list[str]:
    """Children in natural order: numeric ids by value (broker 2 before broker 10)."""
    return sorted(node, key=lambda name: (0, int(name), "") if name.isdigit() else (1, 0, name))
