"""Partition leaders over a metadata image: which AlterPartition each leader wants to send."""

from __future__ import annotations

import pytest

from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.no_op_record import NoOpRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.register_broker_record import RegisterBrokerRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.generated.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.primitives import ZERO_UUID
from protocol.records import Record, RecordBatch, frame_metadata_record
from server.controller.partitions import RECOVERED, RECOVERING
from server.image.image import MetadataImage
from server.image.loader import LoadError
from tools.broker.lag import LagModel
from tools.broker.leader import Hold, plan

TOPIC = bytes(range(1, 17))
EPOCHS = {1: 10, 2: 11, 3: 12}


def batch(base: int, *records) -> RecordBatch:
    return RecordBatch(base_offset=base, partition_leader_epoch=1, last_offset_delta=len(records) - 1,
                       records=[Record(frame_metadata_record(r, v), offset_delta=i)
                                for i, (r, v) in enumerate(records)])


def image_with(isr: list[int], leader: int = 1, recovery: int = RECOVERED) -> MetadataImage:
    image = MetadataImage()
    records = [(FeatureLevelRecord(name="metadata.version", feature_level=25), 0)]
    for b, epoch in EPOCHS.items():
        records.append((RegisterBrokerRecord(broker_id=b, incarnation_id=bytes([b]) * 16, broker_epoch=epoch,
                                             fenced=True), 3))
        records.append((UnfenceBrokerRecord(id=b, epoch=epoch), 0))
    records.append((TopicRecord(name="orders", topic_id=TOPIC), 0))
    records.append((PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3], isr=isr, leader=leader,
                                    leader_recovery_state=recovery, leader_epoch=4, partition_epoch=9,
                                    directories=[ZERO_UUID] * 3), 2))
    image.replay_batch(batch(0, *records))
    return image


def test_nothing_to_do_when_the_isr_matches_the_followers():
    image = image_with([1, 2, 3])
    assert plan(image, {1}.__contains__, LagModel(0, 0.0, 1.0), 0.0, {}) == {}
    assert plan(image, {2, 3}.__contains__, LagModel(0, 0.0, 1.0), 0.0, {}) == {}  # they do not lead it


def test_a_caught_up_follower_joins_with_the_epochs_of_the_image():
    image = image_with([1, 2])
    model = LagModel(0, 0.0, 1.0)
    assert plan(image, {1}.__contains__, model, 0.0, {}) == {}  # broker 3 starts behind
    (change,) = plan(image, {1}.__contains__, model, 60.0, {})[1]
    assert (change.topic, change.partition, change.leader_epoch, change.partition_epoch) == ("orders", 0, 4, 9)
    assert change.isr == [1, 2, 3] and change.isr_epochs == [10, 11, 12]
    assert change.recovery == RECOVERED and change.describe() == "ISR [1, 2] -> [1, 2, 3]"


def test_a_fenced_or_unreachable_follower_never_catches_up_and_leaves_the_isr():
    image = image_with([1, 2])
    image.replay_batch(batch(image.next_offset, (FenceBrokerRecord(id=3, epoch=12), 0)))
    model = LagModel(0, 0.0, 1.0)
    assert plan(image, {1}.__contains__, model, 1000.0, {}) == {}
    (change,) = plan(image, {1}.__contains__, model, 1000.0, {}, unreachable={2}.__contains__)[1]
    assert change.isr == [1]


def test_after_an_unclean_election_the_leader_reports_recovered_alone():
    image = image_with([2], leader=2, recovery=RECOVERING)
    (change,) = plan(image, {2}.__contains__, LagModel(0, 0.0, 1.0), 1000.0, {})[2]
    assert (change.isr, change.recovery) == ([2], RECOVERED)
    assert change.describe() == "leader recovery state RECOVERED"


def test_a_held_partition_waits_for_the_image_or_the_deadline():
    image = image_with([1, 2])
    model = LagModel(0, 0.0, 0.0)  # followers catch up at once
    held = {(TOPIC, 0): Hold(partition_epoch=9, until=5.0)}
    assert plan(image, {1}.__contains__, model, 1.0, held) == {}
    assert len(plan(image, {1}.__contains__, model, 6.0, held)[1]) == 1
    moved = {(TOPIC, 0): Hold(partition_epoch=8, until=5.0)}  # the image has moved past the hold
    assert len(plan(image, {1}.__contains__, model, 1.0, moved)[1]) == 1


def test_the_image_replays_partition_changes_and_skips_what_it_has():
    image = image_with([1, 2])
    end = image.next_offset
    change = PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1, 2, 3])
    image.replay_batch(batch(end, (change, 0), (NoOpRecord(), 0)))
    image.replay_batch(batch(end, (change, 0), (NoOpRecord(), 0)))  # a repeat is skipped
    p = image.replication.topics[TOPIC].partitions[0]
    assert (p.isr, p.partition_epoch, image.offset) == ([1, 2, 3], 10, end + 1)
    with pytest.raises(LoadError, match="missing"):
        image.replay_batch(batch(end + 5, (NoOpRecord(), 0)))
