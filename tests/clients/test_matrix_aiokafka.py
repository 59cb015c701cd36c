"""aiokafka against the controller and the test brokers: the admin calls it has."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from tests.support.clients import BROKER_IDS, FAIL_FAST_S, Cluster, Truth


def with_admin(bootstrap: str, body: Callable[[AIOKafkaAdminClient], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="matrix-aiokafka", request_timeout_ms=15000)
        await admin.start()
        try:
            return await body(admin)
        finally:
            await admin.close()
    return asyncio.run(run())


def _configs(responses: list, name: str) -> dict[str, str]:
    """name -> value of one resource in DescribeConfigs responses."""
    for response in responses:
        for error_code, _, _, resource_name, entries in (r[:5] for r in response.resources):
            if resource_name == name:
                assert error_code == 0
                return {e[0]: e[1] for e in entries}
    raise AssertionError(f"{name} is not in the answer")


def test_metadata_and_cluster(bootstrap: str, cluster: Cluster) -> None:
    described = with_admin(bootstrap, lambda a: a.describe_cluster())
    assert described["cluster_id"] == cluster.controller.cluster_id
    assert {b["node_id"]: (b["host"], b["port"]) for b in described["brokers"]} == cluster.brokers
    assert described["controller_id"] in BROKER_IDS


def test_topics(bootstrap: str, topic: str, truth: Truth) -> None:
    async def create_and_look(admin: AIOKafkaAdminClient) -> tuple[list[str], list[Any]]:
        await admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])
        return await admin.list_topics(), await admin.describe_topics([topic])

    listed, described = with_admin(bootstrap, create_and_look)
    replicas = truth.partitions(topic)
    assert replicas is not None and sorted(replicas) == list(range(6))
    assert all(sorted(r) == list(BROKER_IDS) for r in replicas.values())
    assert topic in listed
    assert {p["partition"]: p["replicas"] for p in described[0]["partitions"]} == replicas

    with_admin(bootstrap, lambda a: a.create_partitions({topic: NewPartitions(total_count=8)}))
    assert sorted(truth.partitions(topic) or {}) == list(range(8))
    with_admin(bootstrap, lambda a: a.delete_topics([topic]))
    assert truth.partitions(topic) is None


def test_configs_of_topic_and_every_broker(bootstrap: str, topic: str, truth: Truth) -> None:
    with_admin(bootstrap, lambda a: a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)]))
    # aiokafka sends AlterConfigs, which sets the whole set of a resource's dynamic configs.
    with_admin(bootstrap, lambda a: a.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "5400000"})]))
    assert truth.topic_config(topic, "retention.ms") == "5400000"
    described = with_admin(bootstrap, lambda a: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
    assert _configs(described, topic)["retention.ms"] == "5400000"
    for broker_id in BROKER_IDS:
        value = str(broker_id * 300_000)
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), configs={"log.retention.ms": value})
        with_admin(bootstrap, lambda a: a.alter_configs([resource]))
        assert truth.broker_config(broker_id, "log.retention.ms") == value
        described = with_admin(bootstrap, lambda a: a.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(broker_id))]))
        assert _configs(described, str(broker_id))["log.retention.ms"] == value


def test_data_plane_fails_fast(bootstrap: str, topic: str) -> None:
    with_admin(bootstrap, lambda a: a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)]))

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, b"x"), FAIL_FAST_S)
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce())

    async def consume() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="matrix-group")
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getone(), FAIL_FAST_S)
        finally:
            await consumer.stop()

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(consume())
