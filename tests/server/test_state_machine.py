"""The broker lifecycle of QuorumController, driven directly with a ManualClock.

No sockets and no sleeping: time moves only when a test advances the clock. Every command's
records are kept in a journal (offset, record, version) so that the tests can check exactly what
would be written to the log, and replay it into a fresh controller.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.constants import FeatureUpgradeType
from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import random_uuid
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from tests.support.harness import CLUSTER_ID, SESSION_MS, Harness, call, names, registration


# --- registration ---------------------------------------------------------------------------------

def test_broker_epoch_is_the_offset_of_its_register_record():
    h = Harness()
    first_offset = h.qc.next_offset
    a = h.register(1)
    assert a.response.error_code == Error.NONE
    assert names(a) == ["RegisterBrokerRecord"]
    assert a.base_offset == first_offset
    assert a.response.broker_epoch == first_offset == a.records[0][0].broker_epoch
    b = h.register(2)
    assert b.response.broker_epoch == first_offset + 1
    reg = h.broker(1)
    assert reg.epoch == first_offset and reg.fenced and not reg.in_controlled_shutdown
    assert [(e.host, e.port) for e in reg.endpoints] == [("broker-1.test", 9093)]
    # The record is written at the version metadata.version 25 allows (log dirs: v3).
    assert a.records[0][1] == 3


def test_register_record_version_follows_metadata_version():
    assert Harness(metadata_version=7).register(1).records[0][1] == 1
    assert Harness(metadata_version=8).register(1).records[0][1] == 2
    assert Harness(metadata_version=17).register(1).records[0][1] == 3


def test_retry_with_the_same_incarnation_returns_the_same_epoch_and_writes_nothing():
    h = Harness()
    incarnation = random_uuid()
    epoch = h.register(1, incarnation).response.broker_epoch
    h.register(2)
    end = h.qc.next_offset
    retry = h.register(1, incarnation)
    assert retry.response.error_code == Error.NONE
    assert retry.response.broker_epoch == epoch
    assert retry.records == []
    assert h.qc.next_offset == end
    # Even long after the lease ran out, the same incarnation is the same registration.
    h.clock.advance(SESSION_MS * 3)
    late = h.register(1, incarnation)
    assert (late.response.error_code, late.response.broker_epoch, late.records) == (Error.NONE, epoch, [])


def test_another_incarnation_while_the_lease_is_live_is_a_duplicate():
    h = Harness()
    epoch = h.active_broker(1)
    h.clock.advance(SESSION_MS - 1)
    dup = h.register(1)
    assert dup.response.error_code == Error.DUPLICATE_BROKER_REGISTRATION
    assert dup.records == []
    assert h.broker(1).epoch == epoch and not h.broker(1).fenced


def test_a_new_incarnation_takes_the_id_once_the_lease_expired_and_the_broker_was_fenced():
    h = Harness()
    old_epoch = h.active_broker(1)
    h.clock.advance(SESSION_MS)
    fenced = h.fence_expired()
    assert names(fenced) == ["FenceBrokerRecord"]
    assert h.broker(1).fenced
    new = h.register(1)
    assert new.response.error_code == Error.NONE
    assert names(new) == ["RegisterBrokerRecord"]
    assert new.response.broker_epoch == new.base_offset > old_epoch
    assert h.broker(1).epoch == new.response.broker_epoch and h.broker(1).fenced
    # The old incarnation is now stale.
    assert h.heartbeat(1, old_epoch).response.error_code == Error.STALE_BROKER_EPOCH


def test_a_new_incarnation_takes_the_id_of_a_never_unfenced_broker_at_once():
    h = Harness()
    h.register(1)
    # A fenced broker holds no session (as in Kafka), even within its lease.
    assert h.register(1).response.error_code == Error.NONE
    h.clock.advance(SESSION_MS)
    # Fenced brokers are not fenced again: nothing for the lease timer to write.
    assert h.fence_expired().records == []


def test_a_new_incarnation_takes_the_id_at_once_after_a_clean_shutdown():
    h = Harness()
    epoch = h.active_broker(1)
    done = h.heartbeat(1, epoch, want_shut_down=True)
    assert done.response.should_shut_down
    new = h.register(1, previous_broker_epoch=epoch)
    assert new.response.error_code == Error.NONE
    assert new.response.broker_epoch > epoch


def test_wrong_cluster_id_is_rejected_without_records():
    h = Harness()
    bad = h.register(1, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert bad.response.error_code == Error.INCONSISTENT_CLUSTER_ID == 104
    assert bad.records == []
    assert 1 not in h.qc.cluster.brokers


def test_a_broker_that_cannot_run_the_finalized_metadata_version_is_rejected():
    h = Harness(metadata_version=20)
    for mv_range in [(7, 19), (21, 25), None]:
        bad = h.register(1, mv_range=mv_range)
        assert bad.response.error_code == Error.UNSUPPORTED_VERSION, mv_range
        assert bad.records == []
    assert h.register(1, mv_range=(20, 20)).response.error_code == Error.NONE


def test_every_finalized_feature_must_be_in_the_broker_range():
    h = Harness()
    assert h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=1)]
                             ).response.results[0].error_code == Error.NONE
    assert h.register(1).response.error_code == Error.UNSUPPORTED_VERSION
    ok = h.register(1, extra_features=[("group.version", 0, 1)])
    assert ok.response.error_code == Error.NONE


# --- heartbeats ---------------------------------------------------------------------------------

def test_heartbeat_from_an_unknown_broker():
    h = Harness()
    hb = h.heartbeat(7, 1)
    assert hb.response.error_code == Error.STALE_BROKER_EPOCH
    assert hb.records == []


def test_heartbeat_with_a_stale_epoch():
    h = Harness()
    epoch = h.register(1).response.broker_epoch
    for wrong in (epoch - 1, epoch + 1, -1):
        hb = h.heartbeat(1, wrong)
        assert hb.response.error_code == Error.STALE_BROKER_EPOCH
        assert hb.records == []
    assert h.broker(1).fenced


def test_unfence_only_when_caught_up_and_not_asking_to_stay_fenced():
    h = Harness()
    epoch = h.register(1).response.broker_epoch
    h.register(2)  # the log moves on; broker 1 only needs to reach its own epoch

    behind = h.heartbeat(1, epoch, offset=epoch - 1)
    assert behind.response.error_code == Error.NONE
    assert (behind.response.is_caught_up, behind.response.is_fenced) == (False, True)
    assert behind.records == [] and h.broker(1).fenced

    wants_fence = h.heartbeat(1, epoch, offset=epoch, want_fence=True)
    assert (wants_fence.response.is_caught_up, wants_fence.response.is_fenced) == (True, True)
    assert wants_fence.records == [] and h.broker(1).fenced

    unfence = h.heartbeat(1, epoch, offset=epoch)
    assert (unfence.response.is_caught_up, unfence.response.is_fenced) == (True, False)
    assert names(unfence) == ["UnfenceBrokerRecord"]
    assert (unfence.records[0][0].id, unfence.records[0][0].epoch) == (1, epoch)
    assert not h.broker(1).fenced

    again = h.heartbeat(1, epoch, offset=epoch)
    assert again.records == [] and not again.response.is_fenced


def test_a_broker_may_ask_to_be_fenced():
    h = Harness()
    epoch = h.active_broker(1)
    fence = h.heartbeat(1, epoch, want_fence=True)
    assert names(fence) == ["FenceBrokerRecord"]
    assert fence.response.is_fenced and h.broker(1).fenced
    assert h.heartbeat(1, epoch, want_fence=True).records == []


def test_lease_expires_exactly_after_the_session_timeout():
    h = Harness()
    epoch = h.active_broker(1)
    h.active_broker(2)
    h.clock.advance(SESSION_MS - 1)
    h.heartbeat(2, h.broker(2).epoch)  # broker 2 keeps its lease
    assert h.fence_expired().records == []
    assert not h.broker(1).fenced
    h.clock.advance(1)
    fenced = h.fence_expired()
    assert [(r.NAME, r.id, r.epoch) for r, _ in fenced.records] == [("FenceBrokerRecord", 1, epoch)]
    assert h.broker(1).fenced and not h.broker(2).fenced
    assert h.fence_expired().records == []  # fenced once
    # A heartbeat from the same incarnation makes it active again.
    back = h.heartbeat(1, epoch)
    assert names(back) == ["UnfenceBrokerRecord"] and not h.broker(1).fenced


def test_each_heartbeat_renews_the_lease():
    h = Harness()
    epoch = h.active_broker(1)
    for _ in range(5):
        h.clock.advance(SESSION_MS - 1)
        h.heartbeat(1, epoch)
        assert h.fence_expired().records == []
    assert not h.broker(1).fenced


def test_a_new_leader_gives_every_broker_a_fresh_lease():
    h = Harness()
    h.active_broker(1)
    h.clock.advance(SESSION_MS * 10)
    h.qc.activate()
    assert h.fence_expired().records == []
    h.clock.advance(SESSION_MS)
    assert names(h.fence_expired()) == ["FenceBrokerRecord"]


# --- controlled shutdown --------------------------------------------------------------------------

def test_a_broker_that_leads_nothing_shuts_down_at_once():
    # Kafka grants an immediate shutdown when there is no leadership to move; the controlled
    # shutdown of a leader is in test_kafka_cluster_control.py.
    h = Harness()
    epoch = h.active_broker(1)
    done = h.heartbeat(1, epoch, want_shut_down=True)
    assert done.response.should_shut_down is True and done.response.is_fenced is True
    assert [(r.NAME, r.id, r.epoch) for r, _ in done.records] == [("FenceBrokerRecord", 1, epoch)]
    assert h.broker(1).fenced and not h.broker(1).in_controlled_shutdown

    # Repeating the question gets the same answer and writes nothing.
    again = h.heartbeat(1, epoch, want_shut_down=True)
    assert again.response.should_shut_down and again.records == []


def test_a_clean_shutdown_still_frees_the_id_after_the_controller_restarts():
    h = Harness()
    epoch = h.active_broker(1)
    h.active_broker(2)
    assert h.heartbeat(1, epoch, want_shut_down=True).response.should_shut_down
    restarted = replayed(h)
    restarted.activate()
    new = call(restarted.register_broker, registration(1, previous_broker_epoch=epoch), 4)
    assert new.response.error_code == Error.NONE
    assert new.response.broker_epoch == new.base_offset > epoch
    # Brokers that were running keep their ids: they get a full lease from the new leader.
    dup = call(restarted.register_broker, registration(2), 4)
    assert dup.response.error_code == Error.DUPLICATE_BROKER_REGISTRATION


def test_a_fenced_broker_may_shut_down_at_once():
    h = Harness()
    epoch = h.register(1).response.broker_epoch
    hb = h.heartbeat(1, epoch, want_shut_down=True)
    assert hb.response.should_shut_down and hb.response.is_fenced
    assert hb.records == []
    assert h.register(1).response.error_code == Error.NONE  # the id is free


# --- unregistration -----------------------------------------------------------------------------

def test_unregister_removes_the_registration():
    h = Harness()
    epoch = h.active_broker(1)
    h.active_broker(2)
    out = h.unregister(1)
    assert out.response.error_code == Error.NONE
    assert [(r.NAME, r.broker_id, r.broker_epoch) for r, _ in out.records] == [
        ("UnregisterBrokerRecord", 1, epoch)]
    assert sorted(h.qc.cluster.brokers) == [2]
    assert h.heartbeat(1, epoch).response.error_code == Error.STALE_BROKER_EPOCH
    # The id is free for a new incarnation right away.
    assert h.register(1).response.error_code == Error.NONE


def test_unregister_of_an_unknown_broker_is_an_error():
    h = Harness()
    out = h.unregister(42)
    assert out.response.error_code == Error.BROKER_ID_NOT_REGISTERED
    assert out.records == []


# --- features -------------------------------------------------------------------------------------

def mv(level: int, upgrade_type: int = FeatureUpgradeType.UPGRADE, allow_downgrade: bool = False) -> FeatureUpdateKey:
    return FeatureUpdateKey(feature="metadata.version", max_version_level=level,
                            upgrade_type=upgrade_type, allow_downgrade=allow_downgrade)


def test_upgrade_metadata_version():
    h = Harness(metadata_version=20)
    out = h.update_features([mv(25)])
    assert [(r.feature, r.error_code) for r in out.response.results] == [("metadata.version", Error.NONE)]
    assert [(r.NAME, r.name, r.feature_level) for r, _ in out.records] == [
        ("FeatureLevelRecord", "metadata.version", 25)]
    assert h.qc.features.finalized["metadata.version"] == 25


def test_downgrade_needs_to_be_asked_for():
    h = Harness()
    group_on = h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=1)])
    assert group_on.response.results[0].error_code == Error.NONE
    silent = h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=0)])
    assert silent.response.results[0].error_code == Error.INVALID_UPDATE_VERSION
    assert silent.records == []
    assert h.qc.features.finalized["group.version"] == 1
    # v0 asks with AllowDowngrade; v1 with UpgradeType.
    v0 = h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=0,
                                             allow_downgrade=True)], version=0, validate_only=True)
    assert v0.response.results[0].error_code == Error.NONE
    asked = h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=0,
                                                upgrade_type=FeatureUpgradeType.SAFE_DOWNGRADE)])
    assert asked.response.results[0].error_code == Error.NONE
    assert "group.version" not in h.qc.features.finalized
    # metadata.version cannot go down at all, flag or not.
    mv_down = h.update_features([mv(20, FeatureUpgradeType.SAFE_DOWNGRADE)])
    assert mv_down.response.results[0].error_code == Error.INVALID_UPDATE_VERSION
    assert h.update_features([mv(20)]).response.results[0].error_code == Error.INVALID_UPDATE_VERSION


def test_validate_only_writes_nothing():
    h = Harness(metadata_version=20)
    end = h.qc.next_offset
    out = h.update_features([mv(25)], validate_only=True)
    assert out.response.results[0].error_code == Error.NONE
    assert out.records == [] and h.qc.next_offset == end
    assert h.qc.features.finalized["metadata.version"] == 20


def test_a_level_outside_a_registered_broker_range_is_rejected():
    h = Harness(metadata_version=20)
    assert h.register(1, mv_range=(7, 22)).response.error_code == Error.NONE
    out = h.update_features([mv(25)])
    assert out.response.results[0].error_code == Error.INVALID_UPDATE_VERSION
    assert out.records == []
    assert h.update_features([mv(22)]).response.results[0].error_code == Error.NONE
    # v2 reports the outcome at the top level only.
    v2 = h.update_features([mv(23)], version=2)
    assert v2.response.error_code == Error.INVALID_UPDATE_VERSION and v2.response.results == []
    assert h.qc.features.finalized["metadata.version"] == 22


def test_one_bad_update_fails_the_whole_request():
    h = Harness(metadata_version=20)
    out = h.update_features([mv(21), FeatureUpdateKey(feature="no.such.feature", max_version_level=1)])
    assert [r.error_code for r in out.response.results] == [Error.INVALID_REQUEST, Error.INVALID_UPDATE_VERSION]
    assert out.records == []


# --- DescribeCluster -------------------------------------------------------------------------------

def test_describe_cluster_lists_unfenced_brokers_and_the_controllers():
    h = Harness()
    h.active_broker(3)
    h.active_broker(1)
    h.register(2, rack="r2")  # fenced: not listed
    brokers = h.qc.describe_cluster(DescribeClusterRequest(endpoint_type=1), 1)
    assert (brokers.error_code, brokers.cluster_id, brokers.controller_id, brokers.endpoint_type) == (
        Error.NONE, CLUSTER_ID, 1, 1)
    assert [(b.broker_id, b.host, b.port) for b in brokers.brokers] == [
        (1, "broker-1.test", 9093), (3, "broker-3.test", 9095)]
    v0 = h.qc.describe_cluster(DescribeClusterRequest(), 0)
    assert [b.broker_id for b in v0.brokers] == [1, 3]

    controllers = h.qc.describe_cluster(DescribeClusterRequest(endpoint_type=2), 1)
    assert (controllers.error_code, controllers.endpoint_type) == (Error.NONE, 2)
    assert [(b.broker_id, b.host, b.port) for b in controllers.brokers] == [(1, "127.0.0.1", 9093)]

    bad = h.qc.describe_cluster(DescribeClusterRequest(endpoint_type=3), 1)
    assert bad.error_code == Error.UNSUPPORTED_ENDPOINT_TYPE and bad.brokers == []


# --- replay ---------------------------------------------------------------------------------------

def replayed(h: Harness) -> QuorumController:
    """A fresh controller fed the journal through the log's encoding."""
    fresh = QuorumController(CLUSTER_ID, 1, ManualClock(), session_timeout_ms=SESSION_MS)
    for offset, record, version in h.journal:
        decoded, decoded_version = parse_metadata_record(frame_metadata_record(record, version))
        assert decoded_version == version
        fresh.replay(decoded, offset)
    return fresh


def assert_same_state(h: Harness) -> None:
    fresh = replayed(h)
    assert fresh.cluster.brokers == h.qc.cluster.brokers
    assert fresh.features.finalized == h.qc.features.finalized
    assert fresh.next_offset == h.qc.next_offset


def lead(h: Harness, broker_id: int) -> None:
    """Give ``broker_id`` a partition to lead, so that its shutdown is a controlled one."""
    created = h.command("create_topics", CreateTopicsRequest(topics=[CreatableTopic(
        name=f"led-by-{broker_id}", num_partitions=-1, replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[broker_id])])]), 7)
    assert created.response.topics[0].error_code == Error.NONE


def test_replaying_the_records_rebuilds_the_same_state():
    h = Harness(metadata_version=20)
    e1 = h.active_broker(1)
    e2 = h.active_broker(2)
    lead(h, 2)
    h.register(3, mv_range=(7, 24), rack="r3")
    h.update_features([mv(24)])
    h.heartbeat(2, e2, want_shut_down=True)           # in controlled shutdown
    h.heartbeat(1, e1, want_fence=True)               # asked to be fenced
    h.clock.advance(SESSION_MS)
    h.fence_expired()
    h.register(4)
    h.unregister(3)
    h.register(1)                                     # a new incarnation of 1
    assert len(h.qc.cluster.brokers) == 3
    assert h.broker(2).in_controlled_shutdown
    assert_same_state(h)


COMMANDS = st.lists(st.tuples(
    st.sampled_from(["register", "register_same", "heartbeat", "fence", "shutdown", "unregister",
                     "tick", "expire", "behind"]),
    st.integers(min_value=1, max_value=4)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(COMMANDS)
def test_any_command_sequence_replays_to_the_same_state(commands):
    h = Harness()
    incarnations: dict[int, bytes] = {}
    for command, broker_id in commands:
        broker = h.qc.cluster.brokers.get(broker_id)
        epoch = broker.epoch if broker else 0
        if command == "register":
            incarnations[broker_id] = random_uuid()
            h.register(broker_id, incarnations[broker_id])
        elif command == "register_same" and broker_id in incarnations:
            h.register(broker_id, incarnations[broker_id])
        elif command == "heartbeat":
            h.heartbeat(broker_id, epoch)
        elif command == "behind":
            h.heartbeat(broker_id, epoch, offset=epoch - 1)
        elif command == "fence":
            h.heartbeat(broker_id, epoch, want_fence=True)
        elif command == "shutdown":
            h.heartbeat(broker_id, epoch, want_shut_down=True)
        elif command == "unregister":
            h.unregister(broker_id)
        elif command == "tick":
            h.clock.advance(SESSION_MS // 3)
        elif command == "expire":
            h.fence_expired()
        # Invariants that hold after every command.
        for b in h.qc.cluster.brokers.values():
            assert b.epoch < h.qc.next_offset
            if not b.fenced:
                assert b.epoch <= h.qc.last_applied_offset
    assert [offset for offset, _, _ in h.journal] == list(range(len(h.journal)))
    assert_same_state(h)


def test_a_snapshot_of_the_state_rebuilds_the_same_registrations():
    h = Harness(metadata_version=20)
    e1 = h.active_broker(1)
    e2 = h.active_broker(2)
    h.register(3, rack="r3")
    lead(h, 1)
    h.heartbeat(1, e1, want_shut_down=True)  # in controlled shutdown, not yet done
    # Loaded as the server loads a snapshot: every record at the last offset it covers.
    fresh = QuorumController(CLUSTER_ID, 1, ManualClock(), session_timeout_ms=SESSION_MS)
    for record, version in h.qc.snapshot_records():
        decoded, _ = parse_metadata_record(frame_metadata_record(record, version))
        fresh.replay(decoded, h.qc.last_applied_offset)
    fresh.offsets.skip_to(h.qc.next_offset)
    assert fresh.features.finalized == h.qc.features.finalized
    assert {b: (r.epoch, r.fenced, r.in_controlled_shutdown, r.rack, r.endpoints, r.features)
            for b, r in fresh.cluster.brokers.items()} == {
        b: (r.epoch, r.fenced, r.in_controlled_shutdown, r.rack, r.endpoints, r.features)
        for b, r in h.qc.cluster.brokers.items()}
    # Broker 1 may go only once the active broker 2 has reported an offset at or past the
    # snapshot, which holds its controlled-shutdown state: the new leader has heard nothing yet.
    fresh.activate()
    early = call(fresh.broker_heartbeat, BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=e1, current_metadata_offset=h.qc.last_applied_offset,
        want_shut_down=True), 1)
    assert early.response.should_shut_down is False
    call(fresh.broker_heartbeat, BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=e2, current_metadata_offset=h.qc.last_applied_offset), 1)
    done = call(fresh.broker_heartbeat, BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=e1, current_metadata_offset=e1, want_shut_down=True), 1)
    assert done.response.should_shut_down is True
