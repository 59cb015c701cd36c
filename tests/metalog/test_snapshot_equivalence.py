"""A snapshot taken anywhere, plus the log after it, gives exactly the state of the whole log.

A seeded workload drives a QuorumController through every kind of command (brokers coming,
going, expiring, shutting down cleanly and not; topics, partitions, configs, ISR changes,
elections, reassignments, feature upgrades), keeping the log it would write. Then, for many
offsets K: the snapshot of the state at K, replayed at K, followed by the log from K, must give
the very state that replaying the whole log gives - every broker, topic, partition field,
config and feature. The same holds on disk, loaded the way ControllerServer loads itself.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from protocol.constants import NO_LEADER
from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic)
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.controller_registration_request import (
    ControllerRegistrationRequest, Feature as ControllerFeature, Listener as ControllerListener)
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_topics_request import (
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest)
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import random_uuid
from protocol.records import frame_metadata_record, parse_metadata_record
from server.config import embedded_config
from server.controller.clock import ManualClock
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import ControllerResult
from server.metalog.commit_path import encode_records
from server.metalog.segments import MetadataLog
from server.metalog.snapshots import SnapshotId, write_snapshot
from protocol.primitives import ZERO_UUID
from tests.support.metalog import replay_snapshot, state_diff, state_of

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SESSION_MS = 9000
MV_START = 14  # 3.6-IV2: partition records v0, registrations v2
STATIC = {"min.insync.replicas": "2", "eligible.leader.replicas.enabled": "true",
          "unclean.leader.election.enable": "false"}


class Workload:
    """A controller, its clock and the log of every command's records (one batch each)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.qc = self.new_controller()
        self.batches: list[list[tuple[int, object, int]]] = []
        self.epochs: dict[int, int] = {}
        self.incarnations: dict[int, bytes] = {}
        self.topic_serial = 0
        self.run(self.qc.apply(ControllerResult([(FeatureLevelRecord(
            name="metadata.version", feature_level=MV_START), 0)])))
        self.qc.activate()

    def new_controller(self) -> QuorumController:
        return QuorumController(CLUSTER_ID, 3000, self.clock, session_timeout_ms=SESSION_MS,
                                static_configs=STATIC)

    @property
    def log(self) -> list[tuple[int, object, int]]:
        return [entry for batch in self.batches for entry in batch]

    def run(self, applied: Applied) -> Applied:
        if applied.records:
            self.batches.append([(applied.base_offset + i, r, v) for i, (r, v) in enumerate(applied.records)])
        return applied

    # --- brokers -------------------------------------------------------------------------------
    def live(self) -> list[int]:
        return sorted(b.broker_id for b in self.qc.cluster.brokers.values()
                      if not b.fenced and not b.in_controlled_shutdown)

    def register(self, broker_id: int, clean: bool = True) -> None:
        previous = self.epochs.get(broker_id, -1) if clean else -1
        incarnation = random_uuid()
        applied = self.run(self.qc.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation,
            listeners=[Listener(name="PLAINTEXT", host=f"b{broker_id}.test", port=9000 + broker_id,
                                security_protocol=0)],
            features=[Feature(name="metadata.version", min_supported_version=7, max_supported_version=25),
                      Feature(name="group.version", min_supported_version=0, max_supported_version=1)],
            rack=f"rack-{broker_id % 3}" if broker_id % 2 else None,
            log_dirs=[random_uuid()], previous_broker_epoch=previous), 4))
        assert applied.response.error_code == Error.NONE, applied.response
        self.epochs[broker_id] = applied.response.broker_epoch
        self.incarnations[broker_id] = incarnation

    def heartbeat(self, broker_id: int, **flags) -> Applied:
        return self.run(self.qc.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=self.epochs[broker_id],
            current_metadata_offset=self.qc.last_applied_offset, **flags), 1))

    def tick(self, skip: int | None = None) -> None:
        """A second passes; every registered broker but ``skip`` heartbeats."""
        self.clock.advance(1000)
        for b in sorted(self.qc.cluster.brokers):
            if b != skip and not self.qc.cluster.brokers[b].in_controlled_shutdown:
                self.heartbeat(b)
        self.run(self.qc.fence_expired_brokers())

    def expire(self, broker_id: int) -> None:
        for _ in range(SESSION_MS // 1000 + 1):
            self.tick(skip=broker_id)

    # --- topics --------------------------------------------------------------------------------
    def topics(self) -> list[str]:
        return sorted(self.qc.replication.names)

    def create_topic(self) -> None:
        self.topic_serial += 1
        rf = self.rng.randint(1, min(3, len(self.live()))) if self.live() else 1
        configs = []
        if self.rng.random() < 0.3:
            configs.append(CreatableTopicConfig(name="min.insync.replicas", value=str(self.rng.randint(1, 2))))
        if self.rng.random() < 0.2:
            configs.append(CreatableTopicConfig(name="cleanup.policy", value="compact"))
        self.run(self.qc.create_topics(CreateTopicsRequest(topics=[CreatableTopic(
            name=f"topic-{self.topic_serial:04d}", num_partitions=self.rng.randint(1, 6),
            replication_factor=rf, configs=configs)]), 7))

    def pick_partition(self):
        topics = self.topics()
        if not topics:
            return None
        r = self.qc.replication
        topic = r.topics[r.names[self.rng.choice(topics)]]
        return topic, self.rng.choice(topic.partitions)

    def alter_isr(self) -> None:
        picked = self.pick_partition()
        if picked is None:
            return
        topic, p = picked
        if p.leader == NO_LEADER or p.leader not in self.epochs:
            return
        isr = list(p.isr)
        if len(isr) > 1 and self.rng.random() < 0.5:
            isr.remove(self.rng.choice([b for b in isr if b != p.leader]))
        else:
            missing = [b for b in p.replicas if b not in isr and b in self.live()]
            if not missing:
                return
            isr.append(self.rng.choice(missing))
        self.run(self.qc.alter_partition(AlterPartitionRequest(
            broker_id=p.leader, broker_epoch=self.epochs[p.leader],
            topics=[TopicData(topic_id=topic.topic_id, partitions=[PartitionData(
                partition_index=p.partition_id, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, leader_recovery_state=p.recovery,
                new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=self.epochs.get(b, -1))
                                     for b in isr])])]), 3))

    def reassign(self) -> None:
        picked = self.pick_partition()
        live = self.live()
        if picked is None or len(live) < 2:
            return
        topic, p = picked
        if p.reassigning and self.rng.random() < 0.5:
            target = None  # cancel
        else:
            target = self.rng.sample(live, min(len(live), len(p.replicas)))
        self.run(self.qc.alter_reassignments(AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(
            name=topic.name, partitions=[ReassignablePartition(partition_index=p.partition_id,
                                                               replicas=target)])]), 0))

    def alter_config(self) -> None:
        choice = self.rng.random()
        if choice < 0.5 and self.topics():
            resource = (2, self.rng.choice(self.topics()))
            name, value = self.rng.choice([("retention.ms", str(self.rng.randint(1, 10**9))),
                                           ("min.insync.replicas", str(self.rng.randint(1, 3))),
                                           ("unclean.leader.election.enable", "true")])
        elif choice < 0.8 and self.qc.cluster.brokers:
            resource = (4, str(self.rng.choice(sorted(self.qc.cluster.brokers))))
            name, value = "log.retention.ms", str(self.rng.randint(1, 10**9))
        else:
            resource = (4, "")  # the cluster-wide default
            name, value = "log.retention.ms", str(self.rng.randint(1, 10**9))
        op = 1 if self.rng.random() < 0.25 else 0  # delete or set
        self.run(self.qc.incremental_alter_configs(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=resource[0], resource_name=resource[1], configs=[
                AlterableConfig(name=name, config_operation=op, value=None if op else value)])]), 1))

    # --- the workload ----------------------------------------------------------------------------
    def step(self) -> None:
        rng = self.rng
        brokers = sorted(self.qc.cluster.brokers)
        fenced = [b for b in brokers if self.qc.cluster.brokers[b].fenced]
        action = rng.choices(
            ["create", "delete", "partitions", "config", "isr", "elect", "reassign", "expire",
             "shutdown", "restart", "unregister", "new-broker", "tick"],
            [14, 3, 3, 8, 12, 3, 4, 1, 1, 3, 1, 2, 6])[0]
        if action == "create":
            self.create_topic()
        elif action == "delete" and self.topics():
            self.run(self.qc.delete_topics(DeleteTopicsRequest(topic_names=[rng.choice(self.topics())]), 5))
        elif action == "partitions" and self.topics():
            name = rng.choice(self.topics())
            count = len(self.qc.replication.topics[self.qc.replication.names[name]].partitions)
            self.run(self.qc.create_partitions(CreatePartitionsRequest(topics=[CreatePartitionsTopic(
                name=name, count=count + rng.randint(1, 3), assignments=None)]), 3))
        elif action == "config":
            self.alter_config()
        elif action == "isr":
            self.alter_isr()
        elif action == "elect":
            self.run(self.qc.elect_leaders(ElectLeadersRequest(election_type=rng.choice([0, 1]),
                                                               topic_partitions=None), 2))
        elif action == "reassign":
            self.reassign()
        elif action == "expire" and len(self.live()) > 2:
            self.expire(rng.choice(self.live()))
        elif action == "shutdown" and len(self.live()) > 2:
            b = rng.choice(self.live())
            self.heartbeat(b, want_shut_down=True)
            if rng.random() < 0.5:
                self.heartbeat(b, want_shut_down=True)  # and completes it, when it can
        elif action == "restart" and fenced:
            b = rng.choice(fenced)
            self.register(b, clean=rng.random() < 0.5)
            self.heartbeat(b)
        elif action == "unregister" and fenced:
            self.run(self.qc.unregister_broker(UnregisterBrokerRequest(broker_id=rng.choice(fenced)), 0))
        elif action == "new-broker":
            b = max(brokers, default=0) + 1
            self.register(b)
            self.heartbeat(b)
        else:
            self.tick()

    def upgrade(self, feature: str, level: int) -> None:
        applied = self.run(self.qc.update_features(UpdateFeaturesRequest(feature_updates=[
            FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=1)]), 1))
        assert all(r.error_code == Error.NONE for r in applied.response.results), applied.response

    def register_controller(self) -> None:
        self.run(self.qc.register_controller(ControllerRegistrationRequest(
            controller_id=3000, incarnation_id=random_uuid(), zk_migration_ready=False,
            listeners=[ControllerListener(name="CONTROLLER", host="c.test", port=9093, security_protocol=0)],
            features=[ControllerFeature(name="metadata.version", min_supported_version=7,
                                        max_supported_version=25)]), 0))


def build(seed: int, steps: int = 700) -> Workload:
    w = Workload(seed)
    for b in range(1, 6):
        w.register(b)
        w.heartbeat(b)
    w.register_controller()
    for i in range(steps):
        if i == steps // 3:
            w.upgrade("metadata.version", 17)  # 3.7-IV2: directories, registration v3
        if i == steps // 2:
            w.upgrade("group.version", 1)
        if i == 2 * steps // 3:
            w.upgrade("metadata.version", 25)  # partition records v2: eligible leader replicas
        w.step()
    # One broker is still shutting down when the log ends.
    w.heartbeat(w.live()[0], want_shut_down=True)
    w.tick()
    return w


def comparable(qc: QuorumController) -> dict:
    """state_of, less two facts a snapshot is allowed to (or, for now, does) change:

    - controlled_shutdown_offset: a snapshot cannot hold the offset of the record that started a
      controlled shutdown, so it restarts it at the snapshot's own offset (later, never earlier;
      checked on its own below);
    - partition directories recorded before metadata.version 3.7-IV2: none in the log, one
      unassigned id per replica once snapshotted (checked on its own below).
    """
    state = state_of(qc)
    for broker in state["brokers"].values():
        del broker["controlled_shutdown_offset"]
    for topic in state["topics"].values():
        for p in topic["partitions"]:
            if not p["directories"]:
                p["directories"] = [ZERO_UUID] * len(p["replicas"])
    return state


def assert_same(left: dict, right: dict, what: str) -> None:
    assert left == right, f"{what}: " + "; ".join(state_diff(left, right))


def through_the_log(record, version):
    """A record as it comes back from the log: framed, then parsed."""
    decoded, decoded_version = parse_metadata_record(frame_metadata_record(record, version))
    assert decoded_version == version
    return decoded


def replay_log(qc: QuorumController, entries) -> QuorumController:
    for offset, record, version in entries:
        qc.replay(through_the_log(record, version), offset)
    return qc


def snapshot_at(w: Workload, end: int) -> list:
    """The snapshot of the state just before offset ``end``, as (record, version) pairs."""
    at = replay_log(w.new_controller(), [e for e in w.log if e[0] < end])
    return [(through_the_log(r, v), v) for r, v in at.snapshot_records()]


SEEDS = [1, 2, 3]


@pytest.fixture(scope="module", params=SEEDS)
def workload(request) -> Workload:
    return build(request.param)


def test_the_workload_covers_every_kind_of_record(workload):
    names = {r.NAME for _, r, _ in workload.log}
    assert names >= {"RegisterBrokerRecord", "UnfenceBrokerRecord", "FenceBrokerRecord", "TopicRecord",
                     "PartitionRecord", "PartitionChangeRecord", "RemoveTopicRecord", "ConfigRecord",
                     "FeatureLevelRecord", "BrokerRegistrationChangeRecord", "UnregisterBrokerRecord",
                     "RegisterControllerRecord"}, names
    assert len(workload.log) > 1500
    state = state_of(workload.qc)
    assert state["topics"] and state["configs"] and state["reassigning"] is not None


def test_the_whole_log_rebuilds_the_live_state(workload):
    assert state_of(replay_log(workload.new_controller(), workload.log)) == state_of(workload.qc)


def cuts(workload: Workload, every: int) -> list[int]:
    """Snapshot offsets: the start of every ``every``-th command's batch, and the log end."""
    return sorted({batch[0][0] for batch in workload.batches[1::every]} | {workload.log[-1][0] + 1})


def from_snapshot(workload: Workload, end: int) -> QuorumController:
    qc = workload.new_controller()
    replay_snapshot(qc, snapshot_at(workload, end), end)
    return replay_log(qc, [e for e in workload.log if e[0] >= end])


def test_snapshot_plus_suffix_equals_the_whole_log_at_every_cut(workload):
    whole = comparable(replay_log(workload.new_controller(), workload.log))
    ends = cuts(workload, 9)
    assert len(ends) > 50
    for end in ends:
        assert_same(comparable(from_snapshot(workload, end)), whole, f"snapshot at offset {end} + suffix")


def test_a_snapshot_reloads_to_the_state_it_was_taken_from(workload):
    log = workload.log
    for end in cuts(workload, 25):
        at = replay_log(workload.new_controller(), [e for e in log if e[0] < end])
        qc = workload.new_controller()
        replay_snapshot(qc, snapshot_at(workload, end), end)
        assert_same(comparable(qc), comparable(at), f"snapshot at offset {end}")


def test_a_controlled_shutdown_never_ends_earlier_after_a_snapshot(workload):
    whole = replay_log(workload.new_controller(), workload.log).cluster.brokers
    checked = 0
    for end in cuts(workload, 9):
        for broker in from_snapshot(workload, end).cluster.brokers.values():
            if broker.in_controlled_shutdown:
                original = whole[broker.broker_id].controlled_shutdown_offset
                assert 0 <= original <= broker.controlled_shutdown_offset, (end, broker.broker_id)
                checked += 1
    assert checked


def test_partition_directories_are_the_same_after_a_snapshot(workload):
    whole = state_of(replay_log(workload.new_controller(), workload.log))
    for end in cuts(workload, 9):
        state = state_of(from_snapshot(workload, end))
        for name, topic in state["topics"].items():
            assert [p["directories"] for p in topic["partitions"]] == \
                [p["directories"] for p in whole["topics"][name]["partitions"]], (end, name)


def test_snapshot_plus_suffix_on_disk_loads_as_the_server_loads_it(workload, tmp_path):
    """Write the log as segments and a snapshot mid-way as a checkpoint file, then let
    ControllerServer load the directory: the same state as the whole log."""
    from server.app import ControllerServer
    from tools.storage import format_dirs

    cut = workload.batches[len(workload.batches) // 2][0][0]
    data_dir = tmp_path / "data"
    config = embedded_config(data_dir, 0)
    format_dirs(config, CLUSTER_ID, "3.6-IV2")
    metadata_log = MetadataLog.open(data_dir, segment_bytes=16384)
    for batch in workload.batches:
        metadata_log.append([encode_records([(r, v) for _, r, v in batch], batch[0][0], 1, 0)])
    metadata_log.close()
    partition = Path(metadata_log.directory)
    write_snapshot(partition, SnapshotId(cut, 1), snapshot_at(workload, cut))
    # The segments wholly before the snapshot go, as after a snapshot in the server.
    reopened = MetadataLog.open(data_dir, segment_bytes=16384)
    removed = reopened.delete_segments_before(cut)
    reopened.close()
    assert removed and reopened.start_offset > 0

    server = ControllerServer(config)
    try:
        assert server.snapshot == SnapshotId(cut, 1)
        loaded = comparable(server.controller)
    finally:
        server.replication.close()
        server.log.close()
    assert_same(loaded, comparable(replay_log(workload.new_controller(), workload.log)), "loaded server")
