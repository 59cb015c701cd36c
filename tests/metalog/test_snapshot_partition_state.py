"""A snapshot's partition records read straight into shared-list partition state give exactly
the state that decoding and replaying them one by one gives."""

from __future__ import annotations

import random

import pytest

from protocol.constants import LeaderRecoveryState
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.partition_values import partition_state
from server.controller.partitions import PartitionState
from server.controller.shared_lists import SharedLists
from server.image.loader import STEP_RECORDS, LoadError, MetadataLoader
from server.metalog.snapshot_file import open_snapshot_file, read_snapshot_file
from server.metalog.snapshots import SnapshotId, write_snapshot
from tests.support.metalog import new_controller, partition_state as slots_of, replay_snapshot, state_of

DIRS = [bytes([d]) * 16 for d in range(1, 7)]


def partition(topic_id: bytes, index: int, version: int, rng: random.Random) -> PartitionRecord:
    """Records of every shape: the common one, and each way of leaving it."""
    shape = index % 8
    count = 130 if shape == 7 else 3  # a count that takes two varint bytes
    replicas = rng.sample(range(200), count)
    isr = [] if shape == 1 else replicas[:2]
    record = PartitionRecord(partition_id=index, topic_id=topic_id, replicas=replicas, isr=isr,
                             leader=replicas[0] if isr else -1, leader_epoch=index, partition_epoch=2 * index,
                             directories=[DIRS[r % len(DIRS)] for r in replicas] if shape != 2 and version else [])
    if shape == 3:
        record.adding_replicas = [replicas[-1]]
    if shape == 4:
        record.leader_recovery_state = LeaderRecoveryState.RECOVERING
    if shape == 5 and version >= 2:
        record.eligible_leader_replicas, record.last_known_elr = [replicas[1]], [replicas[2]]
    if shape == 6:
        record.removing_replicas = [replicas[1]]
    return record


def snapshot_records(seed: int = 3, topics: int = 4, partitions: int = 40) -> list:
    rng = random.Random(seed)
    records: list = []
    for t in range(topics):
        topic_id = rng.getrandbits(128).to_bytes(16, "big")
        records.append((TopicRecord(name=f"t{t}", topic_id=topic_id), 0))
        # Versions 0 (no directories), 1 and 2 (tagged leader recovery state and ELR).
        version = t % 3
        records += [(partition(topic_id, p, version, rng), version) for p in range(partitions)]
    return records


def test_every_record_reads_as_the_generic_decoder_reads_it() -> None:
    shared = SharedLists()
    fast = 0
    for record, version in snapshot_records():
        value = frame_metadata_record(record, version)
        state = partition_state(value, shared)
        if not isinstance(record, PartitionRecord):
            assert state is None
            continue
        expected = slots_of(PartitionState.from_record(parse_metadata_record(value)[0]))
        if state is not None:
            fast += 1
            assert slots_of(state) == expected
    # The common shape takes the direct path; the other shapes fall back (checked above).
    assert fast > 0


def test_a_snapshot_loads_into_the_state_record_by_record_replay_builds(tmp_path) -> None:
    records = snapshot_records()
    snapshot = SnapshotId(len(records), 1)
    write_snapshot(tmp_path, snapshot, records)
    path = tmp_path / snapshot.file_name

    direct = new_controller()
    MetadataLoader(direct).snapshot(open_snapshot_file(path), snapshot.end_offset, str(path))
    one_by_one = new_controller()
    replay_snapshot(one_by_one, read_snapshot_file(path), snapshot.end_offset)

    assert state_of(direct) == state_of(one_by_one)
    assert direct.next_offset == one_by_one.next_offset == snapshot.end_offset
    assert direct.replication.partition_count == 4 * 40


def test_a_snapshot_loaded_in_steps_pauses_after_each_batch_and_ends_whole(tmp_path) -> None:
    """How a running voter loads the snapshot it fetched from the leader: a bounded number of
    records per step, the snapshot's end reached only after the last one, the same state as a
    load in one go."""
    records = snapshot_records(topics=10, partitions=1000)  # three batches of the file
    snapshot = SnapshotId(len(records), 1)
    write_snapshot(tmp_path, snapshot, records)
    path = tmp_path / snapshot.file_name

    opened = open_snapshot_file(path)
    batch_sizes = [len(values) for values in opened.batches()]
    assert len(batch_sizes) == 3

    stepped = new_controller()
    steps = MetadataLoader(stepped).snapshot_in_steps(opened, snapshot.end_offset, str(path))
    next(steps)
    assert 0 < stepped.replication.partition_count < STEP_RECORDS
    assert 1 + sum(1 for _ in steps) == sum(size // STEP_RECORDS for size in batch_sizes)
    whole = new_controller()
    MetadataLoader(whole).snapshot(open_snapshot_file(path), snapshot.end_offset, str(path))

    assert state_of(stepped) == state_of(whole)
    assert stepped.next_offset == whole.next_offset == snapshot.end_offset


def test_equal_lists_are_one_object_and_a_change_leaves_the_others_alone() -> None:
    qc = new_controller()
    topic_id = b"\x01" * 16
    qc.replay(TopicRecord(name="t", topic_id=topic_id), 0)
    shared = qc.replication.shared
    for p in range(2):
        record = PartitionRecord(partition_id=p, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3],
                                 leader=1, directories=[DIRS[0]] * 3)
        state = partition_state(frame_metadata_record(record, 1), shared)
        assert state is not None
        qc.replication.add_partition(state)
    first, second = qc.replication.topics[topic_id].partitions
    assert first.replicas is second.replicas and first.isr is second.isr
    assert first.directories is second.directories

    qc.replay(PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[1, 2]), 1)
    assert first.isr == [1, 2] and second.isr == [1, 2, 3]
    assert second.replicas == [1, 2, 3] and second.directories == [DIRS[0]] * 3


def test_a_partition_of_an_unknown_topic_stops_the_load_naming_the_offset(tmp_path) -> None:
    record = PartitionRecord(partition_id=0, topic_id=b"\x09" * 16, replicas=[1], isr=[1], leader=1,
                             directories=[DIRS[0]])
    snapshot = SnapshotId(5, 1)
    write_snapshot(tmp_path, snapshot, [(record, 1)])
    path = tmp_path / snapshot.file_name
    with pytest.raises(LoadError, match=r"offset 4: cannot replay PartitionRecord"):
        MetadataLoader(new_controller()).snapshot(open_snapshot_file(path), snapshot.end_offset, str(path))
