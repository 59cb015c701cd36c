"""Directory assignment in the state machine: the exact records Kafka's controller writes for
Kafka's own scenarios (ReplicationControlManagerTest's assignment and offline-directory
cases), and that reverting a command restores every placement."""

from __future__ import annotations

from protocol.constants import DIRECTORY_LOST, DIRECTORY_UNASSIGNED
from protocol.error_codes import Error
from protocol.generated.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest, DirectoryData, PartitionData, TopicData)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.primitives import random_uuid
from tests.support.harness import Harness, registration

B1, B2 = 101, 102
DIR1_B1, DIR2_B1, DIR1_B2, DIR2_B2, OFFLINE = (random_uuid() for _ in range(5))
RECORD_VERSION = 2  # PartitionChangeRecord at the latest metadata.version


class Cluster(Harness):
    def __init__(self) -> None:
        super().__init__()
        self.epochs = {}
        for broker_id, dirs in ((B1, [DIR1_B1, DIR2_B1]), (B2, [DIR1_B2, DIR2_B2])):
            request = registration(broker_id)
            request.log_dirs = dirs
            self.epochs[broker_id] = self.command("register_broker", request, 4).response.broker_epoch
            self.heartbeat(broker_id, self.epochs[broker_id])

    def topic(self, name: str, assignments: list[list[int]]) -> bytes:
        created = self.command("create_topics", CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1, assignments=[
                CreatableReplicaAssignment(partition_index=i, broker_ids=a) for i, a in enumerate(assignments)])]), 7)
        assert created.response.topics[0].error_code == Error.NONE
        return created.response.topics[0].topic_id

    def assign(self, broker_id: int, placements: list[tuple[bytes, bytes, int]]):
        by_dir: dict[bytes, dict[bytes, list[int]]] = {}
        for directory, topic_id, index in placements:
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(index)
        return self.command("assign_replicas_to_dirs", AssignReplicasToDirsRequest(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id], directories=[
                DirectoryData(id=d, topics=[TopicData(topic_id=t, partitions=[PartitionData(partition_index=i)
                                                                             for i in parts])
                                            for t, parts in topics.items()])
                for d, topics in by_dir.items()]), 0)

    def partition(self, topic_id: bytes, index: int):
        return self.qc.replication.topics[topic_id].partitions[index]


def change(topic_id: bytes, index: int, **fields) -> tuple[PartitionChangeRecord, int]:
    return PartitionChangeRecord(topic_id=topic_id, partition_id=index, **fields), RECORD_VERSION


def order(item: tuple[PartitionChangeRecord, int]) -> tuple[bytes, int, int]:
    return item[0].topic_id, item[0].partition_id, item[0].leader


def test_assignment_records_as_kafka_writes_them():
    c = Cluster()
    a = c.topic("a", [[B1, B2]] * 3)
    b = c.topic("b", [[B1, B2]] * 2)
    only_b2 = c.topic("c", [[B2]])
    unknown = random_uuid()
    applied = c.assign(B1, [(DIR1_B1, a, 0), (DIR2_B1, a, 1), (OFFLINE, a, 2), (DIR1_B1, b, 0), (DIRECTORY_LOST, b, 1),
                            (DIR2_B1, unknown, 1), (DIR1_B1, a, 137), (DIR1_B1, only_b2, 0)])
    codes = {(d.id, t.topic_id, p.partition_index): p.error_code
             for d in applied.response.directories for t in d.topics for p in t.partitions}
    assert codes == {(DIR1_B1, a, 0): Error.NONE, (DIR2_B1, a, 1): Error.NONE, (OFFLINE, a, 2): Error.NONE,
                     (DIR1_B1, b, 0): Error.NONE, (DIRECTORY_LOST, b, 1): Error.NONE,
                     (DIR2_B1, unknown, 1): Error.UNKNOWN_TOPIC_ID,
                     (DIR1_B1, a, 137): Error.UNKNOWN_TOPIC_OR_PARTITION,
                     (DIR1_B1, only_b2, 0): Error.NOT_LEADER_OR_FOLLOWER}
    # Each broker has two directories, so its new replicas start UNASSIGNED, as in Kafka: the
    # records are Kafka's, leader moves included.
    assert sorted(applied.records, key=order) == sorted([
        change(a, 0, directories=[DIR1_B1, DIRECTORY_UNASSIGNED]),
        change(a, 1, directories=[DIR2_B1, DIRECTORY_UNASSIGNED]),
        change(a, 2, directories=[OFFLINE, DIRECTORY_UNASSIGNED]),
        change(b, 0, directories=[DIR1_B1, DIRECTORY_UNASSIGNED]),
        change(b, 1, directories=[DIRECTORY_LOST, DIRECTORY_UNASSIGNED]),
        change(a, 2, isr=[B2], leader=B2),
        change(b, 1, isr=[B2], leader=B2),
    ], key=order)
    assert sorted(p.partition_id for p in c.qc.replication.isr_of[B1]) == [0, 0, 1]


def test_offline_directories_in_a_heartbeat_as_kafka_handles_them():
    c = Cluster()
    a = c.topic("a", [[B1, B2]] * 2)
    b = c.topic("b", [[B1, B2]] * 2)
    c.assign(B1, [(DIR1_B1, a, 0), (DIR2_B1, a, 1), (DIR1_B1, b, 0), (DIR2_B1, b, 1)])
    c.assign(B2, [(DIR1_B2, a, 0), (DIR2_B2, a, 1), (DIR1_B2, b, 0), (DIR2_B2, b, 1)])
    applied = c.command("broker_heartbeat", BrokerHeartbeatRequest(
        broker_id=B1, broker_epoch=c.epochs[B1], current_metadata_offset=c.qc.last_applied_offset,
        offline_log_dirs=[DIR1_B1, DIR1_B2]), 1)  # DIR1_B2 is not B1's: ignored
    assert applied.response.error_code == Error.NONE
    *changes, registration_change = applied.records
    assert sorted(changes, key=order) == sorted([
        change(a, 0, isr=[B2], leader=B2),
        change(b, 0, isr=[B2], leader=B2),
    ], key=order)
    assert registration_change == (
        BrokerRegistrationChangeRecord(broker_id=B1, broker_epoch=c.epochs[B1], log_dirs=[DIR2_B1]), 2)
    assert c.qc.cluster.brokers[B1].log_dirs == [DIR2_B1]


def test_a_reverted_assignment_restores_every_placement():
    c = Cluster()
    a = c.topic("a", [[B1, B2]] * 2)
    before = [(p.directories, p.isr, p.leader, p.partition_epoch) for p in c.qc.replication.topics[a].partitions]
    applied = c.assign(B1, [(DIR1_B1, a, 0), (OFFLINE, a, 1)])
    assert c.partition(a, 1).leader == B2
    c.qc.offsets.revert_to(applied.base_offset)
    assert [(p.directories, p.isr, p.leader, p.partition_epoch)
            for p in c.qc.replication.topics[a].partitions] == before
    assert c.qc.replication.isr_of[B1] == set(c.qc.replication.topics[a].partitions)
