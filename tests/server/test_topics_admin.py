"""Topic administration and the topic views of QuorumController, with a ManualClock.

CreateTopics, DeleteTopics and CreatePartitions as state-machine commands; Metadata and
DescribeTopicPartitions as reads. Requests go through their own encoding at the version under
test before the controller sees them, and responses are encoded at that version, as the
network would do.
"""

from __future__ import annotations

from collections import Counter

import pytest

from protocol.constants import NO_LEADER
from protocol.error_codes import Error
from protocol.generated.messages.create_partitions_request import (
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsTopic)
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest)
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from protocol.generated.messages.describe_topic_partitions_request import (
    Cursor, DescribeTopicPartitionsRequest, TopicRequest)
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.message import Message
from protocol.primitives import ZERO_UUID, random_uuid
from server.controller.config_defs import TOPIC_CONFIGS
from tests.support.replication import CONTROLLER_ENDPOINT, CONTROLLER_ID, Cluster

TOPIC_CONFIG_SOURCE = 1  # DYNAMIC_TOPIC_CONFIG


def wire(message: Message, version: int) -> Message:
    """``message`` as the other side decodes it at ``version``."""
    decoded, end = type(message).decode(message.encode(version), version)
    return decoded


def create(c: Cluster, topics: list[CreatableTopic], version: int = 7, validate_only: bool = False):
    request = wire(CreateTopicsRequest(topics=topics, validate_only=validate_only), version)
    applied = c.run(c.qc.create_topics(request, version))
    return applied, wire(applied.response, version)


def new_topic(name: str, partitions: int = -1, rf: int = -1, assignments: list[list[int]] | None = None,
              configs: dict[str, str] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=r)
                     for i, r in enumerate(assignments or [])],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def record_names(applied) -> list[str]:
    return [r.NAME for r, _ in applied.records]


def partitions_of(c: Cluster, name: str):
    r = c.qc.replication
    return r.topics[r.names[name]].partitions


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    return cluster


# --- CreateTopics ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(8))
def test_create_topics_at_every_version(c, version):
    applied, response = create(c, [new_topic("orders", 4, 2, configs={"retention.ms": "3600000"})], version)
    result = response.topics[0]
    assert (result.name, result.error_code) == ("orders", Error.NONE)
    assert record_names(applied) == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 4
    topic_id = c.qc.replication.names["orders"]
    assert topic_id != ZERO_UUID and applied.records[0][0].topic_id == topic_id
    assert result.topic_id == (topic_id if version >= 7 else ZERO_UUID)
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (4, 2)
        # Every effective config is listed, as Kafka's controller lists them.
        assert ("retention.ms", "3600000", TOPIC_CONFIG_SOURCE) in [
            (x.name, x.value, x.config_source) for x in result.configs]
        assert len(result.configs) == len(TOPIC_CONFIGS)
    assert c.qc.configs.topic_configs("orders") == {"retention.ms": "3600000"}
    parts = partitions_of(c, "orders")
    assert [p.partition_id for p in parts] == [0, 1, 2, 3]
    for p in parts:
        assert len(p.replicas) == 2 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)


def test_topic_ids_are_distinct(c):
    for name in ("a", "b", "c"):
        c.topic(name, partitions=1, rf=1)
    ids = set(c.qc.replication.names.values())
    assert len(ids) == 3 and ZERO_UUID not in ids


def test_defaults_for_partitions_and_replication_factor(c):
    _, response = create(c, [new_topic("d")])
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (1, 1)
    assert len(partitions_of(c, "d")) == 1 and len(partitions_of(c, "d")[0].replicas) == 1


def racks(c: Cluster, replicas: list[int]) -> list[str]:
    return [c.qc.cluster.brokers[b].rack for b in replicas]


def test_placement_spreads_replicas_over_racks_and_leaders_over_brokers():
    c = Cluster()
    rack_of = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    c.brokers(*rack_of, racks=rack_of)
    c.topic("spread", partitions=12, rf=3)
    parts = partitions_of(c, "spread")
    for p in parts:
        assert len(set(p.replicas)) == 3
        assert sorted(racks(c, p.replicas)) == ["a", "b", "c"], p.replicas
    assert Counter(p.leader for p in parts) == {b: 2 for b in rack_of}
    # Every broker holds the same number of replicas.
    assert Counter(b for p in parts for b in p.replicas) == {b: 6 for b in rack_of}


def test_placement_alternates_racks_when_it_can():
    c = Cluster()
    rack_of = {1: "x", 2: "x", 3: "x", 4: "y", 5: "y", 6: "y"}
    c.brokers(*rack_of, racks=rack_of)
    c.topic("pairs", partitions=6, rf=2)
    for p in partitions_of(c, "pairs"):
        assert sorted(racks(c, p.replicas)) == ["x", "y"], p.replicas
    # Uneven racks: the lone broker of rack "z" cannot be in every partition, but replicas of
    # one partition never repeat a broker.
    c = Cluster()
    rack_of = {1: "w", 2: "w", 3: "w", 4: "z"}
    c.brokers(*rack_of, racks=rack_of)
    c.topic("uneven", partitions=8, rf=2)
    parts = partitions_of(c, "uneven")
    assert all(len(set(p.replicas)) == 2 for p in parts)
    assert sum("z" in racks(c, p.replicas) for p in parts) >= 4
    assert len({p.leader for p in parts}) == 4


def test_placement_prefers_unfenced_brokers_and_rotates_across_topics(c):
    c.add_broker(4)
    c.expire(4)
    c.topic("first", partitions=2, rf=3)
    c.topic("second", partitions=2, rf=1)
    used = {b for name in ("first", "second") for p in partitions_of(c, name) for b in p.replicas}
    assert used == {1, 2, 3}
    # The next topic goes on where the last one stopped instead of starting over.
    assert [p.leader for p in partitions_of(c, "first")] == [1, 2]
    assert [p.leader for p in partitions_of(c, "second")] == [3, 1]
    # As in Kafka, a fenced broker takes a replica (never the lead) when the unfenced are too few.
    _, response = create(c, [new_topic("wide", 1, 4)])
    assert response.topics[0].error_code == Error.NONE
    wide = partitions_of(c, "wide")[0]
    assert sorted(wide.replicas) == [1, 2, 3, 4] and wide.replicas[-1] == 4 and 4 not in wide.isr
    _, response = create(c, [new_topic("wider", 1, 5)])
    assert response.topics[0].error_code == Error.INVALID_REPLICATION_FACTOR


def test_topics_created_in_one_request_spread_their_leaders(c):
    _, response = create(c, [new_topic(f"t{i}", 1, 2) for i in range(6)])
    assert all(t.error_code == Error.NONE for t in response.topics)
    leaders = [partitions_of(c, f"t{i}")[0].leader for i in range(6)]
    assert Counter(leaders) == {1: 2, 2: 2, 3: 2}
    assert Counter(b for i in range(6) for b in partitions_of(c, f"t{i}")[0].replicas) == {1: 4, 2: 4, 3: 4}


def test_explicit_assignments(c):
    c.add_broker(4)
    c.expire(4)
    applied, response = create(c, [new_topic("manual", assignments=[[3, 1], [4, 2], [2, 3]])], 5)
    assert response.topics[0].error_code == Error.NONE
    assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (3, 2)
    parts = partitions_of(c, "manual")
    assert [p.replicas for p in parts] == [[3, 1], [4, 2], [2, 3]]
    # A fenced replica starts outside the ISR and does not lead.
    assert [(p.isr, p.leader) for p in parts] == [([3, 1], 3), ([2], 2), ([2, 3], 2)]


@pytest.mark.parametrize("assignments", [
    [[1, 1]],  # a broker twice
    [[1, 9]],  # an unregistered broker
    [[]],  # no replicas
    [[1, 2], [2, 3, 1]],  # partitions with different replication factors
])
def test_bad_explicit_assignments(c, assignments):
    applied, response = create(c, [new_topic("bad", assignments=assignments)])
    assert response.topics[0].error_code == Error.INVALID_REPLICA_ASSIGNMENT
    assert applied.records == [] and "bad" not in c.qc.replication.names


def test_assignments_must_cover_partitions_from_zero(c):
    topic = CreatableTopic(name="gap", num_partitions=-1, replication_factor=-1, assignments=[
        CreatableReplicaAssignment(partition_index=1, broker_ids=[1])])
    _, response = create(c, [topic])
    assert response.topics[0].error_code == Error.INVALID_REPLICA_ASSIGNMENT


def test_assignments_on_fenced_brokers_only_are_refused(c):
    c.add_broker(4)
    c.expire(4)
    _, response = create(c, [new_topic("dark", assignments=[[4]])])
    assert response.topics[0].error_code == Error.INVALID_REPLICA_ASSIGNMENT


def test_assignments_with_a_partition_count_are_an_invalid_request(c):
    topic = new_topic("both", assignments=[[1, 2]])
    topic.num_partitions = 1
    _, response = create(c, [topic])
    assert response.topics[0].error_code == Error.INVALID_REQUEST


@pytest.mark.parametrize("version", [1, 5, 7])
def test_validate_only_writes_nothing(c, version):
    applied, response = create(c, [new_topic("dry", 3, 2, configs={"cleanup.policy": "compact"})],
                               version, validate_only=True)
    assert response.topics[0].error_code == Error.NONE
    if version >= 5:
        assert (response.topics[0].num_partitions, response.topics[0].replication_factor) == (3, 2)
    assert applied.records == []
    assert "dry" not in c.qc.replication.names and c.qc.configs.topic_configs("dry") == {}
    # ...and still reports the errors a real creation would meet.
    c.topic("exists", partitions=1, rf=1)
    _, response = create(c, [new_topic("exists", 1, 1), new_topic("big", 1, 9)], version, validate_only=True)
    assert [t.error_code for t in response.topics] == [Error.TOPIC_ALREADY_EXISTS, Error.INVALID_REPLICATION_FACTOR]


@pytest.mark.parametrize("topic, code", [
    (new_topic("exists", 1, 1), Error.TOPIC_ALREADY_EXISTS),
    (new_topic("rf0", 1, 0), Error.INVALID_REPLICATION_FACTOR),
    (new_topic("rf4", 1, 4), Error.INVALID_REPLICATION_FACTOR),
    (new_topic("p0", 0, 1), Error.INVALID_PARTITIONS),
    (new_topic("pneg", -5, 1), Error.INVALID_PARTITIONS),
    (new_topic("", 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic(".", 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic("..", 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic("a/b", 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic("spaced name", 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic("x" * 250, 1, 1), Error.INVALID_TOPIC_EXCEPTION),
    (new_topic("cfg", 1, 1, configs={"min.insync.replicas": "many"}), Error.INVALID_CONFIG),
    (new_topic("cfg", 1, 1, configs={"no.such.config": "1"}), Error.INVALID_CONFIG),
    (new_topic("cfg", 1, 1, configs={"cleanup.policy": "shred"}), Error.INVALID_CONFIG),
])
def test_create_topic_errors(c, topic, code):
    c.topic("exists", partitions=1, rf=1)
    before = len(c.journal)
    applied, response = create(c, [topic])
    result = response.topics[0]
    assert result.error_code == code, result.error_message
    assert result.error_message
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert applied.records == [] and len(c.journal) == before


def test_a_longest_legal_name_and_mixed_results_in_one_request(c):
    name = "a-Z_0." + "x" * 243
    applied, response = create(c, [new_topic(name, 1, 1), new_topic("bad!", 1, 1), new_topic("ok", 2, 3)])
    assert [t.error_code for t in response.topics] == [Error.NONE, Error.INVALID_TOPIC_EXCEPTION, Error.NONE]
    assert set(c.qc.replication.names) == {name, "ok"}


def test_a_topic_twice_in_one_request(c):
    # Kafka creates neither copy and answers the name once.
    applied, response = create(c, [new_topic("twice", 1, 1), new_topic("twice", 2, 1)])
    assert [(t.name, t.error_code) for t in response.topics] == [("twice", Error.INVALID_REQUEST)]
    assert "twice" not in c.qc.replication.names and applied.records == []


# --- DeleteTopics -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(6))
def test_delete_topics_by_name(c, version):
    c.topic("gone", partitions=2, rf=2, configs={"retention.ms": "1000"})
    c.topic("kept", partitions=1, rf=1)
    request = wire(DeleteTopicsRequest(topic_names=["gone", "missing"]), version)
    applied = c.run(c.qc.delete_topics(request, version))
    response = wire(applied.response, version)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("gone", Error.NONE), ("missing", Error.UNKNOWN_TOPIC_OR_PARTITION)]
    assert record_names(applied) == ["RemoveTopicRecord"]
    assert set(c.qc.replication.names) == {"kept"}
    assert c.qc.replication.partition_count == 1
    assert c.qc.configs.topic_configs("gone") == {}
    assert all(p.topic_id != applied.records[0][0].topic_id for ps in c.qc.replication.isr_of.values() for p in ps)
    # The name is free again, under a new id.
    c.topic("gone", partitions=1, rf=1)
    assert c.qc.replication.names["gone"] != applied.records[0][0].topic_id


def test_delete_topics_by_id(c):
    topic_id = c.topic("by-id", partitions=1, rf=1)
    c.topic("by-name", partitions=1, rf=1)
    unknown = random_uuid()
    request = wire(DeleteTopicsRequest(topics=[
        DeleteTopicState(topic_id=topic_id), DeleteTopicState(topic_id=unknown),
        DeleteTopicState(name="by-name"), DeleteTopicState(name="nope")]), 6)
    applied = c.run(c.qc.delete_topics(request, 6))
    response = wire(applied.response, 6)
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [
        ("by-id", topic_id, Error.NONE), (None, unknown, Error.UNKNOWN_TOPIC_ID),
        ("by-name", c.journal[-1][1].topic_id, Error.NONE), ("nope", ZERO_UUID, Error.UNKNOWN_TOPIC_OR_PARTITION)]
    assert record_names(applied) == ["RemoveTopicRecord", "RemoveTopicRecord"]
    assert c.qc.replication.names == {}


def test_a_topic_given_by_name_and_by_id_is_not_removed(c):
    # As in Kafka's ControllerApis: the name maps to an id already supplied.
    topic_id = c.topic("dup", partitions=1, rf=1)
    request = DeleteTopicsRequest(topics=[DeleteTopicState(topic_id=topic_id), DeleteTopicState(name="dup")])
    applied = c.run(c.qc.delete_topics(request, 6))
    assert [(r.name, r.error_code) for r in applied.response.responses] == [("dup", Error.INVALID_REQUEST)]
    assert applied.records == [] and "dup" in c.qc.replication.names


# --- CreatePartitions ---------------------------------------------------------------------------------

def create_partitions(c: Cluster, topics: list[CreatePartitionsTopic], version: int = 3,
                      validate_only: bool = False):
    request = wire(CreatePartitionsRequest(topics=topics, validate_only=validate_only), version)
    applied = c.run(c.qc.create_partitions(request, version))
    return applied, wire(applied.response, version)


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_adds_placed_partitions(c, version):
    c.topic("grow", partitions=2, rf=2)
    applied, response = create_partitions(c, [CreatePartitionsTopic(name="grow", count=5, assignments=None)],
                                          version)
    assert [(r.name, r.error_code) for r in response.results] == [("grow", Error.NONE)]
    assert record_names(applied) == ["PartitionRecord"] * 3
    parts = partitions_of(c, "grow")
    assert [p.partition_id for p in parts] == [0, 1, 2, 3, 4]
    assert all(len(set(p.replicas)) == 2 and p.isr == p.replicas for p in parts)
    assert c.qc.replication.partition_count == 5


def test_create_partitions_with_assignments_and_errors(c):
    c.topic("grow", partitions=1, rf=2)
    applied, response = create_partitions(c, [
        CreatePartitionsTopic(name="grow", count=3, assignments=[
            CreatePartitionsAssignment(broker_ids=[3, 1]), CreatePartitionsAssignment(broker_ids=[2, 3])]),
        CreatePartitionsTopic(name="missing", count=2, assignments=None)])
    assert [r.error_code for r in response.results] == [Error.NONE, Error.UNKNOWN_TOPIC_OR_PARTITION]
    assert [p.replicas for p in partitions_of(c, "grow")][1:] == [[3, 1], [2, 3]]
    for topic, code in [
        (CreatePartitionsTopic(name="grow", count=3, assignments=None), Error.INVALID_PARTITIONS),
        (CreatePartitionsTopic(name="grow", count=2, assignments=None), Error.INVALID_PARTITIONS),
        (CreatePartitionsTopic(name="grow", count=5, assignments=[
            CreatePartitionsAssignment(broker_ids=[1, 2])]), Error.INVALID_REPLICA_ASSIGNMENT),
        (CreatePartitionsTopic(name="grow", count=4, assignments=[
            CreatePartitionsAssignment(broker_ids=[1, 7])]), Error.INVALID_REPLICA_ASSIGNMENT),
        (CreatePartitionsTopic(name="grow", count=4, assignments=[
            CreatePartitionsAssignment(broker_ids=[1, 2, 3])]), Error.INVALID_REPLICA_ASSIGNMENT),
    ]:
        applied, response = create_partitions(c, [topic])
        assert response.results[0].error_code == code
        assert response.results[0].error_message
        assert applied.records == []
    assert len(partitions_of(c, "grow")) == 3


def test_new_partitions_of_a_topic_being_reassigned_get_its_replication_factor():
    c = Cluster()
    c.brokers(1, 2, 3, 4, 5, 6)
    c.topic("moving", [[1, 2, 3], [2, 3, 4]])
    c.reassign("moving", 0, [4, 5, 6])
    c.reassign("moving", 1, [5, 6, 1])
    assert len(partitions_of(c, "moving")[0].replicas) == 6  # the merged list while it moves
    _, response = create_partitions(c, [CreatePartitionsTopic(name="moving", count=3, assignments=None)])
    assert response.results[0].error_code == Error.NONE
    assert len(partitions_of(c, "moving")[2].replicas) == 3
    _, response = create_partitions(c, [CreatePartitionsTopic(name="moving", count=4, assignments=[
        CreatePartitionsAssignment(broker_ids=[1, 2, 3])])])
    assert response.results[0].error_code == Error.NONE


def test_create_partitions_validate_only(c):
    c.topic("grow", partitions=1, rf=1)
    applied, response = create_partitions(c, [CreatePartitionsTopic(name="grow", count=4, assignments=None)],
                                          validate_only=True)
    assert response.results[0].error_code == Error.NONE
    assert applied.records == [] and len(partitions_of(c, "grow")) == 1


# --- Metadata ---------------------------------------------------------------------------------------

def metadata(c: Cluster, version: int, topics: list[MetadataRequestTopic] | None = None):
    request = wire(MetadataRequest(topics=topics, allow_auto_topic_creation=version < 4), version)
    return wire(c.qc.metadata(request, version), version)


@pytest.mark.parametrize("version", range(13))
def test_metadata_at_every_version(c, version):
    c.topic("m", [[1, 2, 3], [2, 3, 1]])
    c.topic("n", [[3]])
    c.alter(1, "m", 0, [1, 2])
    c.expire(3)  # "n" loses its only replica
    # All topics: null, or at v0 (where the list cannot be null) an empty list.
    response = metadata(c, version, [] if version == 0 else None)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (CONTROLLER_ID, CONTROLLER_ENDPOINT.host, CONTROLLER_ENDPOINT.port)]
    if version >= 1:
        assert response.controller_id == CONTROLLER_ID
    if version >= 2:
        assert response.cluster_id == c.qc.cluster_id
    assert [t.name for t in response.topics] == ["m", "n"]
    m, n = response.topics
    assert m.error_code == Error.NONE
    if version >= 10:
        assert m.topic_id == c.qc.replication.names["m"]
    p0, p1 = m.partitions
    assert (p0.partition_index, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (0, 1, [1, 2, 3], [1, 2])
    assert (p1.leader_id, p1.isr_nodes) == (2, [2, 1])
    np = n.partitions[0]
    assert (np.error_code, np.leader_id, np.isr_nodes) == (Error.LEADER_NOT_AVAILABLE, NO_LEADER, [3])
    if version >= 5:
        assert p0.offline_replicas == [3] and np.offline_replicas == [3]
    if version >= 7:
        # A follower leaving changes no leader epoch; losing the leader does.
        assert (p0.leader_epoch, p1.leader_epoch, np.leader_epoch) == (0, 0, 1)


def test_metadata_for_chosen_and_unknown_topics(c):
    topic_id = c.topic("m", partitions=2, rf=1)
    response = metadata(c, 9, [MetadataRequestTopic(name="m"), MetadataRequestTopic(name="zz")])
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("m", Error.NONE, 2), ("zz", Error.UNKNOWN_TOPIC_OR_PARTITION, 0)]
    # By id (v12 lets the name be null).
    unknown = random_uuid()
    response = metadata(c, 12, [MetadataRequestTopic(name=None, topic_id=topic_id),
                                MetadataRequestTopic(name=None, topic_id=unknown)])
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("m", topic_id, Error.NONE), (None, unknown, Error.UNKNOWN_TOPIC_ID)]
    # v1+: an empty list asks for no topics, null for all of them.
    assert metadata(c, 4, []).topics == []
    assert [t.name for t in metadata(c, 4, None).topics] == ["m"]


def test_metadata_lists_registered_brokers_when_configured():
    c = Cluster(lists_brokers=True)
    c.brokers(2, 1, 3, racks={1: "r1", 2: "r2"})
    c.add_broker(4)
    c.expire(4)
    for version in (0, 1, 12):
        response = metadata(c, version, [] if version == 0 else None)
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
            (1, "broker-1.test", 9001), (2, "broker-2.test", 9002), (3, "broker-3.test", 9003)]
        if version >= 1:
            assert [b.rack for b in response.brokers] == ["r1", "r2", None]


# --- DescribeTopicPartitions ----------------------------------------------------------------------------

def describe(c: Cluster, names: list[str] | None = None, limit: int = 2000, cursor: tuple[str, int] | None = None):
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names or []], response_partition_limit=limit,
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    return wire(c.qc.describe_topic_partitions(wire(request, 0), 0), 0)


def listed(response) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in response.topics for p in t.partitions]


def next_cursor(response) -> tuple[str, int] | None:
    cur = response.next_cursor
    return None if cur is None else (cur.topic_name, cur.partition_index)


@pytest.fixture
def many() -> Cluster:
    """Topics created out of order: "b" (3 partitions), "a" (2), "c" (4)."""
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    for name, count in (("b", 3), ("a", 2), ("c", 4)):
        cluster.topic(name, partitions=count, rf=2)
    return cluster


def test_describe_topic_partitions_sorts_by_name_then_partition(many):
    response = describe(many)
    assert listed(response) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2),
                                ("c", 0), ("c", 1), ("c", 2), ("c", 3)]
    assert next_cursor(response) is None
    a = response.topics[0]
    assert (a.error_code, a.topic_id, a.is_internal) == (Error.NONE, many.qc.replication.names["a"], False)
    p = a.partitions[0]
    expected = partitions_of(many, "a")[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (
        expected.leader, 0, expected.replicas, expected.isr)
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])


def test_describe_topic_partitions_pages_with_a_cursor(many):
    response = describe(many, limit=4)
    assert listed(response) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert next_cursor(response) == ("b", 2)
    response = describe(many, limit=4, cursor=next_cursor(response))
    assert listed(response) == [("b", 2), ("c", 0), ("c", 1), ("c", 2)]
    assert next_cursor(response) == ("c", 3)
    response = describe(many, limit=4, cursor=next_cursor(response))
    assert listed(response) == [("c", 3)] and next_cursor(response) is None
    # A page that ends exactly at the end of a topic points at the next topic.
    response = describe(many, limit=5)
    assert next_cursor(response) == ("c", 0)
    assert listed(describe(many, limit=5, cursor=("c", 0))) == [("c", i) for i in range(4)]


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
def test_paging_lists_every_partition_once(many, limit):
    seen, cursor, pages = [], None, 0
    while True:
        response = describe(many, limit=limit, cursor=cursor)
        assert len(listed(response)) <= limit
        seen += listed(response)
        pages += 1
        cursor = next_cursor(response)
        if cursor is None:
            break
    assert seen == listed(describe(many))
    assert pages == -(-9 // limit)


def test_describe_chosen_and_unknown_topics(many):
    response = describe(many, ["c", "zz", "a", "c"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", Error.NONE), ("c", Error.NONE), ("zz", Error.UNKNOWN_TOPIC_OR_PARTITION)]
    assert listed(response) == [("a", 0), ("a", 1)] + [("c", i) for i in range(4)]
    # The cursor applies to the chosen topics too.
    response = describe(many, ["c", "a"], limit=3, cursor=("a", 1))
    assert listed(response) == [("a", 1), ("c", 0), ("c", 1)] and next_cursor(response) == ("c", 2)
    # A cursor at a topic that no longer exists starts at the next one.
    assert listed(describe(many, cursor=("bb", 5)))[0] == ("c", 0)


def test_the_server_caps_the_partition_limit():
    c = Cluster(limit=3)
    c.brokers(1)
    c.topic("t", partitions=5, rf=1)
    response = describe(c, limit=2000)
    assert listed(response) == [("t", 0), ("t", 1), ("t", 2)] and next_cursor(response) == ("t", 3)
    assert listed(describe(c, limit=2)) == [("t", 0), ("t", 1)]
    # The cap is a dynamic cluster config too.
    from protocol.generated.messages.incremental_alter_configs_request import (
        AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
    applied = c.run(c.qc.incremental_alter_configs(IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=4, resource_name="", configs=[
            AlterableConfig(name="max.request.partition.size.limit", config_operation=0, value="4")])]), 1))
    assert applied.response.responses[0].error_code == Error.NONE
    assert len(listed(describe(c))) == 4


def test_describe_fills_elr_fields_and_offline_replicas():
    c = Cluster(min_isr=2, elr=True)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    c.expire(3, 2, 1)
    c.register(2, previous_epoch=-1)  # an unclean restart: 2 is not eligible any more
    p = describe(c).topics[0].partitions[0]
    # The last known ELR holds the last leader, 1.
    assert (p.leader_id, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr) == (NO_LEADER, [], [1], [1])
    assert p.offline_replicas == [1, 2, 3]
    c.register(1, previous_epoch=-1)
    p = describe(c).topics[0].partitions[0]
    assert (p.eligible_leader_replicas, p.last_known_elr) == ([], [1])


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_before_v12_is_refused_in_an_answer_that_encodes(c, version):
    topic_id = c.topic("m", partitions=1, rf=1)
    response = metadata(c, version, [MetadataRequestTopic(name=None, topic_id=topic_id),
                                     MetadataRequestTopic(name=None, topic_id=random_uuid()),
                                     MetadataRequestTopic(name="m")])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("", Error.INVALID_REQUEST), ("", Error.INVALID_REQUEST), ("m", Error.NONE)]
