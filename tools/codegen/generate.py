"""Turns a directory tree of schemas into a tree of Python modules, in memory.

Each folder holding schemas becomes a package with one module per schema and an
``__init__.py`` that indexes the classes by name and by (kind, API key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.codegen.checks import check_folder
from tools.codegen.emit import HEADER, emit_module
from tools.codegen.schema import Schema, SchemaError, load_schema, snake_case


@dataclass(frozen=True)
class KeyEnum:
    """An ``IntEnum`` of the API keys of one kind of schema in a folder, in its own module so
    that every generated class can name its key without importing the folder's index."""

    kinds: tuple[str, ...]  # the first kind defines the members, the others reuse them
    module: str
    cls: str
    suffixes: tuple[str, ...]  # dropped from a schema name to make its member name

    def member(self, schema: Schema) -> str:
        name = schema.name
        for suffix in self.suffixes:
            name = name.removesuffix(suffix)
        return snake_case(name).upper()


# Requests name the API (ApiKey.DESCRIBE_QUORUM); metadata records keep their full name, as
# Kafka's MetadataRecordType does (MetadataRecordType.PARTITION_CHANGE_RECORD).
KEY_ENUMS = (KeyEnum(("request", "response"), "api_key", "ApiKey", ("Request", "Response")),
             KeyEnum(("metadata",), "metadata_record_type", "MetadataRecordType", ()))


def render_tree(schema_root: Path, label_root: Path | None = None) -> dict[Path, str]:
    """Map of relative output path -> file text for every schema below ``schema_root``."""
    files: dict[Path, str] = {}
    folders = sorted({p.parent for p in schema_root.rglob("*.json")})
    for folder in folders:
        rel = folder.relative_to(schema_root)
        label = _label(folder, label_root)
        loaded = [(snake_case(path.stem), path, load_schema(path)) for path in sorted(folder.glob("*.json"))]
        try:
            check_folder((s.name, s.kind, s.api_key) for _, _, s in loaded)
        except SchemaError as exc:
            raise SchemaError(f"{label}: {exc}") from None
        enums = [e for e in KEY_ENUMS if any(s.kind == e.kinds[0] for _, _, s in loaded)]
        for enum in enums:
            if enum.module in {module for module, _, _ in loaded}:
                raise SchemaError(f"{label}: a schema's module would hide the generated {enum.module}.py")
            files[rel / f"{enum.module}.py"] = _enum_module(enum, [s for _, _, s in loaded], label)
        for module, path, schema in loaded:
            files[rel / f"{module}.py"] = emit_module(schema, _label(path, label_root), _key_expr(schema, enums))
        files[rel / "__init__.py"] = _index([(m, s) for m, _, s in loaded], enums, label)
    for parent in {p.parent for p in files}:
        while parent != Path(".") and parent / "__init__.py" not in files:
            files[parent / "__init__.py"] = HEADER.format(source=schema_root.name)
            parent = parent.parent
    return files


def _key_expr(schema: Schema, enums: list[KeyEnum]) -> tuple[str, str] | None:
    """(import line, expression) naming ``schema``'s API key through its folder's enum."""
    if schema.api_key is None:
        return None
    for enum in enums:
        if schema.kind in enum.kinds:
            return f"from .{enum.module} import {enum.cls}", f"{enum.cls}.{enum.member(schema)}"
    return None


def _enum_module(enum: KeyEnum, schemas: list[Schema], label: str) -> str:
    members = sorted((s.api_key, enum.member(s)) for s in schemas
                     if s.kind == enum.kinds[0] and s.api_key is not None)
    lines = [HEADER.format(source=label).rstrip("\n"),
             f'"""The API key of every {enum.kinds[0]} schema in this folder, by name."""', "",
             "from enum import IntEnum", "", "",
             f"class {enum.cls}(IntEnum):"]
    lines += [f"    {name} = {key}" for key, name in members]
    return "\n".join(lines) + "\n"


def _label(path: Path, label_root: Path | None) -> str:
    if label_root is not None:
        try:
            return path.resolve().relative_to(label_root.resolve()).as_posix()
        except ValueError:
            pass
    return path.name


def _index(schemas: list[tuple[str, Schema]], enums: list[KeyEnum], label: str) -> str:
    lines = [HEADER.format(source=label).rstrip("\n"),
             '"""Every class generated from this folder, by name and by (kind, API key)."""', "",
             "from __future__ import annotations", "",
             "from protocol.message import Message"]
    lines += [f"from .{e.module} import {e.cls}" for e in enums]
    for module, schema in schemas:
        lines.append(f"from .{module} import {schema.name}")
    lines += ["", "BY_NAME: dict[str, type[Message]] = {"]
    lines += [f"    {s.name!r}: {s.name}," for _, s in schemas]
    lines += ["}", "", "BY_API_KEY: dict[tuple[str, int], type[Message]] = {"]
    lines += [f"    ({s.kind!r}, {s.api_key}): {s.name}," for _, s in schemas if s.api_key is not None]
    lines += ["}", ""]
    return "\n".join(lines)
