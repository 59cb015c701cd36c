"""The KRaft RPCs for the one __cluster_metadata partition: building them and finding the
partition inside them.

Every quorum RPC nests one topic holding one partition; these helpers keep that nesting out of
the state machine. Fetch names the topic by id from v13 and by name before, so both are set
and either is accepted.
"""

from __future__ import annotations

from typing import Any

from protocol.generated.messages import (
    begin_quorum_epoch_request as bqe_req, begin_quorum_epoch_response as bqe_resp,
    end_quorum_epoch_request as eqe_req, end_quorum_epoch_response as eqe_resp,
    fetch_request as f_req, fetch_response as f_resp, fetch_snapshot_request as fs_req,
    fetch_snapshot_response as fs_resp, vote_request as v_req, vote_response as v_resp)
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.primitives import METADATA_TOPIC_ID, ZERO_UUID
from server.raft.types import OffsetAndEpoch, ReplicaKey

METADATA_TOPIC = "__cluster_metadata"


def only_partition(topics: list[Any], name_field: str = "topic_name") -> Any | None:
    """The one partition of a quorum RPC, or None if it names anything else."""
    if len(topics) != 1:
        return None
    topic = topics[0]
    if getattr(topic, name_field) != METADATA_TOPIC and getattr(topic, "topic_id", None) != METADATA_TOPIC_ID:
        return None
    parts = getattr(topic, "partitions")
    if len(parts) != 1:
        return None
    part = parts[0]
    for index_field in ("partition", "partition_index", "index"):
        if hasattr(part, index_field):
            return part if getattr(part, index_field) == 0 else None
    return None


def as_key(replica: int | ReplicaKey) -> ReplicaKey:
    """A node id alone is a replica of unknown directory (a kraft.version 0 voter)."""
    return replica if isinstance(replica, ReplicaKey) else ReplicaKey(replica)


# --- Vote -----------------------------------------------------------------------------------

def vote_request(cluster_id: str, epoch: int, candidate: int | ReplicaKey, voter: int | ReplicaKey,
                 last_epoch: int, last_offset: int, pre_vote: bool = False) -> v_req.VoteRequest:
    candidate, voter = as_key(candidate), as_key(voter)
    part = v_req.PartitionData(partition_index=0, candidate_epoch=epoch, candidate_id=candidate.id,
                               candidate_directory_id=candidate.directory_id,
                               voter_directory_id=voter.directory_id,
                               last_offset_epoch=last_epoch, last_offset=last_offset, pre_vote=pre_vote)
    return v_req.VoteRequest(cluster_id=cluster_id, voter_id=voter.id,
                             topics=[v_req.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def vote_response(error: int, epoch: int, leader_id: int, granted: bool) -> v_resp.VoteResponse:
    part = v_resp.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                leader_epoch=epoch, vote_granted=granted)
    return v_resp.VoteResponse(topics=[v_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


# --- BeginQuorumEpoch -------------------------------------------------------------------------

def begin_epoch_request(cluster_id: str, epoch: int, leader_id: int, voter: int | ReplicaKey,
                        leader_endpoints: tuple[tuple[str, str, int], ...] = ()) -> bqe_req.BeginQuorumEpochRequest:
    voter = as_key(voter)
    part = bqe_req.PartitionData(partition_index=0, leader_id=leader_id, leader_epoch=epoch,
                                 voter_directory_id=voter.directory_id)
    return bqe_req.BeginQuorumEpochRequest(
        cluster_id=cluster_id, voter_id=voter.id,
        topics=[bqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=[part])],
        leader_endpoints=[bqe_req.LeaderEndpoint(name=n, host=h, port=p) for n, h, p in leader_endpoints])


def begin_epoch_response(error: int, epoch: int, leader_id: int) -> bqe_resp.BeginQuorumEpochResponse:
    part = bqe_resp.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                  leader_epoch=epoch)
    return bqe_resp.BeginQuorumEpochResponse(
        topics=[bqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


# --- EndQuorumEpoch ---------------------------------------------------------------------------

def end_epoch_request(cluster_id: str, epoch: int, leader_id: int,
                      successors: list[int]) -> eqe_req.EndQuorumEpochRequest:
    part = eqe_req.PartitionData(partition_index=0, leader_id=leader_id, leader_epoch=epoch,
                                 preferred_successors=list(successors),
                                 preferred_candidates=[eqe_req.ReplicaInfo(candidate_id=s) for s in successors])
    return eqe_req.EndQuorumEpochRequest(
        cluster_id=cluster_id, topics=[eqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def end_epoch_successors(part: eqe_req.PartitionData) -> list[int]:
    """PreferredCandidates (v1+) when present, else PreferredSuccessors (v0)."""
    if part.preferred_candidates:
        return [c.candidate_id for c in part.preferred_candidates]
    return list(part.preferred_successors)


def end_epoch_response(error: int, epoch: int, leader_id: int) -> eqe_resp.EndQuorumEpochResponse:
    part = eqe_resp.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                  leader_epoch=epoch)
    return eqe_resp.EndQuorumEpochResponse(
        topics=[eqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


# --- Fetch ------------------------------------------------------------------------------------

def fetch_request(cluster_id: str, replica: int | ReplicaKey, epoch: int, fetch_offset: int, last_fetched_epoch: int,
                  log_start_offset: int, max_wait_ms: int, max_bytes: int) -> f_req.FetchRequest:
    replica = as_key(replica)
    part = f_req.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=fetch_offset,
                                last_fetched_epoch=last_fetched_epoch, log_start_offset=log_start_offset,
                                partition_max_bytes=max_bytes, replica_directory_id=replica.directory_id)
    return f_req.FetchRequest(
        cluster_id=cluster_id, replica_state=f_req.ReplicaState(replica_id=replica.id),
        max_wait_ms=max_wait_ms, max_bytes=max_bytes,
        topics=[f_req.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part])])


def fit_fetch_request(request: f_req.FetchRequest, version: int) -> None:
    """Move the fetcher's id where ``version`` carries it: ReplicaState from v15, ReplicaId
    before. The shell calls this once it knows the version the leader speaks."""
    if version < 15:
        request.replica_id = request.replica_state.replica_id
        request.replica_state = f_req.ReplicaState()


def fetch_replica_id(request: f_req.FetchRequest) -> int:
    """ReplicaState.ReplicaId from v15, ReplicaId before; whichever was set."""
    state_id = request.replica_state.replica_id
    return state_id if state_id >= 0 else request.replica_id


def fetch_response(error: int, epoch: int, leader_id: int, high_watermark: int, log_start_offset: int,
                   records: bytes = b"", diverging: OffsetAndEpoch | None = None,
                   leader_address: tuple[str, int] | None = None) -> f_resp.FetchResponse:
    part = f_resp.PartitionData(
        partition_index=0, error_code=error, high_watermark=high_watermark,
        last_stable_offset=high_watermark, log_start_offset=log_start_offset, records=records,
        current_leader=f_resp.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch))
    if diverging is not None:
        part.diverging_epoch = f_resp.EpochEndOffset(epoch=diverging.epoch, end_offset=diverging.offset)
    # The leader's endpoint (v16+), so that a fetcher that only knew a bootstrap server can
    # go to it.
    endpoints = [] if leader_address is None or leader_id < 0 else [
        f_resp.NodeEndpoint(node_id=leader_id, host=leader_address[0], port=leader_address[1])]
    return f_resp.FetchResponse(responses=[f_resp.FetchableTopicResponse(
        topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part])], node_endpoints=endpoints)


def fetch_replica_key(request: f_req.FetchRequest) -> ReplicaKey:
    part = request.topics[0].partitions[0] if request.topics and request.topics[0].partitions else None
    return ReplicaKey(fetch_replica_id(request), part.replica_directory_id if part is not None else ZERO_UUID)


def requester_id(message: object) -> int:
    """The node a quorum request says it comes from, as Kafka's handlers read it from the body
    (the candidate, the leader, the fetching replica, the voter updating itself); -1 for an
    admin client's request (DescribeQuorum, AddRaftVoter, RemoveRaftVoter) or one naming no
    partition."""
    if isinstance(message, f_req.FetchRequest):
        return fetch_replica_id(message)
    if isinstance(message, fs_req.FetchSnapshotRequest):
        return message.replica_id
    if isinstance(message, UpdateRaftVoterRequest):
        return message.voter_id
    if isinstance(message, v_req.VoteRequest):
        part = only_partition(message.topics)
        return part.candidate_id if part is not None else -1
    if isinstance(message, (bqe_req.BeginQuorumEpochRequest, eqe_req.EndQuorumEpochRequest)):
        part = only_partition(message.topics)
        return part.leader_id if part is not None else -1
    return -1


# --- FetchSnapshot ----------------------------------------------------------------------------

def fetch_snapshot_request(cluster_id: str, replica: int | ReplicaKey, epoch: int, snapshot: OffsetAndEpoch,
                           position: int, max_bytes: int) -> fs_req.FetchSnapshotRequest:
    replica = as_key(replica)
    part = fs_req.PartitionSnapshot(partition=0, current_leader_epoch=epoch, position=position,
                                    snapshot_id=fs_req.SnapshotId(end_offset=snapshot.offset, epoch=snapshot.epoch),
                                    replica_directory_id=replica.directory_id)
    return fs_req.FetchSnapshotRequest(cluster_id=cluster_id, replica_id=replica.id, max_bytes=max_bytes,
                                       topics=[fs_req.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])


def fetch_snapshot_response(error: int, epoch: int, leader_id: int, snapshot: OffsetAndEpoch, size: int = 0,
                            position: int = 0, chunk: bytes = b"") -> fs_resp.FetchSnapshotResponse:
    part = fs_resp.PartitionSnapshot(
        index=0, error_code=error, size=size, position=position, unaligned_records=chunk,
        snapshot_id=fs_resp.SnapshotId(end_offset=snapshot.offset, epoch=snapshot.epoch),
        current_leader=fs_resp.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch))
    return fs_resp.FetchSnapshotResponse(topics=[fs_resp.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])
