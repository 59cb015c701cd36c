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
from tests.server.test_replication import Cluster, assert_replays


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
        "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered.")
    for b in (1, 2, 3):
        c.heartbeat(b, want_fence=True)
    assert results(create(c, ("none", 1, 1)))["none"] == (
        Error.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")


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
