"""The broker lifecycle over real sockets against a controller process."""

from __future__ import annotations

import time

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.primitives import random_uuid
from server.config import EMBEDDED_NODE_ID
from tests.support.wire import (
    WireBroker, closed_by_peer, connect, describe_cluster, listed_brokers, raw_socket, server_has_read,
    unregister)
from tools.processes import poll

SHORT_SESSION = {"broker.session.timeout.ms": "1000", "broker.heartbeat.interval.ms": "200"}
CAUGHT_UP = 1 << 40  # a metadata offset beyond anything these tests write


@pytest.fixture
def admin(controller):
    with connect(controller) as client:
        yield client


def active(controller, broker_id: int) -> WireBroker:
    broker = WireBroker(controller, broker_id)
    assert broker.register().error_code == Error.NONE
    hb = broker.heartbeat()
    assert (hb.error_code, hb.is_caught_up, hb.is_fenced) == (Error.NONE, True, False)
    return broker


def test_register_then_unfence_after_catching_up(controller, admin):
    b1 = WireBroker(controller, 1)
    reg = b1.register()
    assert reg.error_code == Error.NONE
    assert reg.broker_epoch > 0  # offset 0 holds the bootstrap metadata.version

    behind = b1.heartbeat(offset=reg.broker_epoch - 1)
    assert (behind.error_code, behind.is_caught_up, behind.is_fenced) == (Error.NONE, False, True)
    assert listed_brokers(admin) == []

    wants_fence = b1.heartbeat(want_fence=True)
    assert (wants_fence.is_caught_up, wants_fence.is_fenced) == (True, True)
    assert listed_brokers(admin) == []

    caught_up = b1.heartbeat()
    assert (caught_up.error_code, caught_up.is_caught_up, caught_up.is_fenced) == (Error.NONE, True, False)
    described = describe_cluster(admin)
    assert described.cluster_id == controller.cluster_id
    assert [(b.broker_id, b.host, b.port) for b in described.brokers] == [(1, "127.0.0.1", 29001)]

    b2 = WireBroker(controller, 2)
    assert b2.register().broker_epoch > reg.broker_epoch
    b2.heartbeat()
    assert listed_brokers(admin) == [1, 2]


def test_duplicate_retry_stale_and_unknown(controller):
    b1 = active(controller, 1)
    # Another process claiming id 1 while the first one's lease is live.
    impostor = WireBroker(controller, 1)
    assert impostor.register().error_code == Error.DUPLICATE_BROKER_REGISTRATION
    # A retry of the first registration (same incarnation) on a new connection: same epoch.
    retry = WireBroker(controller, 1, incarnation=b1.incarnation)
    again = retry.register()
    assert (again.error_code, again.broker_epoch) == (Error.NONE, b1.epoch)
    # Heartbeats with any other epoch are stale, and so are those from unknown ids (as in Kafka).
    assert b1.heartbeat(epoch=b1.epoch - 1).error_code == Error.STALE_BROKER_EPOCH
    assert b1.heartbeat(epoch=b1.epoch + 100).error_code == Error.STALE_BROKER_EPOCH
    assert WireBroker(controller, 99).heartbeat(epoch=5).error_code == Error.STALE_BROKER_EPOCH
    # None of that disturbed the registered broker.
    assert b1.heartbeat().is_fenced is False


def test_wrong_cluster_id_and_unsupported_metadata_version(controller, admin):
    b = WireBroker(controller, 1)
    assert b.register(cluster_id="AAAAAAAAAAAAAAAAAAAAAA").error_code == Error.INCONSISTENT_CLUSTER_ID
    assert b.register(mv_range=(7, 24)).error_code == Error.UNSUPPORTED_VERSION
    assert b.heartbeat(epoch=1).error_code == Error.STALE_BROKER_EPOCH
    # The same connection goes on working: the errors were answers, not failures.
    ok = b.register()
    assert ok.error_code == Error.NONE and ok.broker_epoch > 0


@pytest.mark.controller_properties(SHORT_SESSION)
def test_fencing_on_lease_expiry(controller, admin):
    quiet = active(controller, 1)
    chatty = active(controller, 2)
    assert listed_brokers(admin) == [1, 2]

    sent = time.monotonic()
    assert quiet.heartbeat().is_fenced is False  # its last heartbeat

    def quiet_fenced():
        assert chatty.heartbeat().is_fenced is False  # broker 2 keeps its lease
        return listed_brokers(admin) == [2]

    poll(quiet_fenced, timeout=60, interval=0.05, message="broker 1 to be fenced")
    assert time.monotonic() - sent >= 1.0, "fenced before its session timeout"
    controller.wait_for_stderr(r"fencing brokers \[1\]")

    # Its lease is gone, so a new incarnation may take the id at once.
    reborn = WireBroker(controller, 1)
    reg = reborn.register()
    assert reg.error_code == Error.NONE and reg.broker_epoch > quiet.epoch
    assert quiet.heartbeat().error_code == Error.STALE_BROKER_EPOCH
    assert reborn.heartbeat().is_fenced is False
    assert listed_brokers(admin) == [1, 2]


@pytest.mark.controller_properties(SHORT_SESSION)
def test_a_fenced_broker_heartbeating_again_is_unfenced(controller, admin):
    b = active(controller, 1)
    poll(lambda: listed_brokers(admin) == [], timeout=60, interval=0.05, message="the lease to expire")
    hb = b.heartbeat()
    assert (hb.error_code, hb.is_fenced) == (Error.NONE, False)
    assert listed_brokers(admin) == [1]


def test_controlled_shutdown(controller, admin):
    # A broker that leads nothing may go at once, as in Kafka; the shutdown of a leader is
    # in test_kafka_controller_apis.py.
    b = active(controller, 1)
    other = active(controller, 2)

    done = b.heartbeat(want_shut_down=True)
    assert (done.error_code, done.should_shut_down, done.is_fenced) == (Error.NONE, True, True)
    assert listed_brokers(admin) == [2]

    # A clean shutdown frees the id: the next incarnation needs no lease to expire.
    successor = WireBroker(controller, 1)
    reg = successor.register(previous_broker_epoch=b.epoch)
    assert reg.error_code == Error.NONE and reg.broker_epoch > b.epoch
    assert successor.heartbeat().is_fenced is False
    assert other.heartbeat().is_fenced is False
    assert listed_brokers(admin) == [1, 2]


def test_unregistration(controller, admin):
    b = active(controller, 1)
    active(controller, 2)
    assert unregister(admin, 1).error_code == Error.NONE
    assert listed_brokers(admin) == [2]
    assert b.heartbeat().error_code == Error.STALE_BROKER_EPOCH
    assert unregister(admin, 77).error_code == Error.BROKER_ID_NOT_REGISTERED
    assert WireBroker(controller, 1).register().error_code == Error.NONE


def test_registrations_survive_a_restart(controller):
    b1 = active(controller, 1)
    b2 = active(controller, 2)
    fenced = WireBroker(controller, 3)
    assert fenced.register().error_code == Error.NONE
    cluster_id, port = controller.cluster_id, controller.port
    for b in (b1, b2, fenced):
        b.close()

    controller.restart()
    assert (controller.cluster_id, controller.port) == (cluster_id, port)
    with connect(controller) as admin:
        # Unfenced state is in the log, so the brokers are listed before any heartbeat.
        assert listed_brokers(admin) == [1, 2]
    for b in (b1, b2, fenced):
        b.reconnect()
    assert (b1.heartbeat().error_code, b1.heartbeat().is_fenced) == (Error.NONE, False)
    assert fenced.heartbeat(offset=fenced.epoch - 1).is_fenced is True
    # Same incarnation: the same epoch; another incarnation: a duplicate, because the new
    # controller gave every registered broker a fresh lease.
    assert b2.register().broker_epoch == b2.epoch
    assert WireBroker(controller, 2).register().error_code == Error.DUPLICATE_BROKER_REGISTRATION
    # New registrations get epochs beyond everything written before the restart.
    newcomer = WireBroker(controller, 4)
    assert newcomer.register().broker_epoch > max(b1.epoch, b2.epoch, fenced.epoch)


def test_acknowledged_registrations_survive_kill_9(controller):
    brokers = [WireBroker(controller, i) for i in range(1, 6)]
    epochs = {}
    for b in brokers:
        assert b.register().error_code == Error.NONE  # answered only once durable
        epochs[b.broker_id] = b.epoch
    assert brokers[0].heartbeat().is_fenced is False
    controller.kill9()
    controller.start()
    for b in brokers:
        b.reconnect()
        assert b.register().broker_epoch == epochs[b.broker_id]
    with connect(controller) as admin:
        assert listed_brokers(admin) == [1]


def test_a_cleanly_shut_down_broker_id_is_free_after_a_restart(controller):
    b = active(controller, 1)
    b.heartbeat(want_shut_down=True)
    assert b.heartbeat(offset=CAUGHT_UP, want_shut_down=True).should_shut_down
    b.close()
    controller.restart()
    successor = WireBroker(controller, 1, incarnation=random_uuid())
    reg = successor.register(previous_broker_epoch=b.epoch)
    assert reg.error_code == Error.NONE, Error(reg.error_code).name
    assert reg.broker_epoch > b.epoch


@pytest.mark.controller_properties({"metadata.log.max.record.bytes.between.snapshots": "1"})
def test_controlled_shutdown_survives_a_restart_from_a_snapshot(controller):
    b = active(controller, 1)
    other = active(controller, 2)
    with connect(controller) as admin:
        created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="led-by-1", num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])]), 7)
        assert created.topics[0].error_code == Error.NONE
    first = b.heartbeat(want_shut_down=True)
    assert (first.should_shut_down, first.is_fenced) == (False, False)
    with connect(controller) as admin:  # a read after the change: everything is committed
        listed_brokers(admin)
    controller.wait_for_stderr(r"wrote snapshot")
    b.close()
    other.close()
    controller.restart()
    controller.wait_for_stderr(r"loaded snapshot")
    b.reconnect()
    other.reconnect()
    # The new leader has not heard from the active broker 2 yet: 1 may not go.
    waiting = b.heartbeat(offset=CAUGHT_UP, want_shut_down=True)
    assert (waiting.error_code, waiting.should_shut_down, waiting.is_fenced) == (Error.NONE, False, False)
    assert other.heartbeat(offset=CAUGHT_UP).is_fenced is False
    done = b.heartbeat(offset=CAUGHT_UP, want_shut_down=True)
    assert (done.should_shut_down, done.is_fenced) == (True, True)


def test_describe_cluster_for_controllers(controller, admin):
    response = describe_cluster(admin, endpoint_type=2)
    assert (response.error_code, response.endpoint_type, response.controller_id) == (Error.NONE, 2, EMBEDDED_NODE_ID)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(EMBEDDED_NODE_ID, "127.0.0.1", controller.port)]
    bad = describe_cluster(admin, endpoint_type=3)
    assert bad.error_code == Error.UNSUPPORTED_ENDPOINT_TYPE


def test_sigterm_stops_cleanly_with_clients_connected(controller):
    b = active(controller, 1)
    idle = raw_socket(controller)
    half = raw_socket(controller)
    half.sendall(b"\x00\x00\x00\x40abc")  # part of a frame, then nothing
    poll(lambda: server_has_read(half), 60, message="the server to take in the partial frame")
    assert controller.stop() == 0
    text = controller.stderr_text()
    assert "shutting down" in text and "Traceback" not in text, text
    assert "kraftwire.network" not in text, "the server closed those connections itself"
    assert closed_by_peer(idle) and closed_by_peer(half)
    idle.close()
    half.close()
    controller.start()
    b.reconnect()
    assert b.heartbeat().is_fenced is False


@pytest.mark.controller_properties({}, release_version="3.7-IV4")
def test_metadata_version_upgrade_and_broker_ranges_over_the_wire(controller, admin):
    from protocol.generated.messages.update_features_request import (
        FeatureUpdateKey, UpdateFeaturesRequest)
    from tests.support.wire import api_versions

    def finalized() -> dict[str, int]:
        return {f.name: f.max_version_level for f in api_versions(admin).finalized_features}

    assert finalized() == {"metadata.version": 19}
    old = WireBroker(controller, 1)
    assert old.register(mv_range=(7, 18)).error_code == Error.UNSUPPORTED_VERSION
    assert old.register(mv_range=(7, 21)).error_code == Error.NONE

    def upgrade(level: int, validate_only: bool = False):
        return admin.request(UpdateFeaturesRequest(
            feature_updates=[FeatureUpdateKey(feature="metadata.version", max_version_level=level)],
            validate_only=validate_only), 1)

    # Broker 1 cannot run 25, so the cluster cannot move there.
    assert upgrade(25).results[0].error_code == Error.INVALID_UPDATE_VERSION
    assert upgrade(21, validate_only=True).results[0].error_code == Error.NONE
    assert finalized() == {"metadata.version": 19}
    assert upgrade(21).results[0].error_code == Error.NONE
    assert finalized() == {"metadata.version": 21}
    # A newcomer must now support 21.
    assert WireBroker(controller, 2).register(mv_range=(7, 20)).error_code == Error.UNSUPPORTED_VERSION


def test_api_versions_before_v4_leave_out_features_whose_lowest_level_is_0(controller, admin):
    """Kafka 3.7's clients (a 3.7 broker's channel to its controller among them) refuse a
    supported range starting at 0 and drop the connection; Kafka's servers leave such features
    out of ApiVersions v0-3 (KAFKA-17492) and list them from v4."""
    from tests.support.wire import api_versions

    def supported(version: int) -> dict[str, tuple[int, int]]:
        return {f.name: (f.min_version, f.max_version) for f in api_versions(admin, version).supported_features}

    old = supported(3)
    assert "metadata.version" in old and all(low > 0 for low, _ in old.values())
    assert supported(4)["kraft.version"] == (0, 1)
