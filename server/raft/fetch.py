"""The leader's side of Fetch: one way in for every fetcher of the metadata log, as Kafka's
controller hands every Fetch to its Raft client.

What a fetcher is told depends on who it is (``FetchPolicy``):

- A Raft replica (a voter, or any fetcher that names its log directory: a controller that joins
  with add-controller, a Kafka 3.8+ broker) is held to KRaft's rules: a malformed request is
  INVALID_REQUEST, its last fetched epoch is checked against the leader's log (it is told where
  to truncate, or to fetch the snapshot), it reads up to the leader's log end, and what it has
  fetched counts towards the high watermark and check quorum.
- Any other fetcher (kcat reading the log, an older broker, a tool) reads committed batches
  only and gets Fetch's ordinary per-partition errors, at whatever version it speaks, as a
  consumer of a Kafka partition would: it never sees a record the quorum may still lose.

Both read the same log, the same snapshot and the same epochs; the leader tracks both kinds in
one table of replicas (``server.raft.leader``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from protocol.error_codes import Error
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest
from protocol.generated.messages.fetch_response import (
    EpochEndOffset, FetchableTopicResponse, FetchResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData, SnapshotId)
from protocol.primitives import METADATA_TOPIC_ID, ZERO_UUID
from server.raft.log import RaftLog
from server.raft.messages import METADATA_TOPIC, fetch_replica_key
from server.raft.replication import fetch_position

UNKNOWN_OFFSET = -1
# Fetch versions that carry what KRaft answers with: the current leader, a diverging epoch and a
# snapshot id (v12), the leader's endpoint (v16).
LEADER_FIELDS_VERSION = 12
ENDPOINTS_VERSION = 16


class FetchPolicy(Enum):
    RAFT_REPLICA = "raft replica"
    READER = "reader"


def policy_of(request: FetchRequest, voters: frozenset[int]) -> FetchPolicy:
    key = fetch_replica_key(request)
    if key.id in voters or key.directory_id != ZERO_UUID:
        return FetchPolicy.RAFT_REPLICA
    return FetchPolicy.READER


def has_answer(response: FetchResponse) -> bool:
    """Whether a fetch is answered now rather than parked until something changes: it got
    records, an error, or an instruction (truncate, fetch the snapshot)."""
    return response.error_code != Error.NONE or any(
        p.records or p.error_code != Error.NONE or p.diverging_epoch.epoch >= 0 or p.snapshot_id.epoch >= 0
        for t in response.responses for p in t.partitions)


def fit_to_version(response: FetchResponse, version: int) -> FetchResponse:
    """Leave out what ``version`` cannot carry: older fetchers learn the leader from the error
    code alone."""
    if version < LEADER_FIELDS_VERSION:
        for topic in response.responses:
            for part in topic.partitions:
                part.current_leader = LeaderIdAndEpoch()
                part.diverging_epoch = EpochEndOffset()
                part.snapshot_id = SnapshotId()
    if version < ENDPOINTS_VERSION:
        response.node_endpoints = []
    return response


@dataclass(frozen=True)
class LeaderView:
    """What a reader's answer says of the quorum: this node's epoch and leader, whether this
    node leads (only the leader serves reads), the high watermark and where the leader listens."""

    epoch: int
    leader_id: int
    leading: bool
    high_watermark: int
    leader_address: tuple[str, int] | None


@dataclass(frozen=True)
class Read:
    """A reader's answer, and the offset it fetched from when that counts as its progress."""

    response: FetchResponse
    progress: int | None


def read_for_reader(log: RaftLog, request: FetchRequest, version: int, view: LeaderView) -> Read:
    if sum(len(topic.partitions) for topic in request.topics) > 1:
        # One partition is served; a Fetch naming more, repeats included, is refused whole
        # rather than read once per name.
        return Read(FetchResponse(error_code=Error.INVALID_REQUEST), None)
    response = FetchResponse()
    if view.leader_id >= 0 and view.leader_address is not None:
        response.node_endpoints = [NodeEndpoint(node_id=view.leader_id, host=view.leader_address[0],
                                                port=view.leader_address[1])]
    progress = None
    for topic in request.topics:
        out = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
        response.responses.append(out)
        by_id = topic.topic_id != ZERO_UUID
        ours = topic.topic_id == METADATA_TOPIC_ID if by_id else topic.topic == METADATA_TOPIC
        for part in topic.partitions:
            if not ours or part.partition != 0:
                code = Error.UNKNOWN_TOPIC_ID if by_id else Error.UNKNOWN_TOPIC_OR_PARTITION
                out.partitions.append(PartitionData(partition_index=part.partition, error_code=code,
                                                    high_watermark=UNKNOWN_OFFSET))
                continue
            data, progress = _read_partition(log, part, version, view)
            out.partitions.append(data)
    return Read(fit_to_version(response, version), progress)


def _failed(data: PartitionData, code: int) -> tuple[PartitionData, None]:
    """An error answer carries no offsets, as KRaft's does: a client that compares the high
    watermark with its fetch offset (librdkafka) would otherwise take the error for the end
    of the partition."""
    data.error_code = code
    data.high_watermark = data.last_stable_offset = UNKNOWN_OFFSET
    return data, None


def _read_partition(log: RaftLog, part: FetchPartition, version: int,
                    view: LeaderView) -> tuple[PartitionData, int | None]:
    hw = view.high_watermark
    data = PartitionData(partition_index=0, high_watermark=hw, last_stable_offset=hw,
                         log_start_offset=log.start_offset,
                         current_leader=LeaderIdAndEpoch(leader_id=view.leader_id, leader_epoch=view.epoch))
    if not view.leading:
        return _failed(data, Error.NOT_LEADER_OR_FOLLOWER)
    # A reader that knows no epoch (-1) is not checked against one.
    if part.current_leader_epoch > view.epoch:
        return _failed(data, Error.UNKNOWN_LEADER_EPOCH)
    if 0 <= part.current_leader_epoch < view.epoch:
        return _failed(data, Error.FENCED_LEADER_EPOCH)
    offset = part.fetch_offset
    knows_snapshots = version >= LEADER_FIELDS_VERSION
    if knows_snapshots and part.last_fetched_epoch >= 0:
        position = fetch_position(log, offset, part.last_fetched_epoch)
        if position.snapshot is not None:
            data.snapshot_id = SnapshotId(end_offset=position.snapshot.offset, epoch=position.snapshot.epoch)
            return data, None
        if position.diverging is not None:
            data.diverging_epoch = EpochEndOffset(epoch=position.diverging.epoch, end_offset=position.diverging.offset)
            return data, None
    elif knows_snapshots and offset < log.start_offset and log.latest_snapshot is not None:
        end, epoch = log.latest_snapshot
        data.snapshot_id = SnapshotId(end_offset=end, epoch=epoch)
        return data, None
    if offset < log.start_offset or offset > log.end_offset:
        return _failed(data, Error.OFFSET_OUT_OF_RANGE)
    if offset < hw:
        data.records = log.read(offset, part.partition_max_bytes, up_to=hw - 1)
    return data, offset
