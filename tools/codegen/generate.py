"""Turns a directory tree of schemas into a tree of Python modules, in memory.

Each folder holding schemas becomes a package with one module per schema and an
``__init__.py`` that indexes the classes by name and by (kind, API key).
"""

from __future__ import annotations

from pathlib import Path

from tools.codegen.checks import check_folder
from tools.codegen.emit import HEADER, emit_module
from tools.codegen.schema import Schema, SchemaError, load_schema, snake_case


def render_tree(schema_root: Path, label_root: Path | None = None) -> dict[Path, str]:
    """Map of relative output path -> file text for every schema below ``schema_root``."""
    files: dict[Path, str] = {}
    folders = sorted({p.parent for p in schema_root.rglob("*.json")})
    for folder in folders:
        rel = folder.relative_to(schema_root)
        schemas: list[tuple[str, Schema]] = []
        for path in sorted(folder.glob("*.json")):
            schema = load_schema(path)
            module = snake_case(path.stem)
            label = _label(path, label_root)
            files[rel / f"{module}.py"] = emit_module(schema, label)
            schemas.append((module, schema))
        try:
            check_folder((s.name, s.kind, s.api_key) for _, s in schemas)
        except SchemaError as exc:
            raise SchemaError(f"{_label(folder, label_root)}: {exc}") from None
        files[rel / "__init__.py"] = _index(schemas, _label(folder, label_root))
    for parent in {p.parent for p in files}:
        while parent != Path(".") and parent / "__init__.py" not in files:
            files[parent / "__init__.py"] = HEADER.format(source=schema_root.name)
            parent = parent.parent
    return files


def _label(path: Path, label_root: Path | None) -> str:
    if label_root is not None:
        try:
            return path.resolve().relative_to(label_root.resolve()).as_posix()
        except ValueError:
            pass
    return path.name


def _index(schemas: list[tuple[str, Schema]], label: str) -> str:
    lines = [HEADER.format(source=label).rstrip("\n"),
             '"""Every class generated from this folder, by name and by (kind, API key)."""', "",
             "from __future__ import annotations", "",
             "from protocol.message import Message"]
    for module, schema in schemas:
        lines.append(f"from .{module} import {schema.name}")
    lines += ["", "BY_NAME: dict[str, type[Message]] = {"]
    lines += [f"    {s.name!r}: {s.name}," for _, s in schemas]
    lines += ["}", "", "BY_API_KEY: dict[tuple[str, int], type[Message]] = {"]
    lines += [f"    ({s.kind!r}, {s.api_key}): {s.name}," for _, s in schemas if s.api_key is not None]
    lines += ["}", ""]
    return "\n".join(lines)
