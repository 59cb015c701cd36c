"""PartitionChange against Apache Kafka's PartitionChangeBuilderTest.

The builder is driven directly, as Kafka's test drives its own: a partition state, a rule for
which brokers may lead, targets, and the record that comes out. The partitions are Kafka's
fixtures: FOO on [2, 1, 3] led by 1, BAR being reassigned from [1, 2, 3] to [2, 3, 4]; broker 3
may not lead in either.
"""

from __future__ import annotations

from protocol.primitives import ZERO_UUID
from server.controller.partitions import (
    NO_LEADER, NO_LEADER_CHANGE, RECOVERED, RECOVERING, Election, PartitionChange, PartitionState)

TOPIC = b"\x01" * 16
DIRS = {1: b"\x11" * 16, 2: b"\x12" * 16, 3: ZERO_UUID, 4: b"\x14" * 16}


def foo() -> PartitionState:
    return PartitionState(TOPIC, 0, [2, 1, 3], [2, 1, 3], leader=1, leader_epoch=100,
                          partition_epoch=200, directories=[DIRS[2], DIRS[1], DIRS[3]])


def bar() -> PartitionState:
    return PartitionState(TOPIC, 0, [1, 2, 3, 4], [1, 2, 3], leader=1, leader_epoch=100,
                          partition_epoch=200, removing=[1], adding=[4],
                          directories=[DIRS[1], DIRS[2], DIRS[3], DIRS[4]])


def builder(p: PartitionState, *, version: int = 1, unclean: bool = False,
            usable=lambda b: b != 3, **kw) -> PartitionChange:
    return PartitionChange(p, usable, min_isr=2, elr_enabled=False, unclean_allowed=unclean,
                           record_version=version, **kw)


def written(change: PartitionChange) -> dict | None:
    rec = change.build()
    if rec is None:
        return None
    unset = {"isr": None, "leader": NO_LEADER_CHANGE, "replicas": None, "removing_replicas": None,
             "adding_replicas": None, "leader_recovery_state": -1, "directories": None,
             "eligible_leader_replicas": None, "last_known_elr": None}
    return {k: getattr(rec, k) for k, v in unset.items() if getattr(rec, k) != v}


def test_no_change():
    """testNoChange / testNoLeaderEpochBumpIfNothingChanged."""
    assert written(builder(foo())) is None
    change = builder(foo())
    change.isr = [2, 1, 3]
    assert written(change) is None


def test_elect_leader():
    """testElectLeader: preferred, clean, and unclean choices on FOO."""
    def leader(election: str = Election.NORMAL, isr=None, replicas=None) -> int:
        change = builder(foo())
        change.election = election
        if isr is not None:
            change.isr = isr
        if replicas is not None:
            change.replicas = replicas
        change.build()
        return change.leader

    assert leader(Election.PREFERRED) == 2
    assert leader() == 1
    assert leader(Election.UNCLEAN) == 1
    assert leader(isr=[1, 3]) == 1
    assert leader(Election.UNCLEAN, isr=[1, 3]) == 1
    assert leader(isr=[3]) == NO_LEADER
    assert leader(Election.UNCLEAN, isr=[3]) == 2
    assert leader(Election.UNCLEAN, isr=[4], replicas=[2, 1, 3, 4]) == 4


def test_isr_change_does_not_bump_the_leader_epoch():
    """testIsrChangeDoesntBumpLeaderEpoch / testNoLeaderEpochBumpOnIsrExpansion."""
    change = builder(foo())
    change.isr = [2, 1]
    assert written(change) == {"isr": [2, 1]}


def test_leader_epoch_bump_on_isr_shrink_before_3_6():
    """testLeaderEpochBumpOnIsrShrink: the leader field is set (a bump) with the shrink."""
    change = builder(foo(), bump_epoch_on_isr_shrink=True)
    change.isr = [2, 1]
    assert written(change) == {"isr": [2, 1], "leader": 1}
    grow = builder(PartitionState(TOPIC, 0, [2, 1, 3], [2, 1], leader=1), bump_epoch_on_isr_shrink=True)
    grow.isr = [2, 1, 3]
    assert written(grow) == {"isr": [2, 1, 3]}


def test_isr_change_and_leader_change():
    """testIsrChangeAndLeaderChange: the leader leaves the ISR, the next in replica order leads."""
    change = builder(foo())
    change.isr = [2, 3]
    assert written(change) == {"isr": [2, 3], "leader": 2}


def test_reassignment_rearranges_replicas():
    """testReassignmentRearrangesReplicas: same members, new order; no leader change."""
    change = builder(foo())
    change.replicas = [3, 2, 1]
    assert written(change) == {"replicas": [3, 2, 1], "directories": [DIRS[3], DIRS[2], DIRS[1]]}


def test_isr_enlargement_completes_reassignment():
    """testIsrEnlargementCompletesReassignment: 4 joins, 1 (being removed, the leader) goes."""
    change = builder(bar())
    change.isr = [1, 2, 3, 4]
    assert written(change) == {
        "isr": [2, 3, 4], "leader": 2, "replicas": [2, 3, 4], "removing_replicas": [],
        "adding_replicas": [], "directories": [DIRS[2], DIRS[3], DIRS[4]]}


def test_revert_reassignment():
    """testRevertReassignment: back to [1, 2, 3]; 4 leaves, so the leader epoch is bumped."""
    p = bar()
    change = builder(p)
    change.replicas, change.isr = p.original_replicas(), [r for r in p.isr if r not in p.adding]
    change.removing, change.adding = [], []
    assert written(change) == {
        "leader": 1, "replicas": [1, 2, 3], "removing_replicas": [], "adding_replicas": [],
        "directories": [DIRS[1], DIRS[2], DIRS[3]]}


def test_removing_replica_reassignment():
    """testRemovingReplicaReassignment: FOO to [1, 2] completes at once (the rest is in sync)."""
    change = builder(foo())
    change.replicas, change.removing = [1, 2, 3], [3]
    assert written(change) == {
        "isr": [2, 1], "leader": 1, "replicas": [1, 2], "directories": [DIRS[1], DIRS[2]]}


def test_adding_replica_reassignment():
    """testAddingReplicaReassignment: FOO to [1, 2, 3, 4] waits for 4; the new replica has no
    directory yet, the others keep theirs."""
    change = builder(foo())
    change.replicas, change.adding = [1, 2, 3, 4], [4]
    assert written(change) == {
        "replicas": [1, 2, 3, 4], "adding_replicas": [4],
        "directories": [DIRS[1], DIRS[2], DIRS[3], ZERO_UUID]}


def test_unclean_leader_election():
    """testUncleanLeaderElection: no clean leader, so 2 leads alone and must recover."""
    change = builder(foo())
    change.election = Election.UNCLEAN
    change.isr = [3]
    assert written(change) == {"isr": [2], "leader": 2, "leader_recovery_state": RECOVERING}


def test_change_in_leadership_does_not_change_recovery_state():
    """testChangeInLeadershipDoesNotChangeRecoveryState: a recovering partition stays
    recovering through a clean leader change; only the leader ends the recovery."""
    p = PartitionState(TOPIC, 0, [2, 1, 3], [2, 1], leader=1, recovery=RECOVERING)
    change = builder(p)
    change.isr = [2]
    assert written(change) == {"isr": [2], "leader": 2}
    done = builder(p)
    done.recovery = RECOVERED
    assert written(done) == {"leader_recovery_state": RECOVERED}


def test_stopped_leader_is_demoted_after_reassignment_completes_even_without_eligible_leaders():
    """testStoppedLeaderIsDemotedAfterReassignmentCompletesEvenIfNoNewEligibleLeaders."""
    p = PartitionState(TOPIC, 0, [2, 3, 0, 1], [0, 1], leader=0, removing=[0, 1], adding=[2, 3],
                       directories=[ZERO_UUID] * 4)
    change = builder(p, version=0, usable=lambda b: False)
    change.isr = [0, 1, 2, 3]
    assert written(change) == {
        "isr": [2, 3], "leader": NO_LEADER, "replicas": [2, 3], "removing_replicas": [],
        "adding_replicas": []}
