"""A QuorumController driven directly with a ManualClock, each command's records kept, for
the state-machine tests and those built on them."""

from __future__ import annotations

from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import random_uuid
from server.controller.clock import ManualClock
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import ControllerResult
from tests.support.replication import CLUSTER_ID, CONTROLLER_ENDPOINT, MV_LATEST, SESSION_MS


class Harness:
    """A QuorumController, its clock, and the journal of every record it produced."""

    def __init__(self, metadata_version: int = MV_LATEST, session_ms: int = SESSION_MS) -> None:
        self.clock = ManualClock()
        self.qc = QuorumController(CLUSTER_ID, 1, self.clock, session_timeout_ms=session_ms,
                                   controller_endpoints=[CONTROLLER_ENDPOINT])
        self.journal: list[tuple[int, object, int]] = []
        self.run(self.qc.apply(ControllerResult(
            [(FeatureLevelRecord(name="metadata.version", feature_level=metadata_version), 0)])))
        self.qc.activate()

    def run(self, applied: Applied) -> Applied:
        for i, (record, version) in enumerate(applied.records):
            self.journal.append((applied.base_offset + i, record, version))
        return applied

    # --- commands ---------------------------------------------------------------------------
    def command(self, name: str, request, version: int) -> Applied:
        return self.run(call(getattr(self.qc, name), request, version))

    def register(self, broker_id: int, incarnation: bytes | None = None, **fields) -> Applied:
        return self.command("register_broker", registration(broker_id, incarnation, **fields), 4)

    def heartbeat(self, broker_id: int, epoch: int, offset: int | None = None,
                  want_fence: bool = False, want_shut_down: bool = False) -> Applied:
        return self.command("broker_heartbeat", BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=epoch,
            current_metadata_offset=self.qc.last_applied_offset if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down), 1)

    def unregister(self, broker_id: int) -> Applied:
        return self.command("unregister_broker", UnregisterBrokerRequest(broker_id=broker_id), 0)

    def fence_expired(self) -> Applied:
        return self.run(self.qc.fence_expired_brokers())

    def update_features(self, updates: list[FeatureUpdateKey], version: int = 1,
                        validate_only: bool = False) -> Applied:
        return self.run(self.qc.update_features(
            UpdateFeaturesRequest(feature_updates=updates, validate_only=validate_only), version))

    def active_broker(self, broker_id: int) -> int:
        """Register and unfence a broker; returns its epoch."""
        epoch = self.register(broker_id).response.broker_epoch
        assert not self.heartbeat(broker_id, epoch).response.is_fenced
        return epoch

    def broker(self, broker_id: int):
        return self.qc.cluster.brokers[broker_id]


def call(handler, request, version: int):
    """Call a QuorumController command as the router does: with the request's API version."""
    return handler(request, version)


def registration(broker_id: int, incarnation: bytes | None = None, *, cluster_id: str = CLUSTER_ID,
                 mv_range: tuple[int, int] | None = (7, MV_LATEST), extra_features=(),
                 port: int | None = None, rack: str | None = None,
                 previous_broker_epoch: int = -1) -> BrokerRegistrationRequest:
    features = [Feature(name="metadata.version", min_supported_version=mv_range[0],
                        max_supported_version=mv_range[1])] if mv_range else []
    features += [Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                 for n, lo, hi in extra_features]
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation or random_uuid(),
        listeners=[Listener(name="PLAINTEXT", host=f"broker-{broker_id}.test",
                            port=port or 9092 + broker_id, security_protocol=0)],
        features=features, rack=rack, log_dirs=[random_uuid()],
        previous_broker_epoch=previous_broker_epoch)


def names(applied: Applied) -> list[str]:
    return [record.NAME for record, _ in applied.records]
