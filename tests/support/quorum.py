"""Asking the voters of a quorum on loopback who leads, and writing through the leader."""

from __future__ import annotations

from protocol.client import ConnectionClosed
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData, TopicData)
from protocol.generated.messages.metadata_request import MetadataRequest
from tests.support.wire import connect
from tools.controller_process import ControllerProcess

METADATA = "__cluster_metadata"
# A member that is down or not leading must not hold a test up: each request gives up after this.
TIMEOUT_S = 3.0


def describe_quorum(member: ControllerProcess):
    """The metadata partition's entry of DescribeQuorum (only the leader answers it whole)."""
    with connect(member, TIMEOUT_S) as c:
        response = c.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA, partitions=[PartitionData(partition_index=0)])]), 1)
    return response.topics[0].partitions[0]


def create_topic(member: ControllerProcess, name: str, partitions: int = 1) -> int:
    """The topic's error code in the CreateTopics answer; -1 if the connection failed."""
    try:
        with connect(member, TIMEOUT_S) as c:
            response = c.request(CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1)],
                timeout_ms=int(TIMEOUT_S * 1000)), 7)
    except (OSError, ConnectionClosed):
        return -1
    return response.topics[0].error_code


def metadata(member: ControllerProcess):
    with connect(member, TIMEOUT_S) as c:
        return c.request(MetadataRequest(topics=None), 12)


def topic_names(member: ControllerProcess) -> set[str]:
    return {t.name for t in metadata(member).topics}
