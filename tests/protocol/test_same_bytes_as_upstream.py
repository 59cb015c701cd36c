"""The project's schemas put the same bytes on the wire as Apache Kafka's.

Every project schema has a counterpart of the same file name in the upstream corpus (message/
or metadata/). Values drawn from one schema, encoded by its class, must decode with the other
class and re-encode to identical bytes, in both directions and in every valid version.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.protocol.corpus import (
    case_id, hypothesis_settings, project_cases, upstream_cases, upstream_counterpart,
    version_params)
from tests.protocol.strategies import MessageValues, all_structs, max_known_tag

CASES = project_cases()
UPSTREAM = upstream_cases()

# Versions Kafka released after the reference corpus was taken; the versions both have must
# still match byte for byte (test_same_bytes_as_upstream).
NEWER_THAN_REFERENCE = {
    "VoteRequest": 2,  # Kafka 4.0, KIP-996: PreVote
    "VoteResponse": 2,  # Kafka 4.0, bumped with the request
}


def _counterpart(case):
    other = upstream_counterpart(case, UPSTREAM)
    assert other is not None, f"{case.rel} has no upstream counterpart"
    return other


def _tag_floor(*schemas) -> int:
    """Unknown tags above every tag either schema knows, so neither decoder reads them as known."""
    return 1 + max(max_known_tag(s) for schema in schemas for s in all_structs(schema))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_same_identity_as_upstream(case):
    up = _counterpart(case).schema
    ours = case.schema
    assert ours.name == up.name
    assert ours.kind == up.kind
    assert ours.api_key == up.api_key
    assert (ours.valid.lo, ours.valid.hi) == (up.valid.lo, NEWER_THAN_REFERENCE.get(ours.name, up.valid.hi))
    if up.flexible.empty():
        assert ours.flexible.empty()
    else:
        assert (ours.flexible.lo, ours.flexible.hi) == (up.flexible.lo, up.flexible.hi)


def _transfer(src_cls, dst_cls, obj, version):
    data = obj.encode(version)
    decoded, end = dst_cls.decode(data, version)
    assert end == len(data), f"{dst_cls.NAME} v{version} read {end} of {len(data)} bytes"
    assert decoded.encode(version) == data
    # And back: the other side's view of the message is the same message.
    back, _ = src_cls.decode(decoded.encode(version), version)
    assert back == obj


@pytest.mark.parametrize(("case", "version"), version_params(CASES), ids=case_id)
def test_same_bytes_as_upstream(upstream_tree, case, version):
    up_case = upstream_tree.case(_counterpart(case).rel)
    if version not in up_case.schema.valid and version >= NEWER_THAN_REFERENCE.get(case.schema.name, version + 1):
        pytest.skip(f"{case.schema.name} v{version} is newer than the reference corpus")
    if version not in up_case.schema.valid:
        pytest.fail(f"upstream {up_case.rel} has no version {version}")
    ours_cls, up_cls = case.cls(), up_case.cls()
    floor = _tag_floor(case.schema, up_case.schema)
    ours_values = MessageValues(case.schema, case.module(), unknown_tag_floor=floor)
    up_values = MessageValues(up_case.schema, up_case.module(), unknown_tag_floor=floor)

    @hypothesis_settings(8)
    @given(ours_values.strategy(version), up_values.strategy(version))
    def run(ours_obj, up_obj):
        _transfer(ours_cls, up_cls, ours_obj, version)
        _transfer(up_cls, ours_cls, up_obj, version)

    run()


def _fields(struct, path=""):
    for fld in struct.fields:
        yield f"{path}.{fld.name}", fld
        if fld.struct is not None:
            yield from _fields(fld.struct, f"{path}.{fld.name}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_same_field_model_as_upstream(case):
    """Field by field, the project schema says what the upstream one says about the wire:
    names, types, versions, nullability, tags, defaults and ignorability."""
    from tools.codegen.emit import default_literal

    up = _counterpart(case).schema
    newer = NEWER_THAN_REFERENCE.get(case.schema.name)
    # Fields of the newer versions only are not in the reference.
    ours = {path: fld for path, fld in _fields(case.schema.root) if newer is None or fld.versions.lo < newer}
    theirs = dict(_fields(up.root))
    assert sorted(ours) == sorted(theirs)
    for path, fld in ours.items():
        other = theirs[path]
        for attr in ("type", "versions", "nullable", "tagged", "tag", "ignorable", "flexible"):
            assert getattr(fld, attr) == getattr(other, attr), (path, attr)
        assert default_literal(fld) == default_literal(other), (path, "default")
