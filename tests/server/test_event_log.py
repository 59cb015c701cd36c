"""The controller's INFO lines, as Kafka's controller writes them: registrations, fencing and
unfencing with their reason, controlled shutdowns, topic creations and deletions, reassignment
results, configuration changes, and leader elections (a large batch summarised)."""

from __future__ import annotations

import pytest

from protocol.constants import AlterConfigOpType, ConfigResourceType
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.primitives import random_uuid
from server.controller.event_log import LISTED_PARTITIONS
from tests.support.replication import Cluster
from tests.support.harness import Harness

LOGGER = "kraftwire.controller"


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    return cluster


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "INFO"]
    caplog.clear()
    return out


def test_registration_and_unfencing(caplog):
    h = Harness()
    incarnation = random_uuid()
    with caplog.at_level("INFO", logger=LOGGER):
        first = h.register(1, incarnation).response.broker_epoch
        assert lines(caplog) == [
            f"No previous registration found for broker 1. New incarnation ID is {_text(incarnation)}.  "
            f"Generated 0 record(s) to clean up previous incarnations. New broker epoch is {first}."]
        h.register(1, incarnation)
        assert lines(caplog) == [f"Amending registration of broker 1, incarnation ID {_text(incarnation)}. "
                                 f"Broker epoch remains {first}."]
        again = random_uuid()
        second = h.register(1, again).response.broker_epoch
        assert lines(caplog) == [
            f"Registering a new incarnation of broker 1. Previous incarnation ID was {_text(incarnation)}; "
            f"new incarnation ID is {_text(again)}. Generated 0 record(s) to clean up previous incarnations. "
            f"Broker epoch will become {second}."]
        h.heartbeat(1, second, offset=second)
        assert lines(caplog) == [f"The request from broker 1 to unfence has been granted because it has "
                                 f"caught up with the offset of its register broker record {second}."]


def test_topics_fencing_and_elections(c, caplog):
    with caplog.at_level("INFO", logger=LOGGER):
        topic_id = c.topic("orders", [[1, 2], [2, 1]])
        assert lines(caplog) == ["CreateTopics result(s): orders: SUCCESS",
                                 f"Created topic orders with topic ID {_text(topic_id)} and 2 partition(s)."]
        c.expire(1)
        assert lines(caplog) == ["Fencing broker 1 because its session has timed out.",
                                 "Changed the leader of 1 partition(s): orders-0 -> 2"]
        c.shut_down(2)
        # The reason comes first, then what it changed.
        assert lines(caplog) == ["Unfenced broker 2 has requested and been granted a controlled shutdown.",
                                 "Changed the leader of 2 partition(s): orders-0 -> none, orders-1 -> none"]
        c.heartbeat(3)  # every active broker has seen the shutdown begin
        c.shut_down(2)
        assert lines(caplog) == ["The request from broker 2 to shut down has been granted: it leads no partition "
                                 "and every active broker has replicated its controlled shutdown."]
        c.delete("orders")
        assert lines(caplog) == [f"Deleting topic orders with ID {_text(topic_id)}."]


def test_every_create_topics_result_is_logged_refusals_included(caplog):
    """Kafka's ReplicationControlManager logs each CreateTopics result at INFO: a request
    refused whole (no broker registered) leaves its reason in the log."""
    c = Cluster()
    with caplog.at_level("INFO", logger=LOGGER):
        c.create("orders", partitions=1, rf=3)
        [line] = lines(caplog)
        assert line.startswith("CreateTopics result(s): orders: INVALID_REPLICATION_FACTOR (")
        c.brokers(1)
        lines(caplog)  # the registration's
        c.create("a", partitions=1, rf=1, validate_only=True)
        assert lines(caplog) == ["Validate-only CreateTopics result(s): a: SUCCESS"]


def test_a_large_election_is_summarised(c, caplog):
    partitions = LISTED_PARTITIONS + 5
    c.topic("big", [[1, 2]] * partitions)
    with caplog.at_level("INFO", logger=LOGGER):
        c.expire(1)
    [_, elected] = lines(caplog)
    assert elected.startswith(f"Changed the leader of {partitions} partition(s): big-0 -> 2, big-1 -> 2")
    assert elected.endswith("(and 5 more)") and elected.count("->") == LISTED_PARTITIONS


def test_every_reassignment_result_is_logged_refusals_included(c, caplog):
    """Kafka's ReplicationControlManager.alterPartitionReassignments: a line for each partition
    it cannot reassign, then how many of the request's it did."""
    c.topic("orders", [[1, 2]])
    with caplog.at_level("INFO", logger=LOGGER):
        c.reassign("orders", 0, [2, 3])
        assert lines(caplog)[0] == "Successfully altered 1 out of 1 partition reassignment(s)."
        c.reassign("orders", 7, [2, 3])
        assert lines(caplog) == [
            "Unable to alter partition reassignment for orders:7 because of UNKNOWN_TOPIC_OR_PARTITION "
            "(Unable to find partition orders:7.)",
            "Successfully altered 0 out of 1 partition reassignment(s)."]


def test_each_configuration_change_is_logged_secrets_hidden(c, caplog):
    """Kafka's ConfigurationControlManager logs each configuration it sets, a value it cannot
    know to be harmless (a password, a config it cannot type) as [hidden]."""
    c.topic("orders", [[1]])
    with caplog.at_level("INFO", logger=LOGGER):
        c.set_topic_config("orders", "retention.ms", "1000")
        assert lines(caplog) == ["Set configuration retention.ms of ConfigResource(type=TOPIC, name='orders') to 1000."]
        c.run(c.qc.incremental_alter_configs(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="orders", configs=[
                AlterableConfig(name="retention.ms", config_operation=AlterConfigOpType.DELETE)]),
            AlterConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="", configs=[
                AlterableConfig(name="listener.name.internal.ssl.key.password", config_operation=AlterConfigOpType.SET,
                                value="secret")])]), 1))
        assert lines(caplog) == [
            "Removed configuration retention.ms of ConfigResource(type=TOPIC, name='orders').",
            "Set configuration listener.name.internal.ssl.key.password of ConfigResource(type=BROKER, name='') "
            "to [hidden]."]


def _text(uuid: bytes) -> str:
    from protocol.primitives import uuid_to_str
    return uuid_to_str(uuid)
