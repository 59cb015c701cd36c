"""Partition reassignments as Apache Kafka's controller runs them (PartitionReassignmentReplicasTest,
PartitionReassignmentRevertTest and the reassignment cases of ReplicationControlManagerTest),
driven through the QuorumController with a ManualClock.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from tests.support.replication import Cluster, assert_replays


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(0, 1, 2, 3, 4, 5, 6, 7, 9)
    return cluster


def reassign(c: Cluster, target: list[int] | None, name: str = "t") -> tuple[int, str | None]:
    result = c.reassign(name, 0, target).response.responses[0].partitions[0]
    return result.error_code, result.error_message or None


def ongoing(c: Cluster, name: str = "t") -> tuple[list[int], list[int], list[int]]:
    p = c.part(name)
    return p.replicas, p.adding, p.removing


def in_sync(c: Cluster, isr: list[int], name: str = "t"):
    """The leader reports ``isr`` as its ISR."""
    return c.alter(c.part(name).leader, name, 0, isr)


def test_none_added_or_removed(c):
    """PartitionReassignmentReplicasTest.testNoneAddedOrRemoved: nothing to write."""
    c.topic("t", [[3, 2, 1]])
    applied = c.reassign("t", 0, [3, 2, 1])
    assert applied.response.responses[0].partitions[0].error_code == Error.NONE
    assert applied.records == []


def test_additions(c):
    """testAdditions: added replicas in id order, the list as the target gives it."""
    c.topic("t", [[3, 2, 1]])
    assert reassign(c, [3, 6, 2, 1, 5]) == (Error.NONE, None)
    assert ongoing(c) == ([3, 6, 2, 1, 5], [5, 6], [])


def test_removals(c):
    """testRemovals: replicas to remove go after the target in id order; the rest are in sync,
    so the reassignment completes in the same record."""
    c.topic("t", [[3, 2, 1, 0]])
    applied = c.reassign("t", 0, [3, 1])
    assert len(applied.records) == 1
    p = c.part("t")
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ([3, 1], [3, 1], 3, False)
    assert p.leader_epoch == 1  # replicas left: the leader epoch is bumped


def test_additions_and_removals(c):
    """testAdditionsAndRemovals."""
    c.topic("t", [[3, 2, 1, 0]])
    reassign(c, [7, 3, 1, 9])
    assert ongoing(c) == ([7, 3, 1, 9, 0, 2], [7, 9], [0, 2])


def test_rearrangement(c):
    """testRearrangement: same members, new order, completes at once without a leader change."""
    c.topic("t", [[3, 2, 1, 0]])
    applied = c.reassign("t", 0, [0, 1, 3, 2])
    assert len(applied.records) == 1
    p = c.part("t")
    assert (p.replicas, p.leader, p.leader_epoch, p.reassigning) == ([0, 1, 3, 2], 3, 0, False)


def test_does_not_complete_until_every_new_replica_is_in_sync(c):
    """testDoesNotCompleteReassignment / testDoesCompleteReassignmentAllNewReplicas."""
    c.topic("t", [[0, 1, 2]])
    reassign(c, [3, 4, 5])
    in_sync(c, [0, 1, 2, 3, 4])
    assert ongoing(c) == ([3, 4, 5, 0, 1, 2], [3, 4, 5], [0, 1, 2])
    applied, result = in_sync(c, [0, 1, 2, 3, 4, 5])
    assert result.error_code == Error.NEW_LEADER_ELECTED
    p = c.part("t")
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ([3, 4, 5], [3, 4, 5], 3, False)
    assert_replays(c)


def test_does_complete_reassignment_some_new_replicas(c):
    """testDoesCompleteReassignmentSomeNewReplicas: the leader stays, so no error."""
    c.topic("t", [[0, 1, 2]])
    reassign(c, [0, 1, 3])
    applied, result = in_sync(c, [0, 1, 2, 3])
    assert (result.error_code, result.leader_id, result.isr) == (Error.NONE, 0, [0, 1, 3])
    p = c.part("t")
    assert (p.replicas, p.isr, p.reassigning) == ([0, 1, 3], [0, 1, 3], False)


def test_new_reassignment_that_removes_previously_adding_replicas(c):
    """ReplicationControlManagerTest.testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas."""
    c.topic("t", [[0, 1]])
    reassign(c, [2, 3])
    assert ongoing(c) == ([2, 3, 0, 1], [2, 3], [0, 1])
    _, result = in_sync(c, [0, 1, 2])
    assert (result.error_code, result.isr) == (Error.NONE, [0, 1, 2])
    election = c.elect(0, {"t": [0]}).response.replica_election_results[0].partition_result[0]
    assert election.error_code == Error.NONE and c.part("t").leader == 2
    reassign(c, [4, 5])
    assert ongoing(c) == ([4, 5, 0, 1, 2, 3], [4, 5], [0, 1, 2, 3])
    assert c.part("t").leader == 2
    _, result = in_sync(c, [0, 1, 2, 3, 4, 5])
    assert result.error_code == Error.NEW_LEADER_ELECTED
    p = c.part("t")
    assert (p.leader, p.replicas, p.reassigning) == (4, [4, 5], False)
    assert c.list_reassignments() == {}
    assert_replays(c)


def test_invalid_targets(c):
    """testCancelReassignPartitions / validateManualPartitionAssignment: Kafka's words."""
    c.topic("t", [[1, 2, 3]])
    assert reassign(c, []) == (
        Error.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert reassign(c, [1, 8, 2]) == (
        Error.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 8, but no such broker is registered.")
    assert reassign(c, [2, 1, 2]) == (
        Error.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 2 more than once.")
    assert reassign(c, None) == (Error.NO_REASSIGNMENT_IN_PROGRESS, None)
    assert c.reassign("nope", 0, [1]).response.responses[0].partitions[0].error_code == \
        Error.UNKNOWN_TOPIC_OR_PARTITION


def test_cancel_reassign_partitions(c):
    """ReplicationControlManagerTest.testCancelReassignPartitions: the revert drops the replicas
    being added from the replicas and the ISR; the leader stays when it may."""
    c.topic("t", [[1, 2, 3, 4]])
    reassign(c, [1, 2, 3, 4, 0])
    in_sync(c, [1, 2, 3, 4, 0])
    # Every target is in sync: already complete, nothing to cancel.
    assert reassign(c, None) == (Error.NO_REASSIGNMENT_IN_PROGRESS, None)
    c.topic("bar", [[1, 2, 3, 4]])
    reassign(c, [1, 2, 3, 4, 0, 5], name="bar")
    in_sync(c, [1, 2, 3, 4, 0], name="bar")
    assert ongoing(c, "bar") == ([1, 2, 3, 4, 0, 5], [0, 5], [])
    assert reassign(c, None, name="bar") == (Error.NONE, None)
    p = c.part("bar")
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ([1, 2, 3, 4], [1, 2, 3, 4], 1, False)
    assert_replays(c)


def test_revert_that_would_need_an_unclean_election():
    """PartitionReassignmentRevertTest.testIsrSpecialCase and
    ReplicationControlManager.cancelPartitionReassignment: an empty ISR after the revert is
    refused unless the topic allows unclean elections."""
    c = Cluster()
    c.brokers(1, 2, 3, 4)
    c.topic("t", [[1, 2]])
    reassign(c, [3, 4])
    in_sync(c, [1, 2, 3])
    c.expire(1, 2)
    assert c.part("t").isr == [3]
    code, message = reassign(c, None)
    assert (code, message) == (Error.INVALID_REPLICA_ASSIGNMENT,
                               "Unable to revert partition assignment for t:0 because it would "
                               "require an unclean leader election.")
    c.set_topic_config("t", "unclean.leader.election.enable", "true")
    assert reassign(c, None) == (Error.NONE, None)
    p = c.part("t")
    assert (p.replicas, p.isr, p.reassigning) == ([1, 2], [1], False)
    assert_replays(c)
