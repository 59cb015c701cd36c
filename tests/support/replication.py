"""The replication tests' in-process cluster: QuorumController driven directly with a
ManualClock, every record kept in a journal so a test can replay it into a fresh controller."""

from __future__ import annotations

from protocol.constants import LeaderRecoveryState
from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic)
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest)
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsTopics)
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import random_uuid
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.clock import ManualClock
from server.controller.cluster import Endpoint
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import ControllerResult

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
CONTROLLER_ID = 3000
SESSION_MS = 9000
MV_LATEST = 25
CONTROLLER_ENDPOINT = Endpoint("CONTROLLER", "127.0.0.1", 9093, 0)
NO_CHANGE = -2  # PartitionChangeRecord.leader when the leader does not change


class Cluster:
    """A QuorumController with brokers, its clock, and the journal of every record it produced."""

    def __init__(self, *, min_isr: int = 1, unclean: bool = False, elr: bool = False,
                 metadata_version: int = MV_LATEST, limit: int = 2000,
                 lists_brokers: bool = False) -> None:
        self.static = {
            "min.insync.replicas": str(min_isr),
            "unclean.leader.election.enable": str(unclean).lower(),
            "eligible.leader.replicas.enabled": str(elr).lower(),
            "max.request.partition.size.limit": str(limit),
        }
        self.lists_brokers = lists_brokers
        self.clock = ManualClock()
        self.qc = self.new_controller()
        self.journal: list[tuple[int, object, int]] = []
        self.run(self.qc.apply(ControllerResult(
            [(FeatureLevelRecord(name="metadata.version", feature_level=metadata_version), 0)])))
        self.qc.activate()
        self.epochs: dict[int, int] = {}

    def new_controller(self) -> QuorumController:
        return QuorumController(CLUSTER_ID, CONTROLLER_ID, self.clock, session_timeout_ms=SESSION_MS,
                                controller_endpoints=[CONTROLLER_ENDPOINT], static_configs=self.static,
                                metadata_lists_brokers=self.lists_brokers)

    def run(self, applied: Applied) -> Applied:
        for i, (record, version) in enumerate(applied.records):
            self.journal.append((applied.base_offset + i, record, version))
        return applied

    # --- brokers ------------------------------------------------------------------------------
    def register(self, broker_id: int, *, rack: str | None = None, previous_epoch: int = -1) -> Applied:
        applied = self.run(self.qc.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=random_uuid(),
            listeners=[Listener(name="PLAINTEXT", host=f"broker-{broker_id}.test", port=9000 + broker_id,
                                security_protocol=0)],
            features=[Feature(name="metadata.version", min_supported_version=7,
                              max_supported_version=MV_LATEST)],
            rack=rack, log_dirs=[random_uuid(), random_uuid()], previous_broker_epoch=previous_epoch), 4))
        assert applied.response.error_code == Error.NONE
        self.epochs[broker_id] = applied.response.broker_epoch
        return applied

    def heartbeat(self, broker_id: int, *, want_fence: bool = False, want_shut_down: bool = False) -> Applied:
        return self.run(self.qc.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id],
            current_metadata_offset=self.qc.last_applied_offset,
            want_fence=want_fence, want_shut_down=want_shut_down), 1))

    def add_broker(self, broker_id: int, rack: str | None = None) -> Applied:
        """Register and unfence; returns the unfencing heartbeat."""
        self.register(broker_id, rack=rack)
        applied = self.heartbeat(broker_id)
        assert applied.response.is_fenced is False
        return applied

    def brokers(self, *ids: int, racks: dict[int, str] | None = None) -> None:
        for b in ids:
            self.add_broker(b, (racks or {}).get(b))

    def unfence(self, broker_id: int) -> Applied:
        applied = self.heartbeat(broker_id)
        assert applied.response.is_fenced is False
        return applied

    def alive(self) -> list[int]:
        return sorted(b.broker_id for b in self.qc.cluster.brokers.values() if not b.fenced)

    def expire(self, *victims: int) -> Applied:
        """Let the lease of each of ``victims`` run out, one after the other, while every other
        live broker heartbeats; returns what fencing the last one wrote."""
        for victim in victims:
            self.clock.advance(SESSION_MS)
            for b in self.alive():
                if b != victim:
                    self.heartbeat(b)
            self.clock.advance(1)
            applied = self.run(self.qc.fence_expired_brokers())
            assert self.qc.cluster.brokers[victim].fenced
        return applied

    def shut_down(self, broker_id: int) -> Applied:
        return self.heartbeat(broker_id, want_shut_down=True)

    def unregister(self, broker_id: int) -> Applied:
        return self.run(self.qc.unregister_broker(UnregisterBrokerRequest(broker_id=broker_id), 0))

    # --- topics -------------------------------------------------------------------------------
    def create(self, name: str, assignments: list[list[int]] | None = None, *, partitions: int = -1,
               rf: int = -1, configs: dict[str, str] | None = None, version: int = 7,
               validate_only: bool = False) -> Applied:
        topic = CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf,
            assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=list(r))
                         for i, r in enumerate(assignments or [])],
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        return self.run(self.qc.create_topics(
            CreateTopicsRequest(topics=[topic], validate_only=validate_only), version))

    def topic(self, name: str, assignments: list[list[int]] | None = None, **kw) -> bytes:
        """Create a topic that must succeed; returns its id."""
        applied = self.create(name, assignments, **kw)
        result = applied.response.topics[0]
        assert result.error_code == Error.NONE, result.error_message
        return self.qc.replication.names[name]

    def delete(self, *names: str, version: int = 5) -> Applied:
        return self.run(self.qc.delete_topics(DeleteTopicsRequest(topic_names=list(names)), version))

    def part(self, name: str, index: int = 0):
        return self.qc.replication.topics[self.qc.replication.names[name]].partitions[index]

    def set_topic_config(self, name: str, key: str, value: str) -> None:
        applied = self.run(self.qc.incremental_alter_configs(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=2, resource_name=name, configs=[
                AlterableConfig(name=key, config_operation=0, value=value)])]), 1))
        assert applied.response.responses[0].error_code == Error.NONE

    # --- partition changes --------------------------------------------------------------------
    def alter(self, broker_id: int, name: str, index: int, isr: list[int], *, version: int = 3,
              recovery: int = LeaderRecoveryState.RECOVERED, leader_epoch: int | None = None,
              partition_epoch: int | None = None, broker_epoch: int | None = None,
              isr_epochs: dict[int, int] | None = None):
        """AlterPartition from ``broker_id``; returns (applied, the partition's result)."""
        p = self.part(name, index)
        data = PartitionData(
            partition_index=index,
            leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
            partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
            leader_recovery_state=recovery)
        if version >= 3:
            data.new_isr_with_epochs = [BrokerState(broker_id=b, broker_epoch=(isr_epochs or {}).get(
                b, self.epochs.get(b, -1))) for b in isr]
        else:
            data.new_isr = list(isr)
        topic_id = self.qc.replication.names[name]
        request = AlterPartitionRequest(
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id] if broker_epoch is None else broker_epoch,
            topics=[TopicData(topic_name=name if version < 2 else "",
                              topic_id=topic_id if version >= 2 else b"\0" * 16, partitions=[data])])
        applied = self.run(self.qc.alter_partition(request, version))
        response = applied.response
        if response.error_code != Error.NONE:
            return applied, None
        return applied, response.topics[0].partitions[0]

    def elect(self, election_type: int, wanted: dict[str, list[int]] | None, version: int = 2) -> Applied:
        topics = None if wanted is None else [TopicPartitions(topic=t, partitions=ps) for t, ps in wanted.items()]
        return self.run(self.qc.elect_leaders(
            ElectLeadersRequest(election_type=election_type, topic_partitions=topics), version))

    def reassign(self, name: str, index: int, target: list[int] | None) -> Applied:
        applied = self.run(self.qc.alter_reassignments(AlterPartitionReassignmentsRequest(topics=[
            ReassignableTopic(name=name, partitions=[
                ReassignablePartition(partition_index=index, replicas=target)])]), 0))
        return applied

    def list_reassignments(self, wanted: dict[str, list[int]] | None = None) -> dict:
        topics = None if wanted is None else [
            ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in wanted.items()]
        response = self.qc.list_reassignments(ListPartitionReassignmentsRequest(topics=topics), 0)
        assert response.error_code == Error.NONE
        return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
                for t in response.topics for p in t.partitions}

    # --- comparing state ----------------------------------------------------------------------
    def replayed(self) -> QuorumController:
        """A fresh controller fed the journal, each record through its log encoding."""
        fresh = self.new_controller()
        for offset, record, version in self.journal:
            decoded, decoded_version = parse_metadata_record(frame_metadata_record(record, version))
            assert decoded_version == version
            fresh.replay(decoded, offset)
        return fresh

    def from_snapshot(self) -> QuorumController:
        fresh = self.new_controller()
        end = self.qc.next_offset
        for record, version in list(self.qc.snapshot_records()):
            decoded, _ = parse_metadata_record(frame_metadata_record(record, version))
            fresh.replay(decoded, end - 1)
        return fresh


def view(qc: QuorumController) -> dict:
    """Everything replication control keeps, as plain values, indexes included."""
    r = qc.replication
    topics = {}
    for topic_id, t in r.topics.items():
        topics[t.name] = (topic_id, [
            (p.partition_id, list(p.replicas), list(p.isr), p.leader, p.leader_epoch, p.partition_epoch,
             list(p.removing), list(p.adding), p.recovery, list(p.elr), list(p.last_known_elr))
            for p in t.partitions])
    isr_of = {b: sorted((r.topics[p.topic_id].name, p.partition_id) for p in ps)
              for b, ps in r.isr_of.items() if ps}
    leaderless = sorted((r.topics[p.topic_id].name, p.partition_id) for p in r.leaderless)
    reassigning = sorted((r.topics[p.topic_id].name, p.partition_id) for p in r.reassigning)
    return {"topics": topics, "isr_of": isr_of, "leaderless": leaderless, "reassigning": reassigning,
            "names": dict(r.names), "count": r.partition_count}


def without_epochs(qc: QuorumController) -> dict:
    """``view`` without leader and partition epochs: skipping a transient leader writes fewer
    changes, and every change counts in those."""
    v = view(qc)
    v["topics"] = {name: (topic_id, [p[:4] + p[6:] for p in parts]) for name, (topic_id, parts) in v["topics"].items()}
    return v


def assert_replays(c: Cluster) -> None:
    """The log and the snapshot each rebuild exactly the state the commands produced."""
    expected = view(c.qc)
    assert view(c.replayed()) == expected
    assert view(c.from_snapshot()) == expected
