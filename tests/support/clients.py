"""The client matrix's view of its cluster: where the controller and brokers listen, and what
the controller says is true, for each client's answers to be checked against."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.client import KafkaClient
from protocol.constants import ConfigResourceType
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_configs_request import (
    DescribeConfigsRequest, DescribeConfigsResource)
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tools.controller_process import ControllerProcess

BROKER_IDS = (1, 2, 3)
# A client must give up on what a test broker cannot do within this, never wait out a timeout.
FAIL_FAST_S = 20.0


@dataclass
class Cluster:
    controller: ControllerProcess
    brokers: dict[int, tuple[str, int]]

    @property
    def controller_address(self) -> str:
        return f"{self.controller.host}:{self.controller.port}"

    def broker_address(self, broker_id: int) -> str:
        host, port = self.brokers[broker_id]
        return f"{host}:{port}"


class Truth:
    """The controller's own view, read over the wire, to check what a client did."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _client(self) -> KafkaClient:
        return KafkaClient(self.cluster.controller.host, self.cluster.controller.port, "matrix-truth")

    def partitions(self, topic: str) -> dict[int, list[int]] | None:
        """Partition -> replicas of ``topic``; None if it does not exist."""
        with self._client() as c:
            response = c.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
        t = response.topics[0]
        if t.error_code:
            return None
        return {p.partition_index: list(p.replica_nodes) for p in t.partitions}

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """For clients that cannot create topics themselves."""
        with self._client() as c:
            response = c.request(CreateTopicsRequest(topics=[CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=replication_factor)]), 7)
        assert response.topics[0].error_code == 0, response.topics[0].error_message

    def leaders(self, topic: str) -> dict[int, int]:
        with self._client() as c:
            response = c.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
        return {p.partition_index: p.leader_id for p in response.topics[0].partitions}

    def config(self, resource_type: int, name: str, key: str) -> str | None:
        with self._client() as c:
            response = c.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=[key])]), 4)
        result = response.results[0]
        assert result.error_code == 0, result.error_message
        return next((e.value for e in result.configs if e.name == key), None)

    def topic_config(self, topic: str, key: str) -> str | None:
        return self.config(ConfigResourceType.TOPIC, topic, key)

    def broker_config(self, broker_id: int, key: str) -> str | None:
        return self.config(ConfigResourceType.BROKER, str(broker_id), key)

    def reassigning(self) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> target replicas of every reassignment in progress."""
        with self._client() as c:
            response = c.request(ListPartitionReassignmentsRequest(topics=None), 0)
        return {(t.name, p.partition_index): sorted(set(p.replicas) - set(p.removing_replicas))
                for t in response.topics for p in t.partitions}
