"""Topics, partitions and ISR changes as Apache Kafka's controller decides them
(ReplicationControlManagerTest, and the request-level checks of ControllerApisTest), driven
directly with a ManualClock.

Each test names the Kafka scenario it follows.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.primitives import ZERO_UUID, random_uuid
from tests.support.replication import Cluster, assert_replays


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    return cluster


def create(c: Cluster, *topics: tuple[str, int, int], version: int = 7):
    request = CreateTopicsRequest(topics=[
        CreatableTopic(name=name, num_partitions=n, replication_factor=rf) for name, n, rf in topics])
    return c.run(c.qc.create_topics(request, version))


def results(applied) -> dict[str, tuple[int, str | None]]:
    return {t.name: (t.error_code, t.error_message or None) for t in applied.response.topics}


# --- CreateTopics ----------------------------------------------------------------------------

def test_create_topic_with_collision_chars(c):
    """ReplicationControlManagerTest.testCreateTopicWithCollisionChars / testTopicNameCollision:
    '.' and '_' collide with an existing topic; the exact name is TOPIC_ALREADY_EXISTS."""
    c.topic("foo_bar", partitions=1, rf=1)
    c.topic("woo.bar.foo", partitions=1, rf=1)
    applied = create(c, ("foo.bar", 1, 1), ("woo.bar_foo", 1, 1), ("foo_bar", 1, 1), ("foo-bar", 1, 1))
    assert results(applied) == {
        "foo.bar": (Error.INVALID_TOPIC_EXCEPTION, "Topic 'foo.bar' collides with existing topic: foo_bar"),
        "woo.bar_foo": (Error.INVALID_TOPIC_EXCEPTION,
                        "Topic 'woo.bar_foo' collides with existing topic: woo.bar.foo"),
        "foo_bar": (Error.TOPIC_ALREADY_EXISTS, "Topic 'foo_bar' already exists."),
        "foo-bar": (Error.NONE, None)}
    assert sorted(c.qc.replication.names) == ["foo-bar", "foo_bar", "woo.bar.foo"]


@pytest.mark.parametrize("name,message", [
    ("", "Topic name is illegal, it can't be empty"),
    ("..", "Topic name cannot be \".\" or \"..\""),
    ("x" * 250, "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "x" * 250),
    ("a/b", "Topic name \"a/b\" is illegal, it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'"),
])
def test_validate_new_topic_names(c, name, message):
    """ReplicationControlManagerTest.testValidateNewTopicNames: Topic.validate's words."""
    assert results(create(c, (name, 1, 1)))[name] == (Error.INVALID_TOPIC_EXCEPTION, message)


def test_create_topics_with_configs(c):
    """ReplicationControlManagerTest.testCreateTopicsWithConfigs: a topic's configs are written
    between its TopicRecord and its partitions; a null value is INVALID_CONFIG and writes
    nothing; one topic failing leaves the others of the request alone."""
    from protocol.generated.messages.create_topics_request import CreatableTopicConfig
    ok = c.create("foo", partitions=1, rf=1, configs={"retention.ms": "1000"})
    assert [r.NAME for r, _ in ok.records] == ["TopicRecord", "ConfigRecord", "PartitionRecord"]
    bad = c.run(c.qc.create_topics(CreateTopicsRequest(topics=[
        CreatableTopic(name="bar", num_partitions=1, replication_factor=1,
                       configs=[CreatableTopicConfig(name="retention.ms", value=None)]),
        CreatableTopic(name="baz", num_partitions=1, replication_factor=4)]), 7))
    assert {t.name: (t.error_code, t.error_message) for t in bad.response.topics} == {
        "bar": (Error.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms"),
        "baz": (Error.INVALID_REPLICATION_FACTOR,
                "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
                "cannot be reached because only 3 broker(s) are registered.")}
    assert bad.records == []


def test_create_topics_answers_every_effective_config_with_its_source(c):
    """ReplicationControlManager.createTopic with KafkaConfigSchemaTest.testResolveEffectiveTopicConfig:
    the answer lists every topic config, sorted by name, each from the most specific place
    it is set: the request, a cluster default (through a broker synonym), or Kafka's default."""
    from protocol.constants import ConfigResourceType, ConfigSource
    from protocol.generated.metadata.config_record import ConfigRecord
    from server.controller.config_defs import TOPIC_CONFIGS
    from server.controller.result import ControllerResult
    c.run(c.qc.apply(ControllerResult([(ConfigRecord(resource_type=ConfigResourceType.BROKER, resource_name="",
                                                       name="log.retention.hours", value="2"), 0)])))
    for validate_only in (True, False):
        applied = c.create("foo", partitions=1, rf=1, configs={"cleanup.policy": "compact"},
                           validate_only=validate_only)
        [topic] = applied.response.topics
        configs = {e.name: (e.value, e.config_source, e.read_only, e.is_sensitive) for e in topic.configs}
        assert [e.name for e in topic.configs] == sorted(TOPIC_CONFIGS)
        assert configs["cleanup.policy"] == ("compact", ConfigSource.TOPIC_CONFIG, False, False)
        assert configs["retention.ms"] == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False, False)
        assert configs["segment.bytes"] == ("1073741824", ConfigSource.DEFAULT_CONFIG, False, False)


def test_colliding_names_in_one_request_are_both_created(c):
    """Kafka checks collisions against existing topics only: two new topics that collide with
    each other in the same request are both created."""
    applied = create(c, ("a.b", 1, 1), ("a_b", 1, 1))
    assert {name: code for name, (code, _) in results(applied).items()} == {"a.b": Error.NONE, "a_b": Error.NONE}


def test_a_deleted_topic_no_longer_collides(c):
    c.topic("x.y", partitions=1, rf=1)
    c.delete("x.y")
    assert results(create(c, ("x_y", 1, 1)))["x_y"][0] == Error.NONE
    assert_replays(c)


def test_a_reverted_topic_creation_leaves_no_collision_behind(c):
    """The collision index is replayed state: undoing a creation undoes its entry."""
    base = c.qc.next_offset
    create(c, ("p.q", 1, 1))
    c.qc.offsets.revert_to(base)
    assert results(create(c, ("p_q", 1, 1)))["p_q"][0] == Error.NONE


def test_duplicate_names_in_create_topics(c):
    """ControllerApisTest.testCreateTopics: a repeated name creates nothing and is answered once,
    after the other topics; the metadata topic may not be created."""
    applied = create(c, ("foo", 1, 1), ("bar", 1, 1), ("foo", 2, 1), ("foo", 3, 1), ("__cluster_metadata", 1, 1))
    assert [(t.name, t.error_code, t.error_message or None) for t in applied.response.topics] == [
        ("bar", Error.NONE, None),
        ("foo", Error.INVALID_REQUEST, "Duplicate topic name."),
        ("__cluster_metadata", Error.INVALID_REQUEST,
         "Creation of internal topic __cluster_metadata is prohibited.")]
    assert sorted(c.qc.replication.names) == ["bar"]


def test_create_topics_isr_invariants_with_a_fenced_broker(c):
    """ReplicationControlManagerTest.testCreateTopicsISRInvariants and StripedReplicaPlacer:
    with too few unfenced brokers a fenced one takes a replica, but is neither the leader nor
    in the ISR."""
    c.expire(3)
    applied = create(c, ("foo", 1, 3))
    assert results(applied)["foo"][0] == Error.NONE
    p = c.part("foo")
    assert sorted(p.replicas) == [1, 2, 3] and p.replicas[0] != 3
    assert 3 not in p.isr and p.leader in (1, 2)
    assert_replays(c)


def test_placement_fails_when_every_broker_is_fenced_or_too_few_are_registered(c):
    """StripedReplicaPlacer: all fenced -> INVALID_REPLICATION_FACTOR; more replicas than
    registered brokers -> INVALID_REPLICATION_FACTOR; brokers in controlled shutdown count
    for neither."""
    assert results(create(c, ("wide", 1, 4)))["wide"] == (
        Error.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be "
        "reached because only 3 broker(s) are registered.")
    for b in (1, 2, 3):
        c.heartbeat(b, want_fence=True)
    assert results(create(c, ("none", 1, 1)))["none"] == (
        Error.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 1 time(s): All brokers are "
                                          "currently fenced.")


def test_create_topic_argument_checks(c):
    """ReplicationControlManager.createTopic: Kafka's refusals for counts and assignments."""
    from protocol.generated.messages.create_topics_request import CreatableReplicaAssignment
    bad_rf = create(c, ("rf0", 1, 0))
    assert results(bad_rf)["rf0"] == (
        Error.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
    assert results(create(c, ("p0", 0, 1)))["p0"] == (
        Error.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    both = c.run(c.qc.create_topics(CreateTopicsRequest(topics=[CreatableTopic(
        name="both", num_partitions=-1, replication_factor=1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1])])]), 7))
    assert results(both)["both"] == (Error.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                            "but replication factor was not set to -1.")
    gap = c.run(c.qc.create_topics(CreateTopicsRequest(topics=[CreatableTopic(
        name="gap", num_partitions=-1, replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=1, broker_ids=[1])])]), 7))
    assert results(gap)["gap"] == (
        Error.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")


def test_create_partitions_fails_when_all_brokers_are_fenced_or_in_controlled_shutdown(c):
    """ReplicationControlManagerTest.testCreatePartitionsFailsWhenAllBrokersAreFencedOrInControlledShutdown."""
    c.topic("foo", [[1], [2], [3]])
    c.heartbeat(1, want_fence=True)
    c.heartbeat(2, want_fence=True)
    c.shut_down(3)
    assert c.qc.cluster.brokers[3].in_controlled_shutdown
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=4, assignments=None)]), 3))
    assert applied.response.results[0].error_code == Error.INVALID_REPLICATION_FACTOR
    assert applied.records == []


# --- DeleteTopics ----------------------------------------------------------------------------

def test_invalid_delete_topics_request(c):
    """ControllerApisTest.testInvalidDeleteTopicsRequest, every answer as Kafka words it."""
    foo = c.topic("foo", partitions=1, rf=1)
    bar = c.topic("bar", partitions=1, rf=1)
    baz = random_uuid()
    request = DeleteTopicsRequest(topics=[
        DeleteTopicState(name=None, topic_id=ZERO_UUID),
        DeleteTopicState(name="foo", topic_id=foo),
        DeleteTopicState(name="bar"), DeleteTopicState(name=None, topic_id=bar),
        DeleteTopicState(name="quux"), DeleteTopicState(name="quux"), DeleteTopicState(name="quux"),
        DeleteTopicState(name=None, topic_id=baz), DeleteTopicState(name=None, topic_id=baz),
        DeleteTopicState(name=None, topic_id=baz)])
    applied = c.run(c.qc.delete_topics(request, 6))
    assert {(r.name, r.topic_id, r.error_code, r.error_message) for r in applied.response.responses} == {
        (None, ZERO_UUID, Error.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("foo", foo, Error.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("bar", bar, Error.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied."),
        ("quux", ZERO_UUID, Error.INVALID_REQUEST, "Duplicate topic name."),
        (None, baz, Error.INVALID_REQUEST, "Duplicate topic id.")}
    assert applied.records == [] and sorted(c.qc.replication.names) == ["bar", "foo"]


def test_delete_topics_by_name_and_by_id(c):
    """ControllerApisTest.testDeleteTopicsByName / testDeleteTopicsById."""
    foo = c.topic("foo", partitions=1, rf=1)
    bar = c.topic("bar", partitions=1, rf=1)
    unknown = random_uuid()
    by_id = c.run(c.qc.delete_topics(DeleteTopicsRequest(topics=[
        DeleteTopicState(name=None, topic_id=foo), DeleteTopicState(name=None, topic_id=unknown)]), 6))
    assert {(r.name, r.topic_id, r.error_code) for r in by_id.response.responses} == {
        ("foo", foo, Error.NONE), (None, unknown, Error.UNKNOWN_TOPIC_ID)}
    by_name = c.run(c.qc.delete_topics(DeleteTopicsRequest(topic_names=["bar", "baz", "bar"]), 5))
    assert {(r.name, r.error_code) for r in by_name.response.responses} == {
        ("bar", Error.INVALID_REQUEST), ("baz", Error.UNKNOWN_TOPIC_OR_PARTITION)}
    assert "bar" in c.qc.replication.names and bar == c.qc.replication.names["bar"]


# --- CreatePartitions ------------------------------------------------------------------------

def test_create_partitions_with_duplicate_names(c):
    """ControllerApisTest.testCreatePartitionsRequest: a repeated name is answered once with
    INVALID_REQUEST, first, and its partitions are not added."""
    c.topic("foo", partitions=1, rf=1)
    c.topic("bar", partitions=1, rf=1)
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=2, assignments=None),
        CreatePartitionsTopic(name="bar", count=2, assignments=None),
        CreatePartitionsTopic(name="foo", count=3, assignments=None),
        CreatePartitionsTopic(name="baz", count=3, assignments=None)]), 3))
    assert [(r.name, r.error_code, r.error_message or None) for r in applied.response.results] == [
        ("foo", Error.INVALID_REQUEST, "Duplicate topic name."),
        ("bar", Error.NONE, None),
        ("baz", Error.UNKNOWN_TOPIC_OR_PARTITION, "topic 'baz' does not exist")]
    assert len(c.qc.replication.topics[c.qc.replication.names["foo"]].partitions) == 1
    assert len(c.qc.replication.topics[c.qc.replication.names["bar"]].partitions) == 2


# --- AlterPartition --------------------------------------------------------------------------

@pytest.fixture
def t3(c) -> Cluster:
    """Topic "t": one partition on [1, 2, 3] led by 1."""
    c.topic("t", [[1, 2, 3]])
    return c


def test_invalid_alter_partition_requests(t3):
    """ReplicationControlManagerTest.testInvalidAlterPartitionRequests, each refusal alone."""
    c = t3
    p = c.part("t")
    cases = [
        ("not the leader", dict(broker_id=2, isr=[1, 2]), Error.INVALID_REQUEST),
        ("newer leader epoch", dict(isr=[1, 2], leader_epoch=500), Error.NOT_CONTROLLER),
        ("newer partition epoch", dict(isr=[1, 2], partition_epoch=500), Error.NOT_CONTROLLER),
        ("not a replica", dict(isr=[1, 2, 4]), Error.INVALID_REQUEST),
        ("without the leader", dict(isr=[2, 3]), Error.INVALID_REQUEST),
        ("duplicate member", dict(isr=[1, 2, 2]), Error.INVALID_REQUEST),
        ("recovering with more than the leader", dict(isr=[1, 2], recovery=1), Error.INVALID_REQUEST),
        ("recovered back to recovering", dict(isr=[1], recovery=1), Error.INVALID_REQUEST),
    ]
    c.add_broker(4)
    for label, args, expected in cases:
        broker_id = args.pop("broker_id", 1)
        isr = args.pop("isr")
        applied, result = c.alter(broker_id, "t", 0, isr, **args)
        assert result.error_code == expected, label
        assert applied.records == [], label
    assert (c.part("t").isr, c.part("t").partition_epoch) == ([1, 2, 3], p.partition_epoch)


def test_alter_partition_with_a_stale_broker_epoch(t3):
    """testInvalidAlterPartitionRequests: the sender's epoch is checked exactly, first."""
    for epoch in (t3.epochs[1] - 1, -1):
        applied, result = t3.alter(1, "t", 0, [1, 2], broker_epoch=epoch, leader_epoch=500)
        assert result is None and applied.response.error_code == Error.STALE_BROKER_EPOCH


def test_alter_partition_error_precedence(t3):
    """Kafka's validateAlterPartitionData order: epochs from the future, then an old leader
    epoch, then the sender, then an old partition epoch, then the ISR."""
    c = t3
    c.alter(1, "t", 0, [1, 2])  # partition epoch 1
    _, result = c.alter(2, "t", 0, [9], leader_epoch=1)
    assert result.error_code == Error.NOT_CONTROLLER
    c.expire(1)  # leader 2, leader epoch 1
    _, result = c.alter(1, "t", 0, [9], leader_epoch=0, partition_epoch=0)
    assert result.error_code == Error.FENCED_LEADER_EPOCH
    _, result = c.alter(3, "t", 0, [9], partition_epoch=0)
    assert result.error_code == Error.INVALID_REQUEST  # not the leader, before the old epoch
    _, result = c.alter(2, "t", 0, [9], partition_epoch=0)
    assert result.error_code == Error.INVALID_UPDATE_VERSION  # before the bad ISR


@pytest.mark.parametrize("version,expected", [
    (0, Error.OPERATION_NOT_ATTEMPTED), (1, Error.OPERATION_NOT_ATTEMPTED),
    (2, Error.INELIGIBLE_REPLICA), (3, Error.INELIGIBLE_REPLICA)])
def test_alter_partition_should_reject_fenced_brokers(t3, version, expected):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectFencedBrokers."""
    c = t3
    c.alter(1, "t", 0, [1, 2])
    c.heartbeat(3, want_fence=True)
    applied, result = c.alter(1, "t", 0, [1, 2, 3], version=version)
    assert (result.error_code, applied.records) == (expected, [])
    c.unfence(3)
    _, result = c.alter(1, "t", 0, [1, 2, 3], version=version)
    assert result.error_code == Error.NONE and c.part("t").isr == [1, 2, 3]


def test_alter_partition_should_reject_brokers_with_stale_epoch(t3):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch: v3
    carries each member's broker epoch; -1 skips the check; members already in the ISR are
    checked too."""
    c = t3
    c.alter(1, "t", 0, [1, 2])
    _, result = c.alter(1, "t", 0, [1, 2, 3], isr_epochs={3: c.epochs[3] - 1})
    assert result.error_code == Error.INELIGIBLE_REPLICA
    _, result = c.alter(1, "t", 0, [1, 2], isr_epochs={2: c.epochs[2] + 1})
    assert result.error_code == Error.INELIGIBLE_REPLICA
    _, result = c.alter(1, "t", 0, [1, 2, 3], isr_epochs={3: -1})
    assert result.error_code == Error.NONE


def test_alter_partition_should_reject_shutting_down_brokers(t3):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectShuttingDownBrokers."""
    c = t3
    c.topic("u", [[3, 1]])
    c.alter(1, "t", 0, [1, 2])
    c.shut_down(3)
    assert c.qc.cluster.brokers[3].in_controlled_shutdown
    _, result = c.alter(1, "t", 0, [1, 2, 3])
    assert result.error_code == Error.INELIGIBLE_REPLICA


def test_alter_partition_handles_unknown_topic_id_or_name(t3):
    """ReplicationControlManagerTest.testAlterPartitionHandleUnknownTopicIdOrName."""
    from protocol.generated.messages.alter_partition_request import (
        AlterPartitionRequest, BrokerState, PartitionData, TopicData)
    c = t3
    for version, topic in [(2, TopicData(topic_id=random_uuid())), (3, TopicData(topic_id=ZERO_UUID)),
                           (1, TopicData(topic_name="nope"))]:
        topic.partitions = [PartitionData(partition_index=0, new_isr=[1], new_isr_with_epochs=[
            BrokerState(broker_id=1, broker_epoch=-1)])]
        response = c.qc.alter_partition(AlterPartitionRequest(
            broker_id=1, broker_epoch=c.epochs[1], topics=[topic]), version).response
        expected = Error.UNKNOWN_TOPIC_ID if version >= 2 else Error.UNKNOWN_TOPIC_OR_PARTITION
        assert response.topics[0].partitions[0].error_code == expected


def test_alter_partition_on_a_topic_allowing_unclean_elections():
    """ReplicationControlManager.alterPartition elects uncleanly when the topic allows it:
    an ISR change that finds no clean leader may still keep one."""
    c = Cluster(unclean=True)
    c.brokers(1, 2)
    c.topic("t", [[1, 2]])
    _, result = c.alter(1, "t", 0, [1])
    assert (result.error_code, result.leader_id, result.isr) == (Error.NONE, 1, [1])


@pytest.mark.parametrize("metadata_version,bumped", [(11, True), (12, False)])
def test_leader_epoch_bump_on_isr_shrink(metadata_version, bumped):
    """PartitionChangeBuilderTest.testLeaderEpochBumpOnIsrShrink / testNoLeaderEpochBumpOnIsrShrink:
    before 3.6-IV0 a shrinking ISR bumps the leader epoch (KAFKA-15021); growth never does."""
    c = Cluster(metadata_version=metadata_version)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    applied, result = c.alter(1, "t", 0, [1, 2], version=2)
    assert (c.part("t").leader_epoch, result.leader_epoch) == ((1, 1) if bumped else (0, 0))
    before = c.part("t").leader_epoch
    c.alter(1, "t", 0, [1, 2, 3], version=2)
    assert c.part("t").leader_epoch == before
    assert_replays(c)


# --- elections -------------------------------------------------------------------------------

def test_elect_preferred_leaders_lists_every_topic_for_all_partitions(c):
    """ReplicationControlManager.electLeaders with no partitions named: every topic appears,
    partitions that needed no election do not."""
    c.topic("a", [[1, 2]])
    c.topic("b", [[2, 1]])
    applied = c.elect(0, None)
    assert [(r.topic, r.partition_result) for r in applied.response.replica_election_results] == [
        ("a", []), ("b", [])]


def test_elect_unclean_leaders_without_elr():
    """ReplicationControlManagerTest.testElectUncleanLeaders_WithoutElr: a partition with a
    leader needs no election; a leaderless one gets a live replica that must recover."""
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    c.alter(1, "t", 0, [1])
    c.expire(1)
    assert c.part("t").leader == -1
    results = {(r.topic, p.partition_id): p.error_code
               for r in c.elect(1, {"t": [0]}).response.replica_election_results for p in r.partition_result}
    assert results == {("t", 0): Error.NONE}
    p = c.part("t")
    assert (p.leader, p.isr, p.recovery) == (2, [2], 1)
    again = c.elect(1, {"t": [0]}).response.replica_election_results[0].partition_result[0]
    assert again.error_code == Error.ELECTION_NOT_NEEDED


def test_unclean_election_clears_the_elr_and_the_last_known_elr():
    """PartitionChangeBuilderTest.testUncleanLeaderElection: after an unclean election no
    replica is known to hold every committed record, so the ELR and the last known ELR go."""
    c = Cluster(elr=True, min_isr=2)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    c.expire(2, 3, 1)
    p = c.part("t")
    assert (p.leader, p.isr, sorted(p.elr)) == (-1, [], [1, 3])
    c.unfence(2)  # not eligible: it left the ISR while the ISR was still large enough
    c.unregister(1)
    c.unregister(3)
    p = c.part("t")
    # The last known ELR holds the last leader (useLastKnownLeaderInBalancedRecovery).
    assert (p.leader, p.elr, p.last_known_elr) == (-1, [], [1])
    applied = c.elect(1, {"t": [0]})
    assert applied.response.replica_election_results[0].partition_result[0].error_code == Error.NONE
    p = c.part("t")
    assert (p.leader, p.isr, p.recovery, p.elr, p.last_known_elr) == (2, [2], 1, [], [])
    assert_replays(c)


def test_create_partitions(c):
    """ReplicationControlManagerTest.testCreatePartitions: Kafka's refusals, word for word."""
    from protocol.generated.messages.create_partitions_request import CreatePartitionsAssignment
    c.topic("foo", partitions=3, rf=2)
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=3, assignments=None),
        CreatePartitionsTopic(name="bar", count=5, assignments=None)]), 3))
    refusals = [(r.name, r.error_code, r.error_message) for r in applied.response.results]
    assert refusals[0] == ("foo", Error.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert refusals[1][:2] == ("bar", Error.UNKNOWN_TOPIC_OR_PARTITION)
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=2, assignments=None)]), 3))
    assert applied.response.results[0].error_message == \
        "The topic foo currently has 3 partition(s); 2 would not be an increase."
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=5, assignments=[
            CreatePartitionsAssignment(broker_ids=[1, 2])])]), 3))
    assert (applied.response.results[0].error_code, applied.response.results[0].error_message) == (
        Error.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
    applied = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="foo", count=5, assignments=None)]), 3))
    assert applied.response.results[0].error_code == Error.NONE
    assert len(c.qc.replication.topics[c.qc.replication.names["foo"]].partitions) == 5


def test_an_unknown_election_type_fails_the_whole_request(c):
    """ReplicationControlManager.electionType: InvalidRequestException, answered for every
    named partition and at the top."""
    c.topic("t", [[1, 2]])
    response = c.elect(5, {"t": [0, 1]}).response
    assert response.error_code == Error.INVALID_REQUEST
    assert [(p.partition_id, p.error_code) for p in response.replica_election_results[0].partition_result] == [
        (0, Error.INVALID_REQUEST), (1, Error.INVALID_REQUEST)]


# --- eligible leader replicas (KIP-966) ------------------------------------------------------

def test_eligible_leader_replicas_shrink_and_expand_isr():
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_ShrinkAndExpandIsr."""
    c = Cluster(elr=True)
    c.brokers(0, 1, 2)
    c.topic("foo", [[0, 1, 2]])
    c.set_topic_config("foo", "min.insync.replicas", "2")
    _, result = c.alter(0, "foo", 0, [0])
    assert result.error_code == Error.NONE
    p = c.part("foo")
    assert (p.elr, p.last_known_elr) == ([1, 2], [])
    _, result = c.alter(0, "foo", 0, [0, 1])
    assert result.error_code == Error.NONE
    p = c.part("foo")
    assert (p.elr, p.last_known_elr) == ([], [])
    assert_replays(c)


def test_eligible_leader_replicas_broker_fence():
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_BrokerFence: members fenced
    while the ISR is below min.insync.replicas join the ELR; unfencing them changes nothing
    while the partition has a leader."""
    c = Cluster(elr=True)
    c.brokers(0, 1, 2, 3)
    c.topic("foo", [[0, 1, 2, 3]])
    c.set_topic_config("foo", "min.insync.replicas", "3")
    c.expire(2, 3)
    p = c.part("foo")
    assert (p.isr, p.elr, p.last_known_elr) == ([0, 1], [3], [])
    c.expire(1)
    p = c.part("foo")
    assert (p.isr, p.elr, p.last_known_elr) == ([0], [1, 3], [])
    for b in (1, 2, 3):
        c.unfence(b)
    p = c.part("foo")
    assert (p.isr, p.leader, p.elr, p.last_known_elr) == ([0], 0, [1, 3], [])
    assert_replays(c)


def test_elect_preferred_leaders():
    """ReplicationControlManagerTest.testElectPreferredLeaders: a preferred replica that is
    fenced or in controlled shutdown cannot lead; one that leads needs no election."""
    c = Cluster()
    c.register(0)
    c.brokers(1, 2, 3, 4)
    c.topic("aux", [[1, 2]])  # something for 1 to lead, so that its shutdown is a controlled one
    c.shut_down(1)
    assert c.qc.cluster.brokers[1].in_controlled_shutdown
    c.topic("foo", [[1, 2, 3], [2, 3, 4], [0, 2, 1]])
    applied = c.elect(0, {"foo": [0, 1, 2], "bar": [0, 1]})
    assert {(r.topic, p.partition_id): (p.error_code, p.error_message or None)
            for r in applied.response.replica_election_results for p in r.partition_result} == {
        ("foo", 0): (Error.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR or not live"),
        ("foo", 1): (Error.ELECTION_NOT_NEEDED, "the preferred replica already leads"),
        ("foo", 2): (Error.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR or not live"),
        ("bar", 0): (Error.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as bar"),
        ("bar", 1): (Error.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as bar")}
    assert applied.records == []
    # Once 0 and 1 are back and in sync, the preferred replicas take over. Broker 1 first
    # finishes its shutdown and comes back as a new incarnation.
    for b in (2, 3, 4):
        c.heartbeat(b)
    assert c.shut_down(1).response.should_shut_down
    c.register(1)
    c.unfence(1)
    c.unfence(0)
    c.alter(2, "foo", 0, [2, 3, 1])
    c.alter(2, "foo", 2, [2, 0, 1])
    applied = c.elect(0, {"foo": [0, 1, 2]})
    assert [(p.partition_id, p.error_code) for p in applied.response.replica_election_results[0].partition_result] == [
        (0, Error.NONE), (1, Error.ELECTION_NOT_NEEDED), (2, Error.NONE)]
    assert [c.part("foo", i).leader for i in range(3)] == [1, 2, 0]
    assert_replays(c)


@pytest.mark.parametrize("assignments,message", [
    ([[]], "The manual partition assignment includes an empty replica list."),
    ([[1, 2, 4]], "The manual partition assignment includes broker 4, but no such broker is registered."),
    ([[1, 2, 2]], "The manual partition assignment includes the broker 2 more than once."),
    ([[1, 2, 3], [1, 2]], "The manual partition assignment includes a partition with 2 replica(s), but "
                          "this is not consistent with previous partitions, which have 3 replica(s)."),
])
def test_validate_bad_manual_partition_assignments(c, assignments, message):
    """ReplicationControlManagerTest.testValidateBadManualPartitionAssignments, through
    CreateTopics."""
    applied = c.create("foo", assignments)
    assert results(applied)["foo"] == (Error.INVALID_REPLICA_ASSIGNMENT, message)


def test_manual_partition_assignment_on_all_fenced_brokers(c):
    """ReplicationControlManagerTest.testManualPartitionAssignmentOnAllFencedBrokers and
    testCreatePartitionsFailsWithManualAssignmentWithAllFenced."""
    c.topic("bar", [[1]])
    c.heartbeat(2, want_fence=True)
    c.heartbeat(3, want_fence=True)
    assert results(c.create("foo", [[2, 3]]))["foo"] == (
        Error.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 0 are fenced or in "
        "controlled shutdown.")
    from protocol.generated.messages.create_partitions_request import CreatePartitionsAssignment
    grown = c.run(c.qc.create_partitions(CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name="bar", count=2, assignments=[CreatePartitionsAssignment(broker_ids=[3])])]), 3))
    assert (grown.response.results[0].error_code, grown.response.results[0].error_message) == (
        Error.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in "
        "controlled shutdown.")


def test_unclean_shutdown_broker():
    """QuorumControllerTest.testUncleanShutdownBroker: every broker fenced, the last leader is
    the last known ELR; an unclean re-registration takes it out of the ELR but leaves it the
    last known ELR, even registering again; the remaining eligible replica is then elected and
    the ELR and last known ELR clear."""
    c = Cluster(elr=True, min_isr=2)
    c.brokers(1, 2, 3)
    c.topic("foo", [[1, 2, 3]])
    c.expire(1, 2, 3)
    p = c.part("foo")
    assert (p.isr, p.leader, len(p.last_known_elr), len(p.elr)) == ([], -1, 1, 2)
    [last_leader] = p.last_known_elr
    [to_lead] = [r for r in p.elr if r != last_leader]
    c.register(last_leader)
    assert list(c.part("foo").elr) == [to_lead]
    c.register(last_leader)
    assert list(c.part("foo").last_known_elr) == [last_leader]
    c.unfence(to_lead)
    p = c.part("foo")
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ([to_lead], [], [], to_lead)
    assert_replays(c)
