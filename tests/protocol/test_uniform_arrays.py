"""Arrays of structs that share one layout are read in one pass; these cases pin that the pass
gives what reading each struct alone gives, and that it steps aside when the structs differ."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import pytest

from protocol.errors import DecodeError
from protocol.generated.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition as Partition,
    DescribeTopicPartitionsResponseTopic as Topic)
from protocol.primitives import INT32, uniform_columns
from tools.codegen.emit import UNIFORM_MIN_COUNT


def partition(i: int, replicas: int = 3, elr: list[int] | None = None, offline: list[int] | None = None,
              tags: dict[int, bytes] | None = None) -> Partition:
    nodes = [(i + k) % 30 for k in range(replicas)]
    return Partition(partition_index=i, leader_id=nodes[0] if nodes else -1, leader_epoch=i, replica_nodes=nodes,
                     isr_nodes=nodes, eligible_leader_replicas=elr, offline_replicas=offline or [],
                     unknown_tagged_fields=tags)


def response(parts: list[Partition]) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(topics=[Topic(name="t", topic_id=bytes(range(16)), partitions=parts)])


SAME = [partition(i) for i in range(12)]
LAYOUTS = {
    "all alike": SAME,
    "alike with empty and null arrays": [partition(i, elr=[], offline=[]) for i in range(8)],
    "alike with non-empty nullable arrays": [partition(i, elr=[1, 2]) for i in range(8)],
    "last one differs": SAME[:-1] + [partition(11, replicas=2)],
    "null where the first is empty": [partition(i, elr=[] if i == 0 else None) for i in range(6)],
    "one has tagged fields": SAME[:5] + [partition(5, tags={7: b"xy"})] + SAME[6:],
    "a count past one byte": [partition(i, replicas=200) for i in range(5)],
    "too few to check": SAME[:UNIFORM_MIN_COUNT - 1],
}


@pytest.mark.parametrize("parts", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_decoded_as_written(parts: list[Partition]) -> None:
    msg = response(parts)
    raw = msg.encode(0)
    decoded, end = DescribeTopicPartitionsResponse.decode(raw, 0)
    assert end == len(raw)
    assert decoded == msg
    assert decoded.encode(0) == raw


def test_the_pass_is_taken_only_when_every_struct_is_alike() -> None:
    def rows(parts: list[Partition]) -> tuple[list[Iterable[Any]], int] | None:
        # The partitions begin after throttle time, the topic count and the topic's fields.
        start = 4 + 1 + 2 + 2 + 16 + 1 + 1
        arrays = (("i", False), ("i", False), ("i", True), ("i", True), ("i", False))
        return uniform_columns(response(parts).encode(0), start, len(parts), struct.Struct(">hiii"), 4, arrays)

    found = rows(SAME)
    assert found is not None
    columns, _ = found
    got = [list(column) for column in columns]
    assert got[1] == [p.partition_index for p in SAME]
    assert got[4] == [p.replica_nodes for p in SAME]
    assert got[6] == [p.eligible_leader_replicas for p in SAME] == [None] * len(SAME)
    assert got[8] == [p.offline_replicas for p in SAME]
    for name in ("last one differs", "null where the first is empty", "one has tagged fields",
                 "a count past one byte"):
        assert rows(LAYOUTS[name]) is None, name


def test_a_truncated_uniform_array_fails_as_one_decode_error() -> None:
    raw = response(SAME).encode(0)
    for cut in (len(raw) - 1, len(raw) - 30, 60):
        with pytest.raises(DecodeError):
            DescribeTopicPartitionsResponse.decode(raw[:cut], 0)


def test_a_length_byte_that_claims_more_than_remains_fails() -> None:
    raw = bytearray(response(SAME).encode(0))
    # The first partition's replica count sits after the topic header and the fixed fields.
    first = raw.index(bytes([4]) + INT32.pack(0) + INT32.pack(1))
    raw[first] = 127
    with pytest.raises(DecodeError):
        DescribeTopicPartitionsResponse.decode(bytes(raw), 0)
