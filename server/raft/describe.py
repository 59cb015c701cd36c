"""DescribeQuorum's answer: the leader's view of every replica of the metadata log.

Only the leader knows every replica's progress; any other node names the leader it knows
(NOT_LEADER_OR_FOLLOWER), as Kafka's does.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.error_codes import Error
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.describe_quorum_response import (
    DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData)
from protocol.primitives import ZERO_UUID
from server.raft.messages import METADATA_TOPIC
from server.raft.state import ReplicaProgress

# Directory ids and the voters' endpoints came with v2 (KIP-853).
DIRECTORIES_VERSION = 2


@dataclass(frozen=True)
class QuorumView:
    """What the answer is made of. ``progress`` (wall-clock times) is set on the leader only;
    ``voters`` maps each voter to its directory; ``endpoints``: where the voters, this node
    and the leader listen, on ``listener_name``."""

    node_id: int
    epoch: int
    leader_id: int
    high_watermark: int
    voters: dict[int, bytes]
    progress: dict[int, ReplicaProgress] | None
    listener_name: str
    endpoints: dict[int, tuple[str, int]]


def describe_quorum(request: DescribeQuorumRequest, version: int, view: QuorumView) -> DescribeQuorumResponse:
    response = DescribeQuorumResponse()
    for topic in request.topics:
        out = TopicData(topic_name=topic.topic_name)
        response.topics.append(out)
        for part in topic.partitions:
            if topic.topic_name != METADATA_TOPIC or part.partition_index != 0:
                out.partitions.append(PartitionData(partition_index=part.partition_index,
                                                    error_code=Error.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            answer = _partition(view)
            if version < DIRECTORIES_VERSION:
                for replica in (*answer.current_voters, *answer.observers):
                    replica.replica_directory_id = ZERO_UUID
            out.partitions.append(answer)
    if version >= DIRECTORIES_VERSION:
        response.nodes = [Node(node_id=n, listeners=[Listener(name=view.listener_name, host=h, port=p)])
                          for n, (h, p) in sorted(view.endpoints.items())]
    return response


def _partition(view: QuorumView) -> PartitionData:
    progress = view.progress
    if progress is None:
        return PartitionData(partition_index=0, error_code=Error.NOT_LEADER_OR_FOLLOWER,
                             leader_id=view.leader_id, leader_epoch=view.epoch)

    def state(replica: int, seen: ReplicaProgress | None) -> ReplicaState:
        directory = view.voters.get(replica, seen.directory_id if seen is not None else ZERO_UUID)
        if seen is None:
            return ReplicaState(replica_id=replica, replica_directory_id=directory, log_end_offset=-1,
                                last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
        return ReplicaState(replica_id=replica, replica_directory_id=directory, log_end_offset=seen.log_end_offset,
                            last_fetch_timestamp=seen.last_fetch_ms, last_caught_up_timestamp=seen.last_caught_up_ms)

    return PartitionData(
        partition_index=0, leader_id=view.node_id, leader_epoch=view.epoch, high_watermark=view.high_watermark,
        current_voters=[state(v, progress.get(v)) for v in sorted(view.voters)],
        observers=[state(r, p) for r, p in sorted(progress.items()) if r not in view.voters])
