"""confluent-kafka (librdkafka) against the controller and the test brokers."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import (
    Consumer, ElectionType, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition)
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourceType)

from tests.support.clients import BROKER_IDS, FAIL_FAST_S, Cluster, Truth

TIMEOUT_S = 15.0


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "matrix-confluent-kafka"})


def _done(futures: dict) -> None:
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def test_metadata_and_cluster(admin: AdminClient, cluster: Cluster) -> None:
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == cluster.brokers
    assert metadata.controller_id in BROKER_IDS
    described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert described.cluster_id == cluster.controller.cluster_id
    assert {n.id: (n.host, n.port) for n in described.nodes} == cluster.brokers
    assert described.controller.id in BROKER_IDS


def test_topics(admin: AdminClient, topic: str, truth: Truth) -> None:
    _done(admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)]))
    replicas = truth.partitions(topic)
    assert replicas is not None and sorted(replicas) == list(range(6))
    assert all(sorted(r) == list(BROKER_IDS) for r in replicas.values())
    listed = admin.list_topics(timeout=TIMEOUT_S).topics
    assert {p.id: p.replicas for p in listed[topic].partitions.values()} == replicas
    (described,) = admin.describe_topics(TopicCollection([topic])).values()
    partitions = described.result(timeout=TIMEOUT_S).partitions
    assert {p.id: [n.id for n in p.replicas] for p in partitions} == replicas
    assert all(p.leader.id in [n.id for n in p.isr] for p in partitions)

    _done(admin.create_partitions([NewPartitions(topic, 8)]))
    assert sorted(truth.partitions(topic) or {}) == list(range(8))
    _done(admin.delete_topics([topic]))
    assert truth.partitions(topic) is None


def test_configs_of_topic_and_every_broker(admin: AdminClient, topic: str, truth: Truth) -> None:
    _done(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)]))
    _done(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])]))
    assert truth.topic_config(topic, "retention.ms") == "7200000"
    (described,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert described.result(timeout=TIMEOUT_S)["retention.ms"].value == "7200000"
    for broker_id in BROKER_IDS:
        value = str(broker_id * 200_000)
        _done(admin.incremental_alter_configs([ConfigResource(
            ResourceType.BROKER, str(broker_id), incremental_configs=[
                ConfigEntry("log.retention.ms", value, incremental_operation=AlterConfigOpType.SET)])]))
        assert truth.broker_config(broker_id, "log.retention.ms") == value
        (described,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker_id))]).values()
        assert described.result(timeout=TIMEOUT_S)["log.retention.ms"].value == value


def test_elect_leaders(admin: AdminClient, topic: str, truth: Truth) -> None:
    _done(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)]))
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    result = future.result(timeout=TIMEOUT_S)
    # The leader is the preferred one already: Kafka's answer says no election was needed.
    (error,) = result.values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED
    replicas = truth.partitions(topic)
    assert replicas is not None and truth.leaders(topic)[0] == replicas[0][0]


def test_data_plane_fails_fast(bootstrap: str, topic: str, admin: AdminClient) -> None:
    _done(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)]))
    delivered: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(FAIL_FAST_S)
    assert len(delivered) == 1 and delivered[0] is not None
    assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "matrix-group"})
    try:
        consumer.subscribe([topic])
        began = time.monotonic()
        errors: list[KafkaError] = []
        while not errors and time.monotonic() - began < FAIL_FAST_S:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error():
                errors.append(msg.error())
        assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        assert re.search("coordinates? no groups", errors[0].str()), errors[0].str()
    except KafkaException as exc:
        pytest.fail(f"the consumer raised instead of reporting an error: {exc}")
    finally:
        consumer.close()
