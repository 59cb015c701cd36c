"""A metadata or control message as Kafka's generated JSON converters write it.

Kafka's ``<Message>JsonConverter.write(message, version)`` names each field in camelCase (the
schema name with its first letter lowercased), leaves out the fields the version does not
have and the tagged fields that hold their default, writes UUIDs in Kafka's base64 form and
bytes as standard base64. The field list comes from the project's own schemas, so every record
type the codecs know is written the same way.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

from protocol.message import Message
from protocol.primitives import uuid_to_str
from tools.codegen.emit import attr_name
from tools.codegen.schema import Field, Struct, load_schema

_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "metadata"


@functools.cache
def _roots() -> dict[str, Struct]:
    """Each metadata and control message's fields, by message name (a file's name need not be
    its message's)."""
    schemas = (load_schema(path) for path in sorted(_SCHEMAS.glob("*.json")))
    return {schema.name: schema.root for schema in schemas}


def kafka_json(message: Message, version: int) -> dict[str, Any]:
    """``message`` at ``version`` as Kafka's JSON converter writes it."""
    return _struct(message, _roots()[message.NAME], version)


def _struct(obj: Any, spec: Struct, version: int) -> dict[str, Any]:
    defaults = type(obj)()
    node: dict[str, Any] = {}
    for fld in spec.fields:
        if version not in fld.versions:
            continue
        attr = attr_name(fld)
        value = getattr(obj, attr)
        if version in fld.tagged and value == getattr(defaults, attr):
            continue
        node[fld.name[:1].lower() + fld.name[1:]] = _value(value, fld, version)
    return node


def _value(value: Any, fld: Field, version: int) -> Any:
    if value is None:
        return None
    if fld.is_array:
        return [_element(v, fld, version) for v in value]
    return _element(value, fld, version)


def _element(value: Any, fld: Field, version: int) -> Any:
    if fld.struct is not None:
        return _struct(value, fld.struct, version)
    if fld.element_type == "uuid":
        return uuid_to_str(value)
    if fld.element_type in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value
