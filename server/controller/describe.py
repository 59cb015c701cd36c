"""Read-only views of the topics: Metadata and DescribeTopicPartitions (KIP-966).

An admin client bootstrapped at the controller sends every later request to the nodes it
learns from Metadata, so by default the node list is the controller's own endpoint with
controller_id set to it; ``kraftwire.metadata.nodes=brokers`` lists the live brokers, which
serve clients and forward admin requests (the test brokers do), with one of them as controller.
"""

from __future__ import annotations

from typing import Callable

from protocol.constants import AUTHORIZED_OPERATIONS_OMITTED, NO_LEADER
from protocol.error_codes import Error
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from protocol.generated.messages.describe_topic_partitions_response import (
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic)
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.metadata_response import (
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic)
from protocol.primitives import ZERO_UUID
from server.controller.cluster import Endpoint
from server.controller.partitions import PartitionState
from server.controller.replication import ReplicationControl
from server.controller.topic_names import topic_name_problem



class TopicViews:
    def __init__(self, replication: ReplicationControl,
                 active_controller: Callable[[], tuple[int, Endpoint | None]], list_brokers: bool) -> None:
        """``active_controller``: who leads now (-1: none known) and where it listens, asked at
        each request because a standby learns the leader's endpoint after its id."""
        self.r = replication
        self.active_controller = active_controller
        self.list_brokers = list_brokers

    def _offline(self, p: PartitionState) -> list[int]:
        brokers = self.r.cluster.brokers
        return [b for b in p.replicas if b not in brokers or brokers[b].fenced]

    # --- Metadata --------------------------------------------------------------------------------
    def metadata(self, req: MetadataRequest, version: int, cluster_id: str) -> MetadataResponse:
        controller_id, controller_endpoint = self.active_controller()
        response = MetadataResponse(cluster_id=cluster_id, controller_id=controller_id)
        live = [MetadataResponseBroker(node_id=b.broker_id, host=b.endpoints[0].host, port=b.endpoints[0].port,
                                       rack=b.rack or None)
                for b in sorted(self.r.cluster.brokers.values(), key=lambda b: b.broker_id)
                if not b.fenced and b.endpoints] if self.list_brokers else []
        if live or (self.list_brokers and controller_endpoint is None):
            response.brokers = live
            # As Kafka's brokers answer: a live broker stands for the controller, and forwards
            # the admin requests clients send it. Until a broker is live, the controller names itself.
            ids = [b.node_id for b in live]
            response.controller_id = controller_id if controller_id in ids else (ids[0] if ids else -1)
        elif controller_endpoint is not None:
            e = controller_endpoint
            response.brokers = [MetadataResponseBroker(node_id=controller_id, host=e.host, port=e.port)]
        # (name, topic id) of each topic asked for; None for a lookup the version cannot answer.
        wanted: list[tuple[str | None, bytes | None] | None]
        if req.topics is None or (version == 0 and not req.topics):
            names = sorted(self.r.names)
            wanted = [(n, self.r.names[n]) for n in names]
        else:
            wanted = []
            for t in req.topics:
                if t.name is not None:
                    wanted.append((t.name, self.r.names.get(t.name)))
                elif version < 12:
                    # Only v10+ names a topic by id alone, and v10-11 answers cannot hold a null
                    # name (an unknown id has none): Kafka refuses lookups by id before v12.
                    wanted.append(None)
                else:
                    topic = self.r.topics.get(t.topic_id)
                    wanted.append((None if topic is None else topic.name, t.topic_id))
        for entry in wanted:
            if entry is None:
                response.topics.append(MetadataResponseTopic(error_code=Error.INVALID_REQUEST, name=""))
                continue
            name, topic_id = entry
            topic = self.r.topics.get(topic_id) if topic_id is not None else None
            if topic is None:
                response.topics.append(MetadataResponseTopic(
                    error_code=Error.UNKNOWN_TOPIC_ID if name is None else Error.UNKNOWN_TOPIC_OR_PARTITION,
                    name=name, topic_id=topic_id or ZERO_UUID))
                continue
            response.topics.append(MetadataResponseTopic(
                name=topic.name, topic_id=topic.topic_id if version >= 10 else ZERO_UUID,
                partitions=[self._metadata_partition(p, version) for p in topic.partitions],
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
        return response

    def _metadata_partition(self, p: PartitionState, version: int) -> MetadataResponsePartition:
        return MetadataResponsePartition(
            error_code=Error.LEADER_NOT_AVAILABLE if p.leader == NO_LEADER else Error.NONE,
            partition_index=p.partition_id, leader_id=p.leader,
            leader_epoch=p.leader_epoch if version >= 7 else -1,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=self._offline(p) if version >= 5 else [])

    # --- DescribeTopicPartitions ---------------------------------------------------------------
    def describe_topic_partitions(self, req: DescribeTopicPartitionsRequest,
                                  limit_cap: int) -> DescribeTopicPartitionsResponse:
        """Topics sorted by name, partitions by index, at most the partition limit per
        response; ``NextCursor`` names where the next page starts. As Kafka's handler: only
        topics at or after the cursor's are described, and a cursor must name one of the
        topics asked for and a partition index that is not negative."""
        limit = max(1, min(req.response_partition_limit, limit_cap))
        cursor = req.cursor
        first_name = cursor.topic_name if cursor is not None else ""
        asked = sorted(self.r.names) if not req.topics else sorted({t.name for t in req.topics})
        names = [n for n in asked if n >= first_name]
        if cursor is not None and ((req.topics and cursor.topic_name not in names) or cursor.partition_index < 0):
            return DescribeTopicPartitionsResponse(topics=[
                DescribeTopicPartitionsResponseTopic(error_code=Error.INVALID_REQUEST, name=t.name,
                                                     is_internal=False)
                for t in req.topics])
        response = DescribeTopicPartitionsResponse()
        budget = limit
        for name in names:
            if budget == 0:
                response.next_cursor = Cursor(topic_name=name, partition_index=0)
                break
            topic_id = self.r.names.get(name)
            if topic_id is None:
                response.topics.append(DescribeTopicPartitionsResponseTopic(
                    error_code=_unknown_topic_error(name), name=name))
                continue
            topic = self.r.topics[topic_id]
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            parts = topic.partitions[first:first + budget]
            budget -= len(parts)
            response.topics.append(DescribeTopicPartitionsResponseTopic(
                name=name, topic_id=topic_id, is_internal=False,
                partitions=[self._dtp_partition(p) for p in parts],
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            if first + len(parts) < len(topic.partitions):
                response.next_cursor = Cursor(topic_name=name, partition_index=first + len(parts))
                break
        return response

    def _dtp_partition(self, p: PartitionState) -> DescribeTopicPartitionsResponsePartition:
        return DescribeTopicPartitionsResponsePartition(
            error_code=Error.NONE, partition_index=p.partition_id, leader_id=p.leader,
            leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            eligible_leader_replicas=list(p.elr), last_known_elr=list(p.last_known_elr),
            offline_replicas=self._offline(p))


def _unknown_topic_error(name: str) -> int:
    return Error.UNKNOWN_TOPIC_OR_PARTITION if topic_name_problem(name) is None else Error.INVALID_TOPIC_EXCEPTION
