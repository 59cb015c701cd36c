"""Reads Kafka's JSON message schemas into a small typed model.

The JSON dialect allows ``//`` line comments anywhere (including after a value on the same
line), so comments are stripped with a scanner that respects string literals. A schema is
checked (``tools.codegen.checks``) before it is read, so the reader trusts its input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.codegen.checks import check_message
from tools.codegen.spec import PRIMITIVE_TYPES, SchemaError, Versions, snake_case

__all__ = ["Field", "Schema", "SchemaError", "Struct", "Versions", "load_schema", "snake_case",
           "strip_comments"]

@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions = Versions.NONE
    tagged: Versions = Versions.NONE
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    map_key: bool = False
    flexible: Versions | None = None  # per-field override (RequestHeader.ClientId)
    struct: "Struct | None" = None  # element type for struct and []struct fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None

    @property
    def struct_spec(self) -> Struct:
        """The struct of a struct or ``[]struct`` field."""
        if self.struct is None:
            raise TypeError(f"field {self.name} of type {self.type} is not a struct")
        return self.struct

    @property
    def tag_id(self) -> int:
        """The tag of a field that is tagged in some version."""
        if self.tag is None:
            raise TypeError(f"field {self.name} has no tag")
        return self.tag


@dataclass
class Struct:
    name: str
    versions: Versions
    fields: list[Field] = field(default_factory=list)


@dataclass
class Schema:
    name: str
    kind: str  # request, response, header, metadata or data
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    source: Path
    structs: list[Struct] = field(default_factory=list)  # nested structs, definition order


def strip_comments(text: str) -> str:
    """Remove ``//`` comments outside string literals."""
    out = []
    i = 0
    n = len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_schema(path: Path) -> Schema:
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{path}: {exc}") from exc
    try:
        check_message(data)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    return _build(data, path)


def _build(data: dict[str, Any], path: Path) -> Schema:
    valid = Versions.parse(data["validVersions"])
    flexible = Versions.parse(data["flexibleVersions"])
    common = {c["name"]: c for c in data.get("commonStructs", [])}
    structs: dict[str, Struct] = {}
    order: list[Struct] = []

    def struct_for(name: str, fields_json: list[dict[str, Any]] | None, versions: Versions) -> Struct:
        if name in structs:
            return structs[name]
        if fields_json is None:
            spec = common[name]
            fields_json = spec["fields"]
            versions = Versions.parse(spec["versions"])
        st = Struct(name, versions)
        structs[name] = st
        order.append(st)
        st.fields = [build_field(f) for f in fields_json]
        return st

    def build_field(f: dict[str, Any]) -> Field:
        ftype = f["type"].strip()
        tagged = Versions.parse(f.get("taggedVersions", "none"))
        versions = Versions.parse(f["versions"]) if "versions" in f else tagged
        element = ftype[2:] if ftype.startswith("[]") else ftype
        fld = Field(
            name=f["name"],
            type=ftype,
            versions=versions,
            nullable=Versions.parse(f.get("nullableVersions", "none")),
            tagged=tagged,
            tag=None if f.get("tag") is None else int(f["tag"]),
            default=None if f.get("default") is None else _default_text(f["default"]),
            ignorable=f.get("ignorable", False),
            map_key=f.get("mapKey", False),
            flexible=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
        )
        if element not in PRIMITIVE_TYPES:
            fld.struct = struct_for(element, f.get("fields"), versions)
        return fld

    root = Struct(data["name"], valid)
    root.fields = [build_field(f) for f in data.get("fields", [])]
    return Schema(
        name=data["name"],
        kind=data["type"],
        api_key=None if data.get("apiKey") is None else int(data["apiKey"]),
        valid=valid,
        flexible=flexible,
        root=root,
        source=path,
        structs=order,
    )


def _default_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
