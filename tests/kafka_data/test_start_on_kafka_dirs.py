"""kraftwire started on a copy of each real Kafka controller's directory serves what the files hold.

The expectation is an independent reading of the copied files (``tests/support/kafka_data.py``); what the
server serves is read over the wire: Metadata, DescribeTopicPartitions, DescribeConfigs,
DescribeCluster, ApiVersions' finalized features and, through AllocateProducerIds, the next
producer id block.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.broker_registration_request import Feature
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest, TopicRequest
from protocol.generated.messages.metadata_request import MetadataRequest
from server.controller.config_defs import TOPIC_CONFIGS
from server.metalog.meta_properties import read_meta_properties
from tests.support.kafka_data import Expected, read_directory
from tests.support.shared_data import metadata_dir_params
from tests.support.wire import registration_request

TOPIC_RESOURCE = 2
MV_RANGE = (7, 29)
# Nodes of a three-voter Kafka quorum: kraftwire refuses them unless told to take over.
MULTI_VOTER = {"hiage-kafka-raft--data-kafka1", "greenlemonT-kafka-temp--data-kafka1"}


def served_topics(client: KafkaClient) -> dict[str, tuple[bytes, dict[int, tuple]]]:
    response = client.request(MetadataRequest(topics=None), 12)
    return {t.name: (t.topic_id, {p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes),
                                                     list(p.isr_nodes)) for p in t.partitions})
            for t in response.topics}


def expected_topics(expected: Expected) -> dict[str, tuple[bytes, dict[int, tuple]]]:
    topics: dict[str, tuple[bytes, dict[int, tuple]]] = {name: (tid, {}) for name, tid in expected.topics.items()}
    for (tid, index), p in expected.partitions.items():
        topics[expected.topic_name(tid)][1][index] = (p.leader, p.leader_epoch, p.replicas, p.isr)
    return topics


def described_partitions(client: KafkaClient, names: list[str]) -> dict[str, dict[int, tuple]]:
    found: dict[str, dict[int, tuple]] = {}
    cursor = None
    while True:
        response = client.request(DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name=n) for n in names], cursor=cursor), 0)
        for t in response.topics:
            assert t.error_code == Error.NONE, t.name
            found.setdefault(t.name, {}).update({
                p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
                for p in t.partitions})
        if response.next_cursor is None:
            return found
        cursor = response.next_cursor


def described_topic_configs(client: KafkaClient, wanted: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    response = client.request(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=sorted(keys))
        for name, keys in wanted.items()]), 4)
    return {r.resource_name: {c.name: c.value for c in r.configs} for r in response.results}


@pytest.mark.parametrize("source", metadata_dir_params())
def test_serves_what_the_kafka_directory_holds(source: Path, start_on) -> None:
    flags = ["--take-over-quorum"] if source.name in MULTI_VOTER else []
    controller = start_on(source, *flags)
    expected = read_directory(controller.data_dir)
    assert controller.cluster_id == read_meta_properties(source).cluster_id
    with KafkaClient(controller.host, controller.port, client_id="kafka-dir-test", timeout=20) as client:
        topics = served_topics(client)
        assert topics == expected_topics(expected)
        if topics:
            assert described_partitions(client, sorted(topics)) == {n: p for n, (_, p) in topics.items()}
        # Kafka 3.x directories keep topic configs Kafka 4 removed (message.timestamp.difference.max.ms,
        # ...); kraftwire, like Kafka 4, describes only the configs it defines.
        configured = {name: known for name, c in expected.topic_configs.items()
                      if name in expected.topics and (known := {k: v for k, v in c.items() if k in TOPIC_CONFIGS})}
        if configured:
            assert described_topic_configs(client, configured) == configured

        cluster = client.request(DescribeClusterRequest(), 1)
        assert cluster.cluster_id == controller.cluster_id
        assert sorted(b.broker_id for b in cluster.brokers) == sorted(
            b for b, (_, fenced) in expected.brokers.items() if not fenced)

        versions = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert {f.name: f.max_version_level for f in versions.finalized_features} == expected.features

        if expected.brokers:
            broker_id, (epoch, _) = sorted(expected.brokers.items())[0]
            block = client.request(AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch), 0)
            assert block.error_code == Error.NONE
            assert (block.producer_id_start, block.producer_id_len) == (expected.next_producer_id or 0, 1000)

        # A broker registers with whatever string the directory's cluster id is (under an id
        # that is neither a broker's nor the controller's own).
        new_id = max([*expected.brokers, read_meta_properties(source).node_id]) + 1
        for cluster_id, outcome in (("not-" + controller.cluster_id, Error.INCONSISTENT_CLUSTER_ID),
                                    (controller.cluster_id, Error.NONE)):
            request = registration_request(cluster_id, new_id, mv_range=MV_RANGE)
            request.features += [Feature(name=name, min_supported_version=0, max_supported_version=level)
                                 for name, level in expected.features.items() if name != "metadata.version"]
            assert client.request(request, 4).error_code == outcome


@pytest.mark.parametrize("source", [p for p in metadata_dir_params() if p.id in MULTI_VOTER or p.id == "no-shared-data"])
def test_a_node_of_a_three_voter_quorum_is_refused_without_the_flag(source: Path, start_on) -> None:
    with pytest.raises(RuntimeError) as failure:
        start_on(source)
    message = str(failure.value)
    assert "the quorum's voters are [1, 2, 3]" in message and "--take-over-quorum" in message
    assert "Traceback" not in message
