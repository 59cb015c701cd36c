"""The project's schemas say what Apache Kafka's say about the wire.

Every project schema has a counterpart of the same file name in the upstream corpus (message/
or metadata/): the same identity, versions and fields. The bytes themselves are checked against
bytes Kafka's own serializers wrote, in test_kafka_golden.
"""

from __future__ import annotations

import pytest

from tests.support.schema_corpus import case_id, project_cases, upstream_cases, upstream_counterpart

CASES = project_cases()
UPSTREAM = upstream_cases()

# Versions Kafka released after the reference corpus was taken; the versions both have must
# still match field for field.
NEWER_THAN_REFERENCE = {
    "VoteRequest": 2,  # Kafka 4.0, KIP-996: PreVote
    "VoteResponse": 2,  # Kafka 4.0, bumped with the request
}


def _counterpart(case):
    other = upstream_counterpart(case, UPSTREAM)
    assert other is not None, f"{case.rel} has no upstream counterpart"
    return other


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
