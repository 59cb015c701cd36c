"""The controller state machine: commands -> records -> replay.

Handlers read the state and return a ``ControllerResult``; ``apply`` gives the records their
offsets and replays them, and ``replay`` is the only code that changes metadata state. The
same ``replay`` loads snapshots, replays the log at start-up and keeps observers in step.
No I/O happens here: the shell persists the applied records and releases each response only
once the log has committed everything the response could have seen.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import Callable, Iterable, Iterator

from protocol.constants import EndpointType
from protocol.error_codes import Error
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.alter_client_quotas_request import AlterClientQuotasRequest
from protocol.generated.messages.alter_configs_request import AlterConfigsRequest
from protocol.generated.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from protocol.generated.messages.alter_partition_reassignments_response import AlterPartitionReassignmentsResponse
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest
from protocol.generated.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from protocol.generated.messages.api_versions_response import FinalizedFeatureKey, SupportedFeatureKey
from protocol.generated.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.generated.messages.controller_registration_request import ControllerRegistrationRequest
from protocol.generated.messages.create_acls_request import CreateAclsRequest
from protocol.generated.messages.create_delegation_token_request import CreateDelegationTokenRequest
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest
from protocol.generated.messages.create_topics_request import CreateTopicsRequest
from protocol.generated.messages.create_topics_response import CreateTopicsResponse
from protocol.generated.messages.delete_acls_request import DeleteAclsRequest
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest
from protocol.generated.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from protocol.generated.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol.generated.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.generated.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import UpdateFeaturesRequest
from protocol.generated.metadata import (
    AbortTransactionRecord, AccessControlEntryRecord, BeginTransactionRecord,
    BrokerRegistrationChangeRecord, ClientQuotaRecord, ConfigRecord, DelegationTokenRecord,
    EndTransactionRecord, FeatureLevelRecord, FenceBrokerRecord, KRaftVersionRecord, NoOpRecord,
    PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    RegisterControllerRecord, RemoveAccessControlEntryRecord, RemoveDelegationTokenRecord,
    RemoveTopicRecord, RemoveUserScramCredentialRecord, TopicRecord, UnfenceBrokerRecord,
    UnregisterBrokerRecord, UserScramCredentialRecord, VotersRecord, ZkMigrationStateRecord)
from protocol.message import Message
from server.controller.acls import AclControl
from server.controller.clock import Clock
from server.controller.cluster import ClusterControl, Endpoint
from server.controller.configs import ConfigControl
from server.controller import event_log
from server.controller.delegation_tokens import DelegationTokenControl, TokenRequester
from server.controller.describe import TopicViews
from server.controller.directories import assign_replicas_to_dirs, fail_directories
from server.controller.features import KRAFT_VERSION, MV_3_6_IV1, SUPPORTED_FEATURES, FeatureControl, KraftUpgrade
from server.controller.offsets import OffsetControl
from server.controller.producer_ids import ProducerIdControl
from server.controller.quorum_records import QuorumRecords
from server.controller.quotas import ClientQuotaControl
from server.controller.replication import ReplicationControl
from server.controller.result import (
    MAX_RECORDS_PER_BATCH, SLICE_RECORDS, ControllerResult, Later, VersionedRecord, accepting)
from server.controller.scram import ScramControl
from server.controller.shapes import CopiedChange
from server.controller.topics import TopicAdmin
from server.controller.unserved import refuse_find_coordinator

COORDINATES_NOTHING = "a KRaft controller coordinates no groups or transactions: bootstrap at a broker"


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
                 controller_endpoints: list[Endpoint] | None = None,
                 static_configs: dict[str, str] | None = None,
                 metadata_lists_brokers: bool = False,
                 voter_ids: Iterable[int] = (),
                 voter_endpoints: Callable[[], dict[int, Endpoint]] | None = None,
                 kraft_upgrade: KraftUpgrade | None = None) -> None:
        """``kraft_upgrade``: the Raft leader's answer to raising kraft.version (its records or
        its refusal); without it, as outside a quorum, the upgrade is refused."""
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.clock = clock
        self.timed_out_heartbeats = 0  # brokers fenced because their sessions expired
        self._fencing: Iterator[VersionedRecord | None] | None = None  # the stale brokers being fenced
        self._later: deque[Later] = deque()  # commands' work still to write, in slices
        self.offsets = OffsetControl()
        self.features = FeatureControl(offsets=self.offsets, kraft_upgrade=kraft_upgrade)
        self.cluster = ClusterControl(cluster_id, session_timeout_ms, self.features, self.offsets,
                                      voter_ids=frozenset(voter_ids))
        self.configs = ConfigControl(static_configs or {}, self.offsets)
        self.replication = ReplicationControl(self.cluster, self.features, self.configs, self.offsets)
        self.leadership = self.replication
        self.topic_admin = TopicAdmin(self.replication)
        self.acls = AclControl(self.offsets)
        self.quotas = ClientQuotaControl(self.offsets)
        self.scram = ScramControl(self.offsets)
        self.delegation_tokens = DelegationTokenControl(self.offsets)
        self.producer_ids = ProducerIdControl(self.cluster, self.offsets)
        self.quorum = QuorumRecords(self.offsets)
        # Endpoints of the voters as configured: DescribeCluster for controllers falls back
        # to them until the controllers register themselves.
        self.controller_endpoints = controller_endpoints or []
        # Every voter's endpoint as the Raft layer knows it at each call (a dynamic quorum's
        # voters are in its log and change at run time): who leads is named by id and reached there.
        self.voter_endpoints = voter_endpoints or dict
        # The controller Metadata and DescribeCluster name: this node while it leads.
        self.active_controller_id = node_id
        self.views = TopicViews(self.replication, self.active_controller, metadata_lists_brokers)
        self._replayers: dict[str, Callable[[Message, int], None]] = {
            RegisterBrokerRecord.NAME: accepting(RegisterBrokerRecord, self.cluster.replay_register_broker),
            UnregisterBrokerRecord.NAME: accepting(
                UnregisterBrokerRecord, lambda r, o: self.cluster.replay_unregister_broker(r)),
            FenceBrokerRecord.NAME: accepting(
                FenceBrokerRecord, lambda r, o: self.cluster.replay_fence(r.id, r.epoch, True)),
            UnfenceBrokerRecord.NAME: accepting(
                UnfenceBrokerRecord, lambda r, o: self.cluster.replay_fence(r.id, r.epoch, False)),
            BrokerRegistrationChangeRecord.NAME: accepting(
                BrokerRegistrationChangeRecord, self.cluster.replay_registration_change),
            RegisterControllerRecord.NAME: accepting(
                RegisterControllerRecord, lambda r, o: self.cluster.replay_register_controller(r)),
            FeatureLevelRecord.NAME: accepting(
                FeatureLevelRecord, lambda r, o: self.features.replay_feature_level(r)),
            TopicRecord.NAME: accepting(TopicRecord, lambda r, o: self.replication.replay_topic(r)),
            PartitionRecord.NAME: accepting(
                PartitionRecord, lambda r, o: self.replication.replay_partition(r)),
            PartitionChangeRecord.NAME: accepting(
                PartitionChangeRecord, lambda r, o: self.replication.replay_partition_change(r)),
            RemoveTopicRecord.NAME: accepting(
                RemoveTopicRecord, lambda r, o: self.replication.replay_remove_topic(r)),
            ConfigRecord.NAME: accepting(ConfigRecord, lambda r, o: self.configs.replay_config(r)),
            NoOpRecord.NAME: accepting(NoOpRecord, lambda r, o: None),
            BeginTransactionRecord.NAME: accepting(
                BeginTransactionRecord, lambda r, o: self.offsets.begin_transaction(o)),
            EndTransactionRecord.NAME: accepting(
                EndTransactionRecord, lambda r, o: self.offsets.end_transaction(o)),
            AbortTransactionRecord.NAME: accepting(
                AbortTransactionRecord, lambda r, o: self.offsets.abort_transaction(o)),
            AccessControlEntryRecord.NAME: accepting(
                AccessControlEntryRecord, lambda r, o: self.acls.replay_add(r)),
            RemoveAccessControlEntryRecord.NAME: accepting(
                RemoveAccessControlEntryRecord, lambda r, o: self.acls.replay_remove(r)),
            ClientQuotaRecord.NAME: accepting(ClientQuotaRecord, lambda r, o: self.quotas.replay(r)),
            UserScramCredentialRecord.NAME: accepting(
                UserScramCredentialRecord, lambda r, o: self.scram.replay_add(r)),
            RemoveUserScramCredentialRecord.NAME: accepting(
                RemoveUserScramCredentialRecord, lambda r, o: self.scram.replay_remove(r)),
            DelegationTokenRecord.NAME: accepting(
                DelegationTokenRecord, lambda r, o: self.delegation_tokens.replay_add(r)),
            RemoveDelegationTokenRecord.NAME: accepting(
                RemoveDelegationTokenRecord, lambda r, o: self.delegation_tokens.replay_remove(r)),
            ProducerIdsRecord.NAME: accepting(ProducerIdsRecord, lambda r, o: self.producer_ids.replay(r)),
            ZkMigrationStateRecord.NAME: accepting(
                ZkMigrationStateRecord, lambda r, o: self.quorum.replay_zk_migration(r)),
            # Control records of the quorum, replayed from control batches and snapshot headers.
            KRaftVersionRecord.NAME: accepting(
                KRaftVersionRecord, lambda r, o: self.quorum.replay_kraft_version(r)),
            VotersRecord.NAME: accepting(VotersRecord, lambda r, o: self.quorum.replay_voters(r)),
        }

    @property
    def next_offset(self) -> int:
        return self.offsets.next_offset

    @property
    def last_applied_offset(self) -> int:
        return self.offsets.last_applied_offset

    # --- the only mutators -----------------------------------------------------------------
    def replay(self, record: Message, offset: int) -> None:
        fn = self._replayers.get(record.NAME)
        if fn is None:
            raise ValueError(f"cannot replay {record.NAME} at offset {offset}")
        self.offsets.replaying(offset)
        fn(record, offset)
        self.offsets.replayed(offset)

    def apply(self, result: ControllerResult) -> Applied:
        """Give the records their offsets and replay them, all or nothing: if any replay
        fails, every change the command made is undone and the error goes to the caller."""
        base = self.offsets.next_offset
        records = result.records
        if len(records) > MAX_RECORDS_PER_BATCH and self.offsets.transaction_start < 0 \
                and self.features.metadata_version >= MV_3_6_IV1:
            records = [(BeginTransactionRecord(), 0), *records, (EndTransactionRecord(), 0)]
        if self.offsets.recording:
            event_log.changes((r for r, _ in records), self._topic_name, self._current)
        try:
            i = 0
            while i < len(records):
                record = records[i][0]
                # Fencing a fleet writes runs of a thousand copies of a few shapes' changes:
                # they replay in one go, each as its shape's change once worked out.
                if record.__class__ is CopiedChange:
                    i = self.replication.replay_copies(records, i, base)
                else:
                    self.replay(record, base + i)
                    i += 1
        except BaseException:
            self.offsets.revert_to(base)
            raise
        if result.later is not None:
            self._later.append(result.later)
            if result.later.leaving is not None:
                self.cluster.leaving |= {result.later.leaving}
        return Applied(records, base, result.response)

    def activate(self) -> None:
        """Start serving as the active controller: leases start now, and every change from
        here on can be undone until it is committed."""
        self.offsets.activate()
        self.cluster.activate(self.clock.now_ms())
        self._fencing = None
        self._later.clear()

    def committed(self, offset: int) -> None:
        """Everything up to ``offset`` is durable and will never be reverted."""
        self.offsets.committed(offset)

    # --- broker lifecycle ------------------------------------------------------------------
    def _topic_name(self, topic_id: bytes) -> str | None:
        topic = self.replication.topics.get(topic_id)
        return topic.name if topic is not None else None

    def _current(self, record: Message) -> Message | None:
        """The record in force that ``record`` replaces or removes, for the log to tell a
        creation from a change and to name what a removal removes."""
        if isinstance(record, RemoveAccessControlEntryRecord):
            return self.acls.acls.entries.get(record.id)
        if isinstance(record, UserScramCredentialRecord):
            return self.scram.credentials.entries.get((record.name, record.mechanism))
        if isinstance(record, (DelegationTokenRecord, RemoveDelegationTokenRecord)):
            return self.delegation_tokens.tokens.entries.get(record.token_id)
        return None

    def register_broker(self, req: BrokerRegistrationRequest, version: int) -> Applied:
        now = self.clock.now_ms()
        broker_id = req.broker_id
        existing = self.cluster.brokers.get(broker_id)
        refusal = self.cluster.refuse_registration(req, now)
        if refusal is not None:
            applied = self.apply(refusal)
            if existing is not None and self.offsets.recording \
                    and getattr(applied.response, "error_code", None) == Error.NONE:
                event_log.registered(req, existing.incarnation_id, existing.epoch, 0, existing.epoch)
            return applied
        steps: list[Callable[[], ControllerResult]] = []
        if existing is not None and not existing.fenced:
            # The old incarnation's lease ran out before the fence timer noticed: it must not
            # keep leading under the new, fenced registration.
            steps.append(lambda: ControllerResult(self.leadership.move_leadership_away(broker_id)))
        if existing is not None and req.previous_broker_epoch != existing.epoch:
            # KIP-966: the old incarnation did not shut down cleanly, so whatever it held as
            # an eligible leader may be lost.
            steps.append(lambda: ControllerResult(self.leadership.forget_unclean_broker(broker_id)))
        steps.append(lambda: self.cluster.register_broker(req, self.next_offset, now))
        applied = self._steps(steps)
        if self.offsets.recording:
                event_log.registered(req, existing.incarnation_id if existing else None,
                                 existing.epoch if existing else -1, len(applied.records) - 1, applied.last_offset)
        return applied

    def broker_heartbeat(self, req: BrokerHeartbeatRequest, version: int) -> Applied:
        before = self.cluster.brokers.get(req.broker_id)
        fenced, shutting_down = (before.fenced, before.in_controlled_shutdown) if before else (True, False)
        heartbeat = self.cluster.heartbeat(req, self.clock.now_ms(), self.leadership)
        if self.offsets.recording and isinstance(heartbeat.response, BrokerHeartbeatResponse) \
                and not heartbeat.response.error_code:
            event_log.heartbeat(req.broker_id, fenced, shutting_down, req.broker_epoch,
                                (r for r, _ in heartbeat.records), heartbeat.response)
        if not req.offline_log_dirs:
            return self.apply(heartbeat)
        return self._steps([lambda: heartbeat, lambda: ControllerResult(
            fail_directories(req, self.cluster, self.replication, self.features))])

    def unregister_broker(self, req: UnregisterBrokerRequest, version: int) -> Applied:
        broker_id = req.broker_id
        if broker_id not in self.cluster.brokers:
            return self.apply(self.cluster.unregister_broker(broker_id))
        # An id that comes back later is a new, empty broker: it must not stay an eligible leader.
        if self.replication.many_moves(broker_id):
            # The registration goes at once; its many leaderships move away after, in slices.
            def unregister() -> ControllerResult:
                result = self.cluster.unregister_broker(broker_id)
                result.later = self.cluster.moves_later(broker_id, self.leadership)
                return result
            return self._steps([
                lambda: ControllerResult(self.leadership.forget_unclean_broker(broker_id)), unregister])
        return self._steps([
            lambda: ControllerResult(self.leadership.move_leadership_away(broker_id)),
            lambda: ControllerResult(self.leadership.forget_unclean_broker(broker_id)),
            lambda: self.cluster.unregister_broker(broker_id)])

    def register_controller(self, req: ControllerRegistrationRequest, version: int) -> Applied:
        return self.apply(self.cluster.register_controller(req))

    def fence_expired_brokers(self) -> Applied:
        """Fence every broker whose lease ran out, as one command: the slices of
        ``fence_stale_brokers`` back to back, undone whole if one fails."""
        base = self.offsets.next_offset
        records: list[VersionedRecord] = []
        try:
            while (applied := self.fence_stale_brokers(None)) is not None:
                records += applied.records
        except BaseException:
            self.offsets.revert_to(base)
            raise
        return Applied(records, base, None)

    def next_slice(self, max_records: int = SLICE_RECORDS) -> Applied | None:
        """The next slice of the controller's own work, applied: at most ``max_records``
        records of what commands left to write later (in the order they left it), then of
        fencing stale brokers; None when nothing is left. The caller submits it and asks again
        on a later turn of its loop, so that requests are served between slices."""
        while self._later:
            later = self._later[0]
            taken = list(islice(later.records, max_records))
            done = len(taken) < max_records
            if done:
                self._later.popleft()
                if later.leaving is not None and not any(w.leaving == later.leaving for w in self._later):
                    self.cluster.leaving -= {later.leaving}
            records = [r for r in taken if r is not None]
            if records or not done:
                return self.apply(ControllerResult(records))
        return self.fence_stale_brokers(max_records)

    def fence_stale_brokers(self, max_records: int | None = SLICE_RECORDS) -> Applied | None:
        """The next slice of fencing the brokers whose leases ran out, applied: at most
        ``max_records`` partitions looked at, and so records written (None: no bound), or
        None when nobody is left to fence. A slice may write nothing, when the partitions it
        looked at needed no change.

        Kafka's periodic maybeFenceStaleBroker fences one broker at a time, its leaderships
        moved away and then its FenceBrokerRecord. The brokers whose leases have run out when
        a pass begins are fenced together, in that order: one change per partition they are
        in, then their FenceBrokerRecords, written as a non-atomic result. A fleet that died
        together thus costs one pass over its partitions, not one per broker. Each slice is
        built on the state the previous ones left, so requests may be served between slices;
        the caller asks again at once while this returns records."""
        while True:
            if self._fencing is None:
                expired = self.cluster.expired_brokers(self.clock.now_ms())
                if not expired:
                    return None
                self.timed_out_heartbeats += len(expired)
                for broker_id in expired:
                    event_log.session_expired(broker_id)
                self._fencing = self._fence(expired)
            taken = list(islice(self._fencing, max_records))
            if max_records is None or len(taken) < max_records:
                self._fencing = None
            records = [r for r in taken if r is not None]
            if records or self._fencing is not None:
                return self.apply(ControllerResult(records))

    def _fence(self, brokers: list[int]) -> Iterator[VersionedRecord | None]:
        """Move the leaderships of ``brokers`` away, then fence them, lazily. A broker that is
        fenced, registers again or goes away meanwhile is left alone from then on."""
        epochs = {b: self.cluster.brokers[b].epoch for b in brokers}
        self.cluster.leaving |= set(brokers)

        def unchanged(broker_id: int) -> bool:
            broker = self.cluster.brokers.get(broker_id)
            return broker is not None and broker.epoch == epochs[broker_id] and not broker.fenced
        try:
            yield from self.leadership.fencing_moves(brokers, unchanged)
            for broker_id in brokers:
                if unchanged(broker_id):
                    yield self.cluster.fence_record(broker_id)
        finally:
            self.cluster.leaving -= set(brokers)

    def write_no_op(self) -> Applied:
        """KIP-835: the active controller appends a record even when nothing changes, so that
        brokers and standbys see the committed offset advance while it is alive. Every
        metadata version kraftwire supports (3.3-IV3 and later) has NoOpRecord."""
        return self.apply(ControllerResult([(NoOpRecord(), 0)]))

    def _steps(self, steps: list[Callable[[], ControllerResult]]) -> Applied:
        """Run dependent parts of one command in order, each built on the state the previous
        ones left, so that two parts never write conflicting changes to one partition."""
        base = self.offsets.next_offset
        records: list[VersionedRecord] = []
        response = None
        try:
            for step in steps:
                applied = self.apply(step())
                records += applied.records
                if applied.response is not None:
                    response = applied.response
        except BaseException:
            self.offsets.revert_to(base)
            raise
        return Applied(records, base, response)

    def assign_replicas_to_dirs(self, req: AssignReplicasToDirsRequest, version: int) -> Applied:
        assignment = assign_replicas_to_dirs(req, self.cluster, self.replication, self.features)
        # The directory records go first: the ISR changes for offline directories are then
        # built on partitions that already name the directory.
        return self._steps([
            lambda: assignment.result,
            lambda: ControllerResult(self.leadership.move_leadership_away(
                req.broker_id, only=assignment.offline))])

    def allocate_producer_ids(self, req: AllocateProducerIdsRequest, version: int) -> Applied:
        return self.apply(self.producer_ids.allocate(req))

    def update_features(self, req: UpdateFeaturesRequest, version: int) -> Applied:
        ranges = [b.features for b in self.cluster.brokers.values()]
        return self.apply(self.features.update_features(req, version, ranges))

    # --- ACLs and SCRAM credentials -----------------------------------------------------------
    def create_acls(self, req: CreateAclsRequest, version: int) -> Applied:
        return self.apply(self.acls.create_acls(req))

    def delete_acls(self, req: DeleteAclsRequest, version: int) -> Applied:
        return self.apply(self.acls.delete_acls(req))

    def describe_acls(self, req: DescribeAclsRequest, version: int) -> Message:
        return self.acls.describe_acls(req)

    def alter_user_scram_credentials(self, req: AlterUserScramCredentialsRequest, version: int) -> Applied:
        return self.apply(self.scram.alter(req))

    def alter_client_quotas(self, req: AlterClientQuotasRequest, version: int) -> Applied:
        return self.apply(self.quotas.alter(req))

    def describe_client_quotas(self, req: DescribeClientQuotasRequest, version: int) -> Message:
        return self.quotas.describe(req)

    def create_delegation_token(self, req: CreateDelegationTokenRequest, version: int,
                                who: TokenRequester) -> Applied:
        return self.apply(self.delegation_tokens.create(req, who, self.clock.wall_ms(), self.features.metadata_version,
                                                        version))

    def renew_delegation_token(self, req: RenewDelegationTokenRequest, version: int,
                               who: TokenRequester) -> Applied:
        return self.apply(self.delegation_tokens.renew(req, who, self.clock.wall_ms(), self.features.metadata_version))

    def expire_delegation_token(self, req: ExpireDelegationTokenRequest, version: int,
                                who: TokenRequester) -> Applied:
        return self.apply(self.delegation_tokens.expire(req, who, self.clock.wall_ms(), self.features.metadata_version))

    def describe_delegation_token(self, req: DescribeDelegationTokenRequest, version: int,
                                  who: TokenRequester) -> Message:
        return self.delegation_tokens.describe(req, who, self.features.metadata_version, version)

    def describe_user_scram_credentials(self, req: DescribeUserScramCredentialsRequest, version: int) -> Message:
        return self.scram.describe(req)

    # --- topics, partitions, configs ----------------------------------------------------------
    def create_topics(self, req: CreateTopicsRequest, version: int) -> Applied:
        result = self.topic_admin.create_topics(req, version)
        if isinstance(result.response, CreateTopicsResponse):
            event_log.create_topics(result.response, req.validate_only)
        return self.apply(result)

    def delete_topics(self, req: DeleteTopicsRequest, version: int) -> Applied:
        return self.apply(self.topic_admin.delete_topics(req, version))

    def create_partitions(self, req: CreatePartitionsRequest, version: int) -> Applied:
        return self.apply(self.topic_admin.create_partitions(req, version))

    def alter_partition(self, req: AlterPartitionRequest, version: int) -> Applied:
        return self.apply(self.replication.alter_partition(req, version))

    def elect_leaders(self, req: ElectLeadersRequest, version: int) -> Applied:
        return self.apply(self.replication.elect_leaders(req, version))

    def alter_reassignments(self, req: AlterPartitionReassignmentsRequest, version: int) -> Applied:
        result = self.replication.alter_reassignments(req)
        if isinstance(result.response, AlterPartitionReassignmentsResponse):
            event_log.alter_reassignments(result.response)
        return self.apply(result)

    def incremental_alter_configs(self, req: IncrementalAlterConfigsRequest, version: int) -> Applied:
        return self.apply(self.configs.incremental_alter_configs(
            req, version, self._topic_exists, self._broker_exists))

    def alter_configs(self, req: AlterConfigsRequest, version: int) -> Applied:
        return self.apply(self.configs.alter_configs(req, version, self._topic_exists, self._broker_exists))

    def _topic_exists(self, name: str) -> bool:
        return name in self.replication.names

    def _broker_exists(self, broker_id: int) -> bool:
        """A registered broker or a controller, as Kafka's existence check for configs."""
        return (broker_id in self.cluster.brokers or broker_id == self.node_id
                or broker_id in self.cluster.controllers)

    # --- reads -----------------------------------------------------------------------------
    def list_reassignments(self, req: ListPartitionReassignmentsRequest, version: int) -> Message:
        return self.replication.list_reassignments(req)

    def metadata(self, req: MetadataRequest, version: int) -> Message:
        return self.views.metadata(req, version, self.cluster_id)

    def describe_topic_partitions(self, req: DescribeTopicPartitionsRequest, version: int) -> Message:
        return self.views.describe_topic_partitions(req, self.configs.max_request_partition_size_limit())

    def describe_configs(self, req: DescribeConfigsRequest, version: int) -> Message:
        return self.configs.describe_configs(req, version, self._topic_exists, self._broker_exists)

    def find_coordinator(self, req: FindCoordinatorRequest, version: int) -> Message:
        """Refused for good, so that a consumer bootstrapped here stops rather than asks forever."""
        return refuse_find_coordinator(req, version, COORDINATES_NOTHING)

    def describe_cluster(self, req: DescribeClusterRequest, version: int) -> DescribeClusterResponse:
        response = DescribeClusterResponse(cluster_id=self.cluster_id, controller_id=self.active_controller_id,
                                           endpoint_type=req.endpoint_type if version >= 1 else EndpointType.BROKER)
        if version >= 1 and req.endpoint_type == EndpointType.CONTROLLER:
            response.brokers = [DescribeClusterBroker(broker_id=cid, host=e.host, port=e.port)
                                for cid, e in self._controller_endpoints()]
        elif version >= 1 and req.endpoint_type != EndpointType.BROKER:
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
        """The controllers a client may talk to: those that registered (Kafka's controllers
        send ControllerRegistration), and every voter, where it registered or else where the
        voter set says it listens (kraftwire's voters do not register, and a client must find
        the leader DescribeCluster names among the controllers it lists)."""
        found = dict(self.voter_endpoints())
        found.update((c.controller_id, c.endpoints[0]) for c in self.cluster.controllers.values() if c.endpoints)
        if found:
            return sorted(found.items())
        return [(self.node_id, e) for e in self.controller_endpoints[:1]]

    def set_active_controller(self, node_id: int) -> None:
        """A quorum's leader changed (-1: none known yet): Metadata and DescribeCluster name it
        as the controller, as Kafka's ControllerApis names the Raft leader, so clients that asked
        a standby go to the active one."""
        self.active_controller_id = max(node_id, -1)

    def forget_active_controller(self) -> None:
        """This node led a quorum and resigned: until a leader is known it names none rather
        than itself, so that clients look for the new one."""
        self.active_controller_id = -1

    def active_controller(self) -> tuple[int, Endpoint | None]:
        """Who leads and where it listens: the endpoint it registered, else the one the voter
        set gives (looked up at each call: a standby learns a dynamic quorum's voters from the
        log, after it learnt who leads)."""
        node_id = self.active_controller_id
        if node_id < 0:
            return -1, None
        registered = self.cluster.controllers.get(node_id)
        if registered is not None and registered.endpoints:
            return node_id, registered.endpoints[0]
        endpoint = self.voter_endpoints().get(node_id)
        if endpoint is None and node_id == self.node_id and self.controller_endpoints:
            endpoint = self.controller_endpoints[0]
        return node_id, endpoint

    def supported_features(self) -> list[SupportedFeatureKey]:
        return [SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                for n, (lo, hi) in SUPPORTED_FEATURES.items()]

    def finalized_features(self) -> list[FinalizedFeatureKey]:
        """The FeatureLevelRecords' levels and kraft.version, which is the quorum's
        (KRaftVersionRecord), left out at 0 as Kafka's controllers leave it out."""
        levels = dict(self.features.finalized)
        if self.quorum.kraft_version:
            levels[KRAFT_VERSION] = self.quorum.kraft_version
        return [FinalizedFeatureKey(name=n, max_version_level=lvl, min_version_level=lvl)
                for n, lvl in levels.items()]

    # --- snapshots -------------------------------------------------------------------------
    def snapshot_records(self) -> Iterable[VersionedRecord]:
        """The state as records; the quorum's control messages come first, as a snapshot's
        header batch carries them."""
        from protocol.generated.metadata.feature_level_record import FeatureLevelRecord

        yield from self.quorum.snapshot_records()
        for name, level in sorted(self.features.finalized.items()):
            yield FeatureLevelRecord(name=name, feature_level=level), 0
        yield from self.cluster.snapshot_records()
        yield from self.configs.snapshot_records()
        yield from self.replication.snapshot_records()
        yield from self.producer_ids.snapshot_records()
        yield from self.acls.snapshot_records()
        yield from self.quotas.snapshot_records()
        yield from self.scram.snapshot_records()
        yield from self.delegation_tokens.snapshot_records()
