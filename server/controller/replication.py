"""Replication control: topics, partitions, ISR, elections and reassignments.

Replayed state: topics and their partitions. Derived indexes (kept by replay only): which
partitions each broker is in the ISR of, which partitions have no leader, and which are
being reassigned, so that fencing a broker or listing reassignments never scans every
partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from protocol.generated.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse)
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest
from protocol.generated.messages.alter_partition_response import AlterPartitionResponse
from protocol.generated.messages.alter_partition_response import PartitionData as AlterPartitionResult
from protocol.generated.messages.alter_partition_response import TopicData as AlterPartitionTopicResult
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.elect_leaders_response import (
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult)
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment)
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.remove_topic_record import RemoveTopicRecord
from protocol.generated.metadata.topic_record import TopicRecord
from server.controller.cluster import ClusterControl
from server.controller.configs import ConfigControl
from server.controller.features import FeatureControl
from server.controller.offsets import OffsetControl, restore_attrs, restore_key
from server.controller.partitions import (
    NO_LEADER, RECOVERED, RECOVERING, Election, PartitionChange, PartitionState)
from server.controller.result import ControllerResult, VersionedRecord

PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1


@dataclass
class TopicState:
    name: str
    topic_id: bytes
    partitions: list[PartitionState] = field(default_factory=list)


class ReplicationControl:
    def __init__(self, cluster: ClusterControl, features: FeatureControl, configs: ConfigControl,
                 offsets: OffsetControl | None = None) -> None:
        self.offsets = offsets or OffsetControl()
        self.cluster = cluster
        self.features = features
        self.configs = configs
        self.topics: dict[bytes, TopicState] = {}
        self.names: dict[str, bytes] = {}
        self.isr_of: dict[int, set[PartitionState]] = {}
        self.leaderless: set[PartitionState] = set()
        self.reassigning: set[PartitionState] = set()
        self.partition_count = 0

    # --- replay ------------------------------------------------------------------------------
    def replay_topic(self, rec: TopicRecord) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.topics, rec.topic_id))
            self.offsets.on_undo(restore_key(self.names, rec.name))
        self.topics[rec.topic_id] = TopicState(rec.name, rec.topic_id)
        self.names[rec.name] = rec.topic_id

    def replay_partition(self, rec: PartitionRecord) -> None:
        topic = self.topics[rec.topic_id]
        p = PartitionState.from_record(rec)
        if rec.partition_id < len(topic.partitions):
            old = topic.partitions[rec.partition_id]
            self._unindex(old)
            topic.partitions[rec.partition_id] = p
            if self.offsets.recording:
                self.offsets.on_undo(lambda: self._put_partition(topic, old))
        else:
            topic.partitions.append(p)
            self.partition_count += 1
            if self.offsets.recording:
                self.offsets.on_undo(lambda: self._drop_last_partition(topic))
        self._index(p)

    def _put_partition(self, topic: TopicState, p: PartitionState) -> None:
        self._unindex(topic.partitions[p.partition_id])
        topic.partitions[p.partition_id] = p
        self._index(p)

    def _drop_last_partition(self, topic: TopicState) -> None:
        self._unindex(topic.partitions.pop())
        self.partition_count -= 1

    def replay_partition_change(self, rec: PartitionChangeRecord) -> None:
        p = self.topics[rec.topic_id].partitions[rec.partition_id]
        if self.offsets.recording:
            restore = restore_attrs(p, PartitionState.__slots__)

            def undo() -> None:
                self._unindex(p)
                restore()
                self._index(p)
            self.offsets.on_undo(undo)
        self._unindex(p)
        p.apply_change(rec)
        self._index(p)

    def replay_remove_topic(self, rec: RemoveTopicRecord) -> None:
        topic = self.topics.pop(rec.topic_id)
        del self.names[topic.name]
        for p in topic.partitions:
            self._unindex(p)
        self.partition_count -= len(topic.partitions)
        if self.offsets.recording:
            self.offsets.on_undo(lambda: self._restore_topic(topic))
        self.configs.forget_topic(topic.name)

    def _restore_topic(self, topic: TopicState) -> None:
        self.topics[topic.topic_id] = topic
        self.names[topic.name] = topic.topic_id
        for p in topic.partitions:
            self._index(p)
        self.partition_count += len(topic.partitions)

    def _index(self, p: PartitionState) -> None:
        for b in p.isr:
            self.isr_of.setdefault(b, set()).add(p)
        if p.leader == NO_LEADER:
            self.leaderless.add(p)
        if p.reassigning:
            self.reassigning.add(p)

    def _unindex(self, p: PartitionState) -> None:
        for b in p.isr:
            members = self.isr_of.get(b)
            if members is not None:
                members.discard(p)
        self.leaderless.discard(p)
        self.reassigning.discard(p)

    # --- building changes ----------------------------------------------------------------------
    def change(self, p: PartitionState, usable: Callable[[int], bool] | None = None) -> PartitionChange:
        name = self.topics[p.topic_id].name
        return PartitionChange(
            p, usable or self.cluster.is_usable,
            min_isr=self.configs.min_insync_replicas(name),
            elr_enabled=self.configs.elr_enabled(name),
            unclean_allowed=self.configs.unclean_leader_election(name),
            record_version=self.features.partition_record_version())

    def _record(self, change: PartitionChange) -> list[VersionedRecord]:
        rec = change.build()
        return [] if rec is None else [(rec, change.version)]

    # --- leadership, as the broker lifecycle needs it -----------------------------------------
    def leads_any(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for p in self.isr_of.get(broker_id, ()))

    def move_leadership_away(self, broker_id: int, fencing: bool,
                             only: Iterable[PartitionState] | None = None) -> list[VersionedRecord]:
        """Take ``broker_id`` out of every ISR (or those of ``only``) and elect new leaders
        where it led.

        Without eligible leader replicas the last ISR member stays in the ISR (the partition
        goes leaderless), so that it can lead again when it comes back; with them enabled the
        ISR may empty and the member is remembered in the ELR instead.
        """
        def usable(b: int) -> bool:
            return b != broker_id and self.cluster.is_usable(b)

        records: list[VersionedRecord] = []
        members = self.isr_of.get(broker_id, set())
        for p in sorted(members if only is None else members.intersection(only), key=_order):
            change = self.change(p, usable)
            remaining = [r for r in p.isr if r != broker_id]
            if remaining or change.elr_enabled:
                change.isr = remaining
            records += self._record(change)
        return records

    def elect_after_unfence(self, broker_id: int) -> list[VersionedRecord]:
        """A broker coming back may lead the partitions that had no leader without it."""
        def usable(b: int) -> bool:
            return b == broker_id or self.cluster.is_usable(b)

        records: list[VersionedRecord] = []
        for p in sorted(self.leaderless, key=_order):
            if broker_id in p.replicas:
                records += self._record(self.change(p, usable))
        return records

    def forget_unclean_broker(self, broker_id: int) -> list[VersionedRecord]:
        """KIP-966: a broker that did not shut down cleanly may have lost unflushed data, so it
        is no longer an eligible leader anywhere."""
        records: list[VersionedRecord] = []
        if self.features.partition_record_version() < 2:
            return records
        for topic in self.topics.values():
            for p in topic.partitions:
                if broker_id in p.elr:
                    elr = [r for r in p.elr if r != broker_id]
                    rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id,
                                                eligible_leader_replicas=elr)
                    if not elr:
                        rec.last_known_elr = list(p.elr)
                    records.append((rec, 2))
        return records

    # --- AlterPartition ------------------------------------------------------------------------
    def alter_partition(self, req: AlterPartitionRequest, version: int) -> ControllerResult:
        broker = self.cluster.brokers.get(req.broker_id)
        if broker is None or (req.broker_epoch != -1 and req.broker_epoch != broker.epoch):
            return ControllerResult([], AlterPartitionResponse(error_code=Error.STALE_BROKER_EPOCH))
        records: list[VersionedRecord] = []
        response = AlterPartitionResponse()
        for t in req.topics:
            topic_id = t.topic_id if version >= 2 else self.names.get(t.topic_name)
            topic = self.topics.get(topic_id) if topic_id is not None else None
            out = AlterPartitionTopicResult(topic_name=t.topic_name, topic_id=t.topic_id)
            response.topics.append(out)
            for pd in t.partitions:
                if topic is None:
                    code = Error.UNKNOWN_TOPIC_ID if version >= 2 else Error.UNKNOWN_TOPIC_OR_PARTITION
                    out.partitions.append(AlterPartitionResult(partition_index=pd.partition_index, error_code=code))
                    continue
                result, recs = self._alter_one(req.broker_id, topic, pd, version)
                out.partitions.append(result)
                records += recs
        return ControllerResult(records, response)

    def _alter_one(self, broker_id: int, topic: TopicState, pd, version: int
                   ) -> tuple[AlterPartitionResult, list[VersionedRecord]]:
        def fail(code: int) -> tuple[AlterPartitionResult, list[VersionedRecord]]:
            return AlterPartitionResult(partition_index=pd.partition_index, error_code=code), []

        if not 0 <= pd.partition_index < len(topic.partitions):
            return fail(Error.UNKNOWN_TOPIC_OR_PARTITION)
        p = topic.partitions[pd.partition_index]
        if p.leader != broker_id:
            return fail(Error.NOT_LEADER_OR_FOLLOWER)
        if pd.leader_epoch != p.leader_epoch:
            return fail(Error.FENCED_LEADER_EPOCH)
        if pd.partition_epoch != p.partition_epoch:
            return fail(Error.INVALID_UPDATE_VERSION)
        if version >= 3:
            new_isr = [s.broker_id for s in pd.new_isr_with_epochs]
            epochs = {s.broker_id: s.broker_epoch for s in pd.new_isr_with_epochs}
        else:
            new_isr = list(pd.new_isr)
            epochs = {}
        if len(set(new_isr)) != len(new_isr) or any(r not in p.replicas for r in new_isr) or broker_id not in new_isr:
            return fail(Error.INVALID_REQUEST)
        requested_recovery = pd.leader_recovery_state if version >= 1 else RECOVERED
        if requested_recovery == RECOVERING and len(new_isr) > 1:
            return fail(Error.INVALID_REQUEST)  # KIP-704: no ISR growth before recovery ends
        if p.recovery == RECOVERED and requested_recovery == RECOVERING:
            return fail(Error.INVALID_REQUEST)
        for r in new_isr:
            if r not in p.isr:
                b = self.cluster.brokers.get(r)
                stale = r in epochs and epochs[r] != -1 and b is not None and epochs[r] != b.epoch
                if not self.cluster.is_usable(r) or stale:
                    return fail(Error.INELIGIBLE_REPLICA if version >= 1 else Error.OPERATION_NOT_ATTEMPTED)
        change = self.change(p)
        change.isr = new_isr
        change.recovery = requested_recovery
        if p.reassigning and all(r in new_isr for r in p.target_replicas()):
            # The ISR now holds every target: the reassignment completes here (seed 000), and
            # the ISR applied is the target part of the one requested.
            change.replicas = p.target_replicas()
            change.isr = [r for r in new_isr if r in change.replicas]
            change.removing, change.adding = [], []
        records = self._record(change)
        leader = change.leader
        if leader != broker_id:
            code = Error.NEW_LEADER_ELECTED
        else:
            code = Error.NONE
        epoch_bump = 1 if records and records[0][0].leader != -2 else 0
        return AlterPartitionResult(
            partition_index=pd.partition_index, error_code=code, leader_id=leader,
            leader_epoch=p.leader_epoch + epoch_bump, isr=change.isr_after,
            leader_recovery_state=change.recovery if records else p.recovery,
            partition_epoch=p.partition_epoch + (1 if records else 0)), records

    # --- ElectLeaders ------------------------------------------------------------------------
    def elect_leaders(self, req: ElectLeadersRequest, version: int) -> ControllerResult:
        election_type = req.election_type if version >= 1 else PREFERRED_ELECTION
        if req.topic_partitions is None:
            wanted = [(t.name, p.partition_id) for t in self.topics.values() for p in t.partitions]
            wanted.sort()
        else:
            wanted = [(tp.topic, pid) for tp in req.topic_partitions for pid in tp.partitions]
        records: list[VersionedRecord] = []
        results: dict[str, ReplicaElectionResult] = {}
        for name, pid in wanted:
            code, message, recs = self._elect_one(name, pid, election_type)
            records += recs
            entry = results.setdefault(name, ReplicaElectionResult(topic=name))
            entry.partition_result.append(PartitionResult(partition_id=pid, error_code=code, error_message=message))
        if req.topic_partitions is None:
            # "All partitions" reports only those whose election was needed, as Kafka does.
            # A topic left with no partition to report is not listed at all.
            for entry in results.values():
                entry.partition_result = [r for r in entry.partition_result
                                          if r.error_code != Error.ELECTION_NOT_NEEDED]
            return ControllerResult(records, ElectLeadersResponse(
                replica_election_results=[e for e in results.values() if e.partition_result]))
        return ControllerResult(records, ElectLeadersResponse(replica_election_results=list(results.values())))

    def _elect_one(self, name: str, pid: int, election_type: int) -> tuple[int, str | None, list[VersionedRecord]]:
        topic_id = self.names.get(name)
        if topic_id is None or not 0 <= pid < len(self.topics[topic_id].partitions):
            return Error.UNKNOWN_TOPIC_OR_PARTITION, "no such partition", []
        p = self.topics[topic_id].partitions[pid]
        change = self.change(p)
        if election_type == PREFERRED_ELECTION:
            if p.leader == p.replicas[0]:
                return Error.ELECTION_NOT_NEEDED, "the preferred replica already leads", []
            change.election = Election.PREFERRED
            recs = self._record(change)
            if change.leader != p.replicas[0]:
                return Error.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR or not live", []
            return Error.NONE, None, recs
        if election_type != UNCLEAN_ELECTION:
            return Error.INVALID_REQUEST, f"unknown election type {election_type}", []
        if p.leader != NO_LEADER and self.cluster.is_usable(p.leader):
            return Error.ELECTION_NOT_NEEDED, "the partition has a live leader", []
        change.election = Election.UNCLEAN
        recs = self._record(change)
        if change.leader == NO_LEADER:
            return Error.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica can lead", []
        return Error.NONE, None, recs

    # --- reassignments -------------------------------------------------------------------------
    def alter_reassignments(self, req: AlterPartitionReassignmentsRequest) -> ControllerResult:
        records: list[VersionedRecord] = []
        response = AlterPartitionReassignmentsResponse()
        for t in req.topics:
            out = ReassignableTopicResponse(name=t.name)
            response.responses.append(out)
            for rp in t.partitions:
                code, message, recs = self._reassign_one(t.name, rp.partition_index, rp.replicas)
                records += recs
                out.partitions.append(ReassignablePartitionResponse(
                    partition_index=rp.partition_index, error_code=code, error_message=message))
        return ControllerResult(records, response)

    def _reassign_one(self, name: str, pid: int, target: list[int] | None
                      ) -> tuple[int, str | None, list[VersionedRecord]]:
        topic_id = self.names.get(name)
        if topic_id is None or not 0 <= pid < len(self.topics[topic_id].partitions):
            return Error.UNKNOWN_TOPIC_OR_PARTITION, "no such partition", []
        p = self.topics[topic_id].partitions[pid]
        change = self.change(p)
        if target is None:
            if not p.reassigning:
                return Error.NO_REASSIGNMENT_IN_PROGRESS, "nothing to cancel", []
            change.replicas, change.isr = _reverted(p)
            change.removing, change.adding = [], []
            return Error.NONE, None, self._record(change)
        if not target or len(set(target)) != len(target):
            return Error.INVALID_REPLICA_ASSIGNMENT, "the target must be non-empty without duplicates", []
        unknown = [b for b in target if b not in self.cluster.brokers]
        if unknown:
            return Error.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered", []
        # A new target replaces an ongoing reassignment: start from where reverting it leads.
        base, isr = _reverted(p) if p.reassigning else (p.replicas, p.isr)
        if all(r in p.isr for r in target):
            # Every target replica is already in sync: nothing to copy, complete at once.
            change.replicas = list(target)
            change.isr = [r for r in p.isr if r in target]
            change.removing, change.adding = [], []
        else:
            change.replicas = list(target) + [r for r in base if r not in target]
            change.isr = list(isr)
            change.adding = [r for r in target if r not in base]
            change.removing = [r for r in base if r not in target]
        return Error.NONE, None, self._record(change)

    def list_reassignments(self, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
        by_topic: dict[str, OngoingTopicReassignment] = {}
        if req.topics is None:
            chosen = sorted(self.reassigning, key=_order)
        else:
            chosen = []
            for t in req.topics:
                topic_id = self.names.get(t.name)
                if topic_id is None:
                    continue
                parts = self.topics[topic_id].partitions
                chosen += [parts[i] for i in t.partition_indexes if 0 <= i < len(parts) and parts[i].reassigning]
        for p in chosen:
            name = self.topics[p.topic_id].name
            entry = by_topic.setdefault(name, OngoingTopicReassignment(name=name))
            entry.partitions.append(OngoingPartitionReassignment(
                partition_index=p.partition_id, replicas=list(p.replicas),
                adding_replicas=list(p.adding), removing_replicas=list(p.removing)))
        return ListPartitionReassignmentsResponse(topics=list(by_topic.values()))

    # --- snapshots -------------------------------------------------------------------------
    def snapshot_records(self) -> Iterable[VersionedRecord]:
        version = self.features.partition_record_version()
        for topic in sorted(self.topics.values(), key=lambda t: t.name):
            yield TopicRecord(name=topic.name, topic_id=topic.topic_id), 0
            for p in topic.partitions:
                yield p.to_record(version), version


def _reverted(p: PartitionState) -> tuple[list[int], list[int]]:
    """Replicas and ISR once an ongoing reassignment is undone: without the replicas it was
    adding, unless those are the only ones in sync. Dropping them then would leave the
    partition with an empty ISR and no leader, so they stay (as in Kafka's revert)."""
    original = p.original_replicas()
    isr = [r for r in p.isr if r in original]
    if not isr:
        isr = list(p.isr)
        original += [r for r in p.adding if r in isr]
    return original, isr


def _order(p: PartitionState) -> tuple[bytes, int]:
    return p.topic_id, p.partition_id
