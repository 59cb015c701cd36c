"""Hypothesis strategies that build valid message values from the schema model.

``MessageValues(schema, module)`` knows one schema and the generated module that holds its
classes (one class per struct, named by the struct type). ``.strategy(version)`` draws
instances of the root class whose every field is valid for that version:

- only fields present in the version are set; absent fields keep the class default, so the
  encoder never sees a value it cannot send;
- ``None`` only where the field's nullableVersions include the version;
- integers over the full range of their Kafka type, UUIDs as 16 raw bytes, float64 without NaN
  (NaN is never equal to itself, so equality checks would be meaningless);
- tagged fields are sometimes left at their default, so the "not written" path is covered;
- in flexible versions, structs may carry unknown tagged fields whose tags lie above every tag
  the struct knows in any version (so no decoder can mistake them for a known field);
- list, string and bytes sizes are bounded (and shrink with nesting depth) to keep tests fast.

The same code drives any generated tree: the project's own classes and the ones generated from
Apache Kafka's schemas in a temporary directory.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from tools.codegen.emit import attr_name
from tools.codegen.schema import Field, Schema, Struct

INT_RANGES = {
    "int8": (-(2 ** 7), 2 ** 7 - 1),
    "int16": (-(2 ** 15), 2 ** 15 - 1),
    "uint16": (0, 2 ** 16 - 1),
    "int32": (-(2 ** 31), 2 ** 31 - 1),
    "uint32": (0, 2 ** 32 - 1),
    "int64": (-(2 ** 63), 2 ** 63 - 1),
}

# Largest list per nesting depth; deeper levels get shorter lists so that messages with four
# levels of arrays (FetchResponse, ...) stay small.
LIST_SIZES = (3, 3, 2, 2, 1)
MAX_UNKNOWN_TAG = 2 ** 31 - 1


def max_known_tag(struct: Struct) -> int:
    """The highest tag any field of ``struct`` uses in any version, or -1."""
    return max((f.tag for f in struct.fields if f.tag is not None), default=-1)


def primitive(kafka_type: str) -> st.SearchStrategy:
    if kafka_type in INT_RANGES:
        lo, hi = INT_RANGES[kafka_type]
        return st.integers(lo, hi)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "string":
        return st.text(max_size=8)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=12)
    if kafka_type == "uuid":
        return st.binary(min_size=16, max_size=16)
    raise ValueError(f"no strategy for type {kafka_type}")


class MessageValues:
    """Strategies for one schema, building the classes of one generated module."""

    def __init__(self, schema: Schema, module: ModuleType, *, unknown_tags: bool = True,
                 unknown_tags_in_tagged_fields: bool = True) -> None:
        """``unknown_tags`` turns unknown tagged fields on or off altogether;
        ``unknown_tags_in_tagged_fields`` allows them inside structs that are themselves the
        value of a tagged field."""
        self.schema = schema
        self.module = module
        self.unknown_tags = unknown_tags
        self.unknown_tags_in_tagged_fields = unknown_tags_in_tagged_fields
        self._cache: dict[tuple, st.SearchStrategy] = {}

    def cls_for(self, struct: Struct) -> type:
        return getattr(self.module, struct.name)

    def strategy(self, version: int) -> st.SearchStrategy:
        assert version in self.schema.valid, (self.schema.name, version)
        return self._struct(self.schema.root, version, 0, False)

    # --- internals ------------------------------------------------------------------------

    def _struct(self, struct: Struct, version: int, depth: int, in_tagged: bool) -> st.SearchStrategy:
        key = (struct.name, version, depth, in_tagged)
        if key in self._cache:
            return self._cache[key]
        cls = self.cls_for(struct)
        kwargs: dict[str, st.SearchStrategy] = {}
        for fld in struct.fields:
            if version in fld.versions:
                kwargs[attr_name(fld)] = self._field(cls, fld, version, depth, in_tagged)
        if (version in self.schema.flexible and self.unknown_tags
                and (self.unknown_tags_in_tagged_fields or not in_tagged)):
            floor = max_known_tag(struct) + 1
            kwargs["unknown_tagged_fields"] = st.none() | st.dictionaries(
                st.integers(floor, floor + 40) | st.integers(floor, MAX_UNKNOWN_TAG),
                st.binary(max_size=6), min_size=1, max_size=2)
        strategy = st.builds(cls, **kwargs)
        self._cache[key] = strategy
        return strategy

    def _field(self, owner: type, fld: Field, version: int, depth: int,
               in_tagged: bool) -> st.SearchStrategy:
        tagged = version in fld.tagged
        in_tagged = in_tagged or tagged
        if fld.is_struct:
            elem = self._struct(fld.struct, version, depth + 1, in_tagged)
        else:
            elem = primitive(fld.element_type)
        if fld.is_array:
            size = LIST_SIZES[min(depth, len(LIST_SIZES) - 1)]
            value = st.lists(elem, max_size=size)
        else:
            value = elem
        if version in fld.nullable:
            value = st.none() | value
        if tagged:
            # The class default, built fresh per draw (defaults may be mutable).
            attr = attr_name(fld)
            value = st.builds(lambda: getattr(owner(), attr)) | value
        return value


def strip_unknown_tags(value: Any) -> Any:
    """A copy of a message tree with every ``unknown_tagged_fields`` cleared."""
    from protocol.message import Message
    if isinstance(value, list):
        return [strip_unknown_tags(v) for v in value]
    if not isinstance(value, Message):
        return value
    copy = object.__new__(type(value))
    for slot in type(value).__slots__:
        setattr(copy, slot, None if slot == "unknown_tagged_fields"
                else strip_unknown_tags(getattr(value, slot)))
    return copy
