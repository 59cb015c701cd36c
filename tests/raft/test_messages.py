"""The quorum RPCs the core builds survive the wire at every version a shell may send them in,
and the core finds its partition in them afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.error_codes import Error
from protocol.message import Message
from server.raft.types import OffsetAndEpoch
from server.raft import messages as rpc
from tests.raft.helpers import batch


def _round_trip(message: Message, version: int) -> Any:
    data = message.encode(version)
    decoded, end = type(message).decode(data, version)
    assert end == len(data) and decoded.encode(version) == data
    return decoded


def _part(topics: list[Any], name_field: str = "topic_name") -> Any:
    part = rpc.only_partition(topics, name_field)
    assert part is not None
    return part


@pytest.mark.parametrize("version", [0, 1])
def test_vote_begin_and_end_epoch_round_trip(version: int) -> None:
    vote = _round_trip(rpc.vote_request("c", 5, 2, 1, 4, 100), version)
    part = _part(vote.topics)
    assert (part.candidate_epoch, part.candidate_id, part.last_offset_epoch, part.last_offset) == (5, 2, 4, 100)
    voted = _part(_round_trip(rpc.vote_response(Error.NONE, 5, 3, True), version).topics)
    assert voted.vote_granted and voted.leader_id == 3
    begin = _part(_round_trip(rpc.begin_epoch_request("c", 6, 2, 1), version).topics)
    assert (begin.leader_id, begin.leader_epoch) == (2, 6)
    end = _part(_round_trip(rpc.end_epoch_request("c", 6, 2, [3, 1]), version).topics)
    assert rpc.end_epoch_successors(end) == [3, 1]
    for response in (rpc.begin_epoch_response(Error.NONE, 6, 2), rpc.end_epoch_response(Error.NONE, 6, 2)):
        assert _part(_round_trip(response, version).topics).leader_epoch == 6


@pytest.mark.parametrize("version", range(12, 18))
def test_fetch_round_trips_from_version_12(version: int) -> None:
    built = rpc.fetch_request("c", 2, 5, 40, 4, 0, 500, 1 << 20)
    rpc.fit_fetch_request(built, version)
    request = _round_trip(built, version)
    part = _part(request.topics, "topic")
    assert (part.current_leader_epoch, part.fetch_offset, part.last_fetched_epoch) == (5, 40, 4)
    assert rpc.fetch_replica_id(request) == 2
    records = batch(40, 5, count=3)
    response = _round_trip(rpc.fetch_response(Error.NONE, 5, 1, 38, 0, records), version)
    answer = _part(response.responses, "topic")
    assert answer.records == records and answer.high_watermark == 38
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (1, 5)
    diverged = _round_trip(rpc.fetch_response(Error.NONE, 5, 1, 38, 0, diverging=OffsetAndEpoch(30, 3)), version)
    assert _part(diverged.responses, "topic").diverging_epoch.end_offset == 30


def test_a_partition_of_another_topic_or_index_is_not_the_metadata_partition() -> None:
    request = rpc.vote_request("c", 5, 2, 1, 4, 100)
    request.topics[0].partitions[0].partition_index = 1
    assert rpc.only_partition(request.topics) is None
    request = rpc.vote_request("c", 5, 2, 1, 4, 100)
    request.topics[0].topic_name = "other"
    assert rpc.only_partition(request.topics) is None


@pytest.mark.parametrize("version", [0, 1])
def test_fetch_snapshot_round_trips(version: int) -> None:
    request = _round_trip(rpc.fetch_snapshot_request("c", 2, 5, OffsetAndEpoch(40, 4), 128, 1 << 20), version)
    part = _part(request.topics, "name")
    assert (part.snapshot_id.end_offset, part.snapshot_id.epoch, part.position) == (40, 4, 128)
    response = _round_trip(rpc.fetch_snapshot_response(Error.NONE, 5, 1, OffsetAndEpoch(40, 4), 300, 128, b"chunk"), version)
    answer = _part(response.topics, "name")
    assert (answer.size, answer.position, answer.unaligned_records) == (300, 128, b"chunk")
    assert answer.current_leader.leader_id == 1
