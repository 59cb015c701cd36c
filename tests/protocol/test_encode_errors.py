"""What the encoders refuse, and what they drop on purpose.

- a non-default value in a field the version does not have raises EncodeError, unless the
  field is ignorable, in which case it is silently left out;
- None where the version does not allow null raises EncodeError (strings, bytes, arrays,
  structs, and the elements of string arrays);
- values that do not fit their Kafka type raise EncodeError, never struct.error/TypeError.
"""

from __future__ import annotations

import pytest

from protocol.errors import EncodeError
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.metadata.topic_record import TopicRecord
from tests.support.message_strategies import INT_RANGES
from tests.support.schema_corpus import case_id, project_cases
from tools.codegen.emit import attr_name

CASES = project_cases()


def non_default(module, owner: type, fld):
    """A value of ``fld``'s type that differs from the field's default."""
    default = getattr(owner(), attr_name(fld))
    if fld.is_array:
        if fld.is_struct:
            return [getattr(module, fld.struct.name)()]
        return [_scalar(fld.element_type, None)] if default is not None else []
    if fld.is_struct:
        cls = getattr(module, fld.struct.name)
        if default is None:
            return cls()
        inner = fld.struct.fields[0]
        return cls(**{attr_name(inner): non_default(module, cls, inner)})
    return _scalar(fld.type, default)


def _scalar(kafka_type: str, default):
    if kafka_type == "bool":
        return not default
    if kafka_type in INT_RANGES:
        lo, hi = INT_RANGES[kafka_type]
        return (default if default is not None else lo) + 1 if default != hi else hi - 1
    if kafka_type == "float64":
        return (default or 0.0) + 1.5
    if kafka_type == "string":
        return "x" if default != "x" else "y"
    if kafka_type in ("bytes", "records"):
        return b"x" if default != b"x" else b"y"
    if kafka_type == "uuid":
        return bytes([1] * 16) if default != bytes([1] * 16) else bytes([2] * 16)
    raise AssertionError(kafka_type)


def _absent_field_params():
    params = []
    for case in CASES:
        for fld in case.schema.root.fields:
            for version in case.versions():
                if version not in fld.versions:
                    params.append(pytest.param(case, fld, version,
                                               id=f"{case_id(case)}.{fld.name}-v{version}"))
    return params


@pytest.mark.parametrize(("case", "fld", "version"), _absent_field_params())
def test_field_absent_from_version(case, fld, version):
    cls, module = case.cls(), case.module()
    value = non_default(module, cls, fld)
    obj = cls(**{attr_name(fld): value})
    assert obj != cls()
    if fld.ignorable:
        assert obj.encode(version) == cls().encode(version)
    else:
        with pytest.raises(EncodeError):
            obj.encode(version)


def test_absent_field_params_cover_both_kinds():
    params = _absent_field_params()
    ignorable = [p for p in params if p.values[1].ignorable]
    assert len(params) > 100 and len(ignorable) > 10


NULLABLE_KINDS = ("string", "bytes", "records")


def _null_params():
    params = []
    for case in CASES:
        for fld in case.schema.root.fields:
            if not (fld.is_array or fld.is_struct or fld.type in NULLABLE_KINDS):
                continue
            for version in case.versions():
                if version in fld.versions and version not in fld.nullable:
                    params.append(pytest.param(case, fld, version,
                                               id=f"{case_id(case)}.{fld.name}-v{version}"))
    return params


@pytest.mark.parametrize(("case", "fld", "version"), _null_params())
def test_null_where_not_nullable(case, fld, version):
    cls = case.cls()
    with pytest.raises(EncodeError):
        cls(**{attr_name(fld): None}).encode(version)


def test_null_in_non_nullable_strings():
    # Classic string (int16 length) and compact string (uvarint length).
    for version in (0, 4, 5, 7):
        with pytest.raises(EncodeError):
            CreateTopicsRequest(topics=[CreatableTopic(name=None)]).encode(version)
    # Nullable string: None is fine and comes back as None.
    header = RequestHeader(request_api_key=18, client_id=None)
    decoded, _ = RequestHeader.decode(header.encode(1), 1)
    assert decoded.client_id is None
    with pytest.raises(EncodeError):
        TopicRecord(name=None).encode(0)
    with pytest.raises(EncodeError):
        ApiVersionsRequest(client_software_name=None).encode(3)


def test_null_element_in_string_array():
    from protocol.generated.messages.describe_configs_request import (
        DescribeConfigsRequest, DescribeConfigsResource)
    req = DescribeConfigsRequest(resources=[DescribeConfigsResource(configuration_keys=["a", None])])
    for version in (0, 4):  # classic and compact
        with pytest.raises(EncodeError):
            req.encode(version)


@pytest.mark.parametrize("value", [2 ** 31, -(2 ** 31) - 1, "1", None, 1.5])
def test_out_of_range_or_wrong_type_int(value):
    from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    with pytest.raises(EncodeError):
        BrokerHeartbeatRequest(broker_id=value).encode(1)


@pytest.mark.parametrize("value", [b"", b"\x01" * 15, b"\x01" * 17, "0123456789abcdef", None])
def test_uuid_must_be_16_bytes(value):
    # A UUID field travels as exactly 16 bytes; anything else is a caller error, not a value
    # to pad with zeros or cut short.
    with pytest.raises(EncodeError):
        TopicRecord(name="t", topic_id=value).encode(0)


def test_strings_longer_than_int16_max_are_refused():
    # Kafka caps every string at 0x7fff UTF-8 bytes, in classic and compact form alike: its
    # generated writers throw "field is too long to be serialized" and its readers throw
    # "string field ... had invalid length". A compact length can express more, so the cap has
    # to be enforced explicitly.
    from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
    longest = "x" * 0x7FFF
    assert len(SaslHandshakeRequest(mechanism=longest).encode(1)) == 2 + 0x7FFF
    assert len(TopicRecord(name=longest, topic_id=bytes(16)).encode(0)) > 0x7FFF
    with pytest.raises(EncodeError):
        SaslHandshakeRequest(mechanism=longest + "x").encode(1)   # classic: int16 length
    with pytest.raises(EncodeError):
        TopicRecord(name=longest + "x", topic_id=bytes(16)).encode(0)  # compact length
    with pytest.raises(EncodeError):
        TopicRecord(name="é" * 0x4000, topic_id=bytes(16)).encode(0)  # 0x8000 bytes
