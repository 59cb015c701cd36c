"""Asking the voters of a quorum on loopback who leads, and writing through the leader."""

from __future__ import annotations

from protocol.client import ConnectionClosed, KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData, TopicData)
from protocol.generated.messages.metadata_request import MetadataRequest
from tests.conftest import poll
from tools.controller_process import ControllerProcess, QuorumProcesses

METADATA = "__cluster_metadata"
TIMEOUT_S = 3.0


def client(member: ControllerProcess) -> KafkaClient:
    return KafkaClient(member.host, member.port, client_id="kraftwire-quorum-test", timeout=TIMEOUT_S)


def describe_quorum(member: ControllerProcess):
    """The metadata partition's entry of DescribeQuorum (only the leader answers it whole)."""
    with client(member) as c:
        response = c.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA, partitions=[PartitionData(partition_index=0)])]), 1)
    return response.topics[0].partitions[0]


def leader(quorum: QuorumProcesses, exclude: frozenset[int] = frozenset()) -> int | None:
    """The voter that says it leads, if one among the running ones does."""
    for node in quorum.running():
        if node in exclude:
            continue
        try:
            part = describe_quorum(quorum.members[node])
        except (OSError, ConnectionClosed):
            continue  # killed or frozen a moment ago
        if part.error_code == Error.NONE and part.leader_id == node:
            return node
    return None


def wait_for_leader(quorum: QuorumProcesses, exclude: frozenset[int] = frozenset(), timeout: float = 20.0) -> int:
    found = poll(lambda: leader(quorum, exclude), timeout, interval=0.05,
                 message=f"a leader among {quorum.running()} (not {sorted(exclude)})")
    assert isinstance(found, int)
    return found


def create_topic(member: ControllerProcess, name: str, partitions: int = 1) -> int:
    """The topic's error code in the CreateTopics answer; -1 if the connection failed."""
    try:
        with client(member) as c:
            response = c.request(CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1)],
                timeout_ms=int(TIMEOUT_S * 1000)), 7)
    except (OSError, ConnectionClosed):
        return -1
    return response.topics[0].error_code


def metadata(member: ControllerProcess):
    with client(member) as c:
        return c.request(MetadataRequest(topics=None), 12)


def topic_names(member: ControllerProcess) -> set[str]:
    return {t.name for t in metadata(member).topics}
