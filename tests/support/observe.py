"""Looking at the controller from a test: which brokers are unfenced, who leads what."""

from __future__ import annotations

from typing import Callable

from protocol.client import KafkaClient
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest, TopicRequest)
from tools.processes import poll

Partitions = dict[int, tuple[int, list[int], list[int]]]


def unfenced_brokers(admin: KafkaClient) -> list[int]:
    """DescribeCluster lists the unfenced brokers only."""
    response = admin.request(DescribeClusterRequest(), 1)
    return sorted(b.broker_id for b in response.brokers)


def partitions(admin: KafkaClient, topic: str) -> Partitions:
    """partition -> (leader, ISR sorted, replicas), from DescribeTopicPartitions."""
    response = admin.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name=topic)],
                                                            response_partition_limit=2000), 0)
    (t,) = response.topics
    assert t.error_code == 0, t.error_code
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes), list(p.replica_nodes)) for p in t.partitions}


def eligible_leaders(admin: KafkaClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, eligible leader replicas, last known ELR) (KIP-966)."""
    response = admin.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name=topic)],
                                                            response_partition_limit=2000), 0)
    (t,) = response.topics
    return {p.partition_index: (p.leader_id, list(p.eligible_leader_replicas or []), list(p.last_known_elr or []))
            for p in t.partitions}


def wait_until(predicate: Callable[[], object], timeout: float, message: str) -> object:
    """``poll`` at a gentler pace: each of these predicates makes a request."""
    return poll(predicate, timeout, interval=0.1, message=message)
