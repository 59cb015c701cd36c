"""Replication control of QuorumController, driven directly with a ManualClock.

No sockets and no sleeping: brokers register and heartbeat through the controller's own
commands, time moves only when a test advances the clock, and every record a command produces
is kept in a journal, so that a test can look at exactly what would be written to the log and
replay it (or the snapshot) into a fresh controller.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from protocol.constants import DIRECTORY_UNASSIGNED, NO_LEADER, LeaderRecoveryState
from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.primitives import random_uuid
from server.controller.clock import ManualClock
from server.controller.quorum_controller import Applied, QuorumController
from tests.support.replication import NO_CHANGE, SESSION_MS, Cluster, assert_replays

MV_3_7 = 17  # partition records v1: no eligible leader replicas
PREFERRED, UNCLEAN = 0, 1


def change_records(applied: Applied) -> list:
    return [record for record, _ in applied.records if record.NAME == "PartitionChangeRecord"]


def only_change(applied: Applied):
    changes = change_records(applied)
    assert len(changes) == 1, [r.NAME for r, _ in applied.records]
    return changes[0]


def written(record) -> dict:
    """The fields a PartitionChangeRecord actually sets (the others keep their 'no change' value)."""
    unset = {"isr": None, "leader": NO_CHANGE, "replicas": None, "removing_replicas": None,
             "adding_replicas": None, "leader_recovery_state": -1, "directories": None,
             "eligible_leader_replicas": None, "last_known_elr": None}
    return {k: getattr(record, k) for k, v in unset.items() if getattr(record, k) != v}


def state(p) -> tuple:
    return list(p.replicas), list(p.isr), p.leader


@pytest.fixture
def c() -> Cluster:
    """Three live brokers and topic "t" with one partition on [1, 2, 3], led by 1."""
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    cluster.topic("t", [[1, 2, 3]])
    return cluster


# --- AlterPartition: ISR changes -----------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_alter_partition_shrinks_and_expands_the_isr_writing_only_the_isr(c, version):
    before = c.part("t")
    assert (before.leader_epoch, before.partition_epoch) == (0, 0)
    applied, result = c.alter(1, "t", 0, [1, 3], version=version)
    assert written(only_change(applied)) == {"isr": [1, 3]}
    assert result.error_code == Error.NONE
    assert (result.leader_id, result.isr, result.leader_epoch, result.partition_epoch) == (1, [1, 3], 0, 1)
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1, 3], 1)
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)  # an ISR change keeps the leader epoch
    assert c.qc.replication.isr_of[2] == set()

    applied, result = c.alter(1, "t", 0, [1, 2, 3], version=version)
    assert written(only_change(applied)) == {"isr": [1, 2, 3]}
    assert (result.isr, result.partition_epoch) == ([1, 2, 3], 2)
    assert c.part("t").isr == [1, 2, 3]
    assert_replays(c)


def test_alter_partition_that_changes_nothing_writes_nothing(c):
    applied, result = c.alter(1, "t", 0, [1, 2, 3])
    assert applied.records == []
    assert (result.error_code, result.isr, result.partition_epoch) == (Error.NONE, [1, 2, 3], 0)


def test_alter_partition_from_an_unknown_or_stale_broker_epoch_is_rejected(c):
    for broker_id, epoch in [(1, c.epochs[1] + 100), (42, 7)]:
        c.epochs.setdefault(42, 7)
        applied, result = c.alter(broker_id, "t", 0, [1, 2], broker_epoch=epoch)
        assert result is None and applied.records == []
        assert applied.response.error_code == Error.STALE_BROKER_EPOCH
    # Kafka checks the sender's epoch exactly: -1 is stale too.
    applied, result = c.alter(1, "t", 0, [1, 2], broker_epoch=-1)
    assert applied.response.error_code == Error.STALE_BROKER_EPOCH and c.part("t").isr == [1, 2, 3]


@pytest.mark.parametrize("version", [0, 3])
def test_alter_partition_from_a_follower_is_an_invalid_request(c, version):
    applied, result = c.alter(2, "t", 0, [2, 3], version=version)
    assert result.error_code == Error.INVALID_REQUEST
    assert applied.records == [] and c.part("t").isr == [1, 2, 3]


def test_alter_partition_with_an_old_leader_epoch_is_fenced(c):
    c.expire(1)  # leader 1 -> 2, leader epoch 1
    c.unfence(1)
    c.alter(2, "t", 0, [2, 3, 1])
    applied, result = c.alter(2, "t", 0, [2, 3], leader_epoch=0)
    assert result.error_code == Error.FENCED_LEADER_EPOCH
    assert applied.records == [] and c.part("t").isr == [2, 3, 1]


def test_alter_partition_with_a_stale_partition_epoch_is_an_invalid_update_version(c):
    c.alter(1, "t", 0, [1, 2])
    applied, result = c.alter(1, "t", 0, [1], partition_epoch=0)
    assert result.error_code == Error.INVALID_UPDATE_VERSION
    assert applied.records == [] and c.part("t").isr == [1, 2]


@pytest.mark.parametrize("isr", [[1, 4], [1, 1, 2], [2, 3], []])
def test_alter_partition_with_a_malformed_isr_is_an_invalid_request(c, isr):
    c.add_broker(4)
    applied, result = c.alter(1, "t", 0, isr)
    assert result.error_code == Error.INVALID_REQUEST
    assert applied.records == [] and c.part("t").isr == [1, 2, 3]


def test_alter_partition_may_not_add_a_fenced_shutting_down_or_restarted_replica(c):
    c.alter(1, "t", 0, [1])
    c.expire(2)
    for version in (2, 3):
        _, result = c.alter(1, "t", 0, [1, 2], version=version)
        assert result.error_code == Error.INELIGIBLE_REPLICA
    # Kafka answers v0 and v1 with OPERATION_NOT_ATTEMPTED.
    for version in (0, 1):
        _, result = c.alter(1, "t", 0, [1, 2], version=version)
        assert result.error_code == Error.OPERATION_NOT_ATTEMPTED
    c.topic("u", [[3, 1]])  # a broker that leads nothing would shut down at once
    c.shut_down(3)
    assert c.qc.cluster.brokers[3].in_controlled_shutdown
    _, result = c.alter(1, "t", 0, [1, 3])
    assert result.error_code == Error.INELIGIBLE_REPLICA
    assert c.part("t").isr == [1]
    # v3 carries each new member's broker epoch: one from an earlier incarnation is refused.
    c.unfence(2)
    old_epoch = c.epochs[2]
    _, result = c.alter(1, "t", 0, [1, 2], isr_epochs={2: old_epoch - 1})
    assert result.error_code == Error.INELIGIBLE_REPLICA
    _, result = c.alter(1, "t", 0, [1, 2], isr_epochs={2: old_epoch})
    assert result.error_code == Error.NONE and c.part("t").isr == [1, 2]
    assert_replays(c)


def test_alter_partition_of_unknown_topics_and_partitions(c):
    # v2+ names topics by id.
    request = AlterPartitionRequest(broker_id=1, broker_epoch=c.epochs[1], topics=[
        TopicData(topic_id=random_uuid(), partitions=[PartitionData(partition_index=0, new_isr_with_epochs=[
            BrokerState(broker_id=1, broker_epoch=c.epochs[1])])])])
    response = c.qc.alter_partition(request, 3).response
    assert response.topics[0].partitions[0].error_code == Error.UNKNOWN_TOPIC_ID
    # v0/v1 by name.
    request = AlterPartitionRequest(broker_id=1, broker_epoch=c.epochs[1], topics=[
        TopicData(topic_name="nope", partitions=[PartitionData(partition_index=0, new_isr=[1])])])
    response = c.qc.alter_partition(request, 1).response
    assert response.topics[0].partitions[0].error_code == Error.UNKNOWN_TOPIC_OR_PARTITION
    request = AlterPartitionRequest(broker_id=1, broker_epoch=c.epochs[1], topics=[
        TopicData(topic_name="t", partitions=[PartitionData(partition_index=5, new_isr=[1])])])
    applied = c.qc.alter_partition(request, 1)
    assert applied.response.topics[0].partitions[0].error_code == Error.UNKNOWN_TOPIC_OR_PARTITION
    assert applied.records == []


# --- leader election on fencing, shutdown, unregistration -----------------------------------------

def test_a_fenced_leader_is_replaced_from_the_isr_first(c):
    c.alter(1, "t", 0, [1, 3])  # 2 is out of sync: it comes first in the replicas but may not lead
    applied = c.expire(1)
    assert [r.NAME for r, _ in applied.records] == ["PartitionChangeRecord", "FenceBrokerRecord"]
    assert written(only_change(applied)) == {"isr": [3], "leader": 3}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [3], 3)
    assert (p.leader_epoch, p.partition_epoch) == (1, 2)
    assert_replays(c)


def test_a_fenced_follower_only_leaves_the_isr(c):
    applied = c.expire(2)
    assert written(only_change(applied)) == {"isr": [1, 3]}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1, 3], 1) and p.leader_epoch == 0


def test_controlled_shutdown_moves_leadership_before_the_broker_may_stop(c):
    applied = c.shut_down(1)
    assert written(only_change(applied)) == {"isr": [2, 3], "leader": 2}
    assert applied.response.should_shut_down is False
    assert c.qc.cluster.brokers[1].in_controlled_shutdown
    assert state(c.part("t")) == ([1, 2, 3], [2, 3], 2)
    # It leads nothing now, but the active brokers have not yet seen the move (Kafka's
    # lowest active offset): it may go once they report having caught up.
    assert c.shut_down(1).response.should_shut_down is False
    c.heartbeat(2)
    c.heartbeat(3)
    applied = c.shut_down(1)
    assert applied.response.should_shut_down is True
    assert change_records(applied) == []
    assert_replays(c)


def test_unregistering_the_leader_elects_another(c):
    applied = c.unregister(1)
    assert [r.NAME for r, _ in applied.records] == ["PartitionChangeRecord", "UnregisterBrokerRecord"]
    assert written(only_change(applied)) == {"isr": [2, 3], "leader": 2}
    assert 1 not in c.qc.cluster.brokers
    assert state(c.part("t")) == ([1, 2, 3], [2, 3], 2)
    assert_replays(c)


def test_leadership_moves_for_every_partition_the_broker_led():
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("many", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]])
    c.expire(1)
    leaders = [c.part("many", i).leader for i in range(4)]
    assert leaders == [2, 2, 3, 3]
    assert all(1 not in c.part("many", i).isr for i in range(4))
    assert c.qc.replication.isr_of[1] == set()
    assert not c.qc.replication.leads_any(1)


def test_the_last_isr_member_stays_and_leads_again_when_it_comes_back(c):
    c.alter(1, "t", 0, [1])
    applied = c.expire(1)
    assert written(only_change(applied)) == {"leader": NO_LEADER}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1], NO_LEADER) and p.leader_epoch == 1
    assert p in c.qc.replication.leaderless
    # 2 and 3 are live but out of sync: without unclean election nobody else may lead.
    assert c.elect(PREFERRED, {"t": [0]}).records == []
    applied = c.unfence(1)
    assert [r.NAME for r, _ in applied.records] == ["UnfenceBrokerRecord", "PartitionChangeRecord"]
    assert written(only_change(applied)) == {"leader": 1}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1], 1) and p.leader_epoch == 2
    assert p not in c.qc.replication.leaderless
    assert_replays(c)


def test_a_broker_coming_back_does_not_take_over_partitions_that_have_a_leader(c):
    c.expire(1)
    applied = c.unfence(1)
    assert change_records(applied) == []
    assert state(c.part("t")) == ([1, 2, 3], [2, 3], 2)


def test_a_broker_coming_back_only_elects_where_it_is_a_replica():
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("a", [[1, 2]])
    c.topic("b", [[3, 2]])
    c.alter(1, "a", 0, [1])
    c.alter(3, "b", 0, [3])
    c.expire(1, 3)
    assert c.part("a").leader == c.part("b").leader == NO_LEADER
    c.unfence(3)
    assert c.part("a").leader == NO_LEADER and c.part("b").leader == 3
    c.unfence(1)
    assert c.part("a").leader == 1
    assert c.qc.replication.leaderless == set()
    assert_replays(c)


# --- ElectLeaders ----------------------------------------------------------------------------------

def election_results(applied: Applied) -> dict:
    return {(t.topic, p.partition_id): p.error_code
            for t in applied.response.replica_election_results for p in t.partition_result}


def test_preferred_election_when_the_preferred_replica_already_leads_is_not_needed(c):
    applied = c.elect(PREFERRED, {"t": [0]})
    assert election_results(applied) == {("t", 0): Error.ELECTION_NOT_NEEDED}
    assert applied.records == []


@pytest.mark.parametrize("version", [0, 1, 2])
def test_preferred_election_moves_leadership_back_to_the_first_replica(c, version):
    c.expire(1)
    c.unfence(1)
    c.alter(2, "t", 0, [2, 3, 1])
    assert c.part("t").leader == 2
    applied = c.elect(PREFERRED, {"t": [0]}, version=version)
    assert election_results(applied) == {("t", 0): Error.NONE}
    assert written(only_change(applied)) == {"leader": 1}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [2, 3, 1], 1) and p.leader_epoch == 2
    assert_replays(c)


def test_preferred_election_needs_the_preferred_replica_live_and_in_sync(c):
    c.expire(1)
    applied = c.elect(PREFERRED, {"t": [0]})  # 1 is fenced
    assert election_results(applied) == {("t", 0): Error.PREFERRED_LEADER_NOT_AVAILABLE}
    assert applied.records == []
    c.unfence(1)
    applied = c.elect(PREFERRED, {"t": [0]})  # 1 is live but not back in the ISR
    assert election_results(applied) == {("t", 0): Error.PREFERRED_LEADER_NOT_AVAILABLE}
    assert applied.records == [] and c.part("t").leader == 2


def test_election_of_unknown_partitions(c):
    applied = c.elect(PREFERRED, {"t": [7], "nope": [0]})
    assert election_results(applied) == {("t", 7): Error.UNKNOWN_TOPIC_OR_PARTITION,
                                         ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.elect(UNCLEAN, {"nope": [0]}).response.replica_election_results[0].partition_result[0] \
        .error_code == Error.UNKNOWN_TOPIC_OR_PARTITION


def test_preferred_election_of_all_partitions_reports_those_that_needed_one():
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("a", [[1, 2, 3], [2, 3, 1]])
    c.topic("b", [[3, 1, 2]])
    c.expire(2)
    c.unfence(2)
    c.alter(3, "a", 1, [3, 1, 2])
    assert c.part("a", 1).leader == 3
    applied = c.elect(PREFERRED, None)
    assert election_results(applied) == {("a", 1): Error.NONE}
    assert c.part("a", 1).leader == 2
    # Kafka lists every topic, with no partition when none needed an election.
    assert [(r.topic, r.partition_result) for r in c.elect(PREFERRED, None).response.replica_election_results] == [
        ("a", []), ("b", [])]


def recovering_partition(c: Cluster) -> None:
    """Leader 1 alone in the ISR, then fenced: "t"-0 has no leader; 2 and 3 are live."""
    c.alter(1, "t", 0, [1])
    c.expire(1)
    assert state(c.part("t")) == ([1, 2, 3], [1], NO_LEADER)


def test_unclean_election_elects_a_live_replica_that_must_recover(c):
    recovering_partition(c)
    applied = c.elect(UNCLEAN, {"t": [0]})
    assert election_results(applied) == {("t", 0): Error.NONE}
    assert written(only_change(applied)) == {
        "isr": [2], "leader": 2, "leader_recovery_state": LeaderRecoveryState.RECOVERING}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [2], 2) and p.recovery == LeaderRecoveryState.RECOVERING
    assert p not in c.qc.replication.leaderless
    assert_replays(c)


def test_the_isr_cannot_grow_until_the_unclean_leader_has_recovered(c):
    recovering_partition(c)
    c.elect(UNCLEAN, {"t": [0]})
    applied, result = c.alter(2, "t", 0, [2, 3], recovery=LeaderRecoveryState.RECOVERING)
    assert result.error_code == Error.INVALID_REQUEST and applied.records == []
    assert c.part("t").isr == [2]
    # Before AlterPartition v1 there is no recovery state: the request means LeaderRecoveryState.RECOVERED.
    # Staying LeaderRecoveryState.RECOVERING with the leader alone changes nothing.
    applied, result = c.alter(2, "t", 0, [2], recovery=LeaderRecoveryState.RECOVERING)
    assert result.error_code == Error.NONE and applied.records == []
    assert result.leader_recovery_state == LeaderRecoveryState.RECOVERING
    # Recovered: only the recovery state is written, the leader epoch stays.
    epoch = c.part("t").leader_epoch
    applied, result = c.alter(2, "t", 0, [2], recovery=LeaderRecoveryState.RECOVERED)
    assert written(only_change(applied)) == {"leader_recovery_state": LeaderRecoveryState.RECOVERED}
    assert (result.error_code, result.leader_recovery_state) == (Error.NONE, LeaderRecoveryState.RECOVERED)
    p = c.part("t")
    assert p.recovery == LeaderRecoveryState.RECOVERED and p.leader_epoch == epoch
    applied, result = c.alter(2, "t", 0, [2, 3])
    assert result.error_code == Error.NONE and c.part("t").isr == [2, 3]
    # A recovered partition cannot go back to LeaderRecoveryState.RECOVERING.
    applied, result = c.alter(2, "t", 0, [2], recovery=LeaderRecoveryState.RECOVERING)
    assert result.error_code == Error.INVALID_REQUEST and applied.records == []
    assert_replays(c)


def test_unclean_election_with_a_live_leader_is_not_needed(c):
    applied = c.elect(UNCLEAN, {"t": [0]})
    assert election_results(applied) == {("t", 0): Error.ELECTION_NOT_NEEDED}
    assert applied.records == []


def test_unclean_election_without_any_live_replica(c):
    recovering_partition(c)
    c.expire(2, 3)
    applied = c.elect(UNCLEAN, {"t": [0]})
    assert election_results(applied) == {("t", 0): Error.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    assert applied.records == []


@pytest.mark.parametrize("where", ["static", "topic"])
def test_unclean_leader_election_enabled_elects_automatically(where):
    c = Cluster(unclean=where == "static")
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    if where == "topic":
        c.set_topic_config("t", "unclean.leader.election.enable", "true")
    c.alter(1, "t", 0, [1])
    applied = c.expire(1)
    assert written(only_change(applied)) == {
        "isr": [2], "leader": 2, "leader_recovery_state": LeaderRecoveryState.RECOVERING}
    assert state(c.part("t")) == ([1, 2, 3], [2], 2) and c.part("t").recovery == LeaderRecoveryState.RECOVERING
    assert_replays(c)


# --- reassignment (KIP-455, seed 000) ----------------------------------------------------------------

def reassignment_results(applied: Applied) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in applied.response.responses for p in t.partitions}


@pytest.fixture
def c5() -> Cluster:
    """Five live brokers and topic "t" on [1, 2, 3], led by 1."""
    cluster = Cluster()
    cluster.brokers(1, 2, 3, 4, 5)
    cluster.topic("t", [[1, 2, 3]])
    return cluster


def test_a_target_already_in_the_isr_completes_at_once(c5):
    applied = c5.reassign("t", 0, [3, 2])
    assert reassignment_results(applied) == {("t", 0): Error.NONE}
    # The leader was removed, so it changes (and the leader epoch with it).
    assert written(only_change(applied)) == {"isr": [2, 3], "leader": 3, "replicas": [3, 2],
                                             "directories": [DIRECTORY_UNASSIGNED] * 2}
    p = c5.part("t")
    assert state(p) == ([3, 2], [2, 3], 3) and not p.reassigning and p.leader_epoch == 1
    assert c5.list_reassignments() == {}
    assert_replays(c5)


def test_the_seed_example_1_2_3_to_3_4_5(c5):
    applied = c5.reassign("t", 0, [3, 4, 5])
    assert reassignment_results(applied) == {("t", 0): Error.NONE}
    assert written(only_change(applied)) == {
        "replicas": [3, 4, 5, 1, 2], "adding_replicas": [4, 5], "removing_replicas": [1, 2],
        "directories": [DIRECTORY_UNASSIGNED] * 5}
    p = c5.part("t")
    assert state(p) == ([3, 4, 5, 1, 2], [1, 2, 3], 1) and p.leader_epoch == 0
    assert c5.list_reassignments() == {("t", 0): ([3, 4, 5, 1, 2], [4, 5], [1, 2])}
    assert c5.list_reassignments({"t": [0]}) == c5.list_reassignments()

    # 4 catches up first: the reassignment goes on.
    applied, result = c5.alter(1, "t", 0, [1, 2, 3, 4])
    assert written(only_change(applied)) == {"isr": [1, 2, 3, 4]}
    assert (result.error_code, result.isr) == (Error.NONE, [1, 2, 3, 4])
    assert c5.part("t").reassigning

    # 5 catches up: every target is in sync, so the change completes the reassignment. The
    # ISR applied is not the one asked for, and leader 1 is no longer a replica.
    before = c5.part("t")
    leader_epoch, partition_epoch = before.leader_epoch, before.partition_epoch
    applied, result = c5.alter(1, "t", 0, [1, 2, 3, 4, 5])
    assert written(only_change(applied)) == {
        "isr": [3, 4, 5], "leader": 3, "replicas": [3, 4, 5], "adding_replicas": [],
        "removing_replicas": [], "directories": [DIRECTORY_UNASSIGNED] * 3}
    # Kafka answers only the error: the old leader learns the new state from the log.
    assert result.error_code == Error.NEW_LEADER_ELECTED and result.isr == []
    p = c5.part("t")
    assert state(p) == ([3, 4, 5], [3, 4, 5], 3) and not p.reassigning
    assert (p.leader_epoch, p.partition_epoch) == (leader_epoch + 1, partition_epoch + 1)
    assert c5.list_reassignments() == {}
    assert c5.qc.replication.isr_of[1] == set() and c5.qc.replication.reassigning == set()
    assert_replays(c5)


def test_completing_a_reassignment_that_keeps_the_leader(c5):
    # Seed 000: leader 1, ISR 1,2,3, target 1,2,4; the leader asks for 1,2,3,4 and gets 1,2,4.
    c5.reassign("t", 0, [1, 2, 4])
    assert c5.part("t").replicas == [1, 2, 4, 3]
    applied, result = c5.alter(1, "t", 0, [1, 2, 3, 4])
    assert (result.error_code, result.leader_id, result.isr) == (Error.NONE, 1, [1, 2, 4])
    p = c5.part("t")
    assert state(p) == ([1, 2, 4], [1, 2, 4], 1) and not p.reassigning
    assert p.leader_epoch == 1  # replicas were removed: the leader epoch moves on
    assert_replays(c5)


def test_cancelling_restores_the_original_replicas(c5):
    c5.reassign("t", 0, [3, 4, 5])
    c5.alter(1, "t", 0, [1, 2, 3, 4])
    applied = c5.reassign("t", 0, None)
    assert reassignment_results(applied) == {("t", 0): Error.NONE}
    # The merged list [3, 4, 5, 1, 2] without the adding replicas: the original set, in the
    # order the reassignment left them (as in Kafka, the log does not keep the first order).
    # Replicas were removed, so the leader is written and its epoch moves on.
    assert written(only_change(applied)) == {
        "isr": [1, 2, 3], "leader": 1, "replicas": [3, 1, 2], "adding_replicas": [],
        "removing_replicas": [], "directories": [DIRECTORY_UNASSIGNED] * 3}
    p = c5.part("t")
    assert state(p) == ([3, 1, 2], [1, 2, 3], 1) and not p.reassigning
    assert p.leader_epoch == 1
    assert c5.qc.replication.isr_of[4] == set()
    assert c5.list_reassignments() == {}
    applied = c5.reassign("t", 0, None)
    assert reassignment_results(applied) == {("t", 0): Error.NO_REASSIGNMENT_IN_PROGRESS}
    assert applied.records == []
    assert_replays(c5)


def test_a_new_target_replaces_an_ongoing_reassignment(c5):
    c5.reassign("t", 0, [3, 4, 5])
    c5.reassign("t", 0, [1, 4])
    p = c5.part("t")
    # As in Kafka: measured against the current list, the first reassignment's additions
    # included, and the replicas to remove in id order.
    assert (p.replicas, p.adding, p.removing) == ([1, 4, 2, 3, 5], [], [2, 3, 5])
    assert c5.list_reassignments() == {("t", 0): ([1, 4, 2, 3, 5], [], [2, 3, 5])}
    # Cancelling now goes back to the whole list, as nothing is being added.
    c5.reassign("t", 0, None)
    assert c5.part("t").replicas == [1, 4, 2, 3, 5] and not c5.part("t").reassigning
    assert_replays(c5)


def test_deleting_a_topic_ends_its_reassignment(c5):
    c5.topic("other", [[1, 2]])
    c5.reassign("t", 0, [3, 4, 5])
    c5.reassign("other", 0, [2, 5])
    assert set(c5.list_reassignments()) == {("t", 0), ("other", 0)}
    applied = c5.delete("t")
    assert [r.NAME for r, _ in applied.records] == ["RemoveTopicRecord"]
    assert c5.list_reassignments() == {("other", 0): ([2, 5, 1], [5], [1])}
    assert c5.list_reassignments({"t": [0]}) == {}
    assert {p.topic_id for p in c5.qc.replication.reassigning} == {c5.qc.replication.names["other"]}
    assert all(c5.part("other") in ps or b not in (1, 2) for b, ps in c5.qc.replication.isr_of.items())
    assert_replays(c5)


def test_list_reassignments_of_chosen_partitions(c5):
    c5.topic("u", [[1, 2, 3], [2, 3, 4]])
    c5.reassign("u", 1, [2, 3, 5])
    assert c5.list_reassignments({"u": [0, 1, 9], "nope": [0]}) == {("u", 1): ([2, 3, 5, 4], [5], [4])}
    assert c5.list_reassignments({"u": [0]}) == {}


@pytest.mark.parametrize("target", [[], [1, 1, 2], [1, 2, 99]])
def test_a_bad_reassignment_target_is_refused(c5, target):
    applied = c5.reassign("t", 0, target)
    assert reassignment_results(applied) == {("t", 0): Error.INVALID_REPLICA_ASSIGNMENT}
    assert applied.records == [] and not c5.part("t").reassigning


def test_reassigning_an_unknown_partition(c5):
    assert reassignment_results(c5.reassign("t", 3, [1, 2])) == {("t", 3): Error.UNKNOWN_TOPIC_OR_PARTITION}
    assert reassignment_results(c5.reassign("x", 0, [1, 2])) == {("x", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}


def test_cancelling_when_only_adding_replicas_are_in_sync_needs_unclean_election(c5):
    # Kafka's PartitionReassignmentRevert: without the replicas being added the ISR is empty,
    # so reverting would be an unclean election.
    c5.reassign("t", 0, [3, 4, 5])
    c5.alter(1, "t", 0, [1, 2, 3, 4])
    c5.expire(1, 2, 3)
    assert state(c5.part("t")) == ([3, 4, 5, 1, 2], [4], 4)
    applied = c5.reassign("t", 0, None)
    assert reassignment_results(applied) == {("t", 0): Error.INVALID_REPLICA_ASSIGNMENT}
    assert applied.records == [] and c5.part("t").reassigning
    c5.set_topic_config("t", "unclean.leader.election.enable", "true")
    applied = c5.reassign("t", 0, None)
    assert reassignment_results(applied) == {("t", 0): Error.NONE}
    p = c5.part("t")
    # The ISR becomes the first original replica; with 1, 2 and 3 fenced nobody can lead.
    assert state(p) == ([3, 1, 2], [3], -1) and not p.reassigning
    assert_replays(c5)


# --- eligible leader replicas (KIP-966, seed 003) -------------------------------------------------------

@pytest.fixture
def e() -> Cluster:
    """ELR on, min.insync.replicas=2; three live brokers and "t" on [1, 2, 3], led by 1."""
    cluster = Cluster(min_isr=2, elr=True)
    cluster.brokers(1, 2, 3)
    cluster.topic("t", [[1, 2, 3]])
    return cluster


def elr(p) -> tuple[list[int], list[int]]:
    return list(p.elr), list(p.last_known_elr)


def test_replicas_leaving_an_isr_below_min_isr_join_the_elr_and_the_isr_may_empty(e):
    # Down to min.insync.replicas: no ELR yet.
    applied = e.expire(3)
    assert written(only_change(applied)) == {"isr": [1, 2]}
    assert elr(e.part("t")) == ([], [])
    # Below it: the replica that leaves is still eligible.
    applied = e.expire(2)
    assert written(only_change(applied)) == {"isr": [1], "eligible_leader_replicas": [2]}
    # The last member leaves too: the ISR empties and the partition has no leader.
    applied = e.expire(1)
    assert only_change(applied).isr == []
    # Kafka remembers the leader it had then as the last known ELR.
    assert written(only_change(applied)) == {"isr": [], "leader": NO_LEADER, "eligible_leader_replicas": [1, 2],
                                             "last_known_elr": [1]}
    p = e.part("t")
    assert state(p) == ([1, 2, 3], [], NO_LEADER) and elr(p) == ([1, 2], [1])
    assert p in e.qc.replication.leaderless
    assert_replays(e)


def test_an_eligible_replica_that_comes_back_is_elected(e):
    e.expire(3, 2, 1)
    # 3 left while the ISR was still big enough: it is not eligible and cannot lead.
    applied = e.unfence(3)
    assert change_records(applied) == []
    applied = e.unfence(2)
    assert written(only_change(applied)) == {"isr": [2], "leader": 2, "eligible_leader_replicas": [1],
                                             "last_known_elr": []}
    p = e.part("t")
    assert state(p) == ([1, 2, 3], [2], 2) and elr(p) == ([1], [])
    # An eligible replica has every committed record: a clean election.
    assert p.recovery == LeaderRecoveryState.RECOVERED
    # Back to min.insync.replicas: the ELR is cleared.
    applied, result = e.alter(2, "t", 0, [2, 3])
    assert result.error_code == Error.NONE
    assert written(only_change(applied)) == {"isr": [2, 3], "eligible_leader_replicas": []}
    assert elr(e.part("t")) == ([], [])
    assert_replays(e)


def test_election_picks_a_live_eligible_replica_when_no_isr_member_is_live(e):
    # The leader drops both followers (they lag but are alive): they stay eligible.
    applied, _ = e.alter(1, "t", 0, [1])
    assert written(only_change(applied)) == {"isr": [1], "eligible_leader_replicas": [2, 3]}
    applied = e.expire(1)
    assert written(only_change(applied)) == {"isr": [2], "leader": 2, "eligible_leader_replicas": [1, 3]}
    p = e.part("t")
    assert state(p) == ([1, 2, 3], [2], 2) and p.recovery == LeaderRecoveryState.RECOVERED
    assert_replays(e)


def test_last_known_leader_survives_unclean_restarts_and_is_elected_last(e):
    """PartitionChangeBuilder with useLastKnownLeaderInBalancedRecovery: the last known ELR
    holds the last leader, an unclean restart takes a broker out of the ELR but not out of
    the last known ELR, and with nobody eligible left that leader is elected, uncleanly."""
    e.expire(3, 2, 1)
    assert elr(e.part("t")) == ([1, 2], [1])
    # Both eligible replicas restart without a clean shutdown: they may have lost data.
    applied = e.register(2, previous_epoch=-1)
    assert written(only_change(applied)) == {"eligible_leader_replicas": [1]}
    applied = e.register(1, previous_epoch=e.epochs[1] - 1)
    assert written(only_change(applied)) == {"eligible_leader_replicas": []}
    p = e.part("t")
    assert state(p) == ([1, 2, 3], [], NO_LEADER) and elr(p) == ([], [1])
    # Broker 2 was never the leader: it cannot lead.
    assert change_records(e.unfence(2)) == []
    applied = e.unfence(1)
    assert written(only_change(applied)) == {"isr": [1], "leader": 1, "last_known_elr": [],
                                             "leader_recovery_state": LeaderRecoveryState.RECOVERING}
    assert state(e.part("t")) == ([1, 2, 3], [1], 1) and elr(e.part("t")) == ([], [])
    assert_replays(e)


def shut_down_cleanly(c: Cluster, broker_id: int) -> None:
    c.shut_down(broker_id)
    assert c.shut_down(broker_id).response.should_shut_down
    assert c.qc.cluster.brokers[broker_id].fenced


def test_a_clean_restart_stays_eligible(e):
    e.expire(3)
    shut_down_cleanly(e, 2)
    assert elr(e.part("t")) == ([2], []) and e.part("t").isr == [1]
    old_epoch = e.epochs[2]
    applied = e.register(2, previous_epoch=old_epoch)
    assert change_records(applied) == []
    assert elr(e.part("t")) == ([2], [])
    e.expire(1)
    assert state(e.part("t")) == ([1, 2, 3], [], NO_LEADER)
    applied = e.unfence(2)
    assert written(only_change(applied)) == {"isr": [2], "leader": 2, "eligible_leader_replicas": [1],
                                             "last_known_elr": []}
    assert_replays(e)


def test_an_unclean_restart_is_no_longer_eligible(e):
    e.expire(3)
    shut_down_cleanly(e, 2)
    old_epoch = e.epochs[2]
    applied = e.register(2, previous_epoch=old_epoch - 1)
    assert [r.NAME for r, _ in applied.records] == ["PartitionChangeRecord", "RegisterBrokerRecord"]
    assert written(only_change(applied)) == {"eligible_leader_replicas": []}
    p = e.part("t")
    assert state(p) == ([1, 2, 3], [1], 1) and elr(p) == ([], [])
    e.expire(1)
    assert change_records(e.unfence(2)) == []
    assert e.part("t").leader == NO_LEADER
    applied = e.unfence(1)
    assert written(only_change(applied))["leader"] == 1
    assert_replays(e)


def test_min_insync_replicas_is_capped_at_the_replication_factor():
    c = Cluster(min_isr=2, elr=True)
    c.brokers(1, 2, 3)
    c.topic("one", [[1]])
    c.topic("three", [[1, 2, 3]])
    c.alter(1, "three", 0, [1])
    c.expire(2, 3, 1)
    for name in ("one", "three"):
        assert c.part(name).leader == NO_LEADER and c.part(name).isr == []
        assert 1 in c.part(name).elr
    c.unfence(1)
    # RF 1 with min.insync.replicas=2 acts as min.insync.replicas=1: the leader alone is a
    # full ISR, so nothing stays eligible or remembered.
    one = c.part("one")
    assert state(one) == ([1], [1], 1) and elr(one) == ([], [])
    # RF 3: the leader alone is below min.insync.replicas, the others stay eligible.
    three = c.part("three")
    assert state(three) == ([1, 2, 3], [1], 1) and elr(three) == ([2, 3], [])
    assert_replays(c)


def test_min_insync_replicas_above_the_replication_factor_counts_as_all_replicas():
    c = Cluster(min_isr=3, elr=True)
    c.brokers(1, 2)
    c.topic("two", [[1, 2]])
    applied, _ = c.alter(1, "two", 0, [1])
    assert written(only_change(applied)) == {"isr": [1], "eligible_leader_replicas": [2]}
    # Both replicas in sync meet min.insync.replicas=min(3, 2): the ELR clears, nothing is kept.
    applied, _ = c.alter(1, "two", 0, [1, 2])
    assert written(only_change(applied)) == {"isr": [1, 2], "eligible_leader_replicas": []}
    assert elr(c.part("two")) == ([], [])


def test_the_topic_min_insync_replicas_config_decides():
    c = Cluster(min_isr=1, elr=True)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]], configs={"min.insync.replicas": "3"})
    applied, _ = c.alter(1, "t", 0, [1, 2])
    assert written(only_change(applied)) == {"isr": [1, 2], "eligible_leader_replicas": [3]}


def test_without_elr_the_isr_never_empties_and_no_elr_is_written():
    # eligible.leader.replicas.enabled=false, min.insync.replicas=2
    c = Cluster(min_isr=2, elr=False)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    c.expire(3, 2)
    applied = c.expire(1)
    assert written(only_change(applied)) == {"leader": NO_LEADER}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1], NO_LEADER) and elr(p) == ([], [])
    changes = [record for _, record, _ in c.journal if record.NAME == "PartitionChangeRecord"]
    assert changes and all("eligible_leader_replicas" not in written(r) for r in changes)


def test_elr_needs_a_metadata_version_with_partition_record_v2():
    c = Cluster(min_isr=2, elr=True, metadata_version=MV_3_7)
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    applied = c.expire(3, 2, 1)
    record, version = applied.records[0]
    assert version == 1 and written(record) == {"leader": NO_LEADER}
    p = c.part("t")
    assert state(p) == ([1, 2, 3], [1], NO_LEADER) and elr(p) == ([], [])
    assert_replays(c)


# --- commands that touch partitions in several steps ----------------------------------------------------

def test_brokers_expiring_together_leave_consistent_partitions(c):
    c.alter(1, "t", 0, [1, 3])
    c.clock.advance(SESSION_MS)
    c.heartbeat(2)
    c.clock.advance(1)
    c.run(c.qc.fence_expired_brokers())
    assert c.qc.cluster.brokers[1].fenced and c.qc.cluster.brokers[3].fenced
    p = c.part("t")
    assert p.leader == NO_LEADER and len(p.isr) == 1


def test_a_restart_before_the_fence_timer_still_moves_leadership(c):
    c.clock.advance(SESSION_MS)
    c.heartbeat(2)
    c.heartbeat(3)
    c.clock.advance(1)
    c.register(1, previous_epoch=-1)  # the old incarnation died; its lease is over
    assert c.qc.cluster.brokers[1].fenced
    assert c.part("t").leader != 1


def test_an_unregistered_broker_is_not_an_eligible_leader_when_its_id_returns(e):
    e.expire(3)
    e.unregister(2)
    e.expire(1)
    e.add_broker(2)
    assert 2 not in e.part("t").elr and e.part("t").leader != 2


# --- random histories: invariants, and the log and snapshot rebuilding the state ----------------------

def check_invariants(c: Cluster) -> None:
    cluster = c.qc.cluster
    for t in c.qc.replication.topics.values():
        for p in t.partitions:
            where = f"{t.name}-{p.partition_id} {state(p)} elr={p.elr}"
            assert len(set(p.replicas)) == len(p.replicas), where
            assert set(p.isr) <= set(p.replicas), where
            assert set(p.elr) <= set(p.replicas) and not set(p.elr) & set(p.isr), where
            assert p.leader == NO_LEADER or (p.leader in p.isr and cluster.is_usable(p.leader)), where
            assert set(p.adding) <= set(p.replicas) and set(p.removing) <= set(p.replicas), where
            assert not set(p.adding) & set(p.removing), where
            if p.recovery == LeaderRecoveryState.RECOVERING:
                assert len(p.isr) <= 1, where
            if not c.qc.configs.elr_enabled(t.name):
                assert p.isr, where
            if p.leader == NO_LEADER:
                # Nobody who could lead was passed over.
                could = p.isr + p.elr
                if c.qc.configs.unclean_leader_election(t.name):
                    could = p.replicas
                assert not any(cluster.is_usable(b) for b in could), where


BROKER_IDS = [1, 2, 3, 4, 5]


class ReplicationHistories(RuleBasedStateMachine):
    """Random histories of broker lifecycles and partition changes against one controller, on
    a manual clock. After every step the partitions obey check_invariants; at the end the
    journal and the snapshot each rebuild exactly the state the commands produced. A failing
    history is shrunk to the fewest steps that still break a rule."""

    def __init__(self) -> None:
        super().__init__()
        self.c: Cluster | None = None
        self.made = 0

    @initialize(min_isr=st.sampled_from([1, 2]), elr=st.booleans(), unclean=st.booleans())
    def start(self, min_isr: int, elr: bool, unclean: bool) -> None:
        self.c = Cluster(min_isr=min_isr, elr=elr, unclean=unclean)
        self.c.brokers(*BROKER_IDS)
        self.c.topic("a", partitions=3, rf=3)
        self.c.topic("b", partitions=2, rf=2)

    # --- what the state offers --------------------------------------------------------------------
    def live(self) -> list[int]:
        return self.c.alive()

    def fenced(self) -> list[int]:
        return [b for b in BROKER_IDS if b in self.c.qc.cluster.brokers and b not in self.live()]

    def unregistered(self) -> list[int]:
        return [b for b in BROKER_IDS if b not in self.c.qc.cluster.brokers]

    def names(self) -> list[str]:
        return sorted(self.c.qc.replication.names)

    def led_partitions(self) -> list[tuple[str, int]]:
        return [(t.name, p.partition_id) for t in self.c.qc.replication.topics.values()
                for p in t.partitions if p.leader != NO_LEADER]

    def previous_epoch(self, data: st.DataObject, broker_id: int) -> int:
        """The epoch a restarting broker says it shut down with: its own after a clean
        shutdown, -1 after a crash (KIP-966)."""
        return self.c.epochs[broker_id] if data.draw(st.booleans(), label="clean restart") else -1

    # --- brokers ----------------------------------------------------------------------------------
    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.live()), label="broker")
        assert self.c.heartbeat(b).response.error_code == Error.NONE

    @rule(ms=st.integers(0, 2 * SESSION_MS))
    def time_passes_in_silence(self, ms: int) -> None:
        """Nobody heartbeats while the clock moves on; the fence timer then fences every broker
        whose lease ran out, possibly all of them at once."""
        self.c.clock.advance(ms)
        self.c.run(self.c.qc.fence_expired_brokers())

    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        self.c.expire(data.draw(st.sampled_from(self.live()), label="victim"))

    @precondition(lambda self: len(self.live()) > 2)
    @rule(data=st.data())
    def two_leases_run_out_together(self, data: st.DataObject) -> None:
        """Both are fenced by one tick of the fence timer."""
        live = self.live()
        together = data.draw(st.lists(st.sampled_from(live), min_size=2, max_size=2, unique=True), label="victims")
        self.c.clock.advance(SESSION_MS)
        for b in live:
            if b not in together:
                self.c.heartbeat(b)
        self.c.clock.advance(1)
        self.c.run(self.c.qc.fence_expired_brokers())

    @precondition(lambda self: self.fenced())
    @rule(data=st.data())
    def fenced_broker_comes_back(self, data: st.DataObject) -> None:
        """It heartbeats again; after a controlled shutdown, or if it restarted, it registers first."""
        b = data.draw(st.sampled_from(self.fenced()), label="broker")
        if self.c.qc.cluster.brokers[b].in_controlled_shutdown or data.draw(st.booleans(), label="restarted"):
            self.c.register(b, previous_epoch=self.previous_epoch(data, b))
        self.c.unfence(b)

    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def restart_before_the_fence_timer(self, data: st.DataObject) -> None:
        """A live broker dies and its next incarnation registers before its lease is checked."""
        live = self.live()
        b = data.draw(st.sampled_from(live), label="broker")
        self.c.clock.advance(SESSION_MS)
        for other in live:
            if other != b:
                self.c.heartbeat(other)
        self.c.clock.advance(1)
        self.c.register(b, previous_epoch=self.previous_epoch(data, b))
        self.c.unfence(b)

    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def controlled_shutdown(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.live()), label="broker")
        if self.c.shut_down(b).response.should_shut_down is False:
            self.c.shut_down(b)

    @precondition(lambda self: len(self.c.qc.cluster.brokers) > 1)
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        """An operator removes a broker, live or fenced."""
        b = data.draw(st.sampled_from(sorted(self.c.qc.cluster.brokers)), label="broker")
        assert self.c.unregister(b).response.error_code == Error.NONE

    @precondition(lambda self: self.unregistered())
    @rule(data=st.data())
    def register_new_broker(self, data: st.DataObject) -> None:
        self.c.add_broker(data.draw(st.sampled_from(self.unregistered()), label="broker"))

    # --- topics and partitions ------------------------------------------------------------------
    @rule(partitions=st.integers(1, 3), rf=st.integers(1, 3))
    def create_topic(self, partitions: int, rf: int) -> None:
        self.made += 1
        self.c.create(f"n{self.made}", partitions=partitions, rf=rf)

    @precondition(lambda self: self.names())
    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        self.c.delete(data.draw(st.sampled_from(self.names()), label="topic"))

    @precondition(lambda self: self.led_partitions())
    @rule(data=st.data())
    def leader_alters_isr(self, data: st.DataObject) -> None:
        """The leader shrinks or expands the ISR to usable replicas, or, recovering from an
        unclean election, keeps it to itself until it reports LeaderRecoveryState.RECOVERED."""
        name, index = data.draw(st.sampled_from(self.led_partitions()), label="partition")
        p = self.c.part(name, index)
        others = [r for r in p.replicas if r != p.leader and self.c.qc.cluster.is_usable(r)]
        isr = [p.leader] + data.draw(st.lists(st.sampled_from(others), unique=True) if others else st.just([]),
                                     label="followers in sync")
        recovered = p.recovery == LeaderRecoveryState.RECOVERED or data.draw(st.booleans(), label="recovered")
        self.c.alter(p.leader, name, index, isr if recovered else [p.leader],
                     recovery=LeaderRecoveryState.RECOVERED if recovered else LeaderRecoveryState.RECOVERING)

    @precondition(lambda self: self.names())
    @rule(data=st.data(), election_type=st.sampled_from([PREFERRED, UNCLEAN]))
    def elect(self, data: st.DataObject, election_type: int) -> None:
        wanted = data.draw(st.none() | st.sampled_from(self.names()).map(lambda n: {n: [0]}), label="partitions")
        self.c.elect(election_type, wanted)

    @precondition(lambda self: self.names())
    @rule(data=st.data())
    def reassign(self, data: st.DataObject) -> None:
        """A new target for partition 0 of a topic, or (None) cancelling its reassignment."""
        name = data.draw(st.sampled_from(self.names()), label="topic")
        target = data.draw(st.none() | st.lists(st.sampled_from(BROKER_IDS), min_size=1, max_size=3, unique=True),
                           label="target")
        self.c.reassign(name, 0, target)

    # --- what must always hold --------------------------------------------------------------------
    @invariant()
    def partitions_are_consistent(self) -> None:
        if self.c is not None:
            check_invariants(self.c)

    def teardown(self) -> None:
        if self.c is not None:
            assert_replays(self.c)


ReplicationHistories.TestCase.settings = settings(
    max_examples=50, stateful_step_count=80, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestReplicationHistories = ReplicationHistories.TestCase


def test_a_new_target_is_measured_against_the_current_replicas(c5):
    c5.reassign("t", 0, [3, 4, 5])
    c5.alter(1, "t", 0, [1, 2, 3, 4])
    c5.expire(1, 2, 3)
    assert state(c5.part("t")) == ([3, 4, 5, 1, 2], [4], 4)
    c5.reassign("t", 0, [1, 2])
    p = c5.part("t")
    assert (p.replicas, p.isr, p.leader) == ([1, 2, 3, 4, 5], [4], 4)
    assert (p.adding, p.removing) == ([], [3, 4, 5])
    assert_replays(c5)
