"""Every project schema, every valid version: encode -> decode -> encode is the identity."""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.support.message_strategies import MessageValues
from tests.support.schema_corpus import (
    case_id, check_roundtrip, hypothesis_settings, project_cases, version_params)

CASES = project_cases()


def test_project_corpus_is_complete():
    names = {c.rel.as_posix() for c in CASES}
    assert len(CASES) >= 90
    assert {"messages/BrokerHeartbeatRequest.json", "metadata/PartitionChangeRecord.json",
            "messages/RequestHeader.json"} <= names


@pytest.mark.parametrize(("case", "version"), version_params(CASES), ids=case_id)
def test_roundtrip(case, version):
    cls = case.cls()
    values = MessageValues(case.schema, case.module())

    @hypothesis_settings(20)
    @given(values.strategy(version))
    def run(obj):
        check_roundtrip(cls, obj, version)

    run()


@pytest.mark.parametrize(("case", "version"), version_params(CASES), ids=case_id)
def test_defaults_roundtrip(case, version):
    """A message built with no arguments encodes in every version and decodes back equal."""
    cls = case.cls()
    check_roundtrip(cls, cls(), version)


# Lengths around the unsigned-varint boundaries: compact lengths carry n + 1, so 126 elements
# fit one byte and 127 need two; 16383 + 1 needs three. Strings use a two-byte UTF-8 character
# so that byte lengths, not character counts, must be written.
LONG_SIZES = (126, 127, 128, 300)


def _long_value(module, owner, fld, size: int):
    if fld.is_array:
        if fld.is_struct:
            return [getattr(module, fld.struct.name)() for _ in range(size)]
        sample = {"string": "s", "uuid": bytes(range(16)), "bool": True, "float64": 1.5,
                  "bytes": b"b", "records": b"r"}.get(fld.element_type, 7)
        return [sample] * size
    if fld.type == "string":
        return "é" * (size // 2) + "x" * (size % 2)
    if fld.type in ("bytes", "records"):
        return bytes(range(256)) * (size // 256) + bytes(size % 256)
    return None


@pytest.mark.parametrize(("case", "version"), version_params(CASES), ids=case_id)
def test_long_values_roundtrip(case, version):
    from tools.codegen.emit import attr_name
    cls, module = case.cls(), case.module()
    checked = 0
    for fld in case.schema.root.fields:
        if version not in fld.versions:
            continue
        for size in LONG_SIZES:
            value = _long_value(module, cls, fld, size)
            if value is None:
                break
            check_roundtrip(cls, cls(**{attr_name(fld): value}), version)
            checked += 1
    # A 16384-byte string needs a three-byte compact length (and still fits an int16).
    if any(version in f.versions and f.type == "string" for f in case.schema.root.fields):
        fld = next(f for f in case.schema.root.fields if version in f.versions and f.type == "string")
        check_roundtrip(cls, cls(**{attr_name(fld): "z" * 16384}), version)
    assert checked or not any(version in f.versions and (f.is_array or f.type in ("string", "bytes", "records"))
                              for f in case.schema.root.fields)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_versions_outside_the_range_are_refused(case):
    from protocol.errors import DecodeError, EncodeError
    cls = case.cls()
    outside = [case.schema.valid.hi + 1, -1] + ([case.schema.valid.lo - 1] if case.schema.valid.lo else [])
    for version in outside:
        with pytest.raises(EncodeError):
            cls().encode(version)
        with pytest.raises(DecodeError) as info:
            cls.decode(cls().encode(case.schema.valid.hi), version)
        assert info.value.message_name == case.schema.name
