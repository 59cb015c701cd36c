"""Request-level answers as Apache Kafka's ControllerApis gives them (ControllerApisTest), and
DescribeTopicPartitions as Kafka's handler pages it; first driven directly, then a
representative subset over real sockets against a controller process on 127.0.0.1.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.alter_configs_request import (
    AlterableConfig as LegacyConfig, AlterConfigsRequest, AlterConfigsResource as LegacyResource)
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.describe_topic_partitions_request import (
    Cursor, DescribeTopicPartitionsRequest, TopicRequest)
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.metadata.register_controller_record import RegisterControllerRecord
from protocol.primitives import ZERO_UUID, random_uuid
from server.controller.result import ControllerResult
from tests.support.replication import CONTROLLER_ID, Cluster
from tests.support.wire import WireBroker, connect, unregister

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16
SET = 0


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    return cluster


def incremental(*resources: tuple[int, str, str, str]) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=rtype, resource_name=rname, configs=[
            AlterableConfig(name=key, config_operation=SET, value=value)])
        for rtype, rname, key, value in resources])


def answers(response) -> set[tuple[int, str, int, str | None]]:
    return {(r.resource_type, r.resource_name, r.error_code, r.error_message or None)
            for r in response.responses}


# --- configs -------------------------------------------------------------------------------

def test_invalid_incremental_alter_configs_resources(c):
    """ControllerApisTest.testInvalidIncrementalAlterConfigsResources: a resource named twice
    is answered once with "Duplicate resource."; a type Kafka does not know is
    UNSUPPORTED_VERSION; the rest go through."""
    applied = c.run(c.qc.incremental_alter_configs(incremental(
        (BROKER, "3", "log.cleaner.backoff.ms", "100000"),
        (BROKER, "3", "log.cleaner.backoff.ms", "100000"),
        (124, "foo", "foo", "bar"),
        (BROKER, "2", "log.cleaner.backoff.ms", "100000")), 1))
    assert answers(applied.response) == {
        (BROKER, "3", Error.INVALID_REQUEST, "Duplicate resource."),
        (124, "foo", Error.UNSUPPORTED_VERSION, "Unknown resource type 124."),
        (BROKER, "2", Error.NONE, None)}
    assert [(r.resource_name, r.name) for r, _ in applied.records] == [("2", "log.cleaner.backoff.ms")]


def test_handle_legacy_alter_configs_errors(c):
    """ControllerApisTest.testHandleLegacyAlterConfigsErrors, without the authorizer."""
    def legacy(rtype: int, rname: str) -> LegacyResource:
        return LegacyResource(resource_type=rtype, resource_name=rname, configs=[
            LegacyConfig(name="log.cleaner.backoff.ms", value="100000")])
    applied = c.run(c.qc.alter_configs(AlterConfigsRequest(resources=[
        legacy(BROKER, "1"), legacy(BROKER, "2"), legacy(BROKER, "2"), legacy(123, "baz")]), 0))
    assert answers(applied.response) == {
        (BROKER, "1", Error.NONE, None),
        (BROKER, "2", Error.INVALID_REQUEST, "Duplicate resource."),
        (123, "baz", Error.UNSUPPORTED_VERSION, "Unknown resource type 123.")}


def test_broker_configs_need_a_known_node(c):
    """QuorumController.ConfigResourceExistenceChecker: a broker id must be a registered broker
    or a controller; the cluster default always exists; names must be non-negative numbers."""
    c.run(c.qc.apply(ControllerResult([(RegisterControllerRecord(
        controller_id=3001, incarnation_id=random_uuid(), end_points=[], features=[]), 0)])))
    applied = c.run(c.qc.incremental_alter_configs(incremental(
        (BROKER, "7", "log.cleaner.backoff.ms", "1"),
        (BROKER, "1", "log.cleaner.backoff.ms", "1"),
        (BROKER, str(CONTROLLER_ID), "log.cleaner.backoff.ms", "1"),
        (BROKER, "3001", "log.cleaner.backoff.ms", "1"),
        (BROKER, "", "log.cleaner.backoff.ms", "1"),
        (BROKER, "-1", "log.cleaner.backoff.ms", "1"),
        (BROKER, "one", "log.cleaner.backoff.ms", "1"),
        (TOPIC, "", "retention.ms", "1")), 1))
    assert answers(applied.response) == {
        (BROKER, "7", Error.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
        (BROKER, "1", Error.NONE, None),
        (BROKER, str(CONTROLLER_ID), Error.NONE, None),
        (BROKER, "3001", Error.NONE, None),
        (BROKER, "", Error.NONE, None),
        (BROKER, "-1", Error.INVALID_REQUEST, "Invalid negative broker ID."),
        (BROKER, "one", Error.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        (TOPIC, "", Error.INVALID_REQUEST, "Default topic resources are not allowed.")}


def test_topic_configs_need_a_legal_name(c):
    """ControllerConfigurationValidator.validateTopicName: Topic.validate's refusal comes before
    the existence check."""
    applied = c.run(c.qc.incremental_alter_configs(incremental(
        (TOPIC, "bad name", "retention.ms", "1"), (TOPIC, "missing", "retention.ms", "1")), 1))
    assert answers(applied.response) == {
        (TOPIC, "bad name", Error.INVALID_TOPIC_EXCEPTION,
         "Topic name \"bad name\" is illegal, it contains a character other than ASCII alphanumerics, "
         "'.', '_' and '-'"),
        (TOPIC, "missing", Error.UNKNOWN_TOPIC_OR_PARTITION, "Topic 'missing' does not exist.")}


def test_describe_configs_of_nodes(c):
    """ConfigHelper.describeConfigs: the controller's own id and the cluster default describe;
    an id of no known node is INVALID_REQUEST. kraftwire also describes registered brokers."""
    response = c.qc.describe_configs(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=BROKER, resource_name=name, configuration_keys=["num.partitions"])
        for name in (str(CONTROLLER_ID), "", "2", "9")]), 4)
    assert [r.error_code for r in response.results] == [
        Error.NONE, Error.NONE, Error.NONE, Error.INVALID_REQUEST]


# --- DescribeTopicPartitions ---------------------------------------------------------------

@pytest.fixture
def many(c) -> Cluster:
    for name in ("a", "b", "c"):
        c.topic(name, partitions=3, rf=1)
    return c


def dtp(c: Cluster, names: list[str], cursor: tuple[str, int] | None = None, limit: int = 2000):
    return c.qc.describe_topic_partitions(DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1])), 0)


def test_a_cursor_outside_the_requested_topics_is_an_invalid_request(many):
    """DescribeTopicPartitionsRequestHandler: the cursor's topic must be one of those asked
    for; every topic asked for is answered INVALID_REQUEST."""
    response = dtp(many, ["a", "c"], cursor=("b", 0))
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("a", Error.INVALID_REQUEST, []), ("c", Error.INVALID_REQUEST, [])]
    assert response.next_cursor is None


def test_a_negative_cursor_partition_is_an_invalid_request(many):
    response = dtp(many, [], cursor=("b", -1))
    assert response.topics == [] and response.next_cursor is None
    response = dtp(many, ["b"], cursor=("b", -1))
    assert [t.error_code for t in response.topics] == [Error.INVALID_REQUEST]


def test_only_topics_from_the_cursor_on_are_described(many):
    """Names before the cursor's topic are skipped, in a list or for all topics."""
    response = dtp(many, ["a", "b", "c"], cursor=("b", 1))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [
        ("b", [1, 2]), ("c", [0, 1, 2])]
    response = dtp(many, [], cursor=("c", 2))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [("c", [2])]


def test_unknown_and_invalid_names(many):
    """KRaftMetadataCache: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal name
    INVALID_TOPIC_EXCEPTION; a full page ends with a cursor at the next topic, known or not."""
    response = dtp(many, ["a", "bad name", "zz"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", Error.NONE), ("bad name", Error.INVALID_TOPIC_EXCEPTION), ("zz", Error.UNKNOWN_TOPIC_OR_PARTITION)]
    response = dtp(many, ["a", "zz"], limit=3)
    assert [t.name for t in response.topics] == ["a"]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("zz", 0)


# --- over the wire --------------------------------------------------------------------------

CREATE_TOPICS_V, DELETE_TOPICS_V, CREATE_PARTITIONS_V = 7, 6, 3
INCREMENTAL_ALTER_CONFIGS_V, ALTER_PARTITION_V, DTP_V = 1, 3, 0
CAUGHT_UP = 1 << 40


def active(controller, broker_id: int) -> WireBroker:
    broker = WireBroker(controller, broker_id)
    assert broker.register().error_code == Error.NONE
    assert broker.heartbeat().is_fenced is False  # caught up with its own registration only
    return broker


def create_topics(client, *topics: CreatableTopic):
    return client.request(CreateTopicsRequest(topics=list(topics), timeout_ms=5000), CREATE_TOPICS_V)


def new_topic(name: str, replicas: list[int] | None = None) -> CreatableTopic:
    if replicas is None:
        return CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    return CreatableTopic(name=name, num_partitions=-1, replication_factor=-1, assignments=[
        CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])


def test_topic_requests_over_the_wire(controller):
    """ControllerApisTest.testCreateTopics, testInvalidDeleteTopicsRequest and
    testCreatePartitionsRequest, through a real controller."""
    brokers = [active(controller, b) for b in (1, 2)]
    with connect(controller) as client:
        created = create_topics(client, new_topic("foo_bar"), new_topic("dup"), new_topic("dup"))
        assert [(t.name, t.error_code) for t in created.topics] == [
            ("foo_bar", Error.NONE), ("dup", Error.INVALID_REQUEST)]
        clash = create_topics(client, new_topic("foo.bar"))
        assert (clash.topics[0].error_code, clash.topics[0].error_message) == (
            Error.INVALID_TOPIC_EXCEPTION, "Topic 'foo.bar' collides with existing topic: foo_bar")
        topic_id = created.topics[0].topic_id
        deleted = client.request(DeleteTopicsRequest(topics=[
            DeleteTopicState(name="foo_bar"), DeleteTopicState(name=None, topic_id=topic_id),
            DeleteTopicState(name=None, topic_id=ZERO_UUID)], timeout_ms=5000), DELETE_TOPICS_V)
        assert {(r.name, r.error_code) for r in deleted.responses} == {
            ("foo_bar", Error.INVALID_REQUEST), (None, Error.INVALID_REQUEST)}
        grown = client.request(CreatePartitionsRequest(topics=[
            CreatePartitionsTopic(name="foo_bar", count=2, assignments=None),
            CreatePartitionsTopic(name="foo_bar", count=3, assignments=None)], timeout_ms=5000),
            CREATE_PARTITIONS_V)
        assert [(r.name, r.error_code) for r in grown.results] == [("foo_bar", Error.INVALID_REQUEST)]
    for b in brokers:
        b.close()


def test_config_requests_over_the_wire(controller):
    """ControllerApisTest.testInvalidIncrementalAlterConfigsResources and the node existence
    check, through a real controller."""
    broker = active(controller, 1)
    with connect(controller) as client:
        response = client.request(incremental(
            (BROKER, "1", "log.cleaner.backoff.ms", "1"), (BROKER, "1", "log.cleaner.backoff.ms", "2"),
            (BROKER, "7", "log.cleaner.backoff.ms", "1"), (124, "foo", "foo", "bar"),
            (BROKER, "", "log.cleaner.backoff.ms", "5")), INCREMENTAL_ALTER_CONFIGS_V)
        assert answers(response) == {
            (BROKER, "1", Error.INVALID_REQUEST, "Duplicate resource."),
            (BROKER, "7", Error.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
            (124, "foo", Error.UNSUPPORTED_VERSION, "Unknown resource type 124."),
            (BROKER, "", Error.NONE, None)}
    broker.close()


def test_broker_lifecycle_answers_over_the_wire(controller):
    """Kafka's answers for ids without a registration, a fenced broker's id, and the
    controlled shutdown of a leader that waits for the other active broker."""
    leader, other = active(controller, 1), active(controller, 2)
    with connect(controller) as client:
        assert unregister(client, 77).error_code == Error.BROKER_ID_NOT_REGISTERED
        assert WireBroker(controller, 77).heartbeat(epoch=3).error_code == Error.STALE_BROKER_EPOCH
        created = create_topics(client, new_topic("led", [1, 2]))
        assert created.topics[0].error_code == Error.NONE
    first = leader.heartbeat(offset=CAUGHT_UP, want_shut_down=True)
    assert (first.should_shut_down, first.is_fenced) == (False, False)
    # Broker 2 last reported an offset from before the leadership moved.
    waiting = leader.heartbeat(offset=CAUGHT_UP, want_shut_down=True)
    assert waiting.should_shut_down is False
    assert other.heartbeat(offset=CAUGHT_UP).is_fenced is False
    done = leader.heartbeat(offset=CAUGHT_UP, want_shut_down=True)
    assert (done.should_shut_down, done.is_fenced) == (True, True)
    # Fenced now, so a new incarnation may take the id at once.
    assert WireBroker(controller, 1).register().error_code == Error.NONE
    other.close()
    leader.close()


def test_alter_partition_and_cursor_over_the_wire(controller):
    """AlterPartition from a replica that does not lead is INVALID_REQUEST, and a
    DescribeTopicPartitions cursor outside the requested topics is INVALID_REQUEST."""
    brokers = {b: active(controller, b) for b in (1, 2)}
    with connect(controller) as client:
        created = create_topics(client, new_topic("t", [1, 2]))
        topic_id = created.topics[0].topic_id
        response = brokers[2].client.request(AlterPartitionRequest(
            broker_id=2, broker_epoch=brokers[2].epoch, topics=[TopicData(topic_id=topic_id, partitions=[
                PartitionData(partition_index=0, leader_epoch=0, partition_epoch=0, new_isr_with_epochs=[
                    BrokerState(broker_id=2, broker_epoch=brokers[2].epoch)])])]), ALTER_PARTITION_V)
        assert response.topics[0].partitions[0].error_code == Error.INVALID_REQUEST
        described = client.request(DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name="t")], response_partition_limit=10,
            cursor=Cursor(topic_name="other", partition_index=0)), DTP_V)
        assert [(t.name, t.error_code) for t in described.topics] == [("t", Error.INVALID_REQUEST)]
    for b in brokers.values():
        b.close()
