"""The controller state machine: commands -> records -> replay.

Handlers read the state and return a ``ControllerResult``; ``apply`` gives the records their
offsets and replays them, and ``replay`` is the only code that changes metadata state. The
same ``replay`` loads snapshots, replays the log at start-up and keeps observers in step.
No I/O happens here: the shell persists the applied records and releases each response only
once the log has committed everything the response could have seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from protocol.error_codes import Error
from protocol.generated.messages.api_versions_response import FinalizedFeatureKey, SupportedFeatureKey
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.generated.messages.controller_registration_request import ControllerRegistrationRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import (
    DescribeClusterBroker, DescribeClusterResponse)
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import UpdateFeaturesRequest
from protocol.message import Message
from server.controller.clock import Clock
from server.controller.cluster import ClusterControl, Endpoint, Leadership, NoPartitions
from server.controller.features import SUPPORTED_FEATURES, FeatureControl
from server.controller.result import ControllerResult, VersionedRecord

BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2


@dataclass
class Applied:
    """Records given offsets and replayed, with the response they produced."""

    records: list[VersionedRecord]
    base_offset: int
    response: Message | None

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1


class QuorumController:
    def __init__(self, cluster_id: str, node_id: int, clock: Clock, *,
                 session_timeout_ms: int = 9000,
                 controller_endpoints: list[Endpoint] | None = None) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.clock = clock
        self.features = FeatureControl()
        self.cluster = ClusterControl(cluster_id, session_timeout_ms, self.features)
        self.leadership: Leadership = NoPartitions()
        # Endpoints of the voters as configured: DescribeCluster for controllers falls back
        # to them until the controllers register themselves.
        self.controller_endpoints = controller_endpoints or []
        self.next_offset = 0
        self._replayers: dict[str, Callable[[Message, int], None]] = {
            "RegisterBrokerRecord": self.cluster.replay_register_broker,
            "UnregisterBrokerRecord": lambda r, o: self.cluster.replay_unregister_broker(r),
            "FenceBrokerRecord": lambda r, o: self.cluster.replay_fence(r.id, r.epoch, True),
            "UnfenceBrokerRecord": lambda r, o: self.cluster.replay_fence(r.id, r.epoch, False),
            "BrokerRegistrationChangeRecord": self.cluster.replay_registration_change,
            "RegisterControllerRecord": lambda r, o: self.cluster.replay_register_controller(r),
            "FeatureLevelRecord": self.features.replay_feature_level,
            "NoOpRecord": lambda r, o: None,
        }

    @property
    def last_applied_offset(self) -> int:
        return self.next_offset - 1

    def add_replayer(self, record_name: str, fn: Callable[[Message, int], None]) -> None:
        self._replayers[record_name] = fn

    # --- the only mutators -----------------------------------------------------------------
    def replay(self, record: Message, offset: int) -> None:
        fn = self._replayers.get(record.NAME)
        if fn is None:
            raise ValueError(f"cannot replay {record.NAME} at offset {offset}")
        fn(record, offset)
        self.next_offset = offset + 1

    def apply(self, result: ControllerResult) -> Applied:
        base = self.next_offset
        for i, (record, _version) in enumerate(result.records):
            self.replay(record, base + i)
        return Applied(result.records, base, result.response)

    def activate(self) -> None:
        self.cluster.activate(self.clock.now_ms())

    # --- broker lifecycle ------------------------------------------------------------------
    def register_broker(self, req: BrokerRegistrationRequest) -> Applied:
        return self.apply(self.cluster.register_broker(req, self.next_offset, self.clock.now_ms(), self.leadership))

    def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> Applied:
        return self.apply(self.cluster.heartbeat(req, self.clock.now_ms(), self.leadership))

    def unregister_broker(self, req: UnregisterBrokerRequest) -> Applied:
        return self.apply(self.cluster.unregister_broker(req.broker_id, self.leadership))

    def register_controller(self, req: ControllerRegistrationRequest) -> Applied:
        return self.apply(self.cluster.register_controller(req))

    def fence_expired_brokers(self) -> Applied:
        return self.apply(ControllerResult(self.cluster.fence_expired(self.clock.now_ms(), self.leadership)))

    def update_features(self, req: UpdateFeaturesRequest, version: int) -> Applied:
        ranges = [b.features for b in self.cluster.brokers.values()]
        return self.apply(self.features.update_features(req, version, ranges))

    # --- reads -----------------------------------------------------------------------------
    def describe_cluster(self, req: DescribeClusterRequest, version: int) -> DescribeClusterResponse:
        response = DescribeClusterResponse(cluster_id=self.cluster_id, controller_id=self.node_id,
                                           endpoint_type=req.endpoint_type if version >= 1 else 1)
        if version >= 1 and req.endpoint_type == CONTROLLER_ENDPOINTS:
            response.brokers = [DescribeClusterBroker(broker_id=cid, host=e.host, port=e.port)
                                for cid, e in self._controller_endpoints()]
        elif version >= 1 and req.endpoint_type != BROKER_ENDPOINTS:
            response.error_code = Error.UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = f"unknown endpoint type {req.endpoint_type}"
        else:
            response.brokers = [
                DescribeClusterBroker(broker_id=b.broker_id, host=b.endpoints[0].host,
                                      port=b.endpoints[0].port, rack=b.rack)
                for b in sorted(self.cluster.brokers.values(), key=lambda b: b.broker_id)
                if not b.fenced and b.endpoints]
        return response

    def _controller_endpoints(self) -> list[tuple[int, Endpoint]]:
        registered = [(c.controller_id, c.endpoints[0]) for c in self.cluster.controllers.values() if c.endpoints]
        if registered:
            return sorted(registered, key=lambda item: item[0])
        return [(self.node_id, e) for e in self.controller_endpoints[:1]]

    def supported_features(self) -> list[SupportedFeatureKey]:
        return [SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                for n, (lo, hi) in SUPPORTED_FEATURES.items()]

    def finalized_features(self) -> list[FinalizedFeatureKey]:
        return [FinalizedFeatureKey(name=n, max_version_level=lvl, min_version_level=lvl)
                for n, lvl in self.features.finalized.items()]

    # --- snapshots -------------------------------------------------------------------------
    def snapshot_records(self) -> Iterable[VersionedRecord]:
        from protocol.generated.metadata.feature_level_record import FeatureLevelRecord

        for name, level in sorted(self.features.finalized.items()):
            yield FeatureLevelRecord(name=name, feature_level=level), 0
        yield from self.cluster.snapshot_records()
