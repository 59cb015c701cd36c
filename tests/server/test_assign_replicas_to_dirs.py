"""AssignReplicasToDirs (API 73, KIP-858) against a controller process.

The requests are built and the answers read by kafka-python's schema engine; what the
controller recorded is read back the way a broker reads it, by fetching the metadata log and
replaying it into a fresh state machine.
"""

from __future__ import annotations

import uuid

import pytest

from protocol.constants import DIRECTORY_LOST, DIRECTORY_UNASSIGNED
from protocol.error_codes import Error
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.generated.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest, TopicRequest)
from tests.support.kafka_python_wire import exchange, kp
from tests.support.metalog import new_controller, observe_log
from tests.support.wire import api_versions, connect, heartbeat_request, raw_socket, registration_request

REGISTRATION_V = 4
HEARTBEAT_V = 1
CREATE_TOPICS_V = 7
DESCRIBE_TOPIC_PARTITIONS_V = 0
PROPS = {"broker.session.timeout.ms": "120000"}

DIR_A = uuid.UUID("5e7c0a1b-2d3f-4a5b-8c6d-7e8f9a0b1c2d")
DIR_B = uuid.UUID("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")
DIR_C = uuid.UUID("7a6b5c4d-3e2f-4a1b-9c8d-0e1f2a3b4c5d")
DIR_D = uuid.UUID("3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f")
# A directory belongs to one broker: Kafka refuses a registration naming another's.
DIRECTORIES = {1: [DIR_A.bytes, DIR_B.bytes], 2: [DIR_C.bytes], 3: [DIR_D.bytes]}


class Cluster:
    """Brokers 1-3 (1 with directories A and B, 2 with C, 3 with D), and a topic with replicas on 1 and 2."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self.client = connect(controller)
        self.epochs: dict[int, int] = {}
        for broker_id in (1, 2, 3):
            request = registration_request(controller.cluster_id, broker_id)
            request.log_dirs = DIRECTORIES[broker_id]
            reg = self.client.request(request, REGISTRATION_V)
            assert reg.error_code == Error.NONE, reg
            hb = self.client.request(heartbeat_request(broker_id, reg.broker_epoch), HEARTBEAT_V)
            assert (hb.error_code, hb.is_fenced) == (Error.NONE, False), hb
            self.epochs[broker_id] = reg.broker_epoch
        created = self.client.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="placed", num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2]),
                         CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 1])])]),
            CREATE_TOPICS_V)
        [topic] = created.topics
        assert topic.error_code == Error.NONE, topic
        self.topic_id = uuid.UUID(bytes=topic.topic_id)

    def close(self) -> None:
        self.client.close()

    def assign(self, broker_id: int, placements: dict[uuid.UUID, list[tuple[uuid.UUID, int]]],
               epoch: int | None = None):
        """AssignReplicasToDirs: directory -> [(topic id, partition)]."""
        cls = kp("AssignReplicasToDirsRequest")
        dir_cls = cls.DirectoryData
        directories = []
        for directory, partitions in placements.items():
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, index in partitions:
                by_topic.setdefault(topic_id, []).append(index)
            directories.append(dir_cls(id=directory, topics=[
                dir_cls.TopicData(topic_id=topic_id, partitions=[
                    dir_cls.TopicData.PartitionData(partition_index=i) for i in indexes])
                for topic_id, indexes in by_topic.items()]))
        request = cls[0](broker_id=broker_id,
                         broker_epoch=self.epochs.get(broker_id, 1) if epoch is None else epoch,
                         directories=directories)
        with raw_socket(self.controller) as sock:
            return exchange(sock, request, 11)

    def replayed(self):
        """The partitions of the topic, as a broker replaying the metadata log sees them."""
        qc = new_controller()
        observe_log(self.client, qc)
        return qc.replication.topics[self.topic_id.bytes].partitions

    def leader_and_isr(self, index: int) -> tuple[int, list[int]]:
        response = self.client.request(DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name="placed")], response_partition_limit=10), DESCRIBE_TOPIC_PARTITIONS_V)
        [topic] = response.topics
        p = topic.partitions[index]
        return p.leader_id, list(p.isr_nodes)


    def report_offline(self, broker_id: int, directories: list[uuid.UUID]):
        """A heartbeat naming log directories that failed. kafka-python's engine cannot
        encode this tagged field (Kafka's schema gives its tag as a string), so the
        project's codec sends it."""
        request = heartbeat_request(broker_id, self.epochs[broker_id])
        request.offline_log_dirs = [d.bytes for d in directories]
        return self.client.request(request, HEARTBEAT_V)

    def online_directories(self, broker_id: int) -> list[bytes]:
        qc = new_controller()
        observe_log(self.client, qc)
        return qc.cluster.brokers[broker_id].log_dirs


def errors(response) -> list[tuple[uuid.UUID, uuid.UUID, int, int]]:
    return [(d.id, t.topic_id, p.partition_index, p.error_code)
            for d in response.directories for t in d.topics for p in t.partitions]


@pytest.fixture
def cluster(controller_factory):
    c = Cluster(controller_factory(PROPS))
    yield c
    c.close()


def test_replicas_are_recorded_in_their_directories(cluster):
    before = cluster.replayed()
    # Created in each broker's default directory, as Kafka picks it: broker 2's only one, and
    # UNASSIGNED for broker 1, which has two and must say which.
    assert [p.directories for p in before] == [[DIRECTORY_UNASSIGNED, DIR_C.bytes], [DIR_C.bytes, DIRECTORY_UNASSIGNED]]
    response = cluster.assign(1, {DIR_A: [(cluster.topic_id, 0)], DIR_B: [(cluster.topic_id, 1)]})
    assert response.error_code == Error.NONE
    assert errors(response) == [(DIR_A, cluster.topic_id, 0, Error.NONE),
                                (DIR_B, cluster.topic_id, 1, Error.NONE)]
    after = cluster.replayed()
    assert after[0].directories == [DIR_A.bytes, DIR_C.bytes]  # broker 1 is the first replica of 0
    assert after[1].directories == [DIR_C.bytes, DIR_B.bytes]  # and the second of 1
    assert [p.partition_epoch for p in after] == [p.partition_epoch + 1 for p in before]
    # Placement in an online directory changes nothing else.
    assert [(p.leader, p.isr, p.leader_epoch) for p in after] == [(p.leader, p.isr, p.leader_epoch) for p in before]

    # The same report again writes nothing.
    again = cluster.assign(1, {DIR_A: [(cluster.topic_id, 0)]})
    assert errors(again) == [(DIR_A, cluster.topic_id, 0, Error.NONE)]
    assert [p.partition_epoch for p in cluster.replayed()] == [p.partition_epoch for p in after]

    # A replica that moves is recorded in its new directory.
    cluster.assign(1, {DIR_B: [(cluster.topic_id, 0)]})
    assert cluster.replayed()[0].directories == [DIR_B.bytes, DIR_C.bytes]


def test_a_replica_in_a_directory_that_is_not_online_leaves_isr_and_leadership(cluster):
    assert cluster.leader_and_isr(0) == (1, [1, 2])
    unknown_dir = uuid.UUID("11111111-2222-4333-8444-555555555555")
    response = cluster.assign(1, {unknown_dir: [(cluster.topic_id, 0)]})
    assert errors(response) == [(unknown_dir, cluster.topic_id, 0, Error.NONE)]
    assert cluster.leader_and_isr(0) == (2, [2])
    assert cluster.leader_and_isr(1) == (2, [2, 1])  # the other partition is untouched
    assert cluster.replayed()[0].directories == [unknown_dir.bytes, DIR_C.bytes]

    lost = uuid.UUID(bytes=DIRECTORY_LOST)
    cluster.assign(2, {lost: [(cluster.topic_id, 1)]})
    assert cluster.leader_and_isr(1) == (1, [1])


def test_a_failed_directory_takes_its_replicas_out_of_isrs_and_the_registration(cluster):
    cluster.assign(1, {DIR_A: [(cluster.topic_id, 0)], DIR_B: [(cluster.topic_id, 1)]})
    assert cluster.leader_and_isr(0) == (1, [1, 2])
    beat = cluster.report_offline(1, [DIR_A])
    assert (beat.error_code, beat.is_fenced) == (Error.NONE, False)
    assert cluster.leader_and_isr(0) == (2, [2])  # its replica was in A
    assert cluster.leader_and_isr(1) == (2, [2, 1])  # its replica is in B, still online
    assert cluster.online_directories(1) == [DIR_B.bytes]
    # Reported again, the failure is known already: nothing more is written.
    epoch = cluster.replayed()[1].partition_epoch
    cluster.report_offline(1, [DIR_A])
    assert cluster.replayed()[1].partition_epoch == epoch
    # A replica placed in the failed directory later is one the broker cannot serve.
    cluster.assign(1, {DIR_A: [(cluster.topic_id, 1)]})
    assert cluster.leader_and_isr(1) == (2, [2])


def test_a_stale_or_unknown_broker_epoch(cluster):
    placement = {DIR_A: [(cluster.topic_id, 0)]}
    stale = cluster.assign(1, placement, epoch=cluster.epochs[1] - 1)
    assert (stale.error_code, stale.directories) == (Error.STALE_BROKER_EPOCH, [])
    # Kafka checks the epoch before the registration, so an unknown broker is a stale one.
    assert cluster.assign(9, placement, epoch=5).error_code == Error.STALE_BROKER_EPOCH
    assert cluster.replayed()[0].directories == [DIRECTORY_UNASSIGNED, DIR_C.bytes]


def test_per_partition_errors(cluster):
    unknown_topic = uuid.uuid4()
    response = cluster.assign(1, {DIR_A: [(unknown_topic, 0), (cluster.topic_id, 7), (cluster.topic_id, 0)]})
    assert response.error_code == Error.NONE
    assert errors(response) == [(DIR_A, unknown_topic, 0, Error.UNKNOWN_TOPIC_ID),
                                (DIR_A, cluster.topic_id, 7, Error.UNKNOWN_TOPIC_OR_PARTITION),
                                (DIR_A, cluster.topic_id, 0, Error.NONE)]
    # Broker 3 holds no replica of the topic.
    not_a_replica = cluster.assign(3, {DIR_A: [(cluster.topic_id, 1)]})
    assert errors(not_a_replica) == [(DIR_A, cluster.topic_id, 1, Error.NOT_LEADER_OR_FOLLOWER)]
    assert [p.directories for p in cluster.replayed()] == [
        [DIR_A.bytes, DIR_C.bytes], [DIR_C.bytes, DIRECTORY_UNASSIGNED]]


@pytest.mark.controller_properties(PROPS, release_version="3.7-IV1")
def test_refused_before_metadata_version_3_7_iv2(controller):
    c = Cluster(controller)
    try:
        response = c.assign(1, {DIR_A: [(c.topic_id, 0)]})
        assert (response.error_code, response.directories) == (Error.UNSUPPORTED_VERSION, [])
    finally:
        c.close()


def test_listed_in_api_versions(module_controller):
    with connect(module_controller) as client:
        keys = {k.api_key: (k.min_version, k.max_version) for k in api_versions(client).api_keys}
    assert keys[73] == (0, 0)
