"""The broker lifecycle as Apache Kafka's controller defines it (ClusterControlManagerTest,
BrokerHeartbeatManagerTest), driven directly with a ManualClock.

Each test names the Kafka scenario it follows. The controller is the real QuorumController;
brokers register and heartbeat through its commands and time moves only by the test's hand.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import random_uuid
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult
from tests.support.replication import CONTROLLER_ID, SESSION_MS, Cluster, assert_replays
from tests.support.harness import CLUSTER_ID, MV_LATEST, Harness, names, registration


def dir_id(n: int) -> bytes:
    """A directory id outside the reserved range (ids below 100 in the low word)."""
    return (0x1234_0000_0000_0000 + n).to_bytes(8, "big") + (1000 + n).to_bytes(8, "big")


# --- registration ----------------------------------------------------------------------------

def test_a_fenced_broker_has_no_session_so_a_new_incarnation_takes_the_id():
    """BrokerHeartbeatManagerTest.testHasValidSession: only an unfenced broker with a live
    lease has a session; ClusterControlManager refuses a new incarnation only then."""
    h = Harness()
    epoch = h.active_broker(1)
    assert h.register(1).response.error_code == Error.DUPLICATE_BROKER_REGISTRATION
    assert names(h.heartbeat(1, epoch, want_fence=True)) == ["FenceBrokerRecord"]
    # Fenced on its own request, lease still live: the id is free all the same.
    new = h.register(1)
    assert new.response.error_code == Error.NONE and new.response.broker_epoch > epoch
    assert h.heartbeat(1, epoch).response.error_code == Error.STALE_BROKER_EPOCH


@pytest.mark.parametrize("new_incarnation", [True, False])
def test_re_registration_and_broker_epoch(new_incarnation):
    """ClusterControlManagerTest.testReRegistrationAndBrokerEpoch."""
    h = Harness()
    incarnation = random_uuid()
    first = h.register(1, incarnation).response.broker_epoch
    h.register(2)
    again = h.register(1, random_uuid() if new_incarnation else incarnation)
    assert again.response.error_code == Error.NONE
    if new_incarnation:
        assert again.response.broker_epoch == again.base_offset > first
        assert h.broker(1).epoch == again.response.broker_epoch
    else:
        assert again.response.broker_epoch == first == h.broker(1).epoch
        assert h.broker(1).incarnation_id == incarnation


def test_registration_with_an_incorrect_cluster_id():
    """ClusterControlManagerTest.testRegistrationWithIncorrectClusterId."""
    h = Harness()
    refused = h.register(1, cluster_id="fPZv1VBsRFmnlRvmGcOW9w")
    assert (refused.response.error_code, refused.records) == (Error.INCONSISTENT_CLUSTER_ID, [])


def test_registration_with_an_unsupported_feature():
    """ClusterControlManagerTest.testRegistrationWithUnsupportedFeature: a finalized feature
    the broker does not list counts as supported from 0 to 0 only."""
    h = Harness()
    assert h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=1)]
                             ).response.results[0].error_code == Error.NONE
    assert h.register(1).response.error_code == Error.UNSUPPORTED_VERSION
    assert h.register(1, extra_features=[("group.version", 0, 0)]).response.error_code == \
        Error.UNSUPPORTED_VERSION
    assert h.register(1, extra_features=[("group.version", 0, 1)]).response.error_code == Error.NONE


def test_a_broker_needing_a_feature_the_controller_has_not_finalized_is_refused():
    """ClusterControlManager.processRegistrationFeature: an unfinalized feature is at level 0,
    which the broker's range must include."""
    h = Harness()
    refused = h.register(1, extra_features=[("transaction.version", 1, 2)])
    assert (refused.response.error_code, refused.records) == (Error.UNSUPPORTED_VERSION, [])
    assert h.register(1, extra_features=[("transaction.version", 0, 2)]).response.error_code == Error.NONE


def test_registration_with_an_unsupported_kraft_version():
    """ClusterControlManagerTest.testRegistrationWithUnsupportedKraftVersion: this quorum runs
    kraft.version 0, so a broker that only runs 1 is refused."""
    h = Harness()
    assert h.register(1, extra_features=[("kraft.version", 1, 1)]).response.error_code == \
        Error.UNSUPPORTED_VERSION
    assert h.register(1, extra_features=[("kraft.version", 0, 1)]).response.error_code == Error.NONE


def test_registration_without_a_metadata_version_range(caplog):
    """ClusterControlManagerTest.testRegistrationWithUnsupportedMetadataVersion: a broker that
    sends no metadata.version range supports only version 1 (3.0-IV1); the reason is logged,
    as the response cannot carry it."""
    h = Harness(metadata_version=7)
    with caplog.at_level("INFO", logger="kraftwire.cluster"):
        refused = h.register(1, mv_range=None)
    assert (refused.response.error_code, refused.records) == (Error.UNSUPPORTED_VERSION, [])
    assert "does not support finalized version 7 of metadata.version: it supports 1 to 1" in caplog.text


@pytest.mark.parametrize("problem", ["duplicate", "reserved", "taken"])
def test_registration_with_bad_log_directories(problem):
    """ClusterControlManagerTest.testRegisterWithDuplicateDirectoryId and the other KIP-858
    checks: duplicate, reserved, or another broker's directory is INVALID_REGISTRATION."""
    h = Harness()
    h.command("register_broker", _with_dirs(registration(2), [dir_id(1)]), 4)
    dirs = {"duplicate": [dir_id(5), dir_id(5)], "reserved": [bytes(15) + b"\x01"],
            "taken": [dir_id(1)]}[problem]
    refused = h.command("register_broker", _with_dirs(registration(1), dirs), 4)
    assert (refused.response.error_code, refused.records) == (Error.INVALID_REGISTRATION, [])
    ok = h.command("register_broker", _with_dirs(registration(1), [dir_id(7), dir_id(8)]), 4)
    assert ok.response.error_code == Error.NONE
    assert h.broker(1).log_dirs == [dir_id(7), dir_id(8)]


def test_a_new_incarnation_may_keep_its_own_directories():
    h = Harness()
    h.command("register_broker", _with_dirs(registration(1), [dir_id(1)]), 4)
    again = h.command("register_broker", _with_dirs(registration(1), [dir_id(1)]), 4)
    assert again.response.error_code == Error.NONE


def test_registration_without_log_directories():
    """ClusterControlManagerTest.testRegisterWithDuplicateDirectoryId's empty list: from
    3.7-IV2 a broker must name its directories; before, none is needed."""
    h = Harness()
    refused = h.command("register_broker", _with_dirs(registration(1), []), 4)
    assert (refused.response.error_code, refused.records) == (Error.INVALID_REGISTRATION, [])
    old = Harness(metadata_version=7)
    assert old.command("register_broker", _with_dirs(registration(1), []), 4).response.error_code == Error.NONE


def test_a_migrating_zk_broker_is_not_registered():
    """ClusterControlManager.registerBroker: Kafka 4's controller registers no ZooKeeper
    broker, after checking the session and before the directories."""
    h = Harness()
    request = registration(1)
    request.is_migrating_zk_broker = True
    refused = h.command("register_broker", request, 4)
    assert (refused.response.error_code, refused.records) == (Error.BROKER_ID_NOT_REGISTERED, [])


def test_a_broker_may_not_use_the_node_id_of_a_voter():
    """Kafka shares a node id between broker and controller only in combined mode; a
    kraftwire controller is never combined, so a broker with a voter's id is misconfigured
    (a broker-only Kafka node refuses such a node.id) and is refused with nothing written."""
    qc = QuorumController(CLUSTER_ID, CONTROLLER_ID, ManualClock(), voter_ids=[CONTROLLER_ID, 3001])
    qc.apply(ControllerResult([(FeatureLevelRecord(name="metadata.version", feature_level=MV_LATEST), 0)]))
    qc.activate()
    for voter in (CONTROLLER_ID, 3001):
        refused = qc.register_broker(registration(voter), 4)
        assert (refused.response.error_code, refused.records) == (Error.INVALID_REGISTRATION, [])
    assert qc.register_broker(registration(7), 4).response.error_code == Error.NONE


def _with_dirs(request, dirs: list[bytes]):
    request.log_dirs = dirs
    return request


# --- unregistration --------------------------------------------------------------------------

def test_unregister():
    """ClusterControlManagerTest.testUnregister / ReplicationControlManager.unregisterBroker:
    an unknown id is BROKER_ID_NOT_REGISTERED; a known one is removed from every ISR."""
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    unknown = c.unregister(7)
    assert (unknown.response.error_code, unknown.records) == (Error.BROKER_ID_NOT_REGISTERED, [])
    gone = c.unregister(1)
    assert gone.response.error_code == Error.NONE
    assert [r.NAME for r, _ in gone.records] == ["PartitionChangeRecord", "UnregisterBrokerRecord"]
    assert 1 not in c.qc.cluster.brokers and c.part("t").isr == [2, 3]
    assert c.unregister(1).response.error_code == Error.BROKER_ID_NOT_REGISTERED
    assert_replays(c)


# --- heartbeats: Kafka's next-state table ----------------------------------------------------

def hb(c: Cluster, broker_id: int, *, offset: int | None = None, want_fence: bool = False,
       want_shut_down: bool = False):
    return c.run(c.qc.broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=c.epochs[broker_id],
        current_metadata_offset=c.qc.last_applied_offset if offset is None else offset,
        want_fence=want_fence, want_shut_down=want_shut_down), 1))


def test_a_fenced_broker_next_state():
    """BrokerHeartbeatManagerTest.testCalculateNextBrokerState, from FENCED."""
    c = Cluster()
    c.register(1)
    epoch = c.epochs[1]
    behind = hb(c, 1, offset=epoch - 1)
    assert (behind.response.is_fenced, behind.records) == (True, [])
    asked = hb(c, 1, want_fence=True)
    assert (asked.response.is_fenced, asked.records) == (True, [])
    unfenced = hb(c, 1, offset=epoch)
    assert unfenced.response.is_fenced is False and names(unfenced) == ["UnfenceBrokerRecord"]
    c.register(2)
    now = hb(c, 2, want_shut_down=True)
    assert (now.response.should_shut_down, now.response.is_fenced) == (True, True)


def test_an_unfenced_broker_that_leads_nothing_shuts_down_now():
    """testCalculateNextBrokerState: UNFENCED + wantShutDown without leaderships -> SHUTDOWN_NOW;
    the broker is taken out of every ISR and fenced in the same heartbeat."""
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    applied = hb(c, 3, want_shut_down=True)
    assert (applied.response.should_shut_down, applied.response.is_fenced) == (True, True)
    assert [r.NAME for r, _ in applied.records] == ["PartitionChangeRecord", "FenceBrokerRecord"]
    assert c.part("t").isr == [1, 2]
    assert not c.qc.cluster.brokers[3].in_controlled_shutdown
    assert_replays(c)


def test_want_fence_with_want_shut_down_shuts_down_now():
    """testCalculateNextBrokerState: UNFENCED + wantFence + wantShutDown -> SHUTDOWN_NOW, even
    for a leader."""
    c = Cluster()
    c.brokers(1, 2)
    c.topic("t", [[1, 2]])
    applied = hb(c, 1, want_fence=True, want_shut_down=True)
    assert (applied.response.should_shut_down, applied.response.is_fenced) == (True, True)
    assert c.part("t").leader == 2


def test_controlled_shutdown_waits_for_the_lowest_active_offset():
    """testCalculateNextBrokerState and BrokerHeartbeatManager.lowestActiveOffset: a broker in
    controlled shutdown goes once it leads nothing and every active broker has reported an
    offset at or past the one that started its shutdown; fencing the laggard lets it go."""
    c = Cluster()
    c.brokers(1, 2, 3)
    c.topic("t", [[1, 2, 3]])
    start = hb(c, 1, want_shut_down=True)
    assert (start.response.should_shut_down, start.response.is_fenced) == (False, False)
    assert [r.NAME for r, _ in start.records] == ["PartitionChangeRecord", "BrokerRegistrationChangeRecord"]
    # ReplicationControlManagerTest.testProcessBrokerHeartbeatInControlledShutdown: the leader
    # leaves the ISR, the next replica leads, and the change record is written at version 1.
    change = start.records[0][0]
    assert (change.isr, change.leader, start.records[1][1]) == ([2, 3], 2, 1)
    shutdown_offset = start.base_offset + len(start.records) - 1
    assert c.qc.cluster.brokers[1].controlled_shutdown_offset == shutdown_offset
    assert c.part("t").leader == 2
    hb(c, 2, offset=shutdown_offset)
    hb(c, 3, offset=shutdown_offset - 1)
    assert c.qc.cluster.lowest_active_offset() == shutdown_offset - 1
    waiting = hb(c, 1, want_shut_down=True)
    assert (waiting.response.should_shut_down, waiting.records) == (False, [])
    # Repeated heartbeats do not move the offset the shutdown waits for.
    assert c.qc.cluster.brokers[1].controlled_shutdown_offset == shutdown_offset
    hb(c, 3, want_fence=True)  # the laggard leaves the active set
    done = hb(c, 1, want_shut_down=True)
    assert (done.response.should_shut_down, done.response.is_fenced) == (True, True)
    assert names(done) == ["FenceBrokerRecord"]
    assert_replays(c)


def test_in_controlled_shutdown_the_request_wishes_do_not_matter():
    """testCalculateNextBrokerState: from CONTROLLED_SHUTDOWN the next state depends only on
    leaderships and offsets, so even a plain heartbeat is told to shut down."""
    c = Cluster()
    c.brokers(1, 2)
    c.topic("t", [[1, 2]])
    hb(c, 1, want_shut_down=True)
    assert c.qc.cluster.brokers[1].in_controlled_shutdown
    hb(c, 2)
    plain = hb(c, 1)
    assert (plain.response.should_shut_down, plain.response.is_fenced) == (True, True)


def test_controlled_shutdown_of_a_leader_with_no_other_replica():
    """A sole replica cannot hand its leadership over: it goes leaderless on entering
    controlled shutdown, so the broker leads nothing and may go."""
    c = Cluster()
    c.brokers(1)
    c.topic("t", [[1]])
    start = hb(c, 1, want_shut_down=True)
    assert start.response.should_shut_down is False
    assert c.part("t").leader == -1
    done = hb(c, 1, want_shut_down=True)
    assert done.response.should_shut_down is True


def test_a_new_leader_counts_active_brokers_as_not_caught_up_until_they_heartbeat():
    """ClusterControlManager.activate registers every broker afresh with offset -1."""
    c = Cluster()
    c.brokers(1, 2)
    c.topic("t", [[1, 2]])
    hb(c, 1, want_shut_down=True)
    hb(c, 2)
    c.qc.activate()
    assert c.qc.cluster.lowest_active_offset() == -1
    assert hb(c, 1, want_shut_down=True).response.should_shut_down is False
    hb(c, 2)
    assert hb(c, 1, want_shut_down=True).response.should_shut_down is True


def test_lease_expiry_fences_only_unfenced_brokers_whose_lease_ran_out():
    """BrokerHeartbeatManagerTest.testFindOneStaleBroker: only unfenced brokers whose lease ran
    out are fenced."""
    c = Cluster()
    c.brokers(1, 2, 3)
    c.clock.advance(SESSION_MS // 2)
    hb(c, 2)
    c.clock.advance(SESSION_MS // 2)
    fenced = c.run(c.qc.fence_expired_brokers())
    assert sorted(r.id for r, _ in fenced.records if r.NAME == "FenceBrokerRecord") == [1, 3]
    assert c.alive() == [2]


# --- QuorumControllerTest ----------------------------------------------------------------------

def test_unregister_broker_leaves_its_sole_partition_leaderless():
    """QuorumControllerTest.testUnregisterBroker: with every broker fenced no topic can be
    placed; once broker 0 is unfenced it leads, and unregistering it leaves the partition
    without a leader."""
    from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    c = Cluster()
    c.register(0)
    refused = c.run(c.qc.create_topics(CreateTopicsRequest(topics=[
        CreatableTopic(name="foo", num_partitions=1, replication_factor=1)]), 7)).response.topics[0]
    assert (refused.error_code, refused.error_message) == (
        Error.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.")
    reply = hb(c, 0)
    assert (reply.response.is_caught_up, reply.response.is_fenced, reply.response.should_shut_down) == (
        True, False, False)
    c.topic("foo", partitions=1, rf=1)
    assert c.part("foo").leader == 0
    c.unregister(0)
    assert c.part("foo").leader == -1 and c.part("foo") in c.qc.replication.leaderless
    assert_replays(c)


def test_fence_multiple_brokers():
    """QuorumControllerTest.testFenceMultipleBrokers: four of five brokers lose their lease;
    the partition ends with the survivor alone in the ISR and leading."""
    c = Cluster()
    c.brokers(1, 2, 3, 4, 5)
    c.topic("foo", [[2, 3, 4, 5, 1]])
    c.expire(2, 3, 4, 5)
    assert c.alive() == [1]
    p = c.part("foo")
    assert (p.isr, p.leader) == ([1], 1)
    assert_replays(c)
