"""Rejects a schema that Kafka's own generator would refuse, before any code is emitted.

The checks run on the JSON as written, so that a typo (an unknown key, a tag in a
non-flexible version, a default that does not fit its type) is reported against the field
that carries it instead of surfacing as odd generated code. Every rejection is a
``SchemaError`` whose text names the field by its path inside nested structs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from protocol.primitives import uuid_from_str
from tools.codegen.spec import (
    MAX_VERSION, PRIMITIVE_TYPES, SchemaError, Versions, parse_int_default, snake_case)

MESSAGE_KEYS = frozenset({
    "name", "type", "apiKey", "validVersions", "deprecatedVersions", "flexibleVersions",
    "fields", "commonStructs", "listeners", "latestVersionUnstable"})
STRUCT_KEYS = frozenset({"name", "versions", "deprecatedVersions", "fields"})
FIELD_KEYS = frozenset({
    "name", "type", "versions", "fields", "mapKey", "nullableVersions", "default", "ignorable",
    "entityType", "about", "taggedVersions", "flexibleVersions", "tag", "zeroCopy"})

KINDS = frozenset({"request", "response", "header", "metadata", "data"})
KINDS_WITH_API_KEY = frozenset({"request", "response", "metadata"})
LISTENERS = frozenset({"zkBroker", "broker", "controller"})
# Entity type -> the Kafka type (or array element type) a field tagged with it must have.
ENTITY_TYPES: dict[str, str | None] = {
    "unknown": None, "transactionalId": "string", "producerId": "int64", "groupId": "string",
    "topicName": "string", "brokerId": "int32"}
# Fixed-width values have no spare encoding for null.
NULLABLE_TYPES = frozenset({"string", "bytes", "records"})
INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}

_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_TYPE_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")


def check_message(data: object) -> None:
    """Raise ``SchemaError`` for the first rule ``data`` (one parsed schema file) breaks."""
    if not isinstance(data, dict):
        raise SchemaError("a schema must be a JSON object")
    _Message(data).check()


def check_folder(schemas: Iterable[tuple[str, str, int | None]]) -> None:
    """Cross-file rules for one folder, given (name, kind, API key) per schema: an API key is
    used once per kind, and every request has a response with the same key and vice versa."""
    seen: dict[tuple[str, int], str] = {}
    for name, kind, key in schemas:
        if key is None:
            continue
        if (kind, key) in seen:
            raise SchemaError(f"{name} and {seen[kind, key]} are both the {kind} for API key {key}")
        seen[kind, key] = name
    for (kind, key), name in seen.items():
        partner = {"request": "response", "response": "request"}.get(kind)
        if partner is not None and (partner, key) not in seen:
            raise SchemaError(f"{name} has API key {key} but no {partner} has that key")


@dataclass
class _Scope:
    """Where a list of fields sits: its path, the versions it exists in, whether it is the
    message's top level."""

    path: str
    versions: Versions
    top_level: bool = False


@dataclass
class _Message:
    data: dict[str, Any]
    flexible: Versions = Versions.NONE
    common: dict[str, dict[str, Any]] = field(default_factory=dict)
    inline: set[str] = field(default_factory=set)

    def check(self) -> None:
        data = self.data
        _no_unknown_keys(data, MESSAGE_KEYS, "the message")
        name = data.get("name")
        if not isinstance(name, str) or not _TYPE_NAME.match(name):
            raise SchemaError(f"message name {name!r} must be a capitalized identifier")
        kind = data.get("type")
        if kind not in KINDS:
            raise SchemaError(f"message type {kind!r} is not one of {sorted(KINDS)}")
        self._check_api_key(name, kind, data.get("apiKey"))
        if "validVersions" not in data:
            raise SchemaError("validVersions is required")
        valid = _versions(data["validVersions"], "validVersions")
        if valid.empty():
            raise SchemaError("validVersions must not be none")
        if valid.hi == MAX_VERSION:
            raise SchemaError(f"validVersions {data['validVersions']!r} must name a highest version")
        _versions(data.get("deprecatedVersions", "none"), "deprecatedVersions")
        if "flexibleVersions" not in data:
            raise SchemaError("flexibleVersions is required (none, or an open range such as 0+)")
        self.flexible = _versions(data["flexibleVersions"], "flexibleVersions")
        if not self.flexible.empty() and self.flexible.hi != MAX_VERSION:
            raise SchemaError("flexibleVersions must be none or an open range such as 3+")
        listeners = data.get("listeners")
        if listeners is not None:
            if kind != "request":
                raise SchemaError("listeners are only allowed on a request")
            if not isinstance(listeners, list) or not set(listeners) <= LISTENERS:
                raise SchemaError(f"listeners {listeners!r} must be a list drawn from {sorted(LISTENERS)}")
        unstable = data.get("latestVersionUnstable", False)
        if not isinstance(unstable, bool):
            raise SchemaError("latestVersionUnstable must be true or false")
        if unstable and kind != "request":
            raise SchemaError("latestVersionUnstable is only allowed on a request")
        self._register_common(name, data.get("commonStructs", []))
        for struct_name, spec in self.common.items():
            versions = _versions(spec["versions"], f"struct {struct_name} versions")
            self._check_fields(spec.get("fields", []), _Scope(struct_name, versions))
        self._check_fields(data.get("fields", []), _Scope("", valid, top_level=True))

    def _check_api_key(self, name: str, kind: str, key: object) -> None:
        if key is None:
            if kind in KINDS_WITH_API_KEY:
                raise SchemaError(f"a {kind} needs an apiKey")
        elif not 0 <= _as_int(key, "apiKey") <= MAX_VERSION:
            raise SchemaError(f"apiKey {key!r} must be from 0 to {MAX_VERSION}")
        suffix = {"request": "Request", "response": "Response"}.get(kind)
        if suffix and not name.endswith(suffix):
            raise SchemaError(f"a {kind}'s name must end with {suffix}, not {name!r}")

    def _register_common(self, message_name: str, specs: object) -> None:
        if not isinstance(specs, list):
            raise SchemaError("commonStructs must be a list")
        for spec in specs:
            if not isinstance(spec, dict):
                raise SchemaError("every common struct must be a JSON object")
            struct_name = spec.get("name")
            where = f"common struct {struct_name}"
            _no_unknown_keys(spec, STRUCT_KEYS, where)
            if not isinstance(struct_name, str) or not _TYPE_NAME.match(struct_name):
                raise SchemaError(f"common struct name {struct_name!r} must be a capitalized identifier")
            if struct_name == message_name:
                raise SchemaError(f"{where} has the message's own name")
            if struct_name in self.common:
                raise SchemaError(f"{where} is defined twice")
            if "versions" not in spec:
                raise SchemaError(f"{where} needs versions")
            _versions(spec.get("deprecatedVersions", "none"), f"{where} deprecatedVersions")
            self.common[struct_name] = spec

    def _check_fields(self, fields: object, scope: _Scope) -> None:
        if not isinstance(fields, list):
            raise SchemaError(f"{_where(scope.path)}fields must be a list")
        names: dict[str, str] = {}
        attrs: dict[str, str] = {}
        tags: dict[int, str] = {}
        for spec in fields:
            fld = self._check_field(spec, scope)
            path = _join(scope.path, fld.name)
            if fld.name in names:
                raise SchemaError(f"field {path}: the name is used twice in one struct")
            names[fld.name] = path
            attr = snake_case(fld.name)
            if attr in attrs:
                raise SchemaError(f"field {path}: its attribute name {attr} clashes with "
                                  f"field {attrs[attr]}")
            attrs[attr] = path
            if fld.tag is not None:
                if fld.tag in tags:
                    raise SchemaError(f"field {path}: tag {fld.tag} is already used by "
                                      f"field {tags[fld.tag]}")
                tags[fld.tag] = path
        for expected in range(len(tags)):
            if expected not in tags:
                raise SchemaError(f"{_where(scope.path)}tags must run from 0 without gaps; "
                                  f"tag {expected} is missing")

    def _check_field(self, spec: object, scope: _Scope) -> "_Field":
        if not isinstance(spec, dict):
            raise SchemaError(f"{_where(scope.path)}every field must be a JSON object")
        name = spec.get("name")
        if not isinstance(name, str) or not _FIELD_NAME.match(name):
            raise SchemaError(f"{_where(scope.path)}field name {name!r} must be letters and "
                              "digits, starting with a letter")
        fld = _Field(name, _join(scope.path, name), spec)

        def fail(reason: str) -> SchemaError:
            return SchemaError(f"field {fld.path}: {reason}")

        try:
            _no_unknown_keys(spec, FIELD_KEYS, "the field")
            fld.check(self.flexible, scope)
        except SchemaError as exc:
            raise fail(str(exc)) from None
        if fld.struct_name is not None:
            self._check_struct_field(fld, scope, fail)
        elif "fields" in spec:
            raise fail(f"type {fld.type} cannot have fields")
        return fld

    def _check_struct_field(self, fld: "_Field", scope: _Scope, fail: Any) -> None:
        name = fld.struct_name
        assert name is not None
        if name == self.data["name"]:
            raise fail(f"struct {name} has the message's own name")
        nested = fld.spec.get("fields")
        if name in self.common:
            if nested is not None:
                raise fail(f"{name} is a common struct and cannot be given fields here")
            return
        if nested is None:
            raise fail(f"unknown type {fld.type}: no fields given and no common struct {name}")
        if name in self.inline:
            raise fail(f"struct {name} is defined twice")
        self.inline.add(name)
        self._check_fields(nested, _Scope(fld.path, scope.versions.intersect(fld.versions)))


@dataclass
class _Field:
    """One field's own rules: everything that needs no knowledge of its siblings."""

    name: str
    path: str
    spec: dict[str, Any]
    type: str = ""
    element: str = ""
    struct_name: str | None = None
    versions: Versions = Versions.NONE
    tag: int | None = None

    def check(self, message_flexible: Versions, scope: _Scope) -> None:
        spec = self.spec
        self._check_type(spec.get("type"))
        tagged = _versions(spec.get("taggedVersions", "none"), "taggedVersions")
        if "versions" in spec:
            self.versions = _versions(spec["versions"], "versions")
        elif not tagged.empty():
            self.versions = tagged
        else:
            raise SchemaError("versions is required")
        self._check_within(scope.versions)
        nullable = _versions(spec.get("nullableVersions", "none"), "nullableVersions")
        if not nullable.empty() and not self._can_be_null():
            raise SchemaError(f"type {self.type} cannot be nullable")
        for flag in ("mapKey", "ignorable", "zeroCopy"):
            if not isinstance(spec.get(flag, False), bool):
                raise SchemaError(f"{flag} must be true or false")
        if spec.get("mapKey") and scope.top_level:
            raise SchemaError("mapKey is only allowed inside a struct, not on a top-level field")
        if spec.get("zeroCopy") and self.type != "bytes":
            raise SchemaError("zeroCopy is only allowed on a bytes field")
        self._check_entity_type(spec.get("entityType", "unknown"))
        flexible = message_flexible
        if "flexibleVersions" in spec:
            flexible = _versions(spec["flexibleVersions"], "flexibleVersions")
            if self.type not in ("string", "bytes"):
                raise SchemaError("only a string or bytes field can override flexibleVersions")
            if not message_flexible.contains(flexible):
                raise SchemaError(f"flexibleVersions {flexible} are not within the message's "
                                  f"flexibleVersions {message_flexible}")
        self._check_tag(spec.get("tag"), tagged, nullable, flexible)
        self._check_default(spec.get("default"), nullable)

    def _check_type(self, ftype: object) -> None:
        if not isinstance(ftype, str) or not ftype.strip():
            raise SchemaError("type is required")
        self.type = ftype.strip()
        self.element = self.type[2:] if self.type.startswith("[]") else self.type
        if not self.element:
            raise SchemaError(f"array type {self.type} names no element type")
        if self.element.startswith("[]"):
            raise SchemaError(f"type {self.type}: arrays of arrays are not supported")
        if self.element in PRIMITIVE_TYPES:
            if self.element == "records" and self.element != self.type:
                raise SchemaError("records cannot be an array element")
            return
        if not _TYPE_NAME.match(self.element):
            raise SchemaError(f"unknown type {self.type}")
        self.struct_name = self.element

    def _can_be_null(self) -> bool:
        return self.type != self.element or self.struct_name is not None or self.type in NULLABLE_TYPES

    def _check_within(self, parent: Versions) -> None:
        if self.versions.empty():
            raise SchemaError("versions must not be none")
        inside = parent.intersect(self.versions)
        if inside.empty() or (self.versions.hi != MAX_VERSION and self.versions.hi > parent.hi):
            raise SchemaError(f"versions {self.versions} are outside the enclosing versions {parent}")

    def _check_entity_type(self, entity: object) -> None:
        if entity not in ENTITY_TYPES:
            raise SchemaError(f"entityType {entity!r} is not one of {sorted(ENTITY_TYPES)}")
        expected = ENTITY_TYPES[str(entity)]
        if expected is not None and self.element != expected:
            raise SchemaError(f"entityType {entity} needs type {expected} or []{expected}, "
                              f"not {self.type}")

    def _check_tag(self, tag: object, tagged: Versions, nullable: Versions,
                   flexible: Versions) -> None:
        if tag is None:
            if not tagged.empty():
                raise SchemaError("taggedVersions without a tag")
            return
        tag = _as_int(tag, "tag")
        if tag < 0:
            raise SchemaError(f"tag {tag} is negative")
        if tagged.empty():
            raise SchemaError(f"tag {tag} without taggedVersions")
        if tagged.hi != MAX_VERSION:
            raise SchemaError(f"taggedVersions {tagged} must be an open range such as 2+")
        if not self.versions.contains(tagged):
            raise SchemaError(f"taggedVersions {tagged} are not within versions {self.versions}")
        if not flexible.contains(tagged):
            raise SchemaError(f"taggedVersions {tagged} are not within the flexible versions "
                              f"{flexible}; a tagged field needs a flexible version")
        both = nullable.intersect(tagged)
        if not both.empty() and both != tagged:
            raise SchemaError(f"nullableVersions {nullable} cover only part of taggedVersions "
                              f"{tagged}; either all tagged versions are nullable or none")
        if self.spec.get("mapKey"):
            raise SchemaError("a tagged field cannot be a mapKey")
        if self.type == "records":
            raise SchemaError("a records field cannot be tagged")
        self.tag = tag

    def _check_default(self, default: object, nullable: Versions) -> None:
        if default is None:
            return
        if isinstance(default, bool):
            text = "true" if default else "false"
        elif isinstance(default, (int, float, str)):
            text = str(default)
        else:
            raise SchemaError(f"default {default!r} must be a string, number or boolean")
        if text == "null" and (self.type == "string" or self.type == "bytes"
                               or self.type != self.element or self.struct_name is not None):
            if not nullable.contains(self.versions):
                raise SchemaError(f"default null needs nullableVersions to cover every version "
                                  f"{self.versions}, not only {nullable}")
            return
        if text == "":
            return
        t = self.type
        if t != self.element:
            raise SchemaError(f"default {text!r}: an array's default can only be empty or null")
        if self.struct_name is not None:
            raise SchemaError(f"default {text!r}: a struct's default can only be empty or null")
        if t == "bool":
            if text.lower() not in ("true", "false"):
                raise SchemaError(f"default {text!r} is not true or false")
        elif t in INT_RANGES:
            try:
                value = parse_int_default(text)
            except ValueError:
                raise SchemaError(f"default {text!r} is not an integer") from None
            lo, hi = INT_RANGES[t]
            if not lo <= value <= hi:
                raise SchemaError(f"default {text} does not fit {t} ({lo} to {hi})")
        elif t == "float64":
            try:
                float(text)
            except ValueError:
                raise SchemaError(f"default {text!r} is not a number") from None
        elif t == "uuid":
            try:
                uuid_from_str(text)
            except ValueError:
                raise SchemaError(f"default {text!r} is not a base64 UUID") from None
        elif t == "bytes":
            raise SchemaError(f"default {text!r}: a bytes field's default can only be empty or null")


def _versions(value: object, what: str) -> Versions:
    try:
        return Versions.parse(value)
    except SchemaError as exc:
        raise SchemaError(f"{what}: {exc}") from None


def _as_int(value: object, what: str) -> int:
    """An integer, also when written as a JSON string (some schemas quote their tags)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    raise SchemaError(f"{what} {value!r} must be an integer")


def _no_unknown_keys(spec: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SchemaError(f"{where} has unknown keys {unknown}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _where(path: str) -> str:
    return f"in {path}: " if path else ""
