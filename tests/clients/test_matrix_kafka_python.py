"""kafka-python against the controller and the test brokers: the whole admin surface it has."""

from __future__ import annotations

import time
from typing import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic)
from kafka.errors import KafkaError

from tests.support.clients import BROKER_IDS, FAIL_FAST_S, Cluster, Truth


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000, client_id="matrix-kafka-python")
    yield client
    client.close()


def test_metadata_and_cluster(admin: KafkaAdminClient, cluster: Cluster) -> None:
    described = admin.describe_cluster()
    assert described["cluster_id"] == cluster.controller.cluster_id
    assert {b["broker_id"]: (b["host"], b["port"]) for b in described["brokers"]} == cluster.brokers
    assert described["controller_id"] in BROKER_IDS


def test_topics(admin: KafkaAdminClient, topic: str, truth: Truth) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])
    replicas = truth.partitions(topic)
    assert replicas is not None and sorted(replicas) == list(range(6))
    assert all(sorted(r) == list(BROKER_IDS) for r in replicas.values())
    assert topic in admin.list_topics()
    (described,) = admin.describe_topics([topic])
    assert {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]} == replicas
    assert all(p["leader_id"] in p["isr_nodes"] for p in described["partitions"])

    admin.create_partitions({topic: NewPartitions(total_count=8)})
    assert sorted(truth.partitions(topic) or {}) == list(range(8))
    admin.delete_topics([topic])
    assert truth.partitions(topic) is None
    assert topic not in admin.list_topics()


def test_configs_of_topic_and_every_broker(admin: KafkaAdminClient, topic: str, truth: Truth) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "3600000"})],
                        incremental=True)
    assert truth.topic_config(topic, "retention.ms") == "3600000"
    for broker_id in BROKER_IDS:
        value = str(broker_id * 100_000)
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker_id),
                                            configs={"log.retention.ms": (AlterConfigOp.SET, value)})],
                            incremental=True)
        assert truth.broker_config(broker_id, "log.retention.ms") == value
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker_id),
                                                           configs={"log.retention.ms": None})])
        assert described["broker"][str(broker_id)]["log.retention.ms"]["value"] == value
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": None})])
    assert described["topic"][topic]["retention.ms"]["value"] == "3600000"


def test_reassign_list_and_elect(admin: KafkaAdminClient, topic: str, truth: Truth) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=2)])
    replicas = truth.partitions(topic)
    assert replicas is not None
    # Partition 0: the same replicas in another order, done at once; partition 1: a third
    # replica that the brokers never let catch up, so it stays in progress.
    reordered = list(reversed(replicas[0]))
    third = next(b for b in BROKER_IDS if b not in replicas[1])
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    admin.alter_partition_reassignments({p0: reordered, p1: [*replicas[1], third]})
    assert truth.partitions(topic) is not None and truth.partitions(topic)[0] == reordered
    listed = admin.list_partition_reassignments([p0, p1])
    assert {(tp.topic, tp.partition) for tp in listed} == {(topic, 1)} == {
        k for k in truth.reassigning() if k[0] == topic}

    admin.elect_leaders(0, {topic: [0]})  # 0: preferred
    assert truth.leaders(topic)[0] == reordered[0]


def test_quorum_and_features(admin: KafkaAdminClient, cluster: Cluster) -> None:
    (partition,) = admin.describe_metadata_quorum()["topics"][0]["partitions"]
    assert partition["leader_id"] == 3000
    assert [v["replica_id"] for v in partition["current_voters"]] == [3000]
    features = admin.describe_features()
    assert features["metadata.version"]["finalized"][0] >= 7


def test_data_plane_fails_fast(bootstrap: str, topic: str, admin: KafkaAdminClient, cluster: Cluster) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])
    # kafka-python takes the API versions of the node it bootstrapped at for the cluster's:
    # bootstrapped at the controller, it finds that no data API is served and says so.
    at_controller = bootstrap == cluster.controller_address
    unsupported = "does not support the '{}'"
    # Idempotent (the default) asks for a producer id first; without, it produces at once.
    for idempotent, *refused in ((True, "ClusterAuthorizationFailed", "InitProducerIdRequest"),
                                (False, "TopicAuthorizationFailed", "ProduceRequest")):
        producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent)
        try:
            with pytest.raises(KafkaError, match=unsupported.format(refused[1]) if at_controller else refused[0]):
                producer.send(topic, b"x").get(timeout=FAIL_FAST_S)
        finally:
            producer.close(timeout=1)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="matrix-group")
    try:
        began = time.monotonic()
        with pytest.raises(KafkaError, match="GroupAuthorizationFailed"):
            while time.monotonic() - began < FAIL_FAST_S:
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()
