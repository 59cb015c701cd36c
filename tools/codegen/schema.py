"""Reads Kafka's JSON message schemas into a small typed model.

The JSON dialect allows ``//`` line comments anywhere (including after a value on the same
line), so comments are stripped with a scanner that respects string literals.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF

PRIMITIVE_TYPES = {
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
}
# Fixed-width types map to a struct format character (uuid to 16 raw bytes).
FIXED_FORMATS = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "float64": "d", "uuid": "16s",
}
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}


class SchemaError(Exception):
    """A schema file that cannot be understood; the message names the file and the field."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``lo > hi`` means no versions."""

    lo: int
    hi: int

    NONE: "Versions" = None  # type: ignore[assignment]  # set below

    @staticmethod
    def parse(text: str | int | None, default: "Versions | None" = None) -> "Versions":
        if text is None:
            if default is None:
                raise SchemaError("missing version range")
            return default
        text = str(text).strip()
        if text == "none":
            return Versions.NONE
        if text.endswith("+"):
            return Versions(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: "Versions") -> "Versions":
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))


Versions.NONE = Versions(1, 0)


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


_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """``CurrentMetadataOffset`` -> ``current_metadata_offset``; ``ISR`` -> ``isr``."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()


def load_schema(path: Path) -> Schema:
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{path}: {exc}") from exc
    try:
        return _build(data, path)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise SchemaError(f"{path}: malformed schema ({exc!r})") from None


def _build(data: dict, path: Path) -> Schema:
    valid = Versions.parse(data["validVersions"])
    flexible = Versions.parse(data.get("flexibleVersions", "none"))
    common = {c["name"]: c for c in data.get("commonStructs", [])}
    structs: dict[str, Struct] = {}
    order: list[Struct] = []

    def struct_for(name: str, fields_json: list | None, versions: Versions) -> Struct:
        if fields_json is None:
            if name not in common:
                raise SchemaError(f"unknown type {name}")
            if name in structs:
                return structs[name]
            spec = common[name]
            fields_json = spec["fields"]
            versions = Versions.parse(spec.get("versions"), versions)
        elif name in structs:
            raise SchemaError(f"struct {name} is defined twice")
        st = Struct(name, versions)
        structs[name] = st
        order.append(st)
        st.fields = [build_field(f) for f in fields_json]
        return st

    def build_field(f: dict) -> Field:
        name = f["name"]
        ftype = f["type"].strip()
        versions = Versions.parse(f.get("versions"))
        element = ftype[2:] if ftype.startswith("[]") else ftype
        tag = f.get("tag")
        fld = Field(
            name=name,
            type=ftype,
            versions=versions,
            nullable=Versions.parse(f.get("nullableVersions", "none")),
            tagged=Versions.parse(f.get("taggedVersions", "none")),
            tag=None if tag is None else int(tag),
            default=None if f.get("default") is None else _default_text(f["default"]),
            ignorable=bool(f.get("ignorable", False)),
            map_key=bool(f.get("mapKey", False)),
            flexible=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
        )
        if element not in PRIMITIVE_TYPES:
            if not element[:1].isupper():
                raise SchemaError(f"field {name}: unknown type {ftype}")
            fld.struct = struct_for(element, f.get("fields"), versions)
        elif "fields" in f:
            raise SchemaError(f"field {name}: primitive type {ftype} cannot have fields")
        if fld.tag is not None and fld.tagged.empty():
            raise SchemaError(f"field {name}: tag without taggedVersions")
        if not fld.tagged.empty() and fld.tag is None:
            raise SchemaError(f"field {name}: taggedVersions without tag")
        return fld

    root = Struct(data["name"], valid)
    root.fields = [build_field(f) for f in data["fields"]]
    return Schema(
        name=data["name"],
        kind=data["type"],
        api_key=data.get("apiKey"),
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


def load_dir(directory: Path) -> list[Schema]:
    return [load_schema(p) for p in sorted(directory.glob("*.json"))]
